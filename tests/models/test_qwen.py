"""Qwen: Qwen (1), Qwen2/2.5/3 (+MoE, +VL), and the hybrid Qwen3-Next and Qwen3.5 (qwen.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import CONTEXT, bundled, geometry_of, kinds, total
from transformers_meta import (
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    default_config,
    meta_count,
    variant_cases,
    variant_ids,
)

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

from conftest import BF16, FP16, FP32, KV, make_config, shared_config


def test_qwen2_window_only_with_use_sliding_window() -> None:
    config = shared_config("Qwen__Qwen2-7B")
    assert kinds(parse_config(config, model_id="q")) == ["full_attention"] * 28
    geometry = parse_config(config, model_id="q", overrides={"use_sliding_window": True, "max_window_layers": 20, "sliding_window": 4096})
    assert kinds(geometry) == ["full_attention"] * 20 + ["sliding_window"] * 8  # layers >= max_window_layers slide
    est = estimate(geometry, seq_len=8192)
    assert est.kv_cache_bytes == (20 * 8192 + 8 * 4096) * KV * 4 * 128 * BF16


def test_qwen3_next_bundled() -> None:
    geometry = geometry_of("Qwen/Qwen3-Next-80B-A3B-Instruct", bundled=True)
    k = kinds(geometry)
    assert (k.count("full_attention"), k.count("state")) == (12, 36)
    hk, hv, dk, dv, conv = 16, 32, 128, 128, 4
    state = ((conv - 1) * (2 * hk * dk + hv * dv) + hv * dk * dv) * FP16
    est = estimate(geometry, seq_len=1, kv_dtype="bf16")
    assert est.bytes_per_token == 12 * KV * 2 * 256 * BF16 == 24576
    assert est.state_bytes == 36 * state


def test_qwen2_vl_top_level_text_fields() -> None:
    config = make_config(model_type="qwen2_vl", num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                         hidden_size=3584, sliding_window=32768, use_sliding_window=False, max_window_layers=28)
    geometry = parse_config(config, model_id="qvl")
    assert geometry.family == "qwen" and kinds(geometry) == ["full_attention"] * 28


QWEN35_STATE = 48 * (3 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32)  # conv bf16 + ssm fp32


QWEN35_ATTN = 16 * CONTEXT * KV * 4 * 256 * BF16


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
    report = estimate(parse_config(config, model_id="t"), seq_len=CONTEXT, kv_dtype="bf16",
                      deployment=Deployment(engine="vllm"))
    state = next(g for g in report.groups if g.spec.kind == "state")
    assert state.bytes_per_seq >= 3 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32


def test_qwen3_next_gated_attention_and_delta_net() -> None:
    w = count_weights(bundled("Qwen/Qwen3-Next-80B-A3B-Instruct"), model_id="q3n")
    h, heads, kv_heads, d = 2048, 16, 2, 256
    hk, hv, dk, dv, conv = 16, 32, 128, 128, 4
    full = 12 * (h * 2 * heads * d + 2 * h * kv_heads * d + heads * d * h + 2 * d)  # q doubled for the gate; q/k norms
    key_dim, value_dim = hk * dk, hv * dv
    delta = 36 * (h * (2 * key_dim + 2 * value_dim) + h * 2 * hv + value_dim * h  # in_proj_qkvz, in_proj_ba, out_proj
                  + (2 * key_dim + value_dim) * conv + 2 * hv + dv)  # conv1d, dt_bias + A_log, gated norm
    attention = next(p for p in w.parts if p.name == "attention")
    assert attention.parameters == full + delta
    shared = next(p for p in w.parts if p.name == "shared_experts")
    assert shared.parameters == 48 * (3 * h * 512 + h)  # Qwen3NextConfig default shared expert 512 (noted), + gate
    assert any("shared_expert_intermediate_size" in n for n in w.notes)


def test_qwen3_moe_reads_num_local_experts_as_transformers_5_saves_it() -> None:
    # Qwen3MoeConfig maps num_experts to num_local_experts and to_dict() writes only the latter
    config = default_config("qwen3_moe", num_hidden_layers=2, num_experts=4)
    assert "num_experts" not in config and config["num_local_experts"] == 4
    weights = count_weights(config, model_id="qwen3")
    hidden, size = config["hidden_size"], config["moe_intermediate_size"]
    assert weights.expert_parameters == 3 * hidden * size * 4 * 2  # gate/up/down, experts, layers
    old = {**{k: v for k, v in config.items() if k != "num_local_experts"}, "num_experts": 4}
    assert count_weights(old, model_id="qwen3").parameters == weights.parameters


def test_qwen3_moe_without_expert_count_takes_the_class_default_and_says_so() -> None:
    config = default_config("qwen3_moe", num_hidden_layers=2)
    del config["num_local_experts"]
    weights = count_weights(config, model_id="qwen3")
    assert weights.num_experts == 128  # Qwen3MoeConfig.num_experts
    assert any("num_experts" in n and "default" in n for n in weights.notes)
    assert weights.parameters == meta_count(config)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "qwen3_moe": [{"num_hidden_layers": 6, "mlp_only_layers": [0, 3], "decoder_sparse_step": 2}],
    "qwen3_vl_moe": [{"text_config": {"num_hidden_layers": 4, "mlp_only_layers": [1]}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
