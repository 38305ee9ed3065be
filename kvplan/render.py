"""Rich tables for reports. With cli.py, the only module that imports rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, ConsoleRenderable, Group, RenderHook, RenderResult
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
    tp, pp = inputs.get("tp", 1), inputs.get("pp", 1)
    gpus = tp * pp
    # NOTE: with more than one GPU the line under the table says which numbers are one rank's.
    title = f"KV cache of {model['id']} ({model['model_type']})"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("kind", no_wrap=True)
    table.add_column("layers", justify="right")
    table.add_column("KV heads", justify="right")
    table.add_column("head dim", justify="right", no_wrap=True)
    table.add_column("window", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("per token", justify="right", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    for layer in report["layers"]:
        dims = "-" if layer["head_dim_k"] is None else f"{layer['head_dim_k']}/{layer['head_dim_v']}"
        per_token = (
            format_bytes(layer["bytes_per_token"]) if layer["bytes_per_token"] else
            (f"{format_bytes(layer['state_bytes_per_seq'] // layer['count'])}/seq" if layer["state_bytes_per_seq"] else "-")
        )
        heads = _n(layer["num_kv_heads"])
        if tp > 1 and layer.get("num_kv_heads_per_gpu") is not None:
            heads += f" ({layer['num_kv_heads_per_gpu']}/GPU)"
        table.add_row(
            layer["kind"], _n(layer["count"]), heads, dims, _n(layer["window"]),
            _n(layer["tokens_held"]), per_token, format_bytes(layer["bytes"]),
        )
    table.add_section()
    table.add_row(
        Text("total", style="bold"), _n(sum(layer["count"] for layer in report["layers"])), "", "", "", "",
        "", Text(format_bytes(totals["kv_cache_bytes"]), style="bold"),
    )
    seq = "-" if inputs["seq_len"] is None else f"{inputs['seq_len']:,}"
    lines = [
        Text(f"KV cache: {totals['kv_cache_bytes']:,} bytes ({format_bytes(totals['kv_cache_bytes'])})", style="bold"),
        Text("head dim is K/V; tokens: held per sequence in each layer; state layers show bytes per sequence per layer"),
        Text(
            f"batch {inputs['batch']} × {seq} tokens, KV dtype {inputs['kv_dtype']}"
            + (f", encoder length {inputs['encoder_len']:,}" if inputs["encoder_len"] else "")
        ),
        Text(
            f"per token: {format_bytes(totals['bytes_per_token'])} ({totals['bytes_per_token']:,} B over all layers"
            + (f" and all {tp} tensor-parallel ranks" if tp > 1 else "") + "); "
            f"per sequence: {format_bytes(totals['bytes_per_sequence'])}"
        ),
    ]
    if gpus > 1:
        lines.insert(0, Text(
            f"{gpus} GPUs (tp {tp} × pp {pp}): KV heads = model (per GPU); per token and size = all GPUs"
        ))
    lines += _deployment_lines(report)
    return Group(table, *lines)


def _deployment_lines(report: dict[str, Any]) -> list[Text]:
    """GPU split, per-GPU/all-GPU steady and peak bytes, CPU bytes and each adjustment (before -> after)."""
    totals, adjustments, inputs = report["totals"], report.get("adjustments") or [], report["inputs"]
    tp, pp = inputs.get("tp", 1), inputs.get("pp", 1)
    peaks = totals["peak_bytes"] != totals["kv_cache_bytes"]
    if not adjustments and not peaks:
        return []
    lines: list[Text] = []
    engine = inputs.get("engine", "ideal")
    if tp * pp > 1 or totals["cpu_bytes"]:
        lines.append(Text(
            f"engine {engine}, {tp * pp} GPU(s): the largest GPU holds "
            f"{format_bytes(totals['kv_cache_bytes_per_gpu'])}, all GPUs {format_bytes(totals['kv_cache_bytes'])}"
            + (f" (CPU {format_bytes(totals['cpu_bytes'])} offloaded)" if totals["cpu_bytes"] else "")
        ))
    else:
        lines.append(Text(f"engine {engine}: {format_bytes(totals['kv_cache_bytes'])} on one GPU"))
    if peaks:
        lines.append(Text(
            f"peak (transient): {format_bytes(totals['peak_bytes_per_gpu'])} on the largest GPU"
            + (f", {format_bytes(totals['peak_bytes'])} all GPUs" if tp * pp > 1 else "")
        ))
    for item in adjustments:
        scope = " (largest GPU)" if item.get("scope") == "per_gpu" else (" (all GPUs)" if tp * pp > 1 else "")
        lines.append(Text(
            f"  {item['name']}: {format_bytes(item['before_bytes'])} -> {format_bytes(item['after_bytes'])}{scope}"
        ))
    return lines


def notes_text(report: dict[str, Any]) -> list[str]:
    inputs = report.get("inputs") or {}
    lines = [f"{key[:-7]}: {inputs[key]}" for key in ("seq_len_source", "kv_dtype_source") if inputs.get(key)]
    lines += report.get("notes") or []
    return lines


def make_console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    console.push_render_hook(_EscapeControls())
    return console


class _EscapeControls(RenderHook):
    """Every text segment through kvplan.textsafe.printable: a config's ``ESC ]0;...`` or a plan's
    ``ESC [2J`` prints as ``\\x1b]0;...``, never reaching the terminal raw."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(item) for item in renderables]


