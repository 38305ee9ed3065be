"""Rich tables for reports: each fits the console width with nothing cut (:mod:`kvplan.report.layout` offers
a command's layouts from the widest to a vertical "key: value" one; the first that fits is printed)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kvplan.engines import get_engine
from kvplan.report.flags import engine_flags
from kvplan.report.layout import KIND_LABEL, Clip, Fit, grid, replication
from kvplan.report.layout import n as _n
from kvplan.report.layout import short_bytes as _short_bytes
from kvplan.report.layout import signed_size as _size
from kvplan.report.layout import tokens_short as _tokens_short
from kvplan.textsafe import printable
from kvplan.units import format_bytes

#: The K/V dtype of a GGUF, said by ``inputs.kv_dtype_source`` (``auto: gguf: ...``) and by a note: said once.
_GGUF_DTYPE_NOTE = "a GGUF file names no torch dtype: "

#: Notes that change what the answer means (the engine, the context per slot, the flags read): shown first by
#: default, before generic notes. kvplan/engine_flags.py (ollama, -c over -np) and kvplan/launch (--cmd, -np auto).
_MEANING = re.compile(r"^(--engine ollama: |--cmd read as |-c \d+ is not divisible by -np |llama-server -np auto: )")


def notes_text(report: dict[str, Any]) -> list[str]:
    inputs = report.get("inputs") or {}
    # NOTE: a length the user typed needs no note; one taken from the config does (the JSON keeps both).
    lines = [f"{key[:-7]}: {inputs[key]}" for key in ("seq_len_source", "kv_dtype_source")
             if inputs.get(key) and not str(inputs[key]).startswith("--")]
    said = str(inputs.get("kv_dtype_source") or "").startswith("auto: gguf: ")
    lines += [note for note in report.get("notes") or []
              if not (said and isinstance(note, str) and note.startswith(_GGUF_DTYPE_NOTE))]
    return lines


#: The most lines a command prints by default at 80 columns: verdict, figures, log lines, fixes and notes.
SHORT_LINES = 20


def short_notes(report: dict[str, Any], *, width: int, used: int) -> list[str]:
    """The notes as a default (not ``--verbose``) table prints them: each once, in at most two lines of ``width``,
    as many as fit beside the table's ``used`` lines within :data:`SHORT_LINES`, then one line
    saying what ``--verbose`` adds. WARNINGs are in the table already (:func:`warning_lines`)."""
    notes = [note for note in dict.fromkeys(notes_text(report)) if not note.startswith("WARNING: ")]
    notes.sort(key=lambda note: not _MEANING.match(note))  # NOTE: stable: the notes that change the answer first
    room = SHORT_LINES - used - 1  # NOTE: a last line says what --verbose adds
    out: list[str] = []
    left = 0
    for index, note in enumerate(notes):
        wrapped = textwrap.wrap("note: " + printable(note), width=max(width, 20), subsequent_indent="      ",
                                max_lines=3 if _MEANING.match(note) else 2, placeholder=" ...",
                                break_long_words=True, break_on_hyphens=False)  # NOTE: a long path
        if len(out) + len(wrapped) > room:
            left = len(notes) - index
            break
        out += wrapped
    cut = any(line.endswith(" ...") for line in out)
    said = (["the whole breakdown"] if report.get("command") == "capacity" else [])
    said += [f"{left} more note{'s' * (left != 1)}"] if left else []
    said += ["every note in full"] if cut else []
    return [*out, *textwrap.wrap("--verbose: " + ", ".join(said), width=max(width, 20))] if said else out


def warning_lines(report: dict[str, Any]) -> list[Text]:
    """``WARNING: ...`` notes (core geometry from defaults...), shown beside the answer, not only on stderr."""
    return [Text(note, style="bold red", overflow="fold") for note in report.get("notes") or []
            if isinstance(note, str) and note.startswith("WARNING: ")]


# ---- kvplan estimate -----------------------------------------------------------------------------
_MLA_DETAIL = re.compile(r"kv_lora_rank (\d+) \+ qk_rope_head_dim (\d+)")


def head_dim_label(layer: dict[str, Any]) -> str:
    """``128`` (K = V dims), ``192/128`` (K/V), ``latent 512+64`` (MLA), ``key 128`` (indexer), ``K=V 512`` (shared)."""
    if layer["head_dim_k"] is None:
        return "-"
    if layer["kind"] == "mla":
        match = _MLA_DETAIL.search(layer.get("detail") or "")
        return f"latent {match[1]}+{match[2]}" if match else f"latent {layer['head_dim_k']}"
    k, v = layer["head_dim_k"], layer["head_dim_v"]  # an indexer caches keys only; V dim 0: one shared K=V vector
    return f"key {k}" if layer["kind"] == "indexer" else f"K=V {k}" if v == 0 else str(k) if k == v else f"{k}/{v}"


def _per_token_cell(layer: dict[str, Any]) -> str:
    if layer["bytes_per_token"]:
        return format_bytes(layer["bytes_per_token"])
    if layer["state_bytes_per_seq"]:
        return f"{format_bytes(layer['state_bytes_per_seq'] // layer['count'])}/seq"
    return "-"


def _heads_cell(layer: dict[str, Any], tp: int) -> str:
    heads = _n(layer["num_kv_heads"])
    if tp > 1 and layer.get("num_kv_heads_per_gpu") is not None:
        heads += f" ({layer['num_kv_heads_per_gpu']}/GPU)"
    return heads


def effective_bytes_per_token(report: dict[str, Any]) -> int | None:
    """What a token costs at the requested length: one sequence's bytes over its tokens (windows and state in)."""
    seq_len = report["inputs"]["seq_len"]
    if not seq_len:
        return None
    return round(report["totals"]["bytes_per_sequence"] / seq_len)


