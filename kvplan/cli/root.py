"""The root app: which commands exist, the error boundary around each, and the console entry point.

A command is one module of this package holding ``EPILOG`` and a function of the module's name
(``kvplan/cli/capacity.py`` -> ``capacity``). Adding one = writing that module and naming it in
:data:`COMMANDS`. Command modules never import this module: :func:`make_app` wraps every command
in :func:`cli_errors`, so no command can forget the boundary.
"""

import functools
import gc
import importlib
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from kvplan.errors import EXIT_BUG, EXIT_USAGE, KvplanError
from kvplan.textsafe import printable
from kvplan.version import __version__

APP_SETTINGS: dict[str, Any] = {
    "name": "kvplan",
    "help": "KV-cache memory planner: size the KV cache of an LLM from its config.json.",
    "no_args_is_help": True,
    # NOTE: typer's --install-completion / --show-completion; completion runs `kvplan` with no
    # arguments, so it builds the full app (see _app_for).
    "add_completion": True,
    "pretty_exceptions_enable": False,
    # NOTE: plain click output: usage errors end in one `Error: ...` line like kvplan's own errors.
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}

#: The commands, in the order `kvplan --help` lists them; each is the module ``kvplan.cli.<name>``.
COMMANDS = ("estimate", "models", "capacity", "recommend", "gpus", "check", "compare", "diff", "schema", "verify")

#: The reader of stdout went away (``kvplan ... | head``): exit as a shell does on SIGPIPE.
EXIT_BROKEN_PIPE = 141


@contextmanager
def cli_errors() -> Iterator[None]:
    """Map domain errors to one clear line on stderr and exit code 2; bugs to 101."""
    try:
        yield
    except KvplanError as exc:
        _error(exc.message, exc.hint)
        raise typer.Exit(EXIT_USAGE) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        _quiet_broken_pipe()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except Exception as exc:
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        if type(exc).__module__.startswith("click"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 for the traceback")
        raise typer.Exit(EXIT_BUG) from None


def _quiet_broken_pipe() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _error(message: str, hint: str | None) -> None:
    # NOTE: wrapped only on a terminal: in a pipe or CI log each stays one greppable line.
    tty = getattr(sys.stderr, "isatty", None)
    width = max(shutil.get_terminal_size((80, 24)).columns, 20) if tty is not None and tty() else None
    try:
        typer.echo(error_text(message, hint, width), err=True)
    except (OSError, ValueError):
        # NOTE: stderr is full (/dev/full) or closed: the message is lost, but the exit code still says what happened.
        pass


def error_text(message: str, hint: str | None, width: int | None = None) -> str:
    """``Error: ...`` and ``Hint: ...``, each wrapped on word boundaries at ``width`` (None: not wrapped)
    with its continuation lines indented under its text."""
    lines = []
    for prefix, text in (("Error: ", message), ("Hint: ", hint)):
        if not text:
            continue
        line = prefix + printable(text)
        lines.append(line if width is None else textwrap.fill(
            line, width=width, subsequent_indent=" " * len(prefix), break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def _guarded(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` run inside :func:`cli_errors`; typer reads the signature and help through ``__wrapped__``."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        with cli_errors():
            command(*args, **kwargs)

    return run


def make_app(names: Sequence[str] = COMMANDS) -> typer.Typer:
    """The root app holding the commands ``names`` (all by default), importing only their modules."""
    root = typer.Typer(**APP_SETTINGS)
    for name in names:
        module = importlib.import_module(f"{__package__}.{name}")
        root.command(epilog=module.EPILOG)(_guarded(getattr(module, name)))
    root.callback()(_root)  # --version; also keeps `kvplan COMMAND ...` a group with one command
    return root


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """KV-cache memory planner: size the KV cache of an LLM from its config.json."""


_APP: list[typer.Typer] = []


def __getattr__(name: str) -> Any:
    """``app``, the root app with every command, built on first use: `kvplan estimate` builds and imports
    one command (see :func:`_app_for`), not nine."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _APP:
        _APP.append(make_app())
    return _APP[0]


def _app_for(argv: list[str]) -> typer.Typer:
    """The root app, or, when argv names one command, an app holding only that command.

    NOTE: typer builds the parameters of every registered command before it runs one; building only
    the requested one keeps `kvplan estimate` start-up short. Help and errors are the same.
    """
    if not argv or argv[0] not in COMMANDS:
        return __getattr__("app")
    return make_app([argv[0]])


class _StderrKeepsGoing:
    """sys.stderr whose failed writes (a full disk, a closed pipe) are dropped: a note, FAIL line or error that
    cannot be shown must not turn the command's exit code (0, 1 or 2) into a crash."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main() -> None:
    """Console entry point: typer's own exits pass through; anything unexpected is exit 101."""
    if sys.stderr is not None and not isinstance(sys.stderr, _StderrKeepsGoing):
        sys.stderr = _StderrKeepsGoing(sys.stderr)
    try:
        _app_for(sys.argv[1:])()
    except SystemExit:
        raise
    except BrokenPipeError:
        _quiet_broken_pipe()
        sys.exit(EXIT_BROKEN_PIPE)
    except Exception as exc:
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1")
        sys.exit(EXIT_BUG)
    finally:
        # NOTE: the heap is about to be thrown away: frozen, the interpreter's collection at exit skips it. Worth
        # about 17 % of `kvplan estimate` and 13 % of a 1,000-scenario `kvplan check` (benchmarks/README.md).
        gc.freeze()
