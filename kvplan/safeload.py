"""Read config, plan and report files with bounded time and memory.

Every limit is checked before the data is built: the file size (read at most one byte past the
limit, so ``/dev/zero`` or a 200 MB file costs nothing), the text encoding, JSON and YAML nesting,
YAML alias expansion (a 342-byte alias bomb expands to 10**9 nodes), recursive aliases, and
integers longer than Python converts (4,300 digits). Each failure is one error line, exit 2.
YAML is parsed by libyaml: its events are counted first, then the document is loaded.
"""

from __future__ import annotations

import json
import os
import re
import select
import stat
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import InputError, KvplanError
from kvplan.limits import MAX_FILE_BYTES, MAX_NESTING, MAX_YAML_NODES

#: How long a named pipe (FIFO) given as a file may stay silent before kvplan says so.
FIFO_WAIT_S = 10.0


def read_bounded_text(
    path: Path, *, label: str, what: str = "file", error: type[KvplanError] = InputError,
    max_bytes: int = MAX_FILE_BYTES,
) -> str:
    """UTF-8 text of a regular file (or FIFO/char device, read up to ``max_bytes + 1`` bytes).

    Opened without waiting for a writer: a named pipe nobody writes to is an error at once, not a hang (a pipe
    with a writer, as ``<(cat config.json)`` gives, is read as usual)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with open(fd, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise error(f"{label} is a directory, not a {what}", f"pass the {what} itself")
            if stat.S_ISFIFO(mode) and not select.select([fd], [], [], FIFO_WAIT_S)[0]:
                raise error(f"{label} is a named pipe (FIFO) and nothing was written to it in {FIFO_WAIT_S:g} s",
                            f"pass the {what} itself, or start the process that writes the pipe first")
            os.set_blocking(fd, True)
            data = handle.read(max_bytes + 1)
    except IsADirectoryError:
        raise error(f"{label} is a directory, not a {what}", f"pass the {what} itself") from None
    except OSError as exc:
        raise error(f"cannot read {label}: {exc.strerror or exc}", "check the path and its permissions") from None
    if len(data) > max_bytes:
        raise error(
            f"{label} is larger than kvplan's {max_bytes // 1024**2} MiB limit for a {what}",
            f"a real {what} is far smaller; check that this is the right file",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{label} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            f"save the {what} as UTF-8",
        ) from None


def nesting_depth(value: Any) -> int:
    """Deepest nesting of dicts and lists, walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _too_deep(label: str) -> InputError:
    return InputError(f"{label} is nested deeper than {MAX_NESTING} levels", "a real file nests a few levels")


def load_json(text: str, *, label: str, error: type[KvplanError] = InputError, hint: str = "") -> Any:
    """``json.loads`` with nesting and integer-length limits as one-line errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{label} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                    hint or "fix the file") from None
    except RecursionError:
        raise error(f"{label} is nested deeper than {MAX_NESTING} levels", "a real file nests a few levels") from None
    except ValueError as exc:  # int longer than sys.get_int_max_str_digits()
        raise error(f"{label} holds {_number_problem(exc)}", hint or "fix the file") from None
    if nesting_depth(data) > MAX_NESTING:
        raise error(f"{label} is nested deeper than {MAX_NESTING} levels", "a real file nests a few levels")
    return data


def _number_problem(exc: BaseException) -> str:
    """What a ValueError from int()/float() conversion means, in a few words."""
    if "digits" in str(exc):
        return f"an integer with more than {sys.get_int_max_str_digits():,} digits"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"a value that cannot be read: {text[:200]}"


def _yaml_loader(*, pure: bool = False) -> Any:
    """libyaml's ``CSafeLoader``; PyYAML's pure-Python ``SafeLoader`` where PyYAML was built without it or
    when ``pure``."""
    import yaml

    return yaml.SafeLoader if pure else getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_yaml_bounds(text: str, *, label: str, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_NESTING,
                      pure: bool = False) -> None:
    """InputError when one YAML document would build more than ``max_nodes`` nodes (each alias counted as
    the nodes it stands for), nest deeper than ``max_depth`` collections, or hold an alias inside its own
    anchor. Reads the parser's events only (no node is built), so a bomb costs what its text costs."""
    import yaml

    parser = _yaml_loader(pure=pure)(text)
    weights: dict[str | None, int | None] = {}
    """anchor -> nodes it stands for (its own and those inside it, aliases expanded); None while it is open."""
    open_collections: list[tuple[str | None, int]] = []
    """(anchor, node count before it) of each collection being read."""
    total = 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, yaml.AliasEvent):
                weight = weights.get(event.anchor, 1)  # an undefined alias: PyYAML's composer says so
                if weight is None:
                    where = f" line {event.start_mark.line + 1}" if event.start_mark is not None else ""
                    raise InputError(f"{label}{where}: alias *{event.anchor} refers to itself",
                                     "a recursive YAML alias has no value; write the data out")
                total += weight
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                open_collections.append((event.anchor, total))
                total += 1
                if event.anchor is not None:
                    weights[event.anchor] = None
                if len(open_collections) > max_depth:
                    raise _too_deep(label)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, before = open_collections.pop()
                if anchor is not None:
                    weights[anchor] = total - before
            elif isinstance(event, yaml.ScalarEvent):
                total += 1
                if event.anchor is not None:
                    weights[event.anchor] = 1
            if total > max_nodes:
                raise InputError(
                    f"{label} expands to more than {max_nodes:,} YAML nodes (aliases counted where used)",
                    "a YAML alias bomb, or a file far larger than a plan or report; write the values out",
                )
    except yaml.scanner.ScannerError as exc:
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own limit (1,000), met while looking ahead
            raise _too_deep(label) from None
        raise
    finally:
        parser.dispose()


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


