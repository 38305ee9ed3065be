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

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

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


def minimax_m3_config(**overrides: Any) -> dict[str, Any]:
    """A config of MiniMax-M3's shape as the Hub writes it: 60 layers, the first 3 full attention and 57 block-sparse
    (``sparse_attention_config.sparse_attention_freq``), GQA 4 KV heads x 128, a 128-wide index key."""
    return {"model_type": "minimax_m3", "torch_dtype": "bfloat16", "hidden_size": 6144, "num_hidden_layers": 60,
            "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 200064,
            "sparse_attention_config": {"sparse_attention_freq": [0] * 3 + [1] * 57, "sparse_index_dim": 128,
                                        "sparse_num_index_heads": 4, "sparse_block_size": 128,
                                        "sparse_topk_blocks": 16},
            **overrides}


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic", "vllm", "sglang"])
def test_minimax_m3_caches_the_index_keys_of_its_sparse_layers(engine: str) -> None:
    config = minimax_m3_config()
    geometry = parse_config(config, model_id="m3")
    tokens, layers, kv_heads, head_dim = 8192, 60, 4, 128
    sparse = sum(config["sparse_attention_config"]["sparse_attention_freq"])
    index_dim = config["sparse_attention_config"]["sparse_index_dim"]
    est = estimate(geometry, seq_len=tokens, kv_dtype="bf16", deployment=Deployment(engine=engine))
    assert sparse == 57
    assert est.kv_cache_bytes == tokens * (layers * 2 * kv_heads * head_dim + sparse * index_dim) * FP16
    assert est.kv_cache_bytes == 1_126_170_624  # the figure of a MiniMax-M3 config at 8,192 tokens
    assert any("57 of 60 layers (minimax_m3_sparse) also cache an indexer key" in n for n in geometry.notes)


def test_minimax_m3_layer_types_and_flat_index_dim() -> None:
    # transformers' own spelling: layer_types and index_head_dim (the Hub's sparse_attention_config wins when both)
    config = {"model_type": "minimax_m3_vl_text", "num_hidden_layers": 4, "index_head_dim": 64,
              "layer_types": ["full_attention", "minimax_m3_sparse", "minimax_m3_sparse", "full_attention"]}
    geometry = parse_config(config, model_id="m3")
    heads, head_dim = 4, 128  # MiniMaxM3VLTextConfig defaults
    est = estimate(geometry, seq_len=10, kv_dtype="bf16")
    assert est.kv_cache_bytes == 10 * (4 * 2 * heads * head_dim + 2 * 64) * FP16
    both = estimate(parse_config({**config, "sparse_attention_config": {"sparse_index_dim": 32}}, model_id="m3"),
                    seq_len=10, kv_dtype="bf16")
    assert both.kv_cache_bytes == 10 * (4 * 2 * heads * head_dim + 2 * 32) * FP16
