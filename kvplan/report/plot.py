"""`kvplan compare --plot`: KV memory against context length, drawn with matplotlib.

matplotlib is the optional extra ``kvplan[plot]`` and is imported only inside :func:`write_plot`,
through its object API (``Figure``), so no pyplot backend or global state is touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kvplan.errors import InputError
from kvplan.units import format_bytes

PLOT_SUFFIXES = (".png", ".svg")
INSTALL_HINT = "pip install 'kvplan[plot]'"


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
) -> None:
    """One line per variant (GiB against tokens, log x), plus a dashed line at ``gpu_mem_bytes``."""
    check_plot_path(path)
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError("--plot needs matplotlib, which is not installed", INSTALL_HINT) from None

    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot()
    for name, sizes in series.items():
        axes.plot(seq_lens, sizes, label=name, linewidth=1.8)
    if gpu_mem_bytes:
        label = f"GPU memory {format_bytes(gpu_mem_bytes).replace('.00', '')}"
        axes.axhline(gpu_mem_bytes, color="black", linestyle="--", linewidth=1, label=label)
    # NOTE: log-log: a constant ratio between layouts is a constant gap, and a full window is a flat line.
    axes.set_xscale("log", base=2)
    axes.set_yscale("log", base=2)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: _tokens_label(x)))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: format_bytes(int(y)).replace(".00", "")))
    axes.set_xlabel("context length (tokens per sequence)")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend()
    try:
        figure.savefig(path, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise InputError(f"cannot write --plot {path}: {exc.strerror or exc}", "check the path") from None


def _tokens_label(tokens: float) -> str:
    """Axis labels in the CLI's own token units: 512, 4k, 128k, 1M (k = 1024)."""
    if tokens >= 1024**2:
        return f"{tokens / 1024**2:g}M"
    if tokens >= 1024:
        return f"{tokens / 1024:g}k"
    return f"{tokens:g}"
