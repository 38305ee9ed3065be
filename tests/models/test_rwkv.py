"""RWKV: a recurrent state per layer, no K/V cache (rwkv.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id
from zoo_generate import B, S, T, kv_bytes


def test_rwkv_states(tmp_path: Path) -> None:
    # transformers keeps this state outside the Cache object (the zoo measures only the Cache): arithmetic only
    rwkv = {"model_type": "rwkv", "num_hidden_layers": 6, "hidden_size": 4096}
    assert kv_bytes(rwkv, seq_len=T, tmp_path=tmp_path) == 6 * B * 4096 * (2 * S + 3 * 4)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("rwkv", {}),
    ("rwkv", {"num_hidden_layers": 4, "attention_hidden_size": 2048, "intermediate_size": 8192,
              "tie_word_embeddings": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["rwkv"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
