"""Gemma 4, MiMo-V2-Flash, and the recurrent state dtype of Qwen3.5 and Nemotron-3 Super, on the real Hub
configs in ../shared/hf_configs: expected bytes are arithmetic over the config's fields (the same numbers
transformers caches: tests/test_arch_fam1_oracle.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config
from kvplan.specs import SharedKVSpec

from conftest import BF16, FP32, KV, shared_config

T = 32768


def total(config: dict[str, Any], engine: str = "ideal", seq_len: int = T, **overrides: Any) -> int:
    geometry = parse_config(config, model_id="test", overrides=overrides)
    return estimate(geometry, seq_len=seq_len, kv_dtype="bf16", deployment=Deployment(engine=engine)).kv_cache_bytes


def part(weights, name: str) -> int:
    return next(p.parameters for p in weights.parts if p.name == name)


# ---- Gemma 4 ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_gemma4_26b_a4b_global_layers_use_their_own_heads_and_head_dim(engine: str) -> None:
    config = shared_config("google__gemma-4-26B-A4B")
    types = config["text_config"]["layer_types"]
    n_full, n_sliding = types.count("full_attention"), types.count("sliding_attention")
    assert (n_full, n_sliding) == (5, 25)
    window = 1024  # sliding_window
    assert total(config, engine) == (n_sliding * window * KV * 8 * 256 * BF16  # num_key_value_heads, head_dim
                                     + n_full * T * KV * 2 * 512 * BF16)  # num_global_key_value_heads, global_head_dim


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_gemma4_31b_dense(engine: str) -> None:
    config = shared_config("nvidia__Gemma-4-31B-IT-NVFP4")
    geometry = parse_config(config, model_id="test")
    assert [s.kind for s in geometry.layers].count("full_attention") == 10
    assert total(config, engine) == 50 * 1024 * KV * 16 * 256 * BF16 + 10 * T * KV * 4 * 512 * BF16
    assert any("attention_k_eq_v" in note for note in geometry.notes)


def test_gemma4_without_k_eq_v_keeps_num_key_value_heads_on_global_layers() -> None:
    config = shared_config("nvidia__Gemma-4-31B-IT-NVFP4")
    # Gemma4TextConfig: num_global_key_value_heads applies only with attention_k_eq_v
    got = total(config, **{"text_config.attention_k_eq_v": False})
    assert got == 50 * 1024 * KV * 16 * 256 * BF16 + 10 * T * KV * 16 * 512 * BF16


def test_gemma4_reads_transformers_per_layer_config() -> None:
    text = {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "sliding_window": 512, "per_layer_config": {"5": {"head_dim": 512}}}
    assert total(text, seq_len=10) == 5 * 10 * KV * 4 * 256 * BF16 + 10 * KV * 4 * 512 * BF16


def test_gemma4_kv_shared_layers_cache_nothing() -> None:
    text = {"model_type": "gemma4_text", "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "global_head_dim": 512, "sliding_window": 512, "num_kv_shared_layers": 6}
    geometry = parse_config(text, model_id="test")
    assert all(isinstance(s, SharedKVSpec) for s in geometry.layers[6:])
    # layers 0-4 slide, 5 is global; 6-11 read them
    assert total(text, seq_len=1000) == 5 * 512 * KV * 4 * 256 * BF16 + 1000 * KV * 4 * 512 * BF16
    with pytest.raises(ConfigError, match="no full"):
        parse_config({**text, "num_kv_shared_layers": 7}, model_id="test")  # layer 5, the only global, shared


def test_gemma4_assistant_reads_the_target_models_cache() -> None:
    config = {"model_type": "gemma4_assistant", "text_config": {
        "model_type": "gemma4_text", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "hidden_size_per_layer_input": 0}}
    assert total(config, seq_len=100) == 0
    assert any("gemma4_assistant" in n for n in parse_config(config, model_id="test").notes)


def test_gemma4_defaults_are_noted() -> None:
    geometry = parse_config({"model_type": "gemma4_text"}, model_id="test")
    assert len(geometry.layers) == 30  # Gemma4TextConfig num_hidden_layers
    assert any("global_head_dim = 512" in n for n in geometry.notes)


def test_gemma4_31b_weights() -> None:
    weights = count_weights(shared_config("nvidia__Gemma-4-31B-IT-NVFP4"), model_id="test")
    hidden, heads, inter = 5376, 32, 21504
    sliding = 2 * hidden * heads * 256 + 2 * hidden * 16 * 256 + 2 * 256  # q, o; k, v; q/k norms
    full = 2 * hidden * heads * 512 + hidden * 4 * 512 + 2 * 512  # q, o; k (K = V, no v_proj); q/k norms
    assert part(weights, "attention") == 50 * sliding + 10 * full
    assert part(weights, "mlp") == 60 * 3 * hidden * inter
    assert part(weights, "embed_tokens") == 262144 * hidden  # tied
    # NVFP4: the MLPs in 4 bits with one fp8 scale per 16; self_attn is in the ignore list (16-bit)
    assert next(p.bytes for p in weights.parts if p.name == "mlp") == 60 * 3 * hidden * inter * (4 + 8 / 16) // 8


def test_gemma4_26b_weights_count_experts_beside_the_dense_mlp() -> None:
    weights = count_weights(shared_config("google__gemma-4-26B-A4B"), model_id="test")
    hidden, experts, expert_size = 2816, 128, 704
    assert part(weights, "experts") == 30 * experts * 3 * hidden * expert_size
    assert part(weights, "mlp") == 30 * 3 * hidden * 2112
    assert part(weights, "router") == 30 * (hidden * experts + hidden + experts)


# ---- MiMo-V2-Flash ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_mimo_v2_flash_full_and_swa_layers(engine: str) -> None:
    config = shared_config("XiaomiMiMo__MiMo-V2-Flash")
    n_sliding = sum(config["hybrid_layer_pattern"])
    assert (n_sliding, 48 - n_sliding) == (39, 9)
    window = config["sliding_window_size"] + 1  # MiMoV2FlashConfig: sliding_window = sliding_window_size + 1
    full = T * 4 * (192 + 128) * BF16  # num_key_value_heads x (head_dim K + v_head_dim V)
    swa = window * 8 * (192 + 128) * BF16  # swa_num_key_value_heads x (swa_head_dim + swa_v_head_dim)
    assert total(config, engine) == 9 * full + 39 * swa


def test_mimo_v2_flash_transformers_form_doubles_kv_heads_on_sliding_layers() -> None:
    text = {"model_type": "mimo_v2_flash", "num_hidden_layers": 6}  # MiMoV2FlashConfig defaults
    geometry = parse_config(text, model_id="test")
    assert [s.kind for s in geometry.layers] == ["full_attention"] + ["sliding_window"] * 4 + ["full_attention"]
    assert geometry.layers[1].num_kv_heads == 2 * 4  # 2 x num_key_value_heads
    assert geometry.layers[1].window == 129


def test_mimo_v2_flash_weights() -> None:
    weights = count_weights(shared_config("XiaomiMiMo__MiMo-V2-Flash"), model_id="test")
    assert part(weights, "experts") == 47 * 256 * 3 * 4096 * 2048  # 47 MoE layers x 256 experts, gated
    assert part(weights, "attention") == (
        9 * (4096 * 64 * 192 + 4096 * 4 * (192 + 128) + 64 * 128 * 4096)
        + 39 * (4096 * 64 * 192 + 4096 * 8 * (192 + 128) + 64 * 128 * 4096 + 64))  # + sink logits


# ---- recurrent state dtype ----------------------------------------------------------------------------------
QWEN35_STATE = 48 * (3 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32)  # conv bf16 + ssm fp32
QWEN35_ATTN = 16 * T * KV * 4 * 256 * BF16


@pytest.mark.parametrize("engine", ["ideal", "sglang", "trtllm"])
def test_qwen35_ssm_state_is_float32_as_the_config_names(engine: str) -> None:
    config = shared_config("Qwen__Qwen3.5-27B")
    assert config["text_config"]["mamba_ssm_dtype"] == "float32"
    assert total(config, engine) == QWEN35_STATE + QWEN35_ATTN
    bf16 = total(config, engine, **{"text_config.mamba_ssm_dtype": "bfloat16"})
    assert total(config, engine) - bf16 == 48 * 48 * 128 * 128 * (FP32 - BF16)


def test_qwen35_hf_dynamic_keeps_the_whole_conv_window() -> None:
    config = shared_config("Qwen__Qwen3.5-27B")
    state = 48 * (4 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32)
    assert total(config, "hf-dynamic") == state + QWEN35_ATTN


def test_vllm_sizes_the_state_in_float32_too() -> None:
    config = shared_config("Qwen__Qwen3.5-27B")
    report = estimate(parse_config(config, model_id="t"), seq_len=T, kv_dtype="bf16",
                      deployment=Deployment(engine="vllm"))
    state = next(g for g in report.groups if g.spec.kind == "state")
    assert state.bytes_per_seq >= 3 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32


def test_nemotron3_super_state_dtype_and_provenance() -> None:
    config = shared_config("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    geometry = parse_config(config, model_id="t")
    pattern = config["hybrid_override_pattern"]
    n_m, n_a = pattern.count("M"), pattern.count("*")
    conv = 3 * (128 * 64 + 2 * 8 * 128)  # (conv_kernel - 1) x (mamba_num_heads x mamba_head_dim + 2 n_groups d_state)
    assert total(config) == n_m * (conv * BF16 + 128 * 64 * 128 * FP32) + n_a * T * KV * 2 * 128 * BF16
    assert any(p.field == "ssm_state_dtype" and p.source == "config: mamba_ssm_cache_dtype" for p in geometry.provenance)
    assert any("mamba_ssm_cache_dtype = float32" in n for n in geometry.notes)


def test_nemotron3_super_weights_read_the_latent_moe() -> None:
    config = shared_config("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    n_e = config["hybrid_override_pattern"].count("E")
    weights = count_weights(config, model_id="t")
    assert part(weights, "experts") == n_e * 512 * 2 * 1024 * 2688  # up + down in moe_latent_size 1024
    assert part(weights, "latent_projections") == n_e * 2 * 4096 * 1024
    assert part(weights, "shared_experts") == n_e * 2 * 4096 * 5376
    assert 120e9 < sum(p.parameters for p in weights.parts) < 121e9  # "120B-A12B", not 458.6B