class _Escaped:
    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        from kvplan.textsafe import has_control, printable

        for segment in console.render(self.inner, options):
            if segment.control is None and has_control(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


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
        # NOTE: cells fold on narrow terminals rather than being cut: a scenario name is what CI users grep for.
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in report["scenarios"]:
        inputs = row["estimate"]["inputs"]
        seq = "-" if inputs["seq_len"] is None else f"{inputs['seq_len']:,}"
        serving = "" if inputs["engine"] == "ideal" else f", {inputs['engine']}"
        serving += f" tp{inputs['tp']}" if inputs["tp"] > 1 else ""
        serving += f" pp{inputs['pp']}" if inputs["pp"] > 1 else ""
        head = [row["name"], row["estimate"]["model"]["id"],
                f"{inputs['batch']} × {seq}, {inputs['kv_dtype']}{serving}", format_bytes(row["kv_cache_bytes"])]
        if not row["gates"]:
            table.add_row(*head, "none", "PASS")
        for index, gate in enumerate(row["gates"]):
            limit, actual = gate["limit"], gate["actual"]
            if isinstance(limit, dict):
                budget = f"fits {limit['num_gpus']}× {limit['gpu']}" if limit["num_gpus"] else f"fits {limit['gpu']}"
                budget += f", {format_bytes(actual)}/GPU"
            elif gate["name"] == "max_kv_bytes_per_gpu":
                budget = f"KV/GPU {format_bytes(actual)} ≤ {format_bytes(limit)}"
            elif gate["name"] == "max_kv_bytes":
                budget = f"KV ≤ {format_bytes(limit)}"
            else:
                budget = f"{gate['name'].removeprefix('min_')} {_n(actual)} ≥ {_n(limit)}"
            result = Text("PASS", style="green") if gate["passed"] else Text("FAIL", style="bold red")
            table.add_row(*(head if index == 0 else [""] * len(head)), budget, result)
    total = len(report["scenarios"])
    summary = (f"{total} scenario(s), all within budget" if report["passed"]
               else f"{report['num_failed']} of {total} scenario(s) over budget")
    return Group(table, Text(summary, style="bold" if report["passed"] else "bold red"))


#: Plan keys whose resolved values are integer bytes (shown in human units in tables only).
_SIZE_KEYS = ("max_kv_bytes", "max_kv_bytes_per_gpu", "reserve", "kv_budget", "weights_bytes")


def _input_value(field: str, value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, int) and not isinstance(value, bool) and (field in _SIZE_KEYS or field.endswith("_bytes")):
        return format_bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def diff_table(report: dict[str, Any]) -> Group:
    """`kvplan diff`: KV bytes before and after per scenario, and the inputs that changed."""
    table = Table(title=f"kvplan diff {report['old']} → {report['new']}", title_justify="left")
    for name, justify in (("scenario", "left"), ("status", "left"), ("old", "right"), ("new", "right"),
                          ("change", "right"), ("ratio", "right"), ("inputs changed", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report["scenarios"]:
        change = row["change_bytes"]
        change_text = "-" if change is None else ("+" if change > 0 else "-" if change < 0 else "") + format_bytes(abs(change))
        inputs = "; ".join(
            f"{c['field']}: {_input_value(c['field'], c['old'])} → {_input_value(c['field'], c['new'])}"
            for c in row["inputs_changed"]
        ) or "-"
        status = Text(row["status"] + (" (over --max-increase)" if row["over_threshold"] else ""),
                      style="bold red" if row["over_threshold"] else "")
        table.add_row(
            row["name"], status,
            "-" if row["old_kv_cache_bytes"] is None else format_bytes(row["old_kv_cache_bytes"]),
            "-" if row["new_kv_cache_bytes"] is None else format_bytes(row["new_kv_cache_bytes"]),
            change_text, "-" if row["ratio"] is None else f"{row['ratio']:.3f}×", inputs,
        )
    lines: list[Table | Text] = [table]
    if report["max_increase"] is not None:
        lines.append(Text(f"--max-increase {report['max_increase']}: " + ("within" if report["passed"] else "EXCEEDED"),
                          style="bold" if report["passed"] else "bold red"))
    return Group(*lines)


# ---- kvplan compare ------------------------------------------------------------------------------
_BAR_EIGHTHS = " ▏▎▍▌▋▊▉"


def size_bar(value: int, largest: int, width: int = 24) -> str:
    """A horizontal bar of ``value / largest`` of ``width`` cells, in eighths of a cell."""
    if largest <= 0 or value <= 0:
        return ""
    eighths = max(1, round(8 * width * value / largest))
    full, rest = divmod(eighths, 8)
    return "█" * full + (_BAR_EIGHTHS[rest] if rest else "")


def compare_table(report: dict[str, Any]) -> Group:
    """`kvplan compare`: one row per attention layout, its bytes, ratio to MHA and a bar.

    With --sweep-seq one column per length (--seq-len among them) replaces layout, KV cache and
    read/step, which stay in yaml/json, so the table fits 100 columns.
    """
    model, inputs, variants = report["model"], report["inputs"], report["variants"]
    seq_len, sweep = inputs["seq_len"], inputs["sweep_seq_lens"]
    title = (
        f"KV cache by attention layout: {model['id']} ({inputs['num_attention_layers']} attention layers, "
        f"{inputs['num_attention_heads']} query heads, head dim {inputs['head_dim_k']})"
    )
    # NOTE: exact integer bytes are in --format yaml/json; the table keeps to human units.
    table = Table(title=title, title_justify="left")
    table.add_column("variant", no_wrap=True)
    lengths = sorted({*sweep, seq_len})
    per_gpu = inputs["tp"] * inputs["pp"] > 1
    if sweep:
        table.add_column("KV heads", justify="right")
        for length in lengths:
            table.add_column(f"@{_tokens_short(length)}", justify="right", no_wrap=True)
        table.add_column(f"× MHA @{_tokens_short(seq_len)}", justify="right")
    else:
        table.add_column("layout", min_width=14)
        table.add_column("KV heads", justify="right")
        table.add_column("KV cache", justify="right")
        if per_gpu:
            table.add_column("per GPU", justify="right")
        table.add_column("× MHA", justify="right")
        table.add_column("read/step", justify="right")
    table.add_column("", no_wrap=True)
    largest = max((v["kv_cache_bytes"] for v in variants), default=0)
    for v in variants:
        ratio, bar = f"{v['ratio_to_mha']:.4g}", size_bar(v["kv_cache_bytes"], largest, width=12)
        if sweep:
            at = {point["seq_len"]: point["kv_cache_bytes"] for point in v["sweep"]} | {seq_len: v["kv_cache_bytes"]}
            table.add_row(v["name"], _n(v["num_kv_heads"]), *(_short_bytes(at[n]) for n in lengths), ratio, bar)
        else:
            gpu_cell = [format_bytes(v["kv_cache_bytes_per_gpu"])] if per_gpu else []
            table.add_row(
                v["name"], v["description"], _n(v["num_kv_heads"]), format_bytes(v["kv_cache_bytes"]), *gpu_cell,
                ratio, format_bytes(v["decode_read_bytes_per_step"]), bar,
            )
    caption = [
        Text(
            f"batch {inputs['batch']} × {seq_len:,} tokens, {inputs['kv_dtype']}; "
            + (f"engine {inputs['engine']}; " if inputs["engine"] != "ideal" else "")
            + (f"tp {inputs['tp']} × pp {inputs['pp']} (KV cache: all GPUs); " if per_gpu else "")
            + f"MHA = {format_bytes(report['mha_kv_cache_bytes'])}"
            + (f"; bar: KV cache at {_tokens_short(seq_len)}" if sweep else "; read/step: KV bytes a decode step reads")
        ),
        Text("memory only: not model quality or measured speed", style="italic"),
    ]
    return Group(table, *caption)


def _short_bytes(num_bytes: int) -> str:
    return format_bytes(num_bytes).replace(".00 ", " ")


def _tokens_short(num_tokens: int) -> str:
    if num_tokens % (1024**2) == 0:
        return f"{num_tokens // 1024**2}M"
    if num_tokens % 1024 == 0:
        return f"{num_tokens // 1024}k"
    return f"{num_tokens:,}"


def verify_table(report: dict[str, Any]) -> Group:
    """`kvplan verify`: predicted against measured, layer by layer, then the allocator and speed lines."""
    model, inputs, result = report["model"], report["inputs"], report["verify"]
    title = (
        f"verify {model['id']}: {inputs['layout']} layout on {result['device_name']}, "
        f"{inputs['layers']} of {inputs['layers_total']} layers"
        + (f", transformers {result['transformers_version']}" if result.get("engine") == "transformers" else "")
    )
    table = Table(title=title, title_justify="left")
    for name, justify in (("layer", "right"), ("kind", "left"), ("KV heads", "right"), ("slots/blocks", "right"),
                          ("predicted", "right"), ("measured", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for layer in report["layers"]:
        slots = _n(layer["cache_tokens"]) if layer["blocks_per_seq"] is None else (
            f"{layer['peak_blocks_per_seq']}/{layer['blocks_per_seq']} blocks"
        )
        table.add_row(str(layer["index"]), layer["kind"], _n(layer["num_kv_heads"]), slots,
                      _n(layer["predicted_bytes"]), _n(layer["measured_bytes"]))
    table.add_section()
    verdict = Text("match" if result["match"] else "MISMATCH", style="bold green" if result["match"] else "bold red")
    table.add_row(Text("total", style="bold"), verdict, "", "", _n(result["predicted_bytes"]), _n(result["measured_bytes"]))
    lines = [Text(
        f"batch {inputs['batch']} x beams {inputs['beams']}, prompt {inputs['prompt_len']:,} + {inputs['gen_len']:,} "
        f"decode steps, KV dtype {inputs['kv_dtype']}, tp {inputs['tp']}"
    )]
    for rank in result["ranks"] if len(result["ranks"]) > 1 else []:
        lines.append(Text(f"rank {rank['rank']}: measured {rank['measured_bytes']:,} B, "
                          f"predicted {rank['predicted_bytes']:,} B ({'match' if rank['match'] else 'MISMATCH'})"))
    for key in ("allocated", "reserved"):
        part = result[key]
        if part["measured"] is not None:
            err = part["relative_error"]
            lines.append(Text(
                f"{key}: measured {part['measured']:,} B, predicted {_n(part['predicted'])} B, "
                f"error {err:.4%} (tolerance {part['tolerance']:.1%}), peak {_n(part['peak'])} B"
            ))
    if result["step_seconds"] is not None:
        speed = f"decode step: {result['step_seconds'] * 1e3:.3f} ms"
        if result["bandwidth_fraction"] is not None:
            speed += f", {result['bandwidth_fraction']:.1%} of the bandwidth floor"
        lines.append(Text(speed))
    return Group(table, *lines)


def capacity_table(report: dict[str, Any]) -> Group:
    """`kvplan capacity`: budget, weights, and the capacity answers."""
    model, inputs, weights = report["model"], report["inputs"], report["weights"]
    budget, cap = report["budget"], report["capacity"]
    title = (f"Capacity of {model['id']} on {inputs['gpu']} (tp {inputs['tp']}, pp {inputs['pp']}, "
             f"{inputs['engine']}, KV {inputs['kv_dtype']})")
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_column("detail")

    def size(value: Any) -> str:
        if value is None:
            return "-"
        return format_bytes(value) if value >= 0 else "-" + format_bytes(-value)

    params = "-" if weights["parameters"] is None else f"{weights['parameters'] / 1e9:.2f}B params"
    table.add_row("GPU memory", size(inputs["gpu_memory_bytes"]), inputs.get("gpu_memory_source") or "")
    held = weights["quantization"] or weights["dtype"] or ""
    if weights.get("checkpoint_dtype") and weights["checkpoint_dtype"] != weights["dtype"]:
        held += f" (checkpoint {weights['checkpoint_dtype']})"
    table.add_row("weights", size(weights["bytes"]), f"{params}, {held} ({weights['source']})")
    if weights["vision_parameters"]:
        table.add_row("  vision tower", size(weights["vision_bytes"]), f"{weights['vision_parameters'] / 1e9:.2f}B params")
    table.add_row("weights per GPU", size(budget["weights_bytes_per_gpu"]), "")
    table.add_row("reserve", size(budget["reserve_bytes"]), "activation peak + non-torch (estimate; --reserve)")
    table.add_row(Text("KV budget per GPU", style="bold"), Text(size(budget["kv_bytes_per_gpu"]), style="bold"),
                  budget["formula"])
    table.add_section()
    table.add_row("KV blocks", _n(cap["num_blocks"]), f"{cap['block_size']} tokens per block")
    table.add_row("KV tokens", _n(cap["max_tokens"]), "as the engine reports its pool")
    table.add_row("max concurrency", f"{cap['max_concurrency']:.2f}x",
                  f"{cap['max_concurrent_requests']} requests of {inputs['max_model_len']:,} tokens")
    table.add_row("max context", _n(cap["max_context_len"]), f"at batch {inputs['batch']} ({cap['max_context_limit']})")
    table.add_row("min TP / GPUs", f"{_n(cap['min_tp'])} / {_n(cap['min_num_gpus'])}",
                  f"for one {inputs['max_model_len']:,}-token request")
    if cap["decode_floor_seconds"] is not None:
        table.add_row("decode floor", f"{cap['decode_floor_seconds'] * 1000:.2f} ms/token",
                      f"<= {cap['decode_tokens_per_s']:,.0f} tokens/s at batch {inputs['batch']} "
                      f"({size(cap['decode_bytes_per_step'])} read per step)")
    verdict = "fits" if cap["fits"] else "does NOT fit"
    lines = [Text(
        f"{inputs['batch']} x {inputs['max_model_len']:,} tokens {verdict}: needs {size(cap['kv_bytes_needed'])} of KV "
        f"per GPU, {size(cap['kv_bytes_available'])} available",
        style="bold" if cap["fits"] else "bold red",
    )]
    lines += [Text(f"  try {s}") for s in report["suggestions"]]
    return Group(table, *lines)


def gpus_table(report: dict[str, Any]) -> Table:
    table = Table(title="GPU catalog", title_justify="left")
    for name, justify in (("gpu", "left"), ("memory", "right"), ("bandwidth", "right"), ("aliases", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report["gpus"]:
        table.add_row(row["name"], format_bytes(row["memory_bytes"]), f"{row['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s",
                      ", ".join(row["aliases"]))
    return table
