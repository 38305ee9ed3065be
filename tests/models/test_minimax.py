"""MiniMax-01 / M1 (lightning attention), MiniMax-M2 and MiniMax-M3's language model (minimax.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import BOTH, geometry_of, kinds
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_counts_like_transformers,
    case_id,
    default_config,
    meta_count,
)

from kvplan.calc import estimate
from kvplan.models import count_weights

from conftest import FP16


@BOTH
def test_minimax_attn_type_list(bundled: bool) -> None:
    geometry = geometry_of("MiniMaxAI/MiniMax-M1-80k" if bundled else "MiniMaxAI__MiniMax-M1", bundled=bundled)
    k = kinds(geometry)
    assert (k.count("full_attention"), k.count("state")) == (10, 70)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == list(range(7, 80, 8))
    heads, head_dim = 64, 128
    est = estimate(geometry, seq_len=1000, kv_dtype="bf16")
    assert est.state_bytes == 70 * heads * head_dim * head_dim * FP16  # no torch_dtype: 16-bit state


def test_minimax_without_layer_lists_alternates() -> None:
    # neither layer_types nor attn_type_list: MiniMaxConfig's default (softmax at even layers), noted
    config = default_config("minimax", num_hidden_layers=5)
    del config["layer_types"]
    weights = count_weights(config, model_id="minimax")
    assert weights.parameters == meta_count(config)
    assert any("MiniMaxConfig default alternates" in note for note in weights.notes)


def test_minimax_m3_indexer_and_dense_layers_equal_transformers() -> None:
    layers = {"num_hidden_layers": 4, "layer_types": ["full_attention", "minimax_m3_sparse"] * 2,
              "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]}
    config = default_config("minimax_m3_vl_text", **layers)
    weights = count_weights(config, model_id="m3")
    assert weights.parameters == meta_count(config)
    # two indexers of q 6144 x (4 x 128), k 6144 x 128 and their two 128-wide norms
    plain = count_weights(default_config("minimax_m3_vl_text", **{**layers, "layer_types": ["full_attention"] * 4}),
                          model_id="m3")
    assert weights.parameters - plain.parameters == 2 * (6144 * 4 * 128 + 6144 * 128 + 2 * 128)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("minimax", {}),
    # layer_types with lightning runs, a smaller decay block, GQA with an explicit head dim
    ("minimax", {"num_hidden_layers": 6, "block_size": 128, "num_key_value_heads": 4, "head_dim": 64,
                 "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention",
                                 "linear_attention", "full_attention"]}),
    ("minimax_m2", {}),  # q/k norms over all heads
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["minimax"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