def estimate_headline(report: dict[str, Any]) -> list[Text]:
    """The answer first: per GPU and total under parallelism, and per token at the requested length."""
    inputs, totals = report["inputs"], report["totals"]
    tp, pp = inputs.get("tp", 1), inputs.get("pp", 1)
    gpus = tp * pp
    total = totals["kv_cache_bytes"]
    lines: list[Text] = []
    # NOTE: the tokens sized, as counted (--seq-len 32k = 32,768; --max-model-len 32k = 32,000, as vLLM reads it).
    counted = "" if inputs["seq_len"] is None else f"{inputs['batch']} × {inputs['seq_len']:,} tokens"
    dp = inputs.get("dp", 1)
    if dp > 1:
        lines += _replica_lines(report, total)
    elif gpus > 1:
        lines.append(Text(f"KV cache per GPU{', ' + counted if counted else ''}: {format_bytes(totals['kv_cache_bytes_per_gpu'])} "
                          f"(the most loaded of {gpus} GPUs, tp {tp} × pp {pp})", style="bold"))
        replicated = replication(report)
        lines.append(Text(f"KV cache, all {gpus} GPUs: {format_bytes(total)} ({total:,} bytes)"
                          + (f"; {replicated}" if replicated else "")))
    else:
        lines.append(Text(f"KV cache{' of ' + counted if counted else ''}: {format_bytes(total)} ({total:,} bytes)", style="bold"))
    full_rate, effective = totals["bytes_per_token"], effective_bytes_per_token(report)
    scope = "all layers" + (f", all {gpus} GPUs" if gpus > 1 else "")
    if effective is not None and full_rate and effective != full_rate:
        why = []
        if any(layer["window"] for layer in report["layers"]):
            why.append("windowed layers hold fewer tokens")
        if totals["state_bytes"]:
            why.append("the state is fixed per sequence")
        lines.append(Text(
            f"per token ({scope}): {format_bytes(effective)} at {inputs['seq_len']:,} tokens"
            + (f" ({', '.join(why)})" if why else "") + f"; full-attention rate {format_bytes(full_rate)}"
        ))
    elif full_rate:
        lines.append(Text(f"per token ({scope}): {format_bytes(full_rate)}; "
                          f"per sequence: {format_bytes(totals['bytes_per_sequence'])}"))
    else:
        lines.append(Text(f"per sequence: {format_bytes(totals['bytes_per_sequence'])} (fixed state, no per-token cache)"))
    return lines


