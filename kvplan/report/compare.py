"""The ``kvplan compare`` report: a :class:`kvplan.layouts.Comparison` as the stable schema's dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.layouts import SELF_ATTENTION, Comparison, VariantResult
from kvplan.report import SCHEMA_VERSION, layer_dict, model_dict
from kvplan.report.flags import spell_note, spell_source
from kvplan.sources import Source
from kvplan.specs import MLASpec
from kvplan.version import __version__


def _uniform(values: Sequence[Any]) -> Any:
    """The single value all entries share, else None."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def variant_dict(result: VariantResult, comparison: Comparison) -> dict[str, Any]:
    est, variant = result.estimate, result.variant
    attention = [s for s in est.geometry.layers if isinstance(s, SELF_ATTENTION)]
    mla = [s for s in attention if isinstance(s, MLASpec)]
    mha_at = dict(comparison.mha_sweep)
    return {
        "name": variant.name,
        "kind": variant.kind,
        "description": result.description,
        "num_kv_heads": _uniform([s.num_kv_heads for s in attention]),
        "head_dim_k": _uniform([s.head_size for s in attention if not isinstance(s, MLASpec)]),
        "head_dim_v": _uniform([s.head_size_v for s in attention if not isinstance(s, MLASpec)]),
        "kv_lora_rank": _uniform([s.kv_lora_rank for s in mla]),
        "qk_rope_head_dim": _uniform([s.qk_rope_head_dim for s in mla]),
        "window": _uniform([s.window for s in attention if s.window is not None]),
        "local_layers_per_global": variant.local_per_global,
        "num_attention_layers": len(attention),
        "kv_dtype": est.kv_dtype.name,
        "bytes_per_token": est.bytes_per_token,
        "kv_cache_bytes": est.kv_cache_bytes,
        "kv_cache_bytes_per_gpu": result.kv_cache_bytes_per_gpu,
        "ratio_to_mha": result.ratio_to_mha,
        "decode_read_bytes_per_step": result.decode_read_bytes_per_step,
        "sweep": [
            {"seq_len": length, "kv_cache_bytes": size, "ratio_to_mha": size / mha_at[length]}
            for length, size in result.sweep
        ],
        "layers": [layer_dict(group) for group in est.groups],
    }


def compare_report(
    comparison: Comparison,
    source: Source | None,
    *,
    gpu_mem_bytes: int | None = None,
    plot: str | None = None,
    length_flag: str | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The `kvplan compare` report. ``source``: where the base model came from (None for bare dims);
    ``gpu_mem_bytes`` and ``plot``: --gpu-mem and --plot as given; ``length_flag``: the length flag the user
    typed (the report names it); ``notes``: how the flags were read, after the comparison's own."""
    base, mha = comparison.base, comparison.mha
    if gpu_mem_bytes is not None and plot is None:
        notes = [*notes, "--gpu-mem only draws a line on --plot; it does not change the sizes"]
    geometry = base.geometry
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "compare",
        "model": model_dict(
            geometry,
            source=source.kind if source else ("dims" if base.source_label.startswith("--") else "example"),
            location=source.location if source else base.source_label,
            revision=source.revision if source else None,
        ),
        "inputs": {
            "base": base.source_label,
            "num_attention_layers": base.num_attention_layers,
            "num_attention_heads": base.num_attention_heads,
            "head_dim_k": base.head_size,
            "head_dim_v": base.head_size_v,
            "batch": mha.batch,
            "seq_len": comparison.seq_len,
            "seq_len_source": spell_source(comparison.seq_len_source, length_flag),
            "kv_dtype": mha.kv_dtype.name,
            "kv_dtype_source": mha.kv_dtype_source,
            "engine": mha.deployment.engine,
            "tp": mha.deployment.tp,
            "pp": mha.deployment.pp,
            "block_size": mha.deployment.block_size,
            "sweep_seq_lens": list(comparison.sweep_seq_lens),
            "gpu_mem_bytes": gpu_mem_bytes,
            "plot": plot,
        },
        "mha_kv_cache_bytes": mha.kv_cache_bytes,
        "variants": [variant_dict(result, comparison) for result in comparison.variants],
        "notes": [spell_note(note, length_flag) for note in (*comparison.notes, *notes)],
    }
