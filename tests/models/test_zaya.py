"""Zyphra ZAYA: compressed convolutional attention states (zaya.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes


def test_zaya_cca_states(tmp_path: Path) -> None:
    heads, kv_heads, head_dim = 8, 2, 128
    config = {"model_type": "zaya", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "head_dim": head_dim, "cca_time0": 2, "cca_time1": 2,
              "layer_types": ["hybrid", "hybrid"]}
    state = B * ((heads + kv_heads) * head_dim * (1 + 1) + kv_heads * head_dim // 2) * S  # q/k window + delayed V
    expected = 2 * (kv(1, kv_heads, head_dim, T) + state)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("zaya", expected)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("zaya", {}),
    # other conv kernels and head geometry, biases on attention and an untied lm_head, a smaller router
    ("zaya", {"num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
              "cca_time0": 3, "cca_time1": 4, "attention_bias": True, "tie_word_embeddings": False,
              "lm_head_bias": True, "num_experts": 8, "router_hidden_size": 128, "layer_types": ["hybrid"] * 3}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["zaya"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