def _replica_lines(report: dict[str, Any], total: int) -> list[Text]:
    """``--dp``: the busiest replica's KV per GPU first, then every replica's."""
    inputs, totals = report["inputs"], report["totals"]
    dp, batch, tp, pp = inputs["dp"], inputs["batch"], inputs.get("tp", 1), inputs.get("pp", 1)
    busiest = -(-batch // dp)
    # NOTE: SGLang's DP attention splits the --tp GPUs; other replicas each hold tp x pp (kvplan.calc.Replicas).
    within = get_engine(inputs.get("engine", "ideal")).dp_splits_tp(bool(inputs.get("enable_dp_attention")))
    gpus = tp * pp * (1 if within else dp)
    seq = "" if inputs["seq_len"] is None else f" × {inputs['seq_len']:,} tokens"
    return [
        Text(f"KV cache per GPU, busiest of {dp} replicas ({busiest}{seq}): "
             f"{format_bytes(totals['kv_cache_bytes_per_gpu'])}", style="bold"),
        Text(f"KV cache, all {dp} replicas, {gpus:,} GPUs, {batch} sequences: {format_bytes(total)} ({total:,} bytes)"),
    ]


def estimate_table(report: dict[str, Any]) -> Group:
    model, inputs = report["model"], report["inputs"]
    tp, pp = inputs.get("tp", 1), inputs.get("pp", 1)
    seq = "-" if inputs["seq_len"] is None else f"{inputs['seq_len']:,}"
    engine = inputs.get("engine", "ideal")
    title = (f"{model['id']} ({model['model_type']}): batch {inputs['batch']} × {seq} tokens, KV {inputs['kv_dtype']}"
             + (f", encoder {inputs['encoder_len']:,}" if inputs["encoder_len"] else "")
             + ("" if engine == "ideal" else f", engine {engine}")
             + (" for a GGUF" if engine == "llama.cpp" and model.get("source") in ("gguf", "hub-gguf") else ""))
    layers = report["layers"]
    held = any(layer["tokens_held"] not in (None, inputs["seq_len"]) for layer in layers)
    legend = ["per tok·layer: bytes of one token in one layer"]
    if held:
        legend.append("tokens: held per sequence by each layer")
    if any(layer["state_bytes_per_seq"] for layer in layers):
        legend.append("state layers: bytes per sequence per layer")
    if inputs.get("dp", 1) > 1:
        legend.append(f"sizes: the busiest replica ({-(-inputs['batch'] // inputs['dp'])} sequences)")
    elif tp * pp > 1:
        legend.append(f"sizes: all {tp * pp} GPUs together")
    body = Fit(
        lambda: _estimate_grid(report, compact=False),
        lambda: _estimate_grid(report, compact=True),
        lambda: _estimate_vertical(report),
    )
    return Group(*warning_lines(report), *estimate_headline(report), Text(title), body,
                 Text("; ".join(legend), style="dim"),
                 *_deployment_lines(report))


def _estimate_grid(report: dict[str, Any], *, compact: bool) -> Table:
    inputs, layers = report["inputs"], report["layers"]
    tp = inputs.get("tp", 1)
    windows = any(layer["window"] for layer in layers)
    held = any(layer["tokens_held"] not in (None, inputs["seq_len"]) for layer in layers)
    columns: list[tuple[str, str]] = [("kind", "left"), ("layers", "right")]
    columns += [("heads × dim", "right")] if compact else [("KV heads", "right"), ("head dim", "right")]
    if windows:
        columns.append(("window", "right"))
    if held and not compact:
        columns.append(("tokens", "right"))
    columns += [("per tok·layer", "right"), ("size", "right")]
    table = grid(*columns)
    for layer in layers:
        heads, dim = _heads_cell(layer, tp), head_dim_label(layer)
        row: list[RenderableType] = [KIND_LABEL.get(layer["kind"], layer["kind"]), _n(layer["count"])]
        if compact:
            row.append("-" if layer["num_kv_heads"] is None else f"{heads} × {dim}")
        else:
            row += [heads, dim]
        if windows:
            row.append(_n(layer["window"]))
        if held and not compact:
            row.append(_n(layer["tokens_held"]))
        row += [_per_token_cell(layer), format_bytes(layer["bytes"])]
        table.add_row(*row)
    table.add_section()
    total: list[RenderableType] = [Text("total", style="bold"), _n(sum(layer["count"] for layer in layers))]
    table.add_row(*total, *[""] * (len(columns) - 3),
                  Text(format_bytes(_replica_total(report)), style="bold"))
    return table


def _replica_total(report: dict[str, Any]) -> int:
    """The table's total: the whole cache, or under ``--dp`` the busiest replica's (the rows are its)."""
    if report["inputs"].get("dp", 1) > 1:
        return sum(int(layer["bytes"]) for layer in report["layers"])
    return int(report["totals"]["kv_cache_bytes"])


def _estimate_vertical(report: dict[str, Any]) -> Group:
    inputs = report["inputs"]
    tp = inputs.get("tp", 1)
    lines = []
    for layer in report["layers"]:
        lines.append(Text(f"{KIND_LABEL.get(layer['kind'], layer['kind'])} × {layer['count']} layers: "
                          f"{format_bytes(layer['bytes'])}", style="bold"))
        parts = []
        if layer["num_kv_heads"] is not None:
            parts.append(f"KV heads {_heads_cell(layer, tp)}, head dim {head_dim_label(layer)}")
        if layer["window"]:
            parts.append(f"window {layer['window']:,}")
        if layer["tokens_held"] is not None:
            parts.append(f"holds {layer['tokens_held']:,} tokens")
        parts.append(f"per tok·layer {_per_token_cell(layer)}")
        lines.append(Text("  " + "; ".join(parts)))
    lines.append(Text(f"total × {sum(layer['count'] for layer in report['layers'])} layers: "
                      f"{format_bytes(report['totals']['kv_cache_bytes'])}", style="bold"))
    return Group(*lines)


def _deployment_lines(report: dict[str, Any]) -> list[Text]:
    """Peak and CPU bytes, and each adjustment that changed a number (before -> after)."""
    totals, adjustments, inputs = report["totals"], report.get("adjustments") or [], report["inputs"]
    gpus = inputs.get("tp", 1) * inputs.get("pp", 1)
    lines: list[Text] = []
    if totals["cpu_bytes"]:
        lines.append(Text(f"offloaded to CPU memory: {format_bytes(totals['cpu_bytes'])}"))
    if totals["peak_bytes"] != totals["kv_cache_bytes"]:
        lines.append(Text(
            f"peak (transient): {format_bytes(totals['peak_bytes_per_gpu'])}"
            + (f" on the most loaded GPU, {format_bytes(totals['peak_bytes'])} all GPUs" if gpus > 1 else "")
        ))
    changed = [item for item in adjustments if item["before_bytes"] != item["after_bytes"]]
    if changed:
        lines.append(Text("adjustments:"))
    for item in changed:
        scope = " (most loaded GPU)" if item.get("scope") == "per_gpu" else (" (all GPUs)" if gpus > 1 else "")
        lines.append(Text(
            f"  {item['name']}: {format_bytes(item['before_bytes'])} -> {format_bytes(item['after_bytes'])}{scope}"
        ))
    return lines


# ---- kvplan models -------------------------------------------------------------------------------
def _models_rate(row: dict[str, Any]) -> str:
    rate = format_bytes(row["bytes_per_token"]) if row["bytes_per_token"] else "-"
    return rate


def _models_at_max(row: dict[str, Any]) -> str:
    at_max = row.get("bytes_per_token_at_max_context")
    return "-" if at_max is None else format_bytes(at_max)


def _models_heads(row: dict[str, Any]) -> str:
    if row["num_kv_heads"] is None:
        return "-"
    if "mla" in row["layers"]:
        return f"latent {row['head_dim']}"
    return f"{row['num_kv_heads']} × {row['head_dim']}"


def models_table(report: dict[str, Any]) -> Group:
    rows = report["models"]
    header = Text(f"Bundled models (offline): {len(rows)}")
    legend = Text("per token: all layers at full attention; @ max ctx: what a token costs when one sequence "
                  "holds the model's maximum context (windows and state included)", style="dim")

    every = ("model", "type", "layers", "heads", "ctx", "dtype", "rate", "at_max")

    def layout(columns: tuple[str, ...]) -> Callable[[], Table | Group]:
        def make() -> Table | Group:
            spec = {"model": ("model", "left"), "type": ("type", "left"), "layers": ("layers", "left"),
                    "heads": ("KV heads × dim", "right"), "ctx": ("max ctx", "right"), "dtype": ("dtype", "left"),
                    "rate": ("per token", "right"), "at_max": ("@ max ctx", "right")}
            table = grid(*(spec[c] for c in columns))
            for row in rows:
                cells = {"model": row["id"], "type": row["model_type"], "layers": row["layers"],
                         "heads": _models_heads(row),
                         "ctx": "-" if row["max_context_len"] is None else _tokens_short(row["max_context_len"]),
                         "dtype": row["kv_dtype"], "rate": _models_rate(row), "at_max": _models_at_max(row)}
                table.add_row(*(cells[c] for c in columns))
            hidden = [spec[c][0] for c in every if c not in columns]
            if not hidden:
                return table
            # NOTE: a narrow layout says what it left out and how to see it (the width the full table needs).
            need = Console(width=1000).measure(layout(every)()).maximum
            return Group(table, Text(f"not shown at this width: {', '.join(hidden)} (COLUMNS={need} shows them, "
                                     "or --format yaml)", style="dim"))
        return make

    def vertical() -> Group:
        lines: list[RenderableType] = []
        for row in rows:
            lines.append(Text(row["id"], style="bold"))
            ctx = "-" if row["max_context_len"] is None else f"{row['max_context_len']:,}"
            lines.append(Padding(Text(f"{row['model_type']}; {row['layers']}; KV heads × dim {_models_heads(row)}; "
                                      f"max ctx {ctx}; {row['kv_dtype']}"), (0, 0, 0, 2), expand=False))
            state = (f" + {format_bytes(row['state_bytes_per_seq'])}/seq state" if row["state_bytes_per_seq"] else "")
            lines.append(Padding(Text(f"per token {_models_rate(row)}{state}; @ max ctx {_models_at_max(row)}"),
                                 (0, 0, 0, 2), expand=False))
        return Group(*lines)

    body = Fit(
        layout(every),
        layout(("model", "layers", "heads", "ctx", "rate", "at_max")),
        layout(("model", "heads", "ctx", "rate", "at_max")),
        layout(("model", "ctx", "rate", "at_max")),
        vertical,
    )
    return Group(header, body, legend)


# ---- kvplan check --------------------------------------------------------------------------------
def _check_rows(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, list[tuple[str, bool]]]]:
    """(scenario row, its serving text, [(budget text, passed)])."""
    out = []
    for row in report["scenarios"]:
        inputs = row["estimate"]["inputs"]
        seq = "-" if inputs["seq_len"] is None else _tokens_short(inputs["seq_len"])
        serving = "" if inputs["engine"] == "ideal" else f" {inputs['engine']}"
        serving += f" tp{inputs['tp']}" if inputs["tp"] > 1 else ""
        serving += f" pp{inputs['pp']}" if inputs["pp"] > 1 else ""
        gates = []
        for gate in row["gates"]:
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
            gates.append((budget, gate["passed"]))
        out.append((row, f"{inputs['batch']}×{seq} {inputs['kv_dtype']}{serving}", gates or [("none", True)]))
    return out


