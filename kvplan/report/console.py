"""The rich Console every table is printed on: no highlighting, no soft wrap, and control characters
from configs and plan files escaped before they reach the terminal."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.segment import Segment, SegmentLines

from kvplan.textsafe import has_control, printable


def make_console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    console.push_render_hook(_EscapeControls())
    console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    return console


def print_counted(console: Console, renderable: RenderableType) -> int:
    """Print ``renderable`` on ``console`` and return how many lines it took, rendering it once."""
    lines = console.render_lines(renderable, console.options, pad=False)
    console.print(SegmentLines(lines, new_lines=True))
    return len(lines)


def _raise_broken_pipe() -> None:
    """rich's Console exits 1 on a broken pipe (kvplan's 'does not fit' code); kvplan exits 141 in every format."""
    raise BrokenPipeError


class _EscapeControls(RenderHook):
    """Every text segment through kvplan.textsafe.printable: a config's ``ESC ]0;...`` or a plan's
    ``ESC [2J`` prints as ``\\x1b]0;...``, never reaching the terminal raw."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(item) for item in renderables]


class _Escaped:
    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control is None and has_control(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment
