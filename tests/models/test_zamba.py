"""Zyphra Zamba and Zamba2: Mamba layers and shared attention blocks (zamba.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_counts_like_transformers,
    case_id,
    default_config,
    meta_count,
)
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan.models import count_weights


def test_zamba2_mamba_everywhere_shared_attention_on_hybrid_layers(tmp_path: Path) -> None:
    heads, head_dim, groups, d_state, d_conv, hidden = 8, 640, 1, 64, 4, 2560
    config = {"model_type": "zamba2", "num_hidden_layers": 7, "hidden_size": hidden, "mamba_d_state": d_state,
              "mamba_d_conv": d_conv, "mamba_expand": 2, "mamba_ngroups": groups, "n_mamba_heads": heads,
              "mamba_headdim": head_dim, "num_attention_heads": 32, "num_key_value_heads": 32, "attention_head_dim": 160,
              "layers_block_type": ["linear_attention"] * 6 + ["hybrid"]}
    mamba = B * ((heads * head_dim + 2 * groups * d_state) * d_conv * S + heads * head_dim * d_state * 4)
    expected = 7 * mamba + kv(1, 32, 160, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("zamba2", expected)


def test_zamba_default_block_types() -> None:
    # no layers_block_type: ZambaConfig's rule (Mamba, Mamba, hybrid, then the period/offset pattern), an explicit
    # dt rank, projection biases and no conv bias
    config = default_config("zamba", num_hidden_layers=10, attn_layer_period=3, attn_layer_offset=1, mamba_dt_rank=64,
                            mamba_proj_bias=True, mamba_conv_bias=False, hidden_size=1024, num_attention_heads=8,
                            num_key_value_heads=8)
    for key in ("layers_block_type", "attention_head_dim", "attention_hidden_size"):
        del config[key]
    assert count_weights(config, model_id="zamba").parameters == meta_count(config)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("zamba2", {}),
    # two shared blocks used in turn, q/k/v adapters, biases, two Mamba groups, GQA; tied, then untied (transformers
    # ties the shared blocks through tie_word_embeddings: untied, every hybrid layer holds its own copy)
    *[("zamba2", {"num_hidden_layers": 8, "num_mem_blocks": 2, "use_shared_attention_adapter": True,
                  "add_bias_linear": True, "mamba_ngroups": 2, "num_key_value_heads": 8, "intermediate_size": 4096,
                  "tie_word_embeddings": tie,
                  "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid", "hybrid",
                                        "linear_attention", "hybrid", "linear_attention"]}) for tie in (True, False)],
    ("zamba", {}),
    ("zamba", {"num_hidden_layers": 8, "tie_word_embeddings": False}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["zamba", "zamba2"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
