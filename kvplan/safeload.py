"""Read config, plan and report files with bounded time and memory.

Every limit is checked before the data is walked: the file size (read at most one byte past the
limit, so ``/dev/zero`` or a 200 MB file costs nothing), the text encoding, JSON and YAML nesting,
YAML alias expansion (a 342-byte alias bomb expands to 10**9 nodes), recursive aliases, and
integers longer than Python converts (4,300 digits). Each failure is one error line, exit 2.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from kvplan.errors import InputError, KvplanError
from kvplan.limits import MAX_FILE_BYTES, MAX_NESTING, MAX_YAML_NODES


def read_bounded_text(
    path: Path, *, label: str, what: str = "file", error: type[KvplanError] = InputError,
    max_bytes: int = MAX_FILE_BYTES,
) -> str:
    """UTF-8 text of a regular file (or FIFO/char device, read up to ``max_bytes + 1`` bytes)."""
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise error(f"{label} is a directory, not a {what}", f"pass the {what} itself")
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
    import json

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
    import sys

    if "digits" in str(exc):
        return f"an integer with more than {sys.get_int_max_str_digits():,} digits"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"a value that cannot be read: {text[:200]}"


def bounded_yaml_loader(*, label: str, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_NESTING) -> type:
    """A ``yaml.SafeLoader`` subclass that counts nodes (aliases expanded), depth and recursion while
    it composes, so nothing is constructed or walked past the limits."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._total = 0
            self._weights: dict[int, int] = {}

        def _count(self, weight: int) -> None:
            self._total += weight
            if self._total > max_nodes:
                raise InputError(
                    f"{label} expands to more than {max_nodes:,} YAML nodes (aliases counted where used)",
                    "a YAML alias bomb, or a file far larger than a plan or report; write the values out",
                )

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                anchor = self.peek_event().anchor
                target = self.anchors.get(anchor)
                if target is not None:
                    weight = self._weights.get(id(target))
                    if weight is None:
                        mark = self.peek_event().start_mark
                        raise InputError(f"{label} line {mark.line + 1}: alias *{anchor} refers to itself",
                                         "a recursive YAML alias has no value; write the data out")
                    self._count(weight)
                return super().compose_node(parent, index)
            self._depth += 1
            if self._depth > max_depth:
                raise _too_deep(label)
            before = self._total
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            self._count(1)
            self._weights[id(node)] = self._total - before
            return node

    return BoundedLoader


def load_yaml(text: str, *, label: str) -> tuple[Any, Any]:
    """(data, root node) of one YAML document, bounded; yaml.YAMLError passes through for the caller
    to word (it knows the file's purpose). Integers too long to read are an InputError."""
    loader = bounded_yaml_loader(label=label)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        try:
            data = loader.construct_document(node)
        except ValueError as exc:  # an int past sys.get_int_max_str_digits()
            raise InputError(f"{label} holds {_number_problem(exc)}", "fix the file") from None
        except RecursionError:
            raise _too_deep(label) from None
        return data, node
    finally:
        loader.dispose()
