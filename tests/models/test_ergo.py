"""Ergo (ergo.py): sliding layers with a full one every ``global_attention_every_n_layers``, ReLU^2 MLPs,
experts with their own output norms."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import kinds, parse
from transformers_meta import (
    DROP,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    config_of,
    meta_count,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate
from kvplan.models import count_weights

from conftest import BF16, KV

#: ErgoConfig (transformers 5.25) with fewer layers and experts, then variants that move layers between layouts.
SMALL = {"num_hidden_layers": 8, "num_experts": 8, "vocab_size": 4096}
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "ergo": [{**SMALL, "num_dense_blocks": 3, "global_attention_every_n_layers": 2},
             {**SMALL, DROP: ["mlp_layer_types", "layer_types"]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS), ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


def test_kv_cache_by_the_config_class_rule() -> None:
    # no layer_types: ErgoConfig makes layer i full when (i + 1) % global_attention_every_n_layers == 0
    config = config_of("ergo", {**SMALL, DROP: ["layer_types"]})
    geometry = parse(config)
    assert kinds(geometry) == (["sliding_window"] * 3 + ["full_attention"]) * 2
    head_dim = 8192 // 64  # hidden_size // num_attention_heads (ErgoAttention reads no head_dim)
    per_token_layer = KV * 8 * head_dim * BF16  # K+V, num_key_value_heads, head dim, bf16
    window = 512  # sliding_window
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.kv_cache_bytes == (2 * 8192 + 6 * window) * per_token_layer  # 2 full layers, 6 sliding


def test_dense_layers_from_the_config_class_default_are_said() -> None:
    config = config_of("ergo", {**SMALL, DROP: ["mlp_layer_types"]})
    weights = count_weights(config, model_id="ergo")
    assert any("num_dense_blocks" in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)
