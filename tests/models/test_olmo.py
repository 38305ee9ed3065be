"""AllenAI OLMo 1-3, OLMoE and FlexOlmo (olmo.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import (
    assert_counts_like_transformers,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    case_id,
    variant_cases,
    variant_ids,
)

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("olmo", {}),  # LayerNorms without weights
    # Llama-like members that had no count (issue 10 audit): transformers' default configs
    ("olmo2", {}),
    ("olmo3", {}),
    ("olmoe", {}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "flex_olmo": [{"num_hidden_layers": 3, "num_experts": 3, "attention_bias": True, "num_key_value_heads": 8}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
