"""What ``kvplan verify`` measured, how it is judged, and the report dict (pure, no torch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvplan import __version__
from kvplan.report import SCHEMA_VERSION, model_dict
from kvplan.sources import Source
from kvplan.verify.predict import (
    ALLOCATED_TOLERANCE,
    RESERVED_TOLERANCE,
    SMALL_SIZE_BYTES,
    VerifyPlan,
    bandwidth_floor_seconds,
    predict_allocator,
    relative_error,
)

#: Layouts whose cache is allocated once, up front, so its segments are predictable.
PREALLOCATED_LAYOUTS = ("static", "sliding", "paged")


@dataclass(frozen=True, kw_only=True, slots=True)
class RankMeasurement:
    rank: int
    measured_bytes: int
    """Bytes of the distinct storages behind the cache tensors after the decode."""
    layer_bytes: tuple[int, ...]
    """The same, layer by layer."""
    peak_blocks: tuple[int | None, ...] = ()
    """Paged layout: most blocks per sequence each layer held at once (None for other layers)."""
    allocated_bytes: int | None = None
    """CUDA: memory_allocated() growth with only the cache alive."""
    allocated_peak_bytes: int | None = None
    reserved_bytes: int | None = None
    """CUDA: memory_reserved() growth after empty_cache(), with only the cache alive."""
    reserved_peak_bytes: int | None = None
    step_seconds: float | None = None
    """Median wall time of one decode step."""


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyMeasurement:
    device: str
    """``cpu`` or ``cuda``."""
    device_name: str
    backend: str | None
    """torch.distributed backend for --tp > 1 (gloo, nccl)."""
    torch_version: str
    weight_bytes: int
    """Bytes of the shared random weights of one rank."""
    ranks: tuple[RankMeasurement, ...]
    bandwidth_bytes_per_s: int | None = None
    engine: str = "kvplan"
    transformers_version: str | None = None
    notes: tuple[str, ...] = ()
    weights_shared: bool = True
    """kvplan's decode shares weights between layers of one shape; transformers builds every layer."""
    profile: str | None = None
    """``--engine transformers``: the engine profile the measurement is judged against (hf-dynamic, hf-static)."""
    profile_bytes: int | None = None
    """That profile's prediction (``kvplan estimate --engine ...``) for the same inputs."""


