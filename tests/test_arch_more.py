"""Falcon-H1, Granite 4.0 hybrid, Bamba, LFM2 and Llama 3.2 Vision (mllama) geometry.

Configs are written here, shaped like the released checkpoints; expected values are arithmetic over
the named factors. Field names and defaults follow the transformers config classes
(configuration_falcon_h1 / granitemoehybrid / bamba / lfm2 / lfm2_moe / mllama) and the state shapes
vLLM's ``mamba_utils`` (mamba2_state_shape, short_conv_state_shape).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import parse_config

from conftest import BF16, KV


def parse(config: dict[str, Any], **overrides: Any):
    return parse_config(config, model_id="test", overrides=overrides)


def kinds(geometry) -> list[str]:
    return [spec.kind for spec in geometry.layers]


def mamba2_state_bytes(*, d_inner: int, n_heads: int, head_dim: int, n_groups: int, d_state: int, d_conv: int) -> int:
    conv = (d_conv - 1) * (d_inner + 2 * n_groups * d_state)
    ssm = n_heads * head_dim * d_state
    return (conv + ssm) * BF16


# ---- Falcon-H1: attention and Mamba-2 side by side in every layer -----------------------------------------
def falcon_h1(**overrides: Any) -> dict[str, Any]:
    """Shaped like tiiuae/Falcon-H1-0.5B-Instruct."""
    config = {
        "model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 1024, "num_hidden_layers": 36, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 64, "max_position_embeddings": 16384, "mamba_d_ssm": 1536, "mamba_n_heads": 24,
        "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    config.update(overrides)
    return config


def test_falcon_h1_every_layer_has_attention_and_state() -> None:
    geometry = parse(falcon_h1())
    assert kinds(geometry) == ["full_attention"] * 36 + ["state"] * 36  # attention of layers 0..35, then their states
    assert geometry.num_hidden_layers == 36
    state = geometry.layers[36]
    assert state.mixer == "mamba2"
    assert dict(state.shapes) == {"conv": (4 - 1, 1536 + 2 * 1 * 128), "ssm": (24, 64, 128)}
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.bytes_per_token == 36 * KV * 2 * 64 * BF16  # layers, K+V, kv heads, head dim, bf16
    per_layer = mamba2_state_bytes(d_inner=1536, n_heads=24, head_dim=64, n_groups=1, d_state=128, d_conv=4)
    assert est.state_bytes == 36 * per_layer
    assert est.kv_cache_bytes == 8192 * 36 * KV * 2 * 64 * BF16 + 36 * per_layer
    assert any("parallel hybrid" in note for note in geometry.notes)


def test_falcon_h1_null_d_ssm_is_expand_times_hidden() -> None:
    # FalconH1Config / vLLM: mamba_d_ssm None -> mamba_expand * hidden_size = 2 * 1024 = 2048 = 32 heads * 64
    geometry = parse(falcon_h1(mamba_d_ssm=None, mamba_n_heads=32))
    assert dict(geometry.layers[-1].shapes)["conv"] == (4 - 1, 2 * 1024 + 2 * 1 * 128)
    assert any("mamba_d_ssm is null" in note for note in geometry.notes)


def test_falcon_h1_sparse_config_uses_architecture_defaults() -> None:
    config = {"model_type": "falcon_h1", "num_hidden_layers": 4, "head_dim": 128}
    geometry = parse(config)
    # FalconH1Config defaults: mamba_d_ssm 1024, mamba_n_heads 128, mamba_d_head "auto" -> 1024 // 128 = 8,
    # mamba_n_groups 1, mamba_d_state 256, mamba_d_conv 4; attention 32 heads, 8 KV heads.
    assert dict(geometry.layers[-1].shapes) == {"conv": (4 - 1, 1024 + 2 * 1 * 256), "ssm": (128, 1024 // 128, 256)}
    assert geometry.layers[0].num_kv_heads == 8
    assert any("mamba_d_ssm is not in the config" in note for note in geometry.notes)
    assert any('"auto"' in note and "1024 // 128 = 8" in note for note in geometry.notes)


def test_falcon_h1_heads_must_match_inner_width() -> None:
    with pytest.raises(ConfigError, match="does not match the Mamba inner width 1536"):
        parse(falcon_h1(mamba_n_heads=16))  # 16 * 64 = 1024 != 1536


# ---- Granite 4.0 hybrid ----------------------------------------------------------------------------------
def granite(**overrides: Any) -> dict[str, Any]:
    layer_types = ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"]
    config = {
        "model_type": "granitemoehybrid", "architectures": ["GraniteMoeHybridForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 12, "num_key_value_heads": 4,
        "max_position_embeddings": 131072, "layer_types": layer_types, "mamba_n_heads": 48, "mamba_d_head": 64,
        "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    config.update(overrides)
    return config


def test_granitemoehybrid_layer_types() -> None:
    geometry = parse(granite())
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "full_attention"] == [3, 7]
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    head_dim = 1536 // 12  # no head_dim field: hidden_size // num_attention_heads
    assert est.bytes_per_token == 2 * KV * 4 * head_dim * BF16  # attention layers, K+V, kv heads, head dim, bf16
    d_inner = 2 * 1536  # mamba_expand * hidden_size (vLLM GraniteMoeHybrid intermediate_size)
    per_layer = mamba2_state_bytes(d_inner=d_inner, n_heads=48, head_dim=64, n_groups=1, d_state=128, d_conv=4)
    assert est.state_bytes == 6 * per_layer


def test_granitemoehybrid_layers_block_type_alias_and_auto_head_dim() -> None:
    config = granite(mamba_d_head="auto")
    config["layers_block_type"] = config.pop("layer_types")
    geometry = parse(config)
    assert kinds(geometry).count("full_attention") == 2
    assert dict(geometry.layers[0].shapes)["ssm"] == (48, 2 * 1536 // 48, 128)
    assert any(p.source == "config: layers_block_type" for p in geometry.provenance)


def test_granitemoehybrid_without_layer_types_is_all_mamba() -> None:
    config = granite()
    del config["layer_types"]
    geometry = parse(config)
    assert kinds(geometry) == ["state"] * 8
    assert any("every layer a Mamba-2 layer" in note for note in geometry.notes)


def test_granitemoehybrid_rejects_other_layer_names() -> None:
    with pytest.raises(ConfigError, match="unknown layer type 'sliding_attention'"):
        parse(granite(layer_types=["mamba"] * 7 + ["sliding_attention"]))


# ---- Bamba -------------------------------------------------------------------------------------------------
def bamba(**overrides: Any) -> dict[str, Any]:
    """Shaped like ibm-ai-platform/Bamba-9B."""
    config = {
        "model_type": "bamba", "architectures": ["BambaForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096, "attn_layer_indices": [9, 18, 27], "mamba_n_heads": 128,
        "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    config.update(overrides)
    return config


def test_bamba_attn_layer_indices() -> None:
    geometry = parse(bamba())
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == [9, 18, 27]
    assert k.count("state") == 32 - 3
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    assert est.bytes_per_token == 3 * KV * 8 * 128 * BF16  # attention layers, K+V, kv heads, 4096 // 32, bf16
    d_inner = 2 * 4096  # mamba_expand * hidden_size
    per_layer = mamba2_state_bytes(d_inner=d_inner, n_heads=128, head_dim=d_inner // 128, n_groups=1, d_state=128,
                                   d_conv=4)
    assert est.state_bytes == 29 * per_layer


def test_bamba_without_indices_is_all_mamba_and_bad_index_is_an_error() -> None:
    config = bamba()
    del config["attn_layer_indices"]
    assert kinds(parse(config)) == ["state"] * 32
    with pytest.raises(ConfigError, match="attn_layer_indices holds 32"):
        parse(bamba(attn_layer_indices=[9, 32]))


# ---- LFM2 ----------------------------------------------------------------------------------------------------
def lfm2(**overrides: Any) -> dict[str, Any]:
    """Shaped like LiquidAI/LFM2-1.2B."""
    config = {
        "model_type": "lfm2", "architectures": ["Lfm2ForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3, "full_attn_idxs": [2, 5, 8, 10, 12, 14],
    }
    config.update(overrides)
    return config


def test_lfm2_full_attn_idxs_and_short_conv_state() -> None:
    geometry = parse(lfm2())
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "full_attention"] == [2, 5, 8, 10, 12, 14]
    conv = geometry.layers[0]
    assert (conv.mixer, dict(conv.shapes)) == ("short_conv", {"conv": (3 - 1, 2048)})
    est = estimate(geometry, seq_len=1000, kv_dtype="bf16")
    assert est.bytes_per_token == 6 * KV * 8 * (2048 // 32) * BF16  # attention layers, K+V, kv heads, head dim
    assert est.state_bytes == 10 * (3 - 1) * 2048 * BF16  # conv layers, L_cache - 1, hidden_size, bf16


def test_lfm2_layer_types_win_over_full_attn_idxs() -> None:
    layer_types = ["conv", "full_attention"] * 8
    geometry = parse(lfm2(layer_types=layer_types))
    assert kinds(geometry) == ["state", "full_attention"] * 8


def test_lfm2_without_layout_uses_the_default_and_lfm2_moe_requires_it() -> None:
    config = lfm2()
    del config["full_attn_idxs"]
    geometry = parse(config)
    assert kinds(geometry) == ["full_attention"] * 16  # Lfm2Config: full_attn_idxs defaults to every layer
    assert any("every layer attention" in note for note in geometry.notes)
    moe = lfm2(model_type="lfm2_moe")
    del moe["full_attn_idxs"]
    with pytest.raises(ConfigError, match="layer_types is missing .*full_attn_idxs"):
        parse(moe)


def test_lfm2_moe_layer_types() -> None:
    layer_types = ["conv"] * 24
    for index in (2, 6, 10, 14, 18, 21):
        layer_types[index] = "full_attention"
    config = lfm2(model_type="lfm2_moe", num_hidden_layers=24, layer_types=layer_types)
    del config["full_attn_idxs"]
    est = estimate(parse(config), seq_len=1, kv_dtype="bf16")
    assert est.state_bytes == 18 * (3 - 1) * 2048 * BF16


# ---- Llama 3.2 Vision (mllama) ---------------------------------------------------------------------------
def mllama(**text_overrides: Any) -> dict[str, Any]:
    """Shaped like meta-llama/Llama-3.2-11B-Vision-Instruct."""
    text = {
        "model_type": "mllama_text_model", "hidden_size": 4096, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
    }
    text.update(text_overrides)
    return {
        "model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"], "torch_dtype": "bfloat16",
        "text_config": text,
        "vision_config": {"model_type": "mllama_vision_model", "image_size": 560, "patch_size": 14, "max_num_tiles": 4},
    }


def test_mllama_cross_attention_layers() -> None:
    geometry = parse(mllama())
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "cross_attention"] == [3, 8, 13, 18, 23, 28, 33, 38]
    assert k.count("full_attention") == 40 - 8
    tiles, patches = 4, (560 // 14) ** 2 + 1  # + 1 class token per tile
    assert geometry.default_encoder_len == tiles * patches == 6404
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.encoder_len == 6404
    assert est.cross_attention_bytes == 8 * KV * 8 * 128 * 6404 * BF16  # cross layers, K+V, kv heads, dim, tokens
    assert est.kv_cache_bytes == 32 * KV * 8 * 128 * 8192 * BF16 + est.cross_attention_bytes


def test_mllama_sparse_configs_use_architecture_defaults() -> None:
    config = mllama()
    del config["text_config"]["model_type"], config["text_config"]["cross_attention_layers"]
    del config["vision_config"]
    geometry = parse(config)  # text model type from the wrapper; MllamaVisionConfig: 448 / 14, 4 tiles
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "cross_attention"] == [3, 8, 13, 18, 23, 28, 33, 38]
    assert geometry.default_encoder_len == 4 * ((448 // 14) ** 2 + 1)
    assert any("vision_config.image_size is not in the config" in note for note in geometry.notes)
    assert any("cross_attention_layers is not in the config" in note for note in geometry.notes)


def test_mllama_bad_cross_attention_index() -> None:
    with pytest.raises(ConfigError, match="cross_attention_layers holds 40"):
        parse(mllama(cross_attention_layers=[3, 40]))


# ---- end to end --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", ["falcon_h1", "granite", "bamba", "lfm2", "mllama", "exaone4"])
def test_cli_estimate_and_capacity(make: str, runner, write_config) -> None:
    config = globals()[make]()
    path = str(write_config(config))
    result = runner.invoke(app, ["estimate", "-m", path, "--seq-len", "4096", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == estimate(parse(config), seq_len=4096).kv_cache_bytes
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100"])
    # issue 10: these families count their weights from the config (tests/test_models_weights.py)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--format", "json"])
    assert json.loads(result.stdout)["weights"]["source"] == "config"
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--weights-bytes", "4GiB"])
    assert result.exit_code == 0, result.output


# ---- EXAONE 4.0 ---------------------------------------------------------------------------------------------
def exaone4(**overrides: Any) -> dict[str, Any]:
    config = {
        "model_type": "exaone4", "architectures": ["Exaone4ForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 5120, "num_hidden_layers": 8, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 4,
    }
    config.update(overrides)
    return config


def test_exaone4_integer_pattern_and_layer_types() -> None:
    geometry = parse(exaone4())
    assert kinds(geometry) == (["sliding_window"] * 3 + ["full_attention"]) * 2  # (i + 1) % 4 == 0 is global
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    per_token_layer = KV * 8 * 128 * BF16  # K+V, kv heads, head dim, bf16
    assert est.kv_cache_bytes == (2 * 8192 + 6 * 4096) * per_token_layer  # 2 global layers, 6 windowed at 4096
    layer_types = ["sliding_attention", "full_attention"] * 4
    assert kinds(parse(exaone4(layer_types=layer_types, sliding_window_pattern="LG"))) == [
        "sliding_window", "full_attention"] * 4


def test_exaone4_null_window_and_string_pattern() -> None:
    assert kinds(parse(exaone4(sliding_window=None))) == ["full_attention"] * 8
    with pytest.raises(ConfigError, match="no layer_types"):
        parse(exaone4(sliding_window_pattern="LLLG"))


def test_llama_reads_no_sliding_window(runner) -> None:
    """LlamaConfig defines no sliding_window and LlamaAttention has none: a stray key does not make Llama slide
    (Mistral's config class does define it, and slides)."""
    args = ["estimate", "-s", "32k", "--format", "json", "--set", "sliding_window=4096"]
    llama = json.loads(runner.invoke(app, [*args, "-m", "meta-llama/Llama-3.1-8B"]).stdout)
    assert llama["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 32768  # K+V, layers, kv heads, head dim, bf16
    assert any("has no window" in n for n in llama["notes"])
    mistral = json.loads(runner.invoke(app, [*args, "-m", "mistralai/Mistral-7B-v0.1"]).stdout)
    assert mistral["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4096  # the window holds 4,096 tokens
