"""The bundled models as a report: one line of geometry each."""

from __future__ import annotations

from typing import Any

from kvplan import __version__
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.models import parse_config
from kvplan.report import SCHEMA_VERSION, layer_dict
from kvplan.sources import bundled_ids, bundled_index, read_json_config, suggest_bundled

SHORT_KIND = {
    "full_attention": "full", "sliding_window": "swa", "chunked_local": "chunked", "cross_attention": "cross",
    "mla": "mla", "state": "state", "no_cache": "no-cache",
}


def summarise_kinds(layers: list[dict[str, Any]]) -> str:
    parts = []
    for layer in layers:
        label = SHORT_KIND.get(layer["kind"], layer["kind"])
        if layer["window"]:
            label += f" W{layer['window']}"
        parts.append(f"{layer['count']}× {label}")
    return ", ".join(parts)


def models_report() -> dict[str, Any]:
    rows = []
    index = bundled_index()
    for hub_id in bundled_ids():
        path = index[hub_id.lower()]
        config = read_json_config(path, label=f"bundled {hub_id}")
        geometry = parse_config(config, model_id=hub_id)
        est = estimate(geometry, batch=1, seq_len=geometry.max_context_tokens or 1)
        layers = [layer_dict(group) for group in est.groups]
        attention = [layer for layer in layers if layer["num_kv_heads"] is not None]
        rows.append(
            {
                "id": hub_id,
                "alias": path.stem.partition("__")[2].lower(),
                "model_type": geometry.model_type,
                "num_hidden_layers": geometry.num_hidden_layers,
                "num_kv_heads": attention[0]["num_kv_heads"] if attention else None,
                "head_dim": attention[0]["head_dim_k"] if attention else None,
                "layers": summarise_kinds(layers),
                "max_context_len": geometry.max_context_tokens,
                "kv_dtype": est.kv_dtype.name,
                "bytes_per_token": est.bytes_per_token,
                "bytes_per_token_at_max_context": (
                    round(est.bytes_per_sequence / geometry.max_context_tokens) if geometry.max_context_tokens else None
                ),
                "state_bytes_per_seq": est.state_bytes or None,
            }
        )
    return {"schema_version": SCHEMA_VERSION, "kvplan_version": __version__, "command": "models", "models": rows}


def filter_models(report: dict[str, Any], query: str) -> dict[str, Any]:
    """The report with only the rows whose id, alias or model_type contains ``query`` (case-insensitive)."""
    needle = query.strip().lower()
    rows = [row for row in report["models"]
            if any(needle in str(row[key]).lower() for key in ("id", "alias", "model_type"))]
    if not rows:
        raise InputError(f"no bundled model matches {query!r}", suggest_bundled(query))
    return {**report, "models": rows}