class AmbiguousNumber(Exception):
    """A YAML 1.1 number form the command line reads otherwise (``010000`` octal, ``1:08:16`` base 60)."""

    def __init__(self, value: str, mark: Any, meaning: Any) -> None:
        super().__init__(value, mark)
        self.value, self.mark, self.meaning = value, mark, meaning

    @property
    def form(self) -> str:
        text = self.value.lstrip("+-").lower()
        return ("base 60" if ":" in text else "hex" if text.startswith("0x") else "binary" if text.startswith("0b")
                else "digits grouped by _" if "_" in text else "octal")


#: Numbers as the command line writes them: decimal digits, no leading zero, no ``_``, no base-60 ``:``.
_PLAIN_INT = r"[-+]?(?:0|[1-9][0-9]*)"
_PLAIN_FLOAT = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"


@lru_cache(maxsize=4)
def _unique_key_loader(*, pure: bool, plain_numbers: bool = False) -> type:
    """The safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently); keys
    brought in by a merge (``<<: *base``) may be overridden, as YAML means them to be. ``plain_numbers``:
    an int or float written in a YAML 1.1 form the command line does not read the same way (octal
    ``010000`` = 4,096, base 60 ``1:08:16`` = 4,096, hex, binary, ``1_000``) raises :class:`AmbiguousNumber`."""
    import yaml

    class UniqueKeyLoader(_yaml_loader(pure=pure)):  # type: ignore[misc]
        def construct_yaml_int(self, node: Any) -> Any:
            value = super().construct_yaml_int(node)
            if plain_numbers and not re.fullmatch(_PLAIN_INT, node.value):
                raise AmbiguousNumber(node.value, node.start_mark, value)
            return value

        def construct_yaml_float(self, node: Any) -> Any:
            value = super().construct_yaml_float(node)
            if plain_numbers and not re.fullmatch(_PLAIN_FLOAT, node.value):
                raise AmbiguousNumber(node.value, node.start_mark, value)
            return value

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key_node, _value in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    if key_node.value in seen:
                        raise _DuplicateKey(key_node.value, key_node.start_mark.line + 1)
                    seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

    UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)
    UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", UniqueKeyLoader.construct_yaml_float)
    return UniqueKeyLoader


def load_yaml(text: str, *, label: str, plain_numbers: bool = False, max_nodes: int = MAX_YAML_NODES) -> Any:
    """One YAML document as plain data (``yaml.safe_load``), bounded first (:func:`check_yaml_bounds`).
    yaml.YAMLError passes through for the caller to word (it knows the file's purpose); a key given twice
    and an integer too long to read are InputErrors; with ``plain_numbers``, a number in a YAML 1.1 form
    other than plain decimal raises :class:`AmbiguousNumber` for the caller to word."""
    import yaml

    try:
        check_yaml_bounds(text, label=label, max_nodes=max_nodes)
        return _construct(text, label=label, pure=False, plain_numbers=plain_numbers)
    except yaml.YAMLError:
        if _yaml_loader() is yaml.SafeLoader:
            raise
    # NOTE: libyaml rejected the text: PyYAML's own parser words the error (what it expected and found).
    check_yaml_bounds(text, label=label, pure=True, max_nodes=max_nodes)
    return _construct(text, label=label, pure=True, plain_numbers=plain_numbers)


def _construct(text: str, *, label: str, pure: bool, plain_numbers: bool = False) -> Any:
    loader = _unique_key_loader(pure=pure, plain_numbers=plain_numbers)(text)
    try:
        return loader.get_single_data()
    except _DuplicateKey as exc:
        raise InputError(f"{label} line {exc.line}: key {exc.key!r} appears twice", "keep one of them") from None
    except ValueError as exc:  # an int past sys.get_int_max_str_digits()
        raise InputError(f"{label} holds {_number_problem(exc)}", "fix the file") from None
    except RecursionError:
        raise _too_deep(label) from None
    finally:
        loader.dispose()
