"""JetMoE: MoA attention and MoE MLPs (jetmoe.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("jetmoe", {}),
    ("jetmoe", {"num_hidden_layers": 4, "num_key_value_heads": 8, "kv_channels": 64, "num_local_experts": 4,
                "tie_word_embeddings": False}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["jetmoe"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
