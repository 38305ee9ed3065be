"""Cohere: Command-R, Command-R7B / Command-A and Command-A MoE (cohere.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import kinds
from transformers_meta import (
    DROP,
    SET,
    assert_counts_like_transformers,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    case_id,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate
from kvplan.models import parse_config

from conftest import BF16, KV, make_config


def test_cohere2_three_local_one_global() -> None:
    # Command-R7B-style config: 3 sliding layers then 1 global (sliding_window_pattern 4).
    config = make_config(model_type="cohere2", num_hidden_layers=32, num_key_value_heads=8,
                         sliding_window=4096, sliding_window_pattern=4, max_position_embeddings=8192)
    geometry = parse_config(config, model_id="c2")
    assert kinds(geometry) == ["sliding_window", "sliding_window", "sliding_window", "full_attention"] * 8
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.kv_cache_bytes == (24 * 4096 + 8 * 8192) * KV * 8 * 128 * BF16


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("cohere", {}),
    ("cohere2", {}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "cohere2_moe": [{"num_hidden_layers": 4, "first_k_dense_replace": 2, "prefix_dense_intermediate_size": 1024,
                     "num_shared_experts": 1, "attention_bias": True},
                    {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 1}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
