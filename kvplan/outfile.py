"""``--output FILE``: written whole or not at all, never over the command's own input.

The report goes to a temporary file in the same folder, is flushed to disk, then renamed over
FILE, so a full disk, a size limit or a concurrent writer never leaves half a report or destroys
the old one. ``--output -`` means stdout.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kvplan.errors import InputError


def is_stdout(path: Path | str) -> bool:
    return str(path) == "-"


def refuse_inputs(output: Path, inputs: Iterable[Path | str | None]) -> None:
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
        except OSError:
            continue
        if same:
            raise InputError(
                f"--output {output} is the command's own input ({item}); writing the report there would destroy it",
                "write the report to another file, e.g. --output report.yaml",
            )


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, in order) to ``path`` through a temporary file in the same
    folder and a rename."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"cannot write --output {path}: it is a directory", "name a file, e.g. --output report.yaml")
    try:
        existing_mode = os.stat(path).st_mode & 0o7777 if path.exists() else None
    except OSError:
        existing_mode = None
    try:
        handle, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write --output {path}: {exc.strerror or exc}", "check the folder and its permissions") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for piece in [text] if isinstance(text, str) else text:
                out.write(piece)
            out.flush()
            os.fsync(out.fileno())
        if existing_mode is None:
            umask = os.umask(0)
            os.umask(umask)
            existing_mode = 0o666 & ~umask
        os.chmod(tmp_name, existing_mode)
        os.replace(tmp_name, path)
    except OSError as exc:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise InputError(f"cannot write --output {path}: {exc.strerror or exc}; the old file is unchanged",
                         "free some space or check the path") from None