def _verdict(passed: bool) -> Text:
    return Text("PASS", style="green") if passed else Text("FAIL", style="bold red")


def check_table(report: dict[str, Any], *, verbose: bool = False) -> Group:
    """`kvplan check`: the verdict first, then one row per scenario (``verbose``: one per budget, with the model)."""
    rows = _check_rows(report)
    total = len(report["scenarios"])
    summary = Text(f"{total} scenario(s), all within budget" if report["passed"]
                   else f"{report['num_failed']} of {total} scenario(s) over budget",
                   style="bold" if report["passed"] else "bold red")
    if not verbose:
        return Group(summary, Fit(lambda: _check_short(rows), lambda: _check_short_vertical(rows)))

    def table(with_model: bool) -> Callable[[], Table]:
        def make() -> Table:
            columns = [("scenario", "left")] + ([("model", "left")] if with_model else [])
            table = grid(*columns, ("batch×len dtype", "left"), ("KV cache", "right"), ("budget", "left"),
                         ("result", "left"))
            for row, serving, gates in rows:
                head = [row["name"]] + ([row["estimate"]["model"]["id"]] if with_model else [])
                head += [serving, format_bytes(row["kv_cache_bytes"])]
                for index, (budget, passed) in enumerate(gates):
                    table.add_row(*(head if index == 0 else [""] * len(head)), budget, _verdict(passed))
            return table
        return make

    def vertical() -> Group:
        lines = []
        for row, serving, gates in rows:
            verdict = all(passed for _budget, passed in gates)
            lines.append(Text.assemble(_verdict(verdict), " ", (row["name"], "bold")))
            lines.append(Text(f"  {row['estimate']['model']['id']}, {serving}: KV cache {format_bytes(row['kv_cache_bytes'])}"))
            lines += [Text.assemble("  ", _verdict(passed), f" {budget}") for budget, passed in gates]
        return Group(*lines)

    return Group(summary, Text(f"kvplan check {report['plan']}"), Fit(table(True), table(False), vertical))


def _check_short(rows: list[tuple[dict[str, Any], str, list[tuple[str, bool]]]]) -> Table:
    """One row per scenario; a failed budget on its own line under it."""
    table = grid(("scenario", "left"), ("batch×len dtype", "left"), ("KV cache", "right"), ("result", "left"))
    for row, serving, gates in rows:
        table.add_row(row["name"], serving, format_bytes(row["kv_cache_bytes"]),
                      _verdict(all(passed for _budget, passed in gates)))
        for budget, passed in gates:
            if not passed:
                table.add_row("", Text(f"  failed: {budget}", style="red"), "", "")
    return table


def _check_short_vertical(rows: list[tuple[dict[str, Any], str, list[tuple[str, bool]]]]) -> Group:
    lines = []
    for row, serving, gates in rows:
        lines.append(Text.assemble(_verdict(all(passed for _budget, passed in gates)), " ", (row["name"], "bold"),
                                   f": {serving}, KV {format_bytes(row['kv_cache_bytes'])}"))
        lines += [Text(f"  failed: {budget}", style="red") for budget, passed in gates if not passed]
    return Group(*lines)


# ---- kvplan diff ---------------------------------------------------------------------------------
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


def _change(change: int | None) -> str:
    if change is None:
        return "-"
    return ("+" if change > 0 else "-" if change < 0 else "") + format_bytes(abs(change))


