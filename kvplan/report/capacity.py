"""The ``kvplan capacity`` report: a :class:`kvplan.capacity_types.Capacity` as the stable schema's dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.capacity_types import Capacity
from kvplan.logparse import ParsedLog, compare_log
from kvplan.report import SCHEMA_VERSION, model_dict
from kvplan.report.flags import spell_note, spell_source
from kvplan.sources import Source
from kvplan.version import __version__


def capacity_report(
    cap: Capacity, source: Source, *, length_flag: str | None = None, notes: Sequence[str] = (),
    log: ParsedLog | None = None, log_source: str | None = None,
) -> dict[str, Any]:
    """The ``kvplan capacity`` report: keys always present, sizes in integer bytes. ``length_flag``: the length
    flag the user typed (the report names it); ``notes``: where the weights came from and how the flags were
    read, after the answer's own; ``log``: an engine's start-up log (read from ``log_source``) whose KV
    figures ``log_comparison`` puts beside kvplan's."""
    g, i, b, w = cap.geometry, cap.inputs, cap.budget, cap.weights
    counted = w if w is not None and w.counted else None  # parameters counted, not only bytes given
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "capacity",
        "model": model_dict(g, source=source.kind, location=source.location, revision=source.revision),
        "inputs": {
            "gpu": i.gpu.name if i.gpu else None, "gpu_memory_bytes": i.gpu.memory_bytes if i.gpu else None,
            "gpu_memory_source": (i.gpu.memory_source or None) if i.gpu else None,
            "gpu_bandwidth_bytes_per_s": (i.gpu.bandwidth_bytes_per_s or None) if i.gpu else None,
            "num_gpus": i.num_gpus, "tp": i.tp, "pp": i.pp, "engine": cap.deployment.engine,
            "kv_dtype": cap.kv_dtype_name, "kv_dtype_source": cap.kv_dtype_source, "dtype": i.dtype,
            "max_model_len": cap.max_model_len,
            "max_model_len_source": spell_source(cap.max_model_len_source, length_flag),
            "batch": i.batch, "block_size": i.block_size, "gpu_memory_utilization": i.gpu_memory_utilization,
            "mem_fraction_static": i.mem_fraction_static, "free_gpu_memory_fraction": i.free_gpu_memory_fraction,
            "max_num_batched_tokens": i.max_num_batched_tokens, "reserve_bytes": i.reserve_bytes,
            "kv_budget_bytes": i.kv_budget_bytes, "engine_version": i.engine_version, "dp": i.dp,
            "enable_dp_attention": i.enable_dp_attention,
        },
        "weights": {
            "source": w.source if w else None,
            "parameters": counted.parameters if counted else None,
            "language_parameters": counted.language_parameters if counted else None,
            "vision_parameters": counted.vision_parameters if counted else None,
            "active_parameters": counted.active_parameters if counted else None,
            "bytes": w.bytes if w else None,
            "vision_bytes": counted.vision_bytes if counted else None,
            "bytes_per_gpu": b.weights_bytes_per_gpu,
            "dtype": counted.dtype if counted else None,
            "checkpoint_dtype": cap.checkpoint_dtype,
            "quantization": w.quantisation.describe() if w and w.quantisation else None,
            "num_experts": w.num_experts if w else None,
            "experts_per_token": w.experts_per_token if w else None,
            "parts": [
                {"name": p.name, "parameters": p.parameters, "bytes": p.bytes, "storage": p.storage}
                for p in (counted.parts if counted else ())
            ],
        },
        "budget": {
            "formula": b.formula, "gpu_memory_bytes": b.memory_bytes, "usable_bytes": b.usable_bytes,
            "weights_bytes_per_gpu": b.weights_bytes_per_gpu, "activation_bytes": b.activation_bytes,
            "non_torch_bytes": b.non_torch_bytes, "reserve_bytes": b.reserve_bytes,
            "kv_bytes_per_gpu": b.kv_bytes_per_gpu,
            "terms": [{"name": t.name, "bytes": t.bytes, "source": t.source} for t in b.terms],
            "uncertainty_bytes": b.uncertainty_bytes,
        },
        "capacity": {
            "fits": cap.fits,
            "block_size": cap.block_size,
            "num_blocks": cap.num_blocks,
            "max_tokens": cap.max_tokens,
            "max_concurrency": round(cap.max_concurrency, 4),
            "max_concurrent_requests": cap.max_concurrent_requests,
            "max_context_len": cap.max_context_len,
            "max_context_limit": cap.max_context_limit,
            "min_tp": cap.min_tp,
            "min_num_gpus": cap.min_num_gpus,
            "kv_bytes_per_request": cap.kv_bytes_per_request,
            "kv_bytes_needed": cap.kv_bytes_needed,
            "kv_bytes_available": b.kv_bytes_per_gpu,
            "decode_bytes_per_step": cap.decode_bytes_per_step,
            "decode_floor_seconds": cap.decode_floor_seconds,
            "decode_tokens_per_s": cap.decode_tokens_per_s,
            "engine_log": cap.engine_log,
            "stages": None if cap.stages is None else [
                {"stage": s.stage, "ranks": list(s.ranks), "num_layers": s.num_layers,
                 "weights_bytes_per_gpu": s.weights_bytes_per_gpu, "kv_budget_bytes": s.kv_budget_bytes,
                 "low_rank": s.low_rank, "num_blocks": s.num_blocks} for s in cap.stages],
            "limiting_rank": cap.limiting_rank,
            "kv_bytes_available_range": None if cap.kv_bytes_range is None else list(cap.kv_bytes_range),
            "num_blocks_range": None if cap.num_blocks_range is None else list(cap.num_blocks_range),
            "max_concurrency_range": None if cap.max_concurrency_range is None else [
                round(value, 4) for value in cap.max_concurrency_range],
        },
        "log_comparison": None,
        "suggestions": list(cap.suggestions),
        "notes": [spell_note(note, length_flag) for note in
                  (*cap.notes, *(n for n in (w.notes if w else ()) if n not in cap.notes), *notes)],
    }
    if log is not None:
        report["log_comparison"] = compare_log(log, report, source=log_source or "")
    return report
