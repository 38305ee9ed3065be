"""Adept Persimmon and Fuyu (persimmon.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import (
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    variant_cases,
    variant_ids,
)

#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "persimmon": [{"num_hidden_layers": 3, "qk_layernorm": False, "tie_word_embeddings": True}],
    "fuyu": [{"patch_size": 16, "num_channels": 4, "text_config": {"num_hidden_layers": 3}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
