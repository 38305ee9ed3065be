"""Param-2 MoE (param2.py): GLM-4.5's MoE decoder with Param2MoeConfig's defaults."""

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
from kvplan.models import count_weights

from conftest import BF16, KV

WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "param2moe": [{"num_hidden_layers": 4, "first_k_dense_replace": 2, "attention_bias": True,
                   "tie_word_embeddings": False}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS), ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


def test_defaults_of_a_sparse_hub_config() -> None:
    # a config that omits head_dim, use_qk_norm and tie_word_embeddings gets Param2MoeConfig's values
    config = config_of("param2moe", {DROP: ["head_dim", "use_qk_norm", "tie_word_embeddings"]})
    est = estimate(parse(config), seq_len=4096, kv_dtype="bf16")
    assert kinds(parse(config)) == ["full_attention"] * 21
    assert est.kv_cache_bytes == KV * 21 * 8 * 64 * BF16 * 4096  # K+V, layers, KV heads, head_dim 64, bf16
    assert count_weights(config, model_id="param2moe").parameters == \
        count_weights(config_of("param2moe", {}), model_id="param2moe").parameters
