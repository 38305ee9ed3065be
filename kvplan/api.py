"""The public Python API: resolve a model, read its geometry, size its cache."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kvplan.arch import parse_config, parse_override
from kvplan.calc import Estimate
from kvplan.calc import estimate as _estimate
from kvplan.geometry import ModelGeometry
from kvplan.report import Source
from kvplan.units import parse_tokens


def load_geometry(
    model: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
) -> tuple[ModelGeometry, Source]:
    """Resolve ``model`` (path, bundled id/alias or Hub id) and parse its per-layer geometry."""
    from dataclasses import replace

    from kvplan.sources import load_raw_config, source_notes

    config, source, model_id = load_raw_config(model, revision=revision, token=token)
    geometry = parse_config(config, model_id=model_id, source_name=model_id, overrides=normalise_overrides(overrides))
    if source_notes(source):
        geometry = replace(geometry, notes=source_notes(source) + geometry.notes)
    return geometry, source


def normalise_overrides(overrides: Mapping[str, Any] | Iterable[str] | None) -> dict[str, Any]:
    if overrides is None:
        return {}
    if isinstance(overrides, Mapping):
        return dict(overrides)
    return dict(parse_override(item) for item in overrides)


def estimate(
    model: str | ModelGeometry,
    *,
    batch: int = 1,
    seq_len: int | str | None = None,
    kv_dtype: str = "auto",
    encoder_len: int | str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
) -> Estimate:
    """Ideal KV-cache size of ``model`` for ``batch`` sequences of ``seq_len`` tokens."""
    geometry = model if isinstance(model, ModelGeometry) else load_geometry(model, overrides=overrides)[0]
    return _estimate(
        geometry,
        batch=batch,
        seq_len=parse_tokens(seq_len) if seq_len is not None else None,
        kv_dtype=kv_dtype,
        encoder_len=parse_tokens(encoder_len, what="--encoder-len") if encoder_len is not None else None,
    )
