"""Mamba and Mamba-2: a recurrent state per layer, no K/V cache (mamba.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import BOTH, geometry_of, kinds
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id

from kvplan.calc import estimate

from conftest import BF16


@BOTH
def test_mamba_state_only(bundled: bool) -> None:
    geometry = geometry_of("state-spaces/mamba-2.8b-hf" if bundled else "state-spaces__mamba-2.8b-hf", bundled=bundled)
    assert kinds(geometry) == ["state"] * 64
    d_inner, d_conv, d_state, fp32 = 5120, 4, 16, 4
    est = estimate(geometry)  # no --seq-len needed: nothing grows with tokens
    assert est.seq_len is None
    assert est.kv_cache_bytes == 64 * ((d_conv - 1) * d_inner + d_inner * d_state) * fp32
    # constant in the sequence length
    assert estimate(geometry, seq_len=1_000_000).kv_cache_bytes == est.kv_cache_bytes


def test_falcon_mamba_uses_intermediate_size() -> None:
    geometry = geometry_of("tiiuae__falcon-mamba-7b")
    d_inner, d_conv, d_state = 8192, 4, 16  # intermediate_size, not expand (16) * hidden
    assert estimate(geometry).kv_cache_bytes == 64 * ((d_conv - 1) * d_inner + d_inner * d_state) * BF16


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("mamba2", {}),
    ("mamba2", {"num_hidden_layers": 4, "n_groups": 1, "use_bias": True, "use_conv_bias": False, "hidden_size": 2048,
                "num_heads": 64}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["mamba2"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
