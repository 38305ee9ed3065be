"""MiniCPM 5 MoE (minicpm5.py): gated attention, DeepSeek-V3's MoE after the dense layers."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import kinds, parse
from transformers_meta import (
    DROP,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    config_of,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate

from conftest import BF16, KV

SMALL = {"num_hidden_layers": 4, "n_routed_experts": 8, "vocab_size": 4096}
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "minicpm5_moe": [{**SMALL, "mlp_layer_types": ["dense", "dense", "sparse", "sparse"], "attention_bias": True,
                      "n_shared_experts": 2},
                     {**SMALL, DROP: ["mlp_layer_types"]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS), ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


def test_kv_cache_is_gqa_of_head_dim() -> None:
    geometry = parse(config_of("minicpm5_moe", SMALL))
    assert kinds(geometry) == ["full_attention"] * 4
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    assert est.kv_cache_bytes == KV * 4 * 2 * 128 * BF16 * 4096  # K+V, layers, num_key_value_heads, head_dim, bf16
