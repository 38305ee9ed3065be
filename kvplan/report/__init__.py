"""The report: a plain, versioned dict that YAML/JSON serialise and the table renders.

Keys are always present (``None`` when not applicable); sizes are integer bytes; flags never
change the shape. Breaking changes bump SCHEMA_VERSION.

The package around it turns reports into what people and machines read, and never imports the CLI:
``render`` (rich tables, the only rich import), ``schema`` (the JSON Schema of every report),
``diff`` (what changed between two reports) and ``plot`` (matplotlib, imported lazily).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.calc import Estimate, LayerGroup, Replicas
from kvplan.geometry import ModelGeometry
from kvplan.report.flags import spell_note, spell_source
from kvplan.sources import Source
from kvplan.version import __version__

if TYPE_CHECKING:
    from kvplan.gpus import GpuSpec

SCHEMA_VERSION = 2


def compress_indices(indices: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5, 7, 9)`` -> ``"0-2,5,7,9"``."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive indices
    for index in indices:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(f"{first}-{last}" if last != first else str(first) for first, last in runs)


def layer_detail(group: LayerGroup) -> str:
    spec = group.spec
    if spec.kind == "mla":
        return f"latent kv_lora_rank {spec.kv_lora_rank} + qk_rope_head_dim {spec.qk_rope_head_dim}"  # type: ignore[attr-defined]
    if spec.kind == "state":
        shapes = " + ".join(f"{name} {tuple(shape)}" for name, shape in spec.shapes)  # type: ignore[attr-defined]
        return f"{spec.mixer}: {shapes}"  # type: ignore[attr-defined]
    if spec.kind == "no_cache":
        return spec.reason  # type: ignore[attr-defined]
    describe = getattr(spec, "describe", None)  # kinds that say their own layout (DeepSeek-V4)
    return describe() if callable(describe) else ""


def layer_dict(group: LayerGroup, num_layers: int | None = None) -> dict[str, Any]:
    """One group of the report; with ``num_layers``, entries past the decoder's layers (a parallel hybrid's
    states, an encoder-decoder's cross-attention) are numbered by the decoder layer they belong to."""
    spec = group.spec
    is_attention = spec.kind not in ("state", "no_cache")
    indices = group.layer_indices
    if num_layers and any(i >= num_layers for i in indices):
        indices = tuple(sorted({i % num_layers for i in indices}))
    return {
        "kind": spec.kind,
        "count": group.count,
        "layer_indices": compress_indices(indices),
        "num_kv_heads": getattr(spec, "num_kv_heads", None) if is_attention else None,
        "num_kv_heads_per_gpu": getattr(group.rank_spec or spec, "num_kv_heads", None) if is_attention else None,
        "head_dim_k": getattr(spec, "head_size", None) if is_attention else None,
        "head_dim_v": getattr(spec, "head_size_v", None) if is_attention else None,
        "window": getattr(spec, "window", None) if is_attention else None,
        "tokens_held": group.tokens_held if is_attention else None,
        "bytes_per_token": group.bytes_per_token if is_attention else None,
        "bytes_per_token_per_gpu": (
            (group.bytes_per_token if group.bytes_per_token_per_rank is None else group.bytes_per_token_per_rank)
            if is_attention else None
        ),
        "state_bytes_per_seq": group.bytes_per_seq if spec.kind == "state" else None,
        "bytes": group.total_bytes,
        "detail": layer_detail(group) or None,
    }


def model_dict(
    geometry: ModelGeometry,
    *,
    source: str | None,
    location: str | None,
    revision: str | None = None,
    num_hidden_layers: int | None = None,
) -> dict[str, Any]:
    """The report's ``model`` block, shared by every command."""
    return {
        "id": geometry.model_id,
        "model_type": geometry.model_type,
        "family": geometry.family,
        "architecture": geometry.architecture,
        "source": source,
        "location": location,
        "revision": revision,
        "num_hidden_layers": geometry.num_hidden_layers if num_hidden_layers is None else num_hidden_layers,
        "max_context_len": geometry.max_context_tokens,
    }


