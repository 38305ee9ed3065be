"""Microsoft Phi: Phi-1/2, Phi-3/3.5/4, PhiMoE and Phi-3-small (phi.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import geometry_of, kinds
from transformers_meta import assert_counts_like_transformers, case_id


def test_phi3_window() -> None:
    geometry = geometry_of("microsoft__Phi-3-mini-4k-instruct")
    assert kinds(geometry) == ["sliding_window"] * 32 and geometry.layers[0].sliding_window == 2047


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("phimoe", {}),
    ("phimoe biases", {"lm_head_bias": True, "attention_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