def diff_table(report: dict[str, Any]) -> Group:
    """`kvplan diff`: KV bytes before and after per scenario (and per GPU where budgeted), then the inputs changed."""
    rows = report["scenarios"]
    per_gpu = any(row.get("old_kv_cache_bytes_per_gpu") is not None or row.get("new_kv_cache_bytes_per_gpu")
                  is not None for row in rows)

    def status(row: dict[str, Any]) -> Text:
        return Text(row["status"] + (" (over)" if row["over_threshold"] else ""),
                    style="bold red" if row["over_threshold"] else "")

    def table() -> Table:
        columns = [("scenario", "left"), ("status", "left"), ("old", "right"), ("new", "right"),
                   ("change", "right"), ("ratio", "right")]
        if per_gpu:
            columns += [("old/GPU", "right"), ("new/GPU", "right")]
        table = grid(*columns)
        for row in rows:
            cells = [row["name"], status(row), _size(row["old_kv_cache_bytes"]), _size(row["new_kv_cache_bytes"]),
                     _change(row["change_bytes"]), "-" if row["ratio"] is None else f"{row['ratio']:.3f}×"]
            if per_gpu:
                cells += [_size(row.get("old_kv_cache_bytes_per_gpu")), _size(row.get("new_kv_cache_bytes_per_gpu"))]
            table.add_row(*cells)
        return table

    def vertical() -> Group:
        lines = []
        for row in rows:
            lines.append(Text.assemble((row["name"], "bold"), ": ", status(row)))
            text = (f"  KV {_size(row['old_kv_cache_bytes'])} → {_size(row['new_kv_cache_bytes'])} "
                    f"({_change(row['change_bytes'])}" + ("" if row["ratio"] is None else f", {row['ratio']:.3f}×") + ")")
            if per_gpu and (row.get("old_kv_cache_bytes_per_gpu") is not None or row.get("new_kv_cache_bytes_per_gpu") is not None):
                text += (f"; per GPU {_size(row.get('old_kv_cache_bytes_per_gpu'))} → "
                         f"{_size(row.get('new_kv_cache_bytes_per_gpu'))}")
            lines.append(Text(text))
        return Group(*lines)

    lines: list[RenderableType] = [Text(f"kvplan diff {report['old']} → {report['new']}"), Fit(table, vertical)]
    changed = [row for row in rows if row["inputs_changed"]]
    if changed:
        lines.append(Text("inputs changed:"))
    for row in changed:
        for item in row["inputs_changed"]:
            lines.append(Text(f"  {row['name']}: {item['field']} {_input_value(item['field'], item['old'])} → "
                              f"{_input_value(item['field'], item['new'])}"))
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
    read/step, which stay in yaml/json. Narrower terminals drop the bar, then the layout text
    (listed under the table), then go vertical.
    """
    model, inputs, variants = report["model"], report["inputs"], report["variants"]
    seq_len, sweep = inputs["seq_len"], inputs["sweep_seq_lens"]
    title = (f"KV cache of {inputs['batch']} × {seq_len:,} tokens by attention layout: {model['id']} "
             f"({inputs['num_attention_layers']} attention layers, "
             f"{inputs['num_attention_heads']} query heads, head dim {inputs['head_dim_k']})")
    lengths = sorted({*sweep, seq_len})
    per_gpu = inputs["tp"] * inputs["pp"] > 1
    largest = max((v["kv_cache_bytes"] for v in variants), default=0)

    def table(*, bar: int, layout: bool) -> Callable[[], Table]:
        def make() -> Table:
            if sweep:
                columns = [("variant", "left"), ("KV heads", "right")]
                columns += [(f"@{_tokens_short(n)}", "right") for n in lengths]
                columns.append((f"× MHA @{_tokens_short(seq_len)}", "right"))
            else:
                columns = [("variant", "left")] + ([("layout", "left")] if layout else [])
                columns += [("KV heads", "right"), ("KV cache", "right")]
                columns += [("per GPU", "right")] if per_gpu else []
                columns += [("× MHA", "right"), ("read/step", "right")]
            if bar:
                columns.append(("", "left"))
            grid_table = grid(*columns)
            for v in variants:
                ratio = f"{v['ratio_to_mha']:.4g}"
                if sweep:
                    at = {p["seq_len"]: p["kv_cache_bytes"] for p in v["sweep"]} | {seq_len: v["kv_cache_bytes"]}
                    cells = [v["name"], _n(v["num_kv_heads"]), *(_short_bytes(at[n]) for n in lengths), ratio]
                else:
                    cells = [v["name"]] + ([v["description"]] if layout else [])
                    cells += [_n(v["num_kv_heads"]), format_bytes(v["kv_cache_bytes"])]
                    cells += [format_bytes(v["kv_cache_bytes_per_gpu"])] if per_gpu else []
                    cells += [ratio, format_bytes(v["decode_read_bytes_per_step"])]
                if bar:
                    cells.append(size_bar(v["kv_cache_bytes"], largest, width=bar))
                grid_table.add_row(*cells)
            return grid_table
        return make

    def layouts_below() -> Group:
        return Group(table(bar=0, layout=False)(),
                     *(Text(f"  {v['name']}: {v['description']}") for v in variants))

    def vertical() -> Group:
        lines = []
        for v in variants:
            lines.append(Text(f"{v['name']}: {format_bytes(v['kv_cache_bytes'])}, {v['ratio_to_mha']:.4g}× MHA",
                              style="bold"))
            parts = [v["description"], f"KV heads {_n(v['num_kv_heads'])}"]
            if per_gpu:
                parts.append(f"per GPU {format_bytes(v['kv_cache_bytes_per_gpu'])}")
            if sweep:
                parts += [f"@{_tokens_short(p['seq_len'])} {_short_bytes(p['kv_cache_bytes'])}" for p in v["sweep"]]
            else:
                parts.append(f"read/step {format_bytes(v['decode_read_bytes_per_step'])}")
            lines.append(Text("  " + "; ".join(parts)))
        return Group(*lines)

    layouts: list[Callable[[], RenderableType]]
    if sweep:
        layouts = [table(bar=12, layout=False), table(bar=0, layout=False), vertical]
    else:
        layouts = [table(bar=12, layout=True), table(bar=0, layout=True), layouts_below, vertical]
    caption = [
        Text(
            f"batch {inputs['batch']} × {seq_len:,} tokens, {inputs['kv_dtype']}; "
            + (f"engine {inputs['engine']}; " if inputs["engine"] != "ideal" else "")
            + (f"tp {inputs['tp']} × pp {inputs['pp']} (KV cache: all GPUs); " if per_gpu else "")
            + f"MHA ({inputs['kv_dtype']}) = {format_bytes(report['mha_kv_cache_bytes'])}"
            + (f"; bar: KV cache at {_tokens_short(seq_len)}" if sweep else "")
        ),
    ]  # NOTE: what read/step means and "memory only" are notes (said once)
    return Group(*warning_lines(report), Text(title), Fit(*layouts), *caption)


# ---- kvplan verify -------------------------------------------------------------------------------
def verify_steps(gen_len: int) -> int:
    """Decode steps the median step time is taken over: the first is a warm-up when there are more than two."""
    return gen_len - 1 if gen_len > 2 else gen_len


def verify_table(report: dict[str, Any]) -> Group:
    """`kvplan verify`: PASS/FAIL first, then predicted against measured, layer by layer, allocator and speed."""
    model, inputs, result = report["model"], report["inputs"], report["verify"]
    passed = result["passed"]
    verdict = Text.assemble(
        _verdict(passed),
        f": {model['id']}, {inputs['layers']} of {inputs['layers_total']} layers, measured "
        f"{format_bytes(result['measured_bytes'])} vs predicted {format_bytes(result['predicted_bytes'])}"
        + (" (exact)" if result["measured_bytes"] == result["predicted_bytes"] else ""),
    )
    title = (f"{inputs['layout']} layout on {result['device_name']}"
             + (f", transformers {result['transformers_version']}" if result.get("engine") == "transformers" else ""))

    def table() -> Table:
        grid_table = grid(("layer", "right"), ("kind", "left"), ("KV heads", "right"), ("slots/blocks", "right"),
                          ("predicted", "right"), ("measured", "right"))
        for layer in report["layers"]:
            slots = _n(layer["cache_tokens"]) if layer["blocks_per_seq"] is None else (
                f"{layer['peak_blocks_per_seq']}/{layer['blocks_per_seq']} blocks"
            )
            grid_table.add_row(str(layer["index"]), KIND_LABEL.get(layer["kind"], layer["kind"]),
                               _n(layer["num_kv_heads"]), slots, _bytes_exact(layer["predicted_bytes"]),
                               _bytes_exact(layer["measured_bytes"]))
        grid_table.add_section()
        match = Text("match" if result["match"] else "MISMATCH", style="bold green" if result["match"] else "bold red")
        grid_table.add_row(Text("total", style="bold"), match, "", "", _bytes_exact(result["predicted_bytes"]),
                           _bytes_exact(result["measured_bytes"]))
        return grid_table

    def vertical() -> Group:
        lines = []
        for layer in report["layers"]:
            ok = layer["predicted_bytes"] == layer["measured_bytes"]
            lines.append(Text(f"layer {layer['index']} ({KIND_LABEL.get(layer['kind'], layer['kind'])}): "
                              f"predicted {_bytes_exact(layer['predicted_bytes'])}, measured "
                              f"{_bytes_exact(layer['measured_bytes'])}" + ("" if ok else " MISMATCH")))
        return Group(*lines)

    lines: list[RenderableType] = [verdict, Text(title), Fit(table, vertical), Text(
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
        speed = (f"decode step: {result['step_seconds'] * 1e3:.3f} ms "
                 f"(median of {verify_steps(inputs['gen_len'])} steps)")
        if result["bandwidth_fraction"] is not None:
            speed += f", {result['bandwidth_fraction']:.1%} of the bandwidth floor"
        lines.append(Text(speed))
    return Group(*lines)


def _bytes_exact(value: int | None) -> str:
    return "-" if value is None else f"{value:,} B"


# ---- kvplan capacity -----------------------------------------------------------------------------
def _capacity_verdict(report: dict[str, Any]) -> Text:
    inputs, cap = report["inputs"], report["capacity"]
    verdict = f"{inputs['batch']} × {inputs['max_model_len']:,} tokens {'fits' if cap['fits'] else 'does NOT fit'}: "
    verdict += f"needs {_size(cap['kv_bytes_needed'])} of KV per GPU, " + (
        f"{_size(cap['kv_bytes_available'])} available" if cap["kv_bytes_available"] > 0
        else "but --kv-budget is 0" if inputs.get("kv_budget_bytes") == 0
        else "but the weights and reserve leave no KV memory per GPU")
    return Text(verdict, style="bold" if cap["fits"] else "bold red")


def _capacity_title(report: dict[str, Any]) -> Text:
    model, inputs = report["model"], report["inputs"]
    engine = inputs["engine"]
    # NOTE: a GGUF is sized for llama.cpp unless --engine says otherwise: the title says which file made it so.
    served = f"{engine} for a GGUF" if engine == "llama.cpp" and model.get("source") in ("gguf", "hub-gguf") else engine
    return Text(f"{model['id']} on {inputs['gpu'] or 'a --kv-budget'} (tp {inputs['tp']}, pp {inputs['pp']}, "
                f"{served}, KV {inputs['kv_dtype']})")


def _capacity_fixes(report: dict[str, Any]) -> list[RenderableType]:
    """Each suggestion in the engine's own flags: ``try ...`` then ``or ...``."""
    if not report["suggestions"]:
        return []
    tries = Table.grid(padding=(0, 1))
    tries.add_column(no_wrap=True)
    tries.add_column(overflow="fold")
    for index, suggestion in enumerate(report["suggestions"]):
        tries.add_row("  try" if index == 0 else "   or",
                      engine_flags(suggestion, report["inputs"]["engine"], report["inputs"]["batch"]))
    return [tries]