def estimate_report(
    est: Estimate, source: Source | None, *, overrides: dict[str, Any] | None = None, length_flag: str | None = None,
    notes: Sequence[str] = (), dp: int = 1, replicas: Replicas | None = None,
    replica_totals: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The `kvplan estimate` report. ``source``: where the config came from (None for a bare geometry: the
    report's source fields are null); ``length_flag``: the length flag the user typed (the report names it);
    ``notes``: notes on how the flags were read, after the estimate's own; ``dp``: data-parallel replicas;
    ``replicas`` and ``replica_totals``: with ``dp`` > 1, their layout and the totals over all of them (``est``
    is the busiest replica's)."""
    geometry = est.geometry
    deployment = est.deployment.echo()
    at = list(deployment).index("pp") + 1
    dp_attention = replicas is not None and replicas.dp_attention
    deployment = dict([*list(deployment.items())[:at], ("dp", dp), ("enable_dp_attention", dp_attention),
                       *list(deployment.items())[at:]])
    if replicas is not None:
        deployment["tp"] = replicas.tp
        light = (f", {replicas.dp - replicas.busiest_count} hold {replicas.lightest_batch}"
                 if replicas.busiest_count < replicas.dp else "")
        notes = (*notes, f"data parallel: {replicas.dp} replicas on {replicas.gpus:,} GPUs share {replicas.batch} "
                         f"sequences ({replicas.busiest_count} hold {replicas.busiest_batch}{light}); layers and "
                         "per-GPU bytes: the busiest replica's; totals: all replicas'")
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "estimate",
        "model": model_dict(geometry, source=source.kind if source is not None else None,
                            location=source.location if source is not None else None,
                            revision=source.revision if source is not None else None),
        "inputs": {
            "batch": est.batch if replicas is None else replicas.batch,
            "seq_len": est.seq_len,
            "seq_len_source": spell_source(est.seq_len_source, length_flag),
            "kv_dtype": est.kv_dtype.name,
            "kv_dtype_source": est.kv_dtype_source,
            "state_dtype": est.state_dtype.name,
            "encoder_len": est.encoder_len,
            "encoder_len_source": est.encoder_len_source,
            "overrides": dict(overrides or {}),
            **deployment,
        },
        "layers": [layer_dict(group, geometry.num_hidden_layers) for group in est.groups],
        "totals": {
            "kv_cache_bytes": est.kv_cache_bytes,
            "bytes_per_sequence": est.bytes_per_sequence,
            "bytes_per_token": est.bytes_per_token,
            "state_bytes": est.state_bytes,
            "cross_attention_bytes": est.cross_attention_bytes,
            "kv_cache_bytes_per_gpu": est.kv_cache_bytes_per_gpu,
            "peak_bytes": est.peak_bytes,
            "peak_bytes_per_gpu": est.peak_bytes_per_gpu,
            "cpu_bytes": est.cpu_bytes,
            **(replica_totals or {}),
        },
        "adjustments": [adjustment.to_dict() for adjustment in est.adjustments],
        "provenance": [
            {"field": p.field, "value": p.value if isinstance(p.value, (int, str, bool)) else str(p.value), "source": p.source}
            for p in geometry.provenance
        ],
        "notes": [spell_note(note, length_flag) for note in (*est.notes, *notes)],
    }


def gpus_report(catalog: Iterable[GpuSpec]) -> dict[str, Any]:
    """The `kvplan gpus` report: every GPU of ``catalog`` with its memory, bandwidth and where they come from."""
    return {
        "schema_version": SCHEMA_VERSION, "kvplan_version": __version__, "command": "gpus",
        "gpus": [
            {"name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
             "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s, "aliases": list(g.aliases), "source": g.source,
             "memory_source": g.memory_source}
            for g in catalog
        ],
    }


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


def to_yaml(data: Any) -> str:
    """``data`` (a report, or a list of check rows) as block YAML: keys in report order, UTF-8 text as is,
    long strings folded at 100 columns. Written by libyaml (PyYAML's ``CSafeDumper``), or by PyYAML's
    pure-Python ``SafeDumper`` where PyYAML was built without it; both escape control characters."""
    import yaml  # NOTE: ~20 ms to import; `kvplan estimate` (a table) never needs it

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    if not text.isascii() and re.search(_YAML_UNSAFE, text):
        # NOTE: a line break YAML reads as one (NEL U+0085, U+2028/9: a round trip folds it), a C1 control or a bidi
        # override (shows the text reordered) passes "printable" in both emitters: written as escapes instead.
        text = yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=False, default_flow_style=False, width=100)
    return text


#: Characters emitted raw under ``allow_unicode`` that a YAML report must not carry raw.
_YAML_UNSAFE = "[\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]"
