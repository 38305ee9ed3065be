"""Arcee AFMoE and Poolside Laguna (afmoe.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import (
    DROP,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    config_of,
    meta_count,
    variant_cases,
    variant_ids,
)

from kvplan.models import count_weights

#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "afmoe": [{"num_hidden_layers": 4, "num_dense_layers": 2, "num_shared_experts": 1, "attention_bias": True}],
    "laguna": [{"num_hidden_layers": 4, "num_attention_heads_per_layer": [48, 32, 48, 16], "gating": "per-channel",
                "mlp_layer_types": ["dense", "sparse", "dense", "sparse"], "attention_bias": True},
               {"num_hidden_layers": 3, DROP: ["mlp_layer_types", "num_attention_heads_per_layer"]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


@pytest.mark.parametrize(("model_type", "drop", "said"), [
    ("laguna", ["mlp_layer_types"], "LagunaConfig's default"),
])
def test_a_layout_from_the_config_class_default_is_said(model_type: str, drop: list[str], said: str) -> None:
    # a Hub config that omits a per-layer list is counted by its config class's rule, and the report says so
    config = config_of(model_type, {DROP: drop})
    weights = count_weights(config, model_id=model_type)
    assert any(said in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)


def test_laguna_cache_is_full_attention_unless_layer_types_says_otherwise() -> None:
    # LagunaConfig without layer_types: every layer full, although sliding_window (512) is set
    from geometry_check import kinds, parse

    from kvplan.calc import estimate

    from conftest import BF16, KV

    config = config_of("laguna", {"num_hidden_layers": 4, DROP: ["layer_types"]})
    geometry = parse(config)
    assert kinds(geometry) == ["full_attention"] * 4
    assert any("LagunaConfig makes every layer full attention" in note for note in geometry.notes)
    assert estimate(geometry, seq_len=4096, kv_dtype="bf16").kv_cache_bytes == \
        KV * 4 * 8 * 128 * BF16 * 4096  # K+V, layers, num_key_value_heads, head_dim, bf16
    sliding = parse(config_of("laguna", {"num_hidden_layers": 2,
                                         "layer_types": ["sliding_attention", "full_attention"]}))
    assert kinds(sliding) == ["sliding_window", "full_attention"]