def verify_report(
    plan: VerifyPlan,
    measurement: VerifyMeasurement,
    source: Source,
    *,
    overrides: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The report dict; ``report["verify"]["passed"]`` says whether every judged check held. ``notes``: the
    caller's, after the run's own."""
    extra_notes = tuple(notes)
    geometry = plan.geometry
    predicted = plan.predicted_bytes if measurement.profile_bytes is None else measurement.profile_bytes
    ranks = []
    for rank in measurement.ranks:
        blocks_ok = all(
            got is None or got == layer.blocks_per_seq for got, layer in zip(rank.peak_blocks, plan.layers)
        )
        ranks.append({
            "rank": rank.rank,
            "predicted_bytes": predicted,
            "measured_bytes": rank.measured_bytes,
            "match": rank.measured_bytes == predicted and blocks_ok,
        })
    match = all(r["match"] for r in ranks)
    first = measurement.ranks[0]
    is_cuda = measurement.device == "cuda"
    alloc = predict_allocator(plan.allocation_sizes) if is_cuda else None
    allocated_err = relative_error(first.allocated_bytes, alloc.allocated_bytes if alloc else None)
    reserved_err = relative_error(first.reserved_bytes, alloc.reserved_bytes if alloc else None)
    reserved_judged = is_cuda and plan.layout in PREALLOCATED_LAYOUTS
    allocated_ok = allocated_err is None or allocated_err <= ALLOCATED_TOLERANCE
    if is_cuda and alloc and first.allocated_bytes is not None and plan.layout not in PREALLOCATED_LAYOUTS:
        # NOTE: re-allocated tensors may reuse a freed large block whose tail (at most 1 MiB) is not
        # split off and counts as allocated (PyTorch ``c10/cuda/CUDACachingAllocator.cpp``): a bound of 1 MiB per large tensor above the replay.
        slack = sum(SMALL_SIZE_BYTES for size in plan.allocation_sizes if size > SMALL_SIZE_BYTES)
        allocated_ok = allocated_ok or 0 <= first.allocated_bytes - alloc.allocated_bytes <= slack
    reserved_ok = not reserved_judged or reserved_err is None or reserved_err <= RESERVED_TOLERANCE
    floor = None
    fraction = None
    if is_cuda and measurement.bandwidth_bytes_per_s and first.step_seconds:
        floor = bandwidth_floor_seconds(predicted, measurement.bandwidth_bytes_per_s)
        fraction = floor / first.step_seconds

    notes = list(plan.notes)
    if measurement.weights_shared:
        notes.append(
            "weights are random and shared by every layer of the same shape (they do not affect the cache): "
            f"{measurement.weight_bytes:,} bytes per rank"
        )
    else:
        notes.append(f"weights are random, one set per layer: {measurement.weight_bytes:,} bytes")
    if measurement.profile is not None:
        same = "equals" if measurement.profile_bytes == plan.predicted_bytes else "DIFFERS FROM"
        notes.append(
            f"predicted by kvplan's {measurement.profile} engine profile (kvplan estimate --engine "
            f"{measurement.profile}): {measurement.profile_bytes:,} bytes, which {same} the {plan.layout} layout's "
            f"per-layer plan ({plan.predicted_bytes:,} bytes)"
        )
    if plan.layout == "paged":
        notes.append(
            "paged: the pools are sized from the prediction; the check is that the block tables' peak use "
            "equals the predicted blocks per sequence in every layer"
        )
    if is_cuda and plan.layout not in PREALLOCATED_LAYOUTS:
        notes.append(
            f"{plan.layout}: tensors are re-allocated during the decode, so allocated passes within the tolerance "
            "or up to 1 MiB per large tensor above the replay (a reused block's unsplit tail)"
        )
    if is_cuda and plan.layout in ("static", "sliding"):
        notes.append("static/sliding: the allocator prediction includes each ring's int64 slot positions "
                     "(bookkeeping, not cache bytes)")
    if is_cuda and not reserved_judged:
        notes.append(
            f"reserved memory is reported, not judged, for the {plan.layout} layout: its tensors are re-allocated "
            "during the decode, so segment packing depends on history"
        )
    if is_cuda and measurement.bandwidth_bytes_per_s is None:
        notes.append(f"no bandwidth known for {measurement.device_name}; pass --bandwidth to get bandwidth_fraction")
    notes.extend(measurement.notes)

    passed = match and allocated_ok and reserved_ok
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "verify",
        "model": model_dict(geometry, source=source.kind, location=source.location, revision=source.revision,
                            num_hidden_layers=plan.num_layers_total),
        "inputs": {
            "layout": plan.layout,
            "engine": measurement.engine,
            "device": measurement.device,
            "layers": plan.num_layers,
            "layers_total": plan.num_layers_total,
            "batch": plan.batch,
            "beams": plan.beams,
            "prompt_len": plan.prompt_tokens,
            "gen_len": plan.gen_tokens,
            "seq_len": plan.seq_tokens,
            "max_cache_len": plan.max_cache_tokens,
            "block_size": plan.block_size,
            "kv_dtype": plan.kv_dtype_name,
            "kv_dtype_source": plan.kv_dtype_source,
            "state_dtype": plan.state_dtype.name,
            "quant_group_size": plan.quant_group_size if plan.quant_bits else None,
            "residual_length": plan.residual_tokens if plan.quant_bits else None,
            "tp": plan.tp,
            "overrides": dict(overrides or {}),
        },
        "layers": [
            {
                "index": layer.index,
                "kind": layer.kind,
                "num_kv_heads": layer.num_kv_heads or None,
                "num_query_heads": layer.num_query_heads or None,
                "head_dim_k": layer.head_size or None,
                "head_dim_v": layer.head_size_v or None,
                "window": layer.window,
                "cache_tokens": layer.cache_tokens or None,
                "blocks_per_seq": layer.blocks_per_seq or None,
                "peak_blocks_per_seq": first.peak_blocks[layer.index] if first.peak_blocks else None,
                "predicted_bytes": layer.nbytes,
                "measured_bytes": first.layer_bytes[layer.index],
            }
            for layer in plan.layers
        ],
        "verify": {
            "layout": plan.layout,
            "engine": measurement.engine,
            "device": measurement.device,
            "device_name": measurement.device_name,
            "torch_version": measurement.torch_version,
            "transformers_version": measurement.transformers_version,
            "distributed_backend": measurement.backend,
            "predicted_bytes": predicted,
            "measured_bytes": first.measured_bytes,
            "match": match,
            "ranks": ranks,
            "weights_shared": measurement.weights_shared,
            "weight_bytes": measurement.weight_bytes,
            "allocated": {
                "predicted": alloc.allocated_bytes if alloc else None,
                "measured": first.allocated_bytes,
                "peak": first.allocated_peak_bytes,
                "relative_error": allocated_err,
                "tolerance": ALLOCATED_TOLERANCE,
            },
            "reserved": {
                "predicted": alloc.reserved_bytes if alloc else None,
                "measured": first.reserved_bytes,
                "peak": first.reserved_peak_bytes,
                "relative_error": reserved_err,
                "tolerance": RESERVED_TOLERANCE,
                "judged": reserved_judged,
            },
            "step_seconds": first.step_seconds,
            "bandwidth_floor_seconds": floor,
            "bandwidth_fraction": fraction,
            "passed": passed,
        },
        "notes": list(dict.fromkeys((*notes, *extra_notes))),
    }
