"""Falcon (MQA, the new decoder architecture, RefinedWeb) and Falcon-H1 (falcon.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import geometry_of, kinds, mamba2_state_bytes, parse
from transformers_meta import assert_counts_like_transformers, case_id, meta_count

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config

from conftest import BF16, KV, shared_config


def test_falcon_multi_query() -> None:
    geometry = geometry_of("tiiuae/falcon-7b", bundled=True)
    assert geometry.layers[0].num_kv_heads == 1 and geometry.layers[0].head_size == 4544 // 71


def test_falcon_new_decoder_architecture() -> None:
    config = {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 8, "num_attention_heads": 128,
              "hidden_size": 8192, "num_hidden_layers": 60, "torch_dtype": "bfloat16"}
    assert parse_config(config, model_id="f").layers[0].num_kv_heads == 8


def test_falcon_default_multi_query_is_noted() -> None:
    config = {"model_type": "falcon", "num_attention_heads": 71, "hidden_size": 4544, "num_hidden_layers": 32}
    geometry = parse_config(config, model_id="f")
    assert geometry.layers[0].num_kv_heads == 1
    assert any("multi_query" in n for n in geometry.notes)


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


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = falcon_h1()
    path = str(write_config(config))
    result = runner.invoke(app, ["estimate", "-m", path, "--seq-len", "4096", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == estimate(parse(config), seq_len=4096).kv_cache_bytes
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100"])
    # issue 10: these families count their weights from the config (the weight tests of this file)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--format", "json"])
    assert json.loads(result.stdout)["weights"]["source"] == "config"
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--weights-bytes", "4GiB"])
    assert result.exit_code == 0, result.output


def test_refinedweb_is_falcons_new_decoder_architecture() -> None:
    # Falcon-40B's original remote-code config (RWForCausalLM): n_head_kv K/V groups and two LayerNorms per
    # layer are FalconConfig's new_decoder_architecture.
    config = shared_config("tiiuae__falcon-40b")
    falcon = {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": config["n_head_kv"],
              "hidden_size": config["hidden_size"], "num_attention_heads": config["n_head"],
              "num_hidden_layers": config["n_layer"], "vocab_size": config["vocab_size"], "bias": config["bias"],
              "parallel_attn": config["parallel_attn"], "alibi": config["alibi"]}
    assert count_weights(config, model_id="falcon-40b").parameters == meta_count(falcon)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("falcon_h1", {}),
    ("falcon_h1 rms-norm bias", {"mamba_rms_norm": True, "attention_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
