"""`kvplan compare --plot` and `kvplan capacity --plot`: KV memory against context length, drawn with matplotlib
from a command's result (``kvplan.compare``'s or ``kvplan.capacity``'s) and its report.

matplotlib is the optional extra ``kvplan[plot]`` and is imported only inside :func:`write_plot`,
through its object API (``Figure``), so no pyplot backend or global state is touched.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.errors import InputError
from kvplan.outfile import write_atomic
from kvplan.units import format_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_SUFFIXES = (".png", ".svg")
#: Points of a line-end label.
LABEL_FONT_SIZE = 9
INSTALL_HINT = "pip install '.[plot]' in the kvplan checkout (or: pip install matplotlib)"


def check_plot_path(path: Path) -> None:
    """Reject a --plot name matplotlib would not write as PNG or SVG (before any work is done)."""
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path} must end in .png or .svg", "e.g. --plot kv.png or --plot kv.svg")


class CapacityCurves(Protocol):
    """What a capacity plot reads of ``kvplan.capacity``'s result."""

    @property
    def geometry(self) -> Any: ...

    def kv_per_gpu_curve(self, seq_lens: Sequence[int], *, batch: int) -> list[int]: ...


class CompareLines(Protocol):
    """What a compare plot reads of ``kvplan.compare``'s result."""

    @property
    def seq_len(self) -> int: ...

    def plot_series(self) -> tuple[list[int], dict[str, list[int]]]: ...

    def kv_room(self) -> tuple[int | None, str | None]: ...


def write_capacity_plot(path: Path, result: CapacityCurves, report: dict[str, Any]) -> None:
    """KV per GPU of 1 and of --batch requests against context, up to the model's maximum, with the KV budget
    per GPU (memory less weights and reserve) as the line they must stay under and the requested length marked."""
    inputs, capacity, budget = report["inputs"], report["capacity"], report["budget"]
    requested, batch = inputs["max_model_len"], inputs["batch"]
    xs = context_axis(requested, result.geometry.max_context_tokens)
    series = {f"KV of {batch} requests": result.kv_per_gpu_curve(xs, batch=batch)} if batch > 1 else {}
    series["KV of 1 request"] = result.kv_per_gpu_curve(xs, batch=1)
    room = budget["kv_bytes_per_gpu"]
    longest = capacity["max_context_len"]
    room_label = (f"KV budget per GPU after weights and reserve: {format_bytes(room)} "
                  f"(max context at batch {batch}: {longest:,})") if room and room > 0 else None
    gpu = inputs["gpu"] or "a --kv-budget"
    title = (f"{report['model']['id']} on {gpu}, {inputs['engine']}, tp {inputs['tp']} × pp {inputs['pp']}, "
             f"KV {inputs['kv_dtype']}, batch {batch}")
    second = []
    if budget["weights_bytes_per_gpu"] is not None:
        second.append(f"weights {format_bytes(budget['weights_bytes_per_gpu'])} per GPU")
    if room is not None and room <= 0:
        second.append(f"weights and reserve exceed the memory by {format_bytes(-room)}: no KV room")
    if second:
        title += "\n" + ", ".join(second)
    write_plot(path, xs, series, title=title, ylabel="KV cache per GPU (the most loaded one)",
               mark_tokens=requested, room_bytes=room if room and room > 0 else None, room_label=room_label)


def write_compare_plot(path: Path, result: CompareLines, report: dict[str, Any]) -> None:
    """Each variant's KV against context; with --gpu-mem, the GPU's memory and (for a model) the room its
    weights leave."""
    inputs = report["inputs"]
    xs, series = result.plot_series()
    title = f"KV cache of {report['model']['id']}, batch {inputs['batch']}, {inputs['kv_dtype']}"
    per_gpu = inputs["tp"] * inputs["pp"] > 1
    if per_gpu:
        title += f", {inputs['engine']} tp {inputs['tp']} × pp {inputs['pp']}"
    room_bytes, room_label = result.kv_room()
    gpu_mem_bytes = inputs["gpu_mem_bytes"]
    if room_bytes is not None and room_bytes <= 0 and room_label:
        # NOTE: the weights do not fit: no line at all (the card would read as KV room), the title says why.
        title, gpu_mem_bytes, room_bytes, room_label = f"{title}\n{room_label}", None, None, None
    write_plot(path, xs, series, title=title, gpu_mem_bytes=gpu_mem_bytes,
               ylabel="KV cache per GPU (the most loaded one)" if per_gpu else "KV cache (batch total)",
               mark_tokens=result.seq_len, room_bytes=room_bytes, room_label=room_label)


def write_plot(path: Path, seq_lens: Sequence[int], series: Mapping[str, Sequence[int]], **options: Any) -> None:
    """:func:`draw_plot` written to ``path`` (PNG or SVG, by its suffix)."""
    check_plot_path(path)
    figure = draw_plot(seq_lens, series, **options)
    image = io.BytesIO()
    figure.savefig(image, format=path.suffix.lower().lstrip("."))
    # NOTE: as --output: whole or not at all, a FIFO or device written into, a read-only file refused.
    write_atomic(path, image.getvalue(), flag="--plot")


