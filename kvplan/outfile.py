"""``--output FILE`` and ``--plot FILE``: written whole or not at all, never over the command's own input.

A regular file (or a new one) is written to a temporary file in the same folder, flushed to disk, then
renamed over FILE, so a full disk, a size limit, a concurrent writer or an interrupt (Ctrl-C, SIGTERM,
SIGHUP) never leaves half a report, destroys the old one or leaves the temporary file behind. A symlink
to a regular file is followed: its target is replaced, the link stays. Anything else (a FIFO, a
terminal, ``/dev/null``, and ``/dev/stdout`` or ``/proc/self/fd/1`` whatever they point at) is written
into as the shell's ``>`` would, never replaced by a plain file. A read-only file is refused, as ``>`` refuses it. ``--output -`` means stdout.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kvplan.errors import InputError

#: Signals that end a run by default; while a temporary file exists they raise instead, so it is removed.
_INTERRUPTS = (signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A terminating signal arrived while a temporary output file existed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def is_stdout(path: Path | str) -> bool:
    return str(path) == "-"


def refuse_inputs(output: Path, inputs: Iterable[Path | str | None], *, flag: str = "--output") -> None:
    """InputError when ``output`` is (or links to) one of the command's input files."""
    if is_stdout(output) or not output.exists():
        return
    for item in inputs:
        if item is None:
            continue
        candidate = Path(item).expanduser()
        try:
            if candidate.is_dir():
                candidate = candidate / "config.json"
            same = candidate.exists() and os.path.samefile(candidate, output)
        except (OSError, ValueError):
            continue
        if same:
            raise InputError(
                f"{flag} {output} is the command's own input ({item}); writing there would destroy it",
                f"write to another file, e.g. {flag} {'kv.png' if flag == '--plot' else 'report.yaml'}",
            )


def write_atomic(path: Path, text: str | bytes | Iterable[str], *, flag: str = "--output") -> None:
    """Write ``text`` (or its pieces, in order) to ``path``: a regular or new file through a temporary file in the
    same folder and a rename; a FIFO, device or terminal straight into it, as ``>`` does."""
    try:
        info = os.stat(path)  # follows symlinks: what `>` would write into
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}", "check the path") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise InputError(f"cannot write {flag} {path}: it is a directory", f"name a file, e.g. {flag} report.yaml")
    if info is not None and (not stat.S_ISREG(info.st_mode) or _open_file_link(path)):
        _write_into(path, text, flag)
        return
    if info is not None and not info.st_mode & 0o222:
        raise InputError(f"{flag} {path} is read-only; kvplan does not replace a file its owner protected",
                         f"make it writable (chmod u+w {path}) or write to another file")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path  # replace the link's target, keep the link
    _replace(target, path, text, flag, None if info is None else info.st_mode & 0o7777)


def _open_file_link(path: Path) -> bool:
    """``/dev/stdout``, ``/proc/self/fd/1``: a link to a file some process holds open (the shell's ``> log``).
    Replacing its target would leave that process writing to a deleted file, so it is written into."""
    return path.is_symlink() and os.path.abspath(path).startswith(("/proc/", "/dev/"))


def _pieces(text: str | bytes | Iterable[str]) -> Iterable[str | bytes]:
    return [text] if isinstance(text, (str, bytes)) else text


def _write_into(path: Path, text: str | bytes | Iterable[str], flag: str) -> None:
    """Write into a FIFO, device or terminal as ``>`` does; a FIFO nobody reads is an error, not a hang."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader
            raise InputError(f"cannot write {flag} {path}: it is a FIFO that no process is reading",
                             "start the reader first, or write to a regular file") from None
        raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}", "check the path") from None
    try:
        os.set_blocking(fd, True)  # opened without waiting for a reader; then written as `>` writes
        with os.fdopen(fd, "wb", closefd=True) as out:
            fd = -1
            for piece in _pieces(text):
                out.write(piece.encode("utf-8") if isinstance(piece, str) else piece)
    except BrokenPipeError:
        raise InputError(f"cannot write {flag} {path}: its reader went away", "keep the reader open") from None
    except OSError as exc:
        raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}", "check the path") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _replace(target: Path, path: Path, text: str | bytes | Iterable[str], flag: str, mode: int | None) -> None:
    folder = target.parent if str(target.parent) else Path(".")
    with _interrupts_raise():
        try:
            handle, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
        except OSError as exc:
            raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}",
                             "check the folder and its permissions") from None
        try:
            with os.fdopen(handle, "wb") as out:
                for piece in _pieces(text):
                    out.write(piece.encode("utf-8") if isinstance(piece, str) else piece)
                out.flush()
                os.fsync(out.fileno())
            if mode is None:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.chmod(tmp_name, mode)
            os.replace(tmp_name, target)
        except BaseException as exc:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}; the old file is unchanged",
                                 "free some space or check the path") from None
            raise


@contextmanager
def _interrupts_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Interrupted` inside the block (main thread only), so ``finally`` runs;
    the previous handlers come back after it, and the signal is delivered again to end the process as it would."""
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    try:
        for signum in _INTERRUPTS:
            if signal.getsignal(signum) is signal.SIG_DFL:  # an ignored or handled signal stays as it is
                previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: signals cannot be caught here
        pass
    try:
        yield
    except Interrupted as exc:
        for number, old in previous.items():
            signal.signal(number, old)
        previous.clear()
        os.kill(os.getpid(), exc.signum)  # the default action (or the caller's handler), as without kvplan's handler
        raise
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
