"""Kyutai Moshi's text decoder (moshi.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import check_lm_count

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("moshi", {}),
    ("moshi gqa", {"num_key_value_heads": 8, "ffn_dim": 16384}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
