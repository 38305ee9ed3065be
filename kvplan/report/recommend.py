"""The ``kvplan recommend`` report: a :class:`kvplan.recommender.Recommendation` as the stable schema's dict, and
its short table (best first, then each deployment's launch command and the KV lines its engine will log)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.geometry import ModelGeometry
from kvplan.recommender import Recommendation, Recommended, Rejection
from kvplan.report import SCHEMA_VERSION, model_dict
from kvplan.serve_commands import launch_command
from kvplan.sources import Source
from kvplan.units import GiB
from kvplan.version import __version__

if TYPE_CHECKING:
    from rich.console import Group

FLOOR_NOTE = ("decode_floor_ms is a floor, not a prediction: the bytes one decode step must read on the busiest GPU "
              "(its weights, the experts the batch touches, and the KV of every request) over the GPU's memory "
              "bandwidth, once per pipeline stage; real inter-token latency is higher")


def recommend_report(rec: Recommendation, geometry: ModelGeometry, source: Source, *, model_args: Mapping[str, str], inputs: Mapping[str, Any], top: int,
                     notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report: ``deployments`` best first (the first ``top``; 0 keeps all), ``rejected`` layouts with the
    reason. ``model_args``: per engine, the model as it loads it (their commands name it); ``inputs``: the resolved
    flags."""
    kept = rec.deployments if top == 0 else rec.deployments[:top]
    report_notes = [*rec.notes, *notes, FLOOR_NOTE]
    if not rec.deployments:
        report_notes.append(f"no layout holds {rec.target.concurrency} requests of {rec.target.max_model_len} tokens "
                            f"within --max-gpus {rec.target.max_gpus}: see rejected for each GPU's reason")
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "recommend",
        "model": model_dict(geometry, source=source.kind, location=source.location, revision=source.revision),
        "inputs": dict(inputs),
        "candidates": rec.candidates,
        "deployments": [_deployment(r, rank, model_args[r.layout.engine], rec.target.concurrency) for rank, r in enumerate(kept, 1)],
        "rejected": [_rejected(r) for r in rec.rejected],
        "notes": list(dict.fromkeys(report_notes)),
    }


def _deployment(r: Recommended, rank: int, model_arg: str, concurrency: int) -> dict[str, Any]:
    cap, lay = r.capacity, r.layout
    command, command_notes = launch_command(cap, model=model_arg, concurrency=concurrency, dp=lay.dp)
    floor = cap.decode_floor_seconds
    log = cap.engine_log or {}
    return {
        "rank": rank,
        "gpu": lay.gpu.name,
        "num_gpus": lay.num_gpus,
        "nodes": lay.nodes,
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp,
        "engine": lay.engine,
        "kv_dtype": cap.kv_dtype_name,
        "max_concurrency": round(cap.max_concurrency * lay.dp, 4),
        "max_concurrent_requests": r.requests,
        "headroom": r.requests - concurrency,
        "max_context": cap.max_context_len,
        "kv_bytes_per_gpu": cap.budget.kv_bytes_per_gpu,
        "kv_bytes_needed_per_gpu": cap.kv_bytes_needed,
        "weights_bytes_per_gpu": cap.budget.weights_bytes_per_gpu,
        "decode_floor_ms": None if floor is None else round(floor * 1000, 3),
        "cost_per_hour": r.cost_per_hour,
        "command": command,
        "engine_log": [str(line) for line in log.get("lines") or []],  # type: ignore[attr-defined]
        "smaller_fails": r.smaller_fails,
        "notes": list(command_notes),
    }


def _rejected(r: Rejection) -> dict[str, Any]:
    lay = r.layout
    return {"gpu": lay.gpu.name, "engine": lay.engine, "kv_dtype": lay.kv_dtype, "num_gpus": lay.num_gpus,
            "nodes": lay.nodes, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "reason": r.reason}


def layout_cell(d: Mapping[str, Any]) -> str:
    """``tp×pp``, then ``×dpN`` (SGLang DP attention) and ``/Nn`` (nodes): ``8×2×dp8/2n``."""
    return (f"{d['tp']}×{d['pp']}" + (f"×dp{d['dp']}" if d["dp"] > 1 else "")
            + (f"/{d['nodes']}n" if d["nodes"] > 1 else ""))


def recommend_table(report: dict[str, Any]) -> Group:
    """Best first: one row per deployment, then the launch command and log lines of each."""
    # NOTE: rich only for a table: the library API and --format json/yaml never import it.
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    inputs = report["inputs"]
    model = report["model"]["id"]
    engines = inputs["engines"]
    title = (f"{model}: {inputs['concurrency']} requests of {inputs['max_model_len']:,} tokens"
             + (f", {engines[0]}" if len(engines) == 1 else "") + f" ({report['candidates']:,} candidates)")
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, padding=0)
    priced = any(d["cost_per_hour"] is not None for d in report["deployments"])
    # Fits 80 columns with every engine and a price: one space between columns, the GPU count beside its name,
    # the layout in one cell, units in the legend (a number is never cut).
    columns = [("#", "right"), ("GPUs", "left"), ("layout", "left")]
    columns += [("engine", "left")] if len(engines) > 1 else []
    columns += [("KV", "left"), ("holds", "right"), ("KV GiB", "right"), ("floor", "right")]
    columns += [("$/h", "right")] if priced else []
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True, overflow="fold")  # type: ignore[arg-type]
    for d in report["deployments"]:
        row = [str(d["rank"]), f"{d['num_gpus']}×{d['gpu']}", layout_cell(d),
               *([d["engine"]] if len(engines) > 1 else []), d["kv_dtype"], f"{d['max_concurrent_requests']:,}",
               f"{d['kv_bytes_per_gpu'] / GiB:.2f}",
               "-" if d["decode_floor_ms"] is None else f"{d['decode_floor_ms']:.2f}"]
        if priced:
            row.append("-" if d["cost_per_hour"] is None else f"{d['cost_per_hour']:.2f}")
        table.add_row(*row)
    parts: list[Any] = [Text(title, style="bold"), table]  # the title wraps at the terminal, not the table's width
    if not report["deployments"]:
        parts.append(Text("Nothing fits: see the notes and `--format yaml` (rejected) for each GPU's reason."))
    else:
        deps = report["deployments"]
        legend = ("layout: tp×pp" + (", ×dpN SGLang's DP-attention ranks" if any(d["dp"] > 1 for d in deps) else "")
                  + (", /Nn across N nodes" if any(d["nodes"] > 1 for d in deps) else "")
                  + "; holds: requests of max-model-len held at once; KV GiB: the KV pool per GPU; floor: the decode "
                  "floor in ms per token (a lower bound)"
                  + ("; $/h: the deployment's price per hour (--prices)" if priced else ""))
        parts.append(Text(legend, style="dim"))
    for d in report["deployments"]:
        nodes = f" on {d['nodes']} nodes" if d["nodes"] > 1 else ""
        parts.append(Text(f"#{d['rank']} {d['num_gpus']}× {d['gpu']}{nodes} ({d['engine']}):", style="bold"))
        parts.append(Padding(Text(d["command"], overflow="fold"), (0, 0, 0, 2)))
        for line in d["engine_log"]:
            parts.append(Padding(Text("log: " + line, overflow="fold", style="dim"), (0, 0, 0, 4)))
        for note in d["notes"]:
            parts.append(Padding(Text("note: " + note, overflow="fold"), (0, 0, 0, 2)))
        if d["smaller_fails"]:
            parts.append(Padding(Text("smaller fails: " + d["smaller_fails"], overflow="fold"), (0, 0, 0, 2)))
    return Group(*parts)
