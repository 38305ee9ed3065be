"""RecurrentGemma (Griffin): RG-LRU state layers and local attention (recurrent_gemma.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes


def test_recurrent_gemma_states(tmp_path: Path) -> None:
    # transformers keeps these states on the modules (the zoo measures them there): conv1d_state is a view of the
    # conv1d_width-wide concatenation, so it holds 4 columns
    rg = {"model_type": "recurrent_gemma", "num_hidden_layers": 3, "hidden_size": 2560, "num_attention_heads": 10,
          "num_key_value_heads": 10, "attention_window_size": 2048, "conv1d_width": 4,
          "block_types": ["recurrent", "recurrent", "attention"]}
    rg_state = B * (4 * 2560 * S + 2560 * 4)  # conv1d_width inputs (model dtype) + float32 RG-LRU state
    assert kv_bytes(rg, seq_len=T, tmp_path=tmp_path) == 2 * rg_state + kv(1, 10, 256, T)
    check_zoo("recurrent_gemma", 2 * rg_state + kv(1, 10, 256, T))


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("recurrent_gemma", {}),
    ("recurrent_gemma", {"num_hidden_layers": 5, "lru_width": 1280, "num_key_value_heads": 1, "attention_bias": True,
                         "block_types": ["recurrent", "attention"]}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["recurrent_gemma"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