#: The short view's most engine-log lines; a longer log (DeepSeek-V4's in llama.cpp) shows its size lines only.
SHORT_LOG_LINES = 8
_LOG_SIZE = re.compile(r"\bsize = +[\d.]+ MiB")


def _capacity_log(report: dict[str, Any], *, max_lines: int | None = None) -> list[RenderableType]:
    """The lines the engine would log; ``max_lines``: each in at most that many lines (the short view: vLLM's
    8-line error keeps its opening words and figures, ``--verbose`` prints it whole), and a log longer than
    ``SHORT_LOG_LINES`` keeps its ``size = ... MiB`` lines (each cache's total) and says how many it left out."""
    log = report["capacity"].get("engine_log") or {}
    if not log.get("lines"):
        return []
    lines = list(log["lines"])
    left_out = 0
    if max_lines is not None and len(lines) > SHORT_LOG_LINES:
        kept = [line for line in lines if _LOG_SIZE.search(line) and "buffer size" not in line]
        lines, left_out = kept, len(lines) - len(kept)
    more = [Text(f"  ... {left_out} more lines (--verbose)")] if left_out else []
    return [Text(f"{log['engine']} {log['version'] or ''} would log:".replace("  ", " ")),
            *(Padding(Text(line, overflow="fold") if max_lines is None else Clip(line, max_lines), (0, 0, 0, 2),
                      expand=False) for line in lines), *more]


