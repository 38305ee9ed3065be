"""Reading a config into a geometry and sizing it, for the family tests: the shared and bundled configs by
name, layer kinds, bytes per token."""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import parse_config
from kvplan.sources import bundled_index, read_json_config

from conftest import BF16, shared_config


def bundled(hub_id: str) -> dict:
    return read_json_config(bundled_index()[hub_id.lower()])


def geometry_of(name: str, *, bundled: bool = False, **overrides):
    if bundled:
        config = read_json_config(bundled_index()[name.lower()])
    else:
        config = shared_config(name)
    return parse_config(config, model_id=name, overrides=overrides)


def kinds(geometry) -> list[str]:
    return [spec.kind for spec in geometry.layers]


def per_token(geometry, dtype: str = "bf16") -> int:
    return estimate(geometry, seq_len=1, kv_dtype=dtype).bytes_per_token


BOTH = pytest.mark.parametrize("bundled", [False, True], ids=["shared", "bundled"])


def parse(config: dict[str, Any], **overrides: Any):
    return parse_config(config, model_id="test", overrides=overrides)


def mamba2_state_bytes(*, d_inner: int, n_heads: int, head_dim: int, n_groups: int, d_state: int, d_conv: int) -> int:
    conv = (d_conv - 1) * (d_inner + 2 * n_groups * d_state)
    ssm = n_heads * head_dim * d_state
    return (conv + ssm) * BF16


#: The sequence length the long-context tests size the cache at.
CONTEXT = 32768


def total(config: dict[str, Any], engine: str = "ideal", seq_len: int = CONTEXT, **overrides: Any) -> int:
    geometry = parse_config(config, model_id="test", overrides=overrides)
    return estimate(geometry, seq_len=seq_len, kv_dtype="bf16", deployment=Deployment(engine=engine)).kv_cache_bytes


def part(weights, name: str) -> int:
    return next(p.parameters for p in weights.parts if p.name == name)
