"""Rich tables for reports. With cli.py, the only module that imports rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kvplan.units import format_bytes


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def estimate_table(report: dict[str, Any]) -> Group:
    model, inputs, totals = report["model"], report["inputs"], report["totals"]
    title = f"KV cache of {model['id']} ({model['model_type']})"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("kind")
    table.add_column("layers", justify="right")
    table.add_column("KV heads", justify="right")
    table.add_column("head dim K/V", justify="right")
    table.add_column("window", justify="right")
    table.add_column("tokens held", justify="right")
    table.add_column("per token", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("size", justify="right")
    for layer in report["layers"]:
        dims = "-" if layer["head_dim_k"] is None else f"{layer['head_dim_k']}/{layer['head_dim_v']}"
        per_token = (
            format_bytes(layer["bytes_per_token"]) if layer["bytes_per_token"] else
            (f"{format_bytes(layer['state_bytes_per_seq'] // layer['count'])}/seq/layer" if layer["state_bytes_per_seq"] else "-")
        )
        table.add_row(
            layer["kind"], _n(layer["count"]), _n(layer["num_kv_heads"]), dims, _n(layer["window"]),
            _n(layer["tokens_held"]), per_token, _n(layer["bytes"]), format_bytes(layer["bytes"]),
        )
    table.add_section()
    table.add_row(
        Text("total", style="bold"), _n(sum(layer["count"] for layer in report["layers"])), "", "", "", "", "",
        Text(_n(totals["kv_cache_bytes"]), style="bold"), Text(format_bytes(totals["kv_cache_bytes"]), style="bold"),
    )
    seq = "-" if inputs["seq_len"] is None else f"{inputs['seq_len']:,}"
    lines = [
        Text(
            f"batch {inputs['batch']} × {seq} tokens, KV dtype {inputs['kv_dtype']}"
            + (f", encoder length {inputs['encoder_len']:,}" if inputs["encoder_len"] else "")
        ),
        Text(
            f"per token: {format_bytes(totals['bytes_per_token'])} ({totals['bytes_per_token']:,} B over all layers); "
            f"per sequence: {format_bytes(totals['bytes_per_sequence'])}"
        ),
    ]
    return Group(table, *lines)


def notes_text(report: dict[str, Any]) -> list[str]:
    inputs = report.get("inputs") or {}
    lines = [f"{key[:-7]}: {inputs[key]}" for key in ("seq_len_source", "kv_dtype_source") if inputs.get(key)]
    lines += report.get("notes") or []
    return lines


def make_console(*, stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def models_table(report: dict[str, Any]) -> Table:
    table = Table(title="Bundled models (offline)", title_justify="left")
    table.add_column("model", no_wrap=True)
    for name, justify in (("type", "left"), ("layers", "left"), ("KV heads", "right"),
                          ("head dim", "right"), ("max context", "right"), ("dtype", "left"), ("per token", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report["models"]:
        per_token = format_bytes(row["bytes_per_token"]) if row["bytes_per_token"] else "-"
        if row["state_bytes_per_seq"]:
            per_token += f" + {format_bytes(row['state_bytes_per_seq'])}/seq"
        table.add_row(
            row["id"], row["model_type"], row["layers"], _n(row["num_kv_heads"]), _n(row["head_dim"]),
            _n(row["max_context_len"]), row["kv_dtype"], per_token,
        )
    return table


def check_table(report: dict[str, Any]) -> Group:
    """`kvplan check`: one row per budget of each scenario, PASS/FAIL."""
    table = Table(title=f"kvplan check {report['plan']}", title_justify="left")
    for name, justify in (("scenario", "left"), ("model", "left"), ("batch × tokens, dtype", "right"),
                          ("KV cache", "right"), ("budget", "left"), ("result", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report["scenarios"]:
        inputs = row["estimate"]["inputs"]
        seq = "-" if inputs["seq_len"] is None else f"{inputs['seq_len']:,}"
        head = [row["name"], row["estimate"]["model"]["id"], f"{inputs['batch']} × {seq}, {inputs['kv_dtype']}",
                format_bytes(row["kv_cache_bytes"])]
        if not row["gates"]:
            table.add_row(*head, "-", "pass (no budget)")
        for index, gate in enumerate(row["gates"]):
            limit = gate["limit"]
            if isinstance(limit, dict):
                budget = f"{gate['name']}: {limit['num_gpus']}× {limit['gpu']}"
            elif gate["name"].startswith("max_kv_bytes"):
                budget = f"{gate['name']} ≤ {format_bytes(limit)}"
            else:
                budget = f"{gate['name']} ≥ {_n(limit)}"
            result = Text("PASS", style="green") if gate["passed"] else Text("FAIL", style="bold red")
            table.add_row(*(head if index == 0 else [""] * len(head)), budget, result)
    total = len(report["scenarios"])
    summary = (f"{total} scenario(s), all within budget" if report["passed"]
               else f"{report['num_failed']} of {total} scenario(s) over budget")
    return Group(table, Text(summary, style="bold" if report["passed"] else "bold red"))


def diff_table(report: dict[str, Any]) -> Group:
    """`kvplan diff`: KV bytes before and after per scenario, and the inputs that changed."""
    table = Table(title=f"kvplan diff {report['old']} → {report['new']}", title_justify="left")
    for name, justify in (("scenario", "left"), ("status", "left"), ("old", "right"), ("new", "right"),
                          ("change", "right"), ("ratio", "right"), ("inputs changed", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report["scenarios"]:
        change = row["change_bytes"]
        change_text = "-" if change is None else ("+" if change > 0 else "-" if change < 0 else "") + format_bytes(abs(change))
        inputs = "; ".join(f"{c['field']}: {c['old']} → {c['new']}" for c in row["inputs_changed"]) or "-"
        status = Text(row["status"] + (" (over --max-increase)" if row["over_threshold"] else ""),
                      style="bold red" if row["over_threshold"] else "")
        table.add_row(
            row["name"], status,
            "-" if row["old_kv_cache_bytes"] is None else format_bytes(row["old_kv_cache_bytes"]),
            "-" if row["new_kv_cache_bytes"] is None else format_bytes(row["new_kv_cache_bytes"]),
            change_text, "-" if row["ratio"] is None else f"{row['ratio']:.3f}×", inputs,
        )
    lines = [table]
    if report["max_increase"] is not None:
        lines.append(Text(f"--max-increase {report['max_increase']}: " + ("within" if report["passed"] else "EXCEEDED"),
                          style="bold" if report["passed"] else "bold red"))
    return Group(*lines)
