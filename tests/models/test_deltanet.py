"""Gated DeltaNet hybrids: OLMo-Hybrid and LaRA-mini (deltanet.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes


@pytest.mark.parametrize(("model_type", "config", "attention"), [
    ("olmo_hybrid", {"num_hidden_layers": 4, "hidden_size": 3840, "num_attention_heads": 30, "num_key_value_heads": 30,
                     "linear_num_key_heads": 30, "linear_num_value_heads": 30, "linear_key_head_dim": 96,
                     "linear_value_head_dim": 192, "linear_conv_kernel_dim": 4,
                     "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, kv(1, 30, 128, T)),
    ("lara_mini", {"num_hidden_layers": 5, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
                   "head_dim": 128, "linear_num_key_heads": 8, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
                   "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "sliding_window": 512,
                   "layer_types": ["linear_attention", "sliding_attention", "linear_attention", "full_attention",
                                   "sliding_attention"]}, 3 * kv(1, 4, 128, T)),
])
def test_gated_deltanet_hybrids(model_type: str, config: dict[str, Any], attention: int, tmp_path: Path) -> None:
    hk, hv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv, k = config["linear_key_head_dim"], config["linear_value_head_dim"], config["linear_conv_kernel_dim"]
    n_linear = config["layer_types"].count("linear_attention")
    state = B * ((2 * hk * dk + hv * dv) * k * S + hv * dk * dv * 4)  # conv window (model dtype) + float32 state
    expected = n_linear * state + attention
    assert kv_bytes({"model_type": model_type, **config}, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("olmo_hybrid", {}),
    # its own layer list, fewer KV heads, key heads != value heads, attention biases
    ("olmo_hybrid", {"num_hidden_layers": 6, "num_key_value_heads": 10, "linear_num_key_heads": 15, "attention_bias": True,
                     "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention",
                                     "full_attention", "full_attention"]}),
    ("lara_mini", {}),
    ("lara_mini", {"num_hidden_layers": 4, "tie_word_embeddings": False,
                   "layer_types": ["linear_attention", "sliding_attention", "full_attention", "linear_attention"]}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["lara_mini", "olmo_hybrid"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
