"""Layouts that fit the console width: :class:`Fit` picks the first that fits, :func:`grid` builds the tables.

Every table of :mod:`kvplan.report.render` fits the width with nothing cut: each command offers its
layouts from the widest to a vertical "key: value" one, and :class:`Fit` prints the first whose
lines all fit the width with no cell shortened to ``…``. The width is the console's: ``COLUMNS``
when set, the terminal's, else 80 (rich's fallback in a pipe or a CI log).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table

from kvplan.units import format_bytes

#: A cell rich had to shorten ends in this character; a layout that shows one does not fit.
ELLIPSIS = "…"

#: Short names of layer kinds in tables (the report keeps the full ones).
KIND_LABEL = {
    "full_attention": "full", "sliding_window": "sliding", "chunked_local": "chunked",
    "cross_attention": "cross", "mla": "mla", "state": "state", "no_cache": "no cache",
}


def n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class Fit:
    """The first of ``layouts`` that fits the width it is printed at, else the last one.

    A layout fits when no rendered line is wider than the width and no cell ends in ``…``.
    Layouts are built lazily, so a narrow terminal pays only for what it tries.
    """

    def __init__(self, *layouts: Callable[[], RenderableType]) -> None:
        self.layouts = layouts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for index, make in enumerate(self.layouts):
            lines = console.render_lines(make(), options, pad=False)
            if index == len(self.layouts) - 1 or fits(lines, width):
                for line in lines:
                    yield from line
                    yield Segment.line()
                return


class Clip:
    """``text`` in at most ``max_lines`` lines of the width it is printed at, the last ending in `` ...`` when cut
    (the short view's engine log: the line stays recognisable, ``--verbose`` prints it whole)."""

    def __init__(self, text: str, max_lines: int) -> None:
        self.text, self.max_lines = text, max_lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 20)
        lines = textwrap.wrap(self.text, width=width, max_lines=self.max_lines, placeholder=" ...",
                              break_long_words=False, break_on_hyphens=False)
        for line in lines:
            yield Segment(line)
            yield Segment.line()


def fits(lines: Iterable[list[Segment]], width: int) -> bool:
    """No line wider than ``width`` and no text cut short (``…``)."""
    for line in lines:
        if Segment.get_line_length(line) > width or any(ELLIPSIS in segment.text for segment in line):
            return False
    return True


#: Rules under the header and between sections, no side borders or column bars.
RULES = box.Box("    \n    \n ── \n    \n ── \n ── \n    \n    \n")


def grid(*columns: tuple[str, str]) -> Table:
    """A table without side borders: a rule under the header, two spaces between columns.

    Cells never wrap: a cell that would not fit is shortened by rich (``…``), which :class:`Fit`
    sees and answers with the next, narrower layout.
    """
    table = Table(box=RULES, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    return table


def tokens_short(num_tokens: int) -> str:
    if num_tokens % (1024**2) == 0:
        return f"{num_tokens // 1024**2}M"
    if num_tokens % 1024 == 0 and num_tokens < 1024**2:
        return f"{num_tokens // 1024}k"
    return f"{num_tokens:,}"


def short_bytes(num_bytes: int) -> str:
    return format_bytes(num_bytes).replace(".00 ", " ")


def signed_size(value: int | None) -> str:
    if value is None:
        return "-"
    return format_bytes(value) if value >= 0 else "-" + format_bytes(-value)


def replication(report: dict[str, Any]) -> str | None:
    """Why the GPUs together hold more than one copy, when they do."""
    tp = report["inputs"].get("tp", 1)
    if tp <= 1:
        return None
    for layer in report["layers"]:
        heads, per_gpu = layer["num_kv_heads"], layer.get("num_kv_heads_per_gpu")
        if heads is None or per_gpu is None or per_gpu * tp <= heads:
            continue
        if layer["kind"] == "mla":
            return f"replicated: each of the {tp} tensor-parallel ranks keeps the whole MLA latent"
        slots = per_gpu * tp
        if slots % heads:  # NOTE: uneven split: the ranks' slots are padded, not whole copies of the heads
            return (f"padded: {heads} KV heads do not split evenly over {tp} tensor-parallel ranks, each rank "
                    f"keeps {per_gpu} ({heads}/{tp} rounded up), {slots} head slots for {heads} heads")
        return (f"replicated: {heads} KV heads over {tp} tensor-parallel ranks, each rank keeps {per_gpu}, "
                f"so {slots // heads} copies of each head")
    return None
