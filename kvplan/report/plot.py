"""`kvplan compare --plot` and `kvplan capacity --plot`: KV memory against context length, drawn with matplotlib.

matplotlib is the optional extra ``kvplan[plot]`` and is imported only inside :func:`write_plot`,
through its object API (``Figure``), so no pyplot backend or global state is touched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from kvplan.errors import InputError
from kvplan.units import format_bytes

PLOT_SUFFIXES = (".png", ".svg")
INSTALL_HINT = "pip install '.[plot]' in the kvplan checkout (or: pip install matplotlib)"


def check_plot_path(path: Path) -> None:
    """Reject a --plot name matplotlib would not write as PNG or SVG (before any work is done)."""
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path} must end in .png or .svg", "e.g. --plot kv.png or --plot kv.svg")


def write_plot(
    path: Path,
    seq_lens: Sequence[int],
    series: Mapping[str, Sequence[int]],
    *,
    title: str,
    gpu_mem_bytes: int | None = None,
    ylabel: str = "KV cache (batch total)",
    mark_tokens: int | None = None,
    room_bytes: int | None = None,
    room_label: str | None = None,
    legend_loc: str = "upper left",
) -> None:
    """One line per variant (bytes against tokens, log-log), labelled at its right end and listed in the
    legend top to bottom as the lines end; a dotted line at ``mark_tokens`` (the requested length);
    a dashed line at ``room_bytes`` (the KV room left after weights) or else at ``gpu_mem_bytes``.
    1280 x 720 px for PNG, legible in a README."""
    check_plot_path(path)
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError("--plot needs matplotlib, which is not installed", INSTALL_HINT) from None

    figure = Figure(figsize=(12.8, 7.2), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    # NOTE: legend order = the order the lines end, top to bottom, so the legend reads like the plot.
    order = sorted(series, key=lambda name: series[name][-1], reverse=True)
    ends = _spread([math.log2(max(series[name][-1], 1)) for name in order], gap=_label_gap(series))
    for name, end in zip(order, ends):
        (line,) = axes.plot(seq_lens, series[name], label=name, linewidth=2)
        axes.annotate(name, (seq_lens[-1], 2**end), xytext=(6, 0), textcoords="offset points",
                      va="center", fontsize=9, color=line.get_color(), annotation_clip=False)
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
    axes.legend(loc=legend_loc)
    try:
        figure.savefig(path, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise InputError(f"cannot write --plot {path}: {exc.strerror or exc}", "check the path") from None


def context_axis(requested: int, model_max: int | None, *, points: int = 48) -> list[int]:
    """Context lengths for a capacity plot: a log grid from 512 tokens (or less, to show ``requested``) to
    the model's maximum (or ``requested`` when longer), with both ends and ``requested`` on it."""
    hi = max(requested, model_max or 0, 2)
    lo = max(1, min(512, requested, hi // 2))
    step = (math.log2(hi) - math.log2(lo)) / max(points - 1, 1)
    grid = {round(2 ** (math.log2(lo) + i * step)) for i in range(points)} | {lo, hi, requested}
    return sorted(t for t in grid if lo <= t <= hi)


def _label_gap(series: Mapping[str, Sequence[int]]) -> float:
    """The least distance, in log2 bytes, between two line-end labels: 1/40 of the y range."""
    values = [math.log2(max(v, 1)) for sizes in series.values() for v in sizes]
    return max((max(values) - min(values)) / 40, 0.05) if values else 0.05


def _spread(ends: Sequence[float], *, gap: float) -> list[float]:
    """Label heights (sorted high to low) moved apart so no two are closer than ``gap``."""
    out: list[float] = []
    for end in ends:
        out.append(min(end, out[-1] - gap) if out else end)
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
