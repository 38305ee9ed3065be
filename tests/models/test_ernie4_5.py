"""Baidu ERNIE 4.5, dense, MoE and VL's language model (ernie4_5.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import assert_counts_like_transformers, case_id

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("ernie4_5", {}),
    ("ernie4_5_moe", {}),
    ("ernie4_5_moe interval", {"moe_layer_interval": 2, "moe_layer_start_index": 3, "moe_layer_end_index": 20}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