def _kv_budget_cell(budget: dict[str, Any]) -> tuple[str, str | None]:
    """The KV budget per GPU as a table says it, and, when the weights and reserve leave none, by how much."""
    kv_budget = budget["kv_bytes_per_gpu"]
    if kv_budget is not None and kv_budget < 0:  # NOTE: the report keeps the signed figure; the table says it
        return "none", f"weights and reserve exceed the budget by {format_bytes(-kv_budget)}"
    return _size(kv_budget), None


def capacity_table(report: dict[str, Any], *, verbose: bool = False) -> Group:
    """`kvplan capacity`: the verdict first, then the few figures behind it, the engine's log lines and the fixes.

    ``verbose``: the whole breakdown (GPU memory, the reserve's terms, blocks, GPUs needed, decode floor)."""
    if not verbose:
        return _capacity_short(report)
    inputs, weights = report["inputs"], report["weights"]
    budget, cap = report["budget"], report["capacity"]
    engine = inputs["engine"]
    tokens = inputs["max_model_len"]
    title = Text("Capacity of ") + _capacity_title(report)
    verdict = _capacity_verdict(report)
    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False, padding=(0, 1))
    table.add_column("what", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("detail", overflow="fold")

    params = "-" if weights["parameters"] is None else f"{weights['parameters'] / 1e9:.2f}B params"
    table.add_row("GPU memory", _size(inputs["gpu_memory_bytes"]), inputs.get("gpu_memory_source") or "")
    held = weights["quantization"] or weights["dtype"] or ""
    if weights.get("checkpoint_dtype") and weights["checkpoint_dtype"] != weights["dtype"]:
        held += f" (checkpoint {weights['checkpoint_dtype']})"
    table.add_row("weights", _size(weights["bytes"]), f"{params}, {held} ({weights['source']})")
    if weights["vision_parameters"]:
        table.add_row("  vision tower", _size(weights["vision_bytes"]), f"{weights['vision_parameters'] / 1e9:.2f}B params")
    table.add_row("weights per GPU", _size(budget["weights_bytes_per_gpu"]), "")
    table.add_row("reserve", _size(budget["reserve_bytes"]), "activation peak + non-torch (estimate; --reserve)")
    for term in budget.get("terms") or ():
        table.add_row(f"  {term['name']}", _size(term["bytes"]), term["source"])
    spread = budget.get("uncertainty_bytes")
    formula = budget["formula"] + (f" (up to {_size(spread)} more with other kernels)" if spread else "")
    kv_cell, short_by = _kv_budget_cell(budget)
    table.add_row(Text("KV budget per GPU", style="bold"), Text(kv_cell, style="bold"),
                  f"{short_by}: {formula}" if short_by else formula)
    _limiting_rank_row(table, report)
    table.add_section()
    table.add_row("KV blocks", _n(cap["num_blocks"]), f"{cap['block_size']} tokens per block")
    table.add_row("KV tokens", _n(cap["max_tokens"]), "token slots of the pool (the true capacity; the engine's "
                  "own figure is in its log lines below)")
    requests = cap["max_concurrent_requests"]
    table.add_row("max concurrency", f"{cap['max_concurrency']:.2f}x",
                  f"{requests:,} request{'s' * (requests != 1)} of {tokens:,} tokens" if requests
                  else f"does not fit one request of {tokens:,} tokens")
    _spread_row(table, cap)
    table.add_row("max context", _n(cap["max_context_len"]), f"at batch {inputs['batch']} ({cap['max_context_limit']})")
    if cap["min_tp"] is None:
        table.add_row("GPUs needed", "-", f"one {tokens:,}-token request fits on no size tried" if inputs["gpu"]
                      else "needs --gpu: the weights against the GPU's memory decide it")
    elif engine == "llama.cpp":
        table.add_row("GPUs needed", _n(cap["min_num_gpus"]),
                      f"for one {tokens:,}-token request, layers split over them (-ts)")
    else:
        table.add_row("GPUs needed", _n(cap["min_num_gpus"]),
                      f"for one {tokens:,}-token request: the smallest tp is {cap['min_tp']}, "
                      f"× pp {inputs['pp']} = {cap['min_num_gpus']} GPUs")
    if cap["decode_floor_seconds"] is not None:
        table.add_row("decode floor", f"{cap['decode_floor_seconds'] * 1000:.2f} ms/token",
                      f"<= {cap['decode_tokens_per_s']:,.0f} tokens/s at batch {inputs['batch']} "
                      f"({_size(cap['decode_bytes_per_step'])} read per step)")
    lines: list[RenderableType] = [*warning_lines(report), verdict, title, table, *_capacity_fixes(report),
                                   *_capacity_log(report)]
    return Group(*lines, *_capacity_log_comparison(report))


def _spread_row(table: Table, cap: dict[str, Any]) -> None:
    """A derived budget's reach in one row: the concurrency and blocks at its two ends."""
    conc, blocks = cap.get("max_concurrency_range"), cap.get("num_blocks_range")
    if not conc or not blocks:
        return
    table.add_row("  range", f"{conc[0]:.2f}-{conc[1]:.2f}x", f"{blocks[0]:,}-{blocks[1]:,} blocks (derived budget)")


def _limiting_rank_row(table: Table, report: dict[str, Any]) -> None:
    """When ranks differ (pipeline stages, --kv-budget per rank): which rank sizes the pool, in one row."""
    cap = report["capacity"]
    rank, stages = cap.get("limiting_rank"), cap.get("stages")
    if rank is None or not stages:
        return
    stage = next(s for s in stages if rank in s["ranks"])
    rooms = sorted({s["kv_budget_bytes"] for s in stages})
    detail = (f"stage {stage['stage']} of {len(stages)}, {stage['num_layers']} layers" if len(stages) > 1
              else f"of {len(stage['ranks'])} ranks")
    if stage["num_blocks"] is not None and len(stages) > 1:
        detail += f", {stage['num_blocks']:,} blocks: the fewest"
    elif len(rooms) > 1 or len(stages) == 1:
        detail += ": the least KV room"
    table.add_row("limiting rank", f"rank {rank}", detail)


def _capacity_short(report: dict[str, Any]) -> Group:
    """At most 20 lines at 80 columns: verdict, the figures behind it, GPUs needed and fixes when it does not fit,
    the engine's log lines."""
    inputs, weights, budget, cap = report["inputs"], report["weights"], report["budget"], report["capacity"]
    tokens, gpus = inputs["max_model_len"], inputs["tp"] * inputs["pp"]
    table = grid(("what", "left"), ("value", "right"), ("detail", "left"))
    table.show_header = False
    table.columns[-1].no_wrap, table.columns[-1].overflow = False, "fold"
    held = (weights["quantization"] or weights["dtype"] or "").split(" (")[0]  # NOTE: the why is --verbose's
    if weights.get("checkpoint_dtype") and weights["checkpoint_dtype"] != weights["dtype"]:
        held += f" from {weights['checkpoint_dtype']}"
    params = "" if weights["parameters"] is None else f"{weights['parameters'] / 1e9:.2f}B params, "
    total = f"of {_size(weights['bytes'])}: " if budget["weights_bytes_per_gpu"] != weights["bytes"] else ""
    table.add_row("weights", _size(budget["weights_bytes_per_gpu"]), f"{total}{params}{held}")
    kv_cell, short_by = _kv_budget_cell(budget)
    if short_by:
        detail = short_by
    elif inputs.get("kv_budget_bytes") is not None:
        detail = "per GPU (--kv-budget)"
    elif budget["reserve_bytes"]:
        detail = f"per GPU, after the weights and {_size(budget['reserve_bytes'])} reserve"
    else:  # NOTE: SGLang's fraction, or ideal's reserve of 0: the formula says it in a few words
        detail = f"per GPU: {budget['formula']}"
    table.add_row(Text("KV budget", style="bold"), Text(kv_cell, style="bold"), detail)
    _limiting_rank_row(table, report)
    table.add_row("KV per request", _size(cap["kv_bytes_per_request"]),
                  f"{tokens:,} tokens" + (" (per GPU)" if gpus > 1 else ""))
    requests = cap["max_concurrent_requests"]
    table.add_row("max concurrency", f"{cap['max_concurrency']:.2f}x",
                  f"{requests:,} request{'s' * (requests != 1)} of {tokens:,} tokens" if requests
                  else f"not one request of {tokens:,} tokens")
    _spread_row(table, cap)
    table.add_row("max context", _n(cap["max_context_len"]), f"at batch {inputs['batch']} ({cap['max_context_limit']})")
    if not cap["fits"] and cap["min_num_gpus"] is not None:
        table.add_row("GPUs needed", _n(cap["min_num_gpus"]), f"for one {tokens:,}-token request")
    lines: list[RenderableType] = [*warning_lines(report), _capacity_verdict(report), _capacity_title(report), table]
    lines += [*_capacity_fixes(report), *_capacity_log(report, max_lines=2), *_capacity_log_comparison(report)]
    return Group(*lines)


def _capacity_log_comparison(report: dict[str, Any]) -> list[RenderableType]:
    """--compare-log: each logged figure beside kvplan's."""
    lines: list[RenderableType] = []
    compared = report.get("log_comparison")
    if compared:
        lines.append(Text(f"{compared['source']} ({compared['engine']}): {compared['matches']} figure(s) match, "
                          f"{compared['differs']} differ", style="bold"))
        for row in compared["rows"]:
            diff = "" if row["difference"] is None else f" ({row['difference']:+g})"
            said = "same" if row["match"] else f"differs{diff}: {row['cause']}"
            lines.append(Padding(Text(f"line {row['line_no']} {row['figure']}: logged {row['logged']}, kvplan "
                                      f"{row['predicted'] if row['predicted'] is not None else '-'}; {said}",
                                      overflow="fold"), (0, 0, 0, 2), expand=False))
    return lines


# ---- kvplan gpus ---------------------------------------------------------------------------------
def gpus_table(report: dict[str, Any]) -> Group:
    def table(aliases: bool) -> Callable[[], Table]:
        def make() -> Table:
            columns = [("gpu", "left"), ("memory", "right"), ("bandwidth", "right")]
            grid_table = grid(*columns, *([("aliases", "left")] if aliases else []))
            if aliases:
                grid_table.columns[-1].no_wrap = False
                grid_table.columns[-1].overflow = "fold"
                grid_table.columns[-1].min_width = 16
            for row in report["gpus"]:
                cells = [row["name"], format_bytes(row["memory_bytes"]), f"{row['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s"]
                grid_table.add_row(*cells, *([", ".join(row["aliases"])] if aliases else []))
            return grid_table
        return make

    def vertical() -> Group:
        return Group(*(Text(f"{row['name']}: {format_bytes(row['memory_bytes'])}, "
                            f"{row['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s; aliases {', '.join(row['aliases']) or '-'}")
                       for row in report["gpus"]))

    return Group(Text("GPU catalog"), Fit(table(True), vertical))
