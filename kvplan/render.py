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
    inputs = report["inputs"]
    lines = [f"seq_len: {inputs['seq_len_source']}", f"kv_dtype: {inputs['kv_dtype_source']}"]
    lines += report["notes"]
    return lines


def make_console(*, stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def models_table(report: dict[str, Any]) -> Table:
    table = Table(title="Bundled models (offline)", title_justify="left")
    for name, justify in (("model", "left"), ("type", "left"), ("layers", "left"), ("KV heads", "right"),
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