def draw_plot(
    seq_lens: Sequence[int],
    series: Mapping[str, Sequence[int]],
    *,
    title: str,
    gpu_mem_bytes: int | None = None,
    ylabel: str = "KV cache (batch total)",
    mark_tokens: int | None = None,
    room_bytes: int | None = None,
    room_label: str | None = None,
) -> Figure:
    """One line per variant (bytes against tokens, log-log), labelled at its right end, the labels spread so
    none touches another; a dotted line at ``mark_tokens`` (the requested length); a dashed line at
    ``room_bytes`` (the KV room left after weights) or else at ``gpu_mem_bytes``. The legend lies below the
    axes, so it covers no line and no label, listing the lines top to bottom as they end.
    1280 x 720 px for PNG, legible in a README."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError("--plot needs matplotlib, which is not installed", INSTALL_HINT) from None

    figure = Figure(figsize=(12.8, 7.2), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    # NOTE: legend order = the order the lines end, top to bottom, so the legend reads like the plot.
    order = sorted(series, key=lambda name: series[name][-1], reverse=True)
    colors = {name: axes.plot(seq_lens, series[name], label=name, linewidth=2)[0].get_color() for name in order}
    if room_bytes is not None and room_bytes > 0:
        axes.axhline(room_bytes, color="black", linestyle="--", linewidth=1.2,
                     label=room_label or f"KV room {format_bytes(room_bytes)}")
    elif gpu_mem_bytes:
        label = room_label or f"GPU memory {format_bytes(gpu_mem_bytes).replace('.00', '')} (weights not subtracted)"
        axes.axhline(gpu_mem_bytes, color="black", linestyle="--", linewidth=1.2, label=label)
    if mark_tokens:
        axes.axvline(mark_tokens, color="grey", linestyle=":", linewidth=1.2,
                     label=f"requested length {_mark_label(mark_tokens)}")
    # NOTE: log-log: a constant ratio between layouts is a constant gap, and a full window is a flat line.
    axes.set_xscale("log", base=2)
    axes.set_yscale("log", base=2)
    axes.set_xlim(seq_lens[0], seq_lens[-1])
    axes.margins(x=0)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: _tokens_label(x)))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: format_bytes(int(y)).replace(".00", "")))
    axes.set_xlabel("context length (tokens per sequence)")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, which="major", alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), frameon=False)
    # NOTE: the labels are spread in log2 bytes by the height of a label line on the laid-out axes.
    figure.draw_without_rendering()
    low, high = (math.log2(limit) for limit in axes.get_ylim())
    label_px = LABEL_FONT_SIZE * figure.dpi / 72 * 1.3  # a line of 9-point text, with leading
    gap = (high - low) * label_px / axes.bbox.height
    ends = _spread([math.log2(max(series[name][-1], 1)) for name in order], gap=gap, low=low + gap / 2)
    for name, end in zip(order, ends):
        axes.annotate(name, (seq_lens[-1], 2**end), xytext=(6, 0), textcoords="offset points", va="center",
                      fontsize=LABEL_FONT_SIZE, color=colors[name], annotation_clip=False)
    return figure


def context_axis(requested: int, model_max: int | None, *, points: int = 48) -> list[int]:
    """Context lengths for a capacity plot: a log grid from 512 tokens (or less, to show ``requested``) to
    the model's maximum (or ``requested`` when longer), with both ends and ``requested`` on it."""
    hi = max(requested, model_max or 0, 2)
    lo = max(1, min(512, requested, hi // 2))
    step = (math.log2(hi) - math.log2(lo)) / max(points - 1, 1)
    grid = {round(2 ** (math.log2(lo) + i * step)) for i in range(points)} | {lo, hi, requested}
    return sorted(t for t in grid if lo <= t <= hi)


def _spread(ends: Sequence[float], *, gap: float, low: float = -math.inf) -> list[float]:
    """Label heights (sorted high to low) moved apart so no two are closer than ``gap``: each pushed down
    below the one above, then, where that took the lowest under ``low``, pushed back up from there."""
    out: list[float] = []
    for end in ends:
        out.append(min(end, out[-1] - gap) if out else end)
    floor = low
    for index in range(len(out) - 1, -1, -1):
        out[index] = max(out[index], floor)
        floor = out[index] + gap
    return out


def _mark_label(tokens: float) -> str:
    """The requested length: in k when it is a whole number of 1,024 tokens, else the exact count (64,000 read
    as vLLM's 64k is not 62.5k)."""
    return _tokens_label(tokens) if tokens % 1024 == 0 else f"{tokens:,.0f}"


def _tokens_label(tokens: float) -> str:
    """Axis labels in the CLI's own token units: 512, 4k, 128k, 1M (k = 1024)."""
    if tokens >= 1024**2:
        return f"{tokens / 1024**2:g}M"
    if tokens >= 1024:
        return f"{tokens / 1024:g}k"
    return f"{tokens:g}"
