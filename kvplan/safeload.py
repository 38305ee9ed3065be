"""Read config, plan and report files with bounded time and memory.

Every limit is checked before the data is walked: the file size (read at most one byte past the
limit, so ``/dev/zero`` or a 200 MB file costs nothing), the text encoding, JSON and YAML nesting,
YAML alias expansion (a 342-byte alias bomb expands to 10**9 nodes), recursive aliases, and
integers longer than Python converts (4,300 digits). Each failure is one error line, exit 2.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
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


class _SlowPath(Exception):
    """The document has something the event reader leaves to the node-based loader (an anchor, alias,
    explicit tag, merge key, complex key, a value past a limit, or a syntax error), which words the
    error or builds the value exactly as before."""


#: Where a plan's scenarios are: their lines are kept per item (``LineMap``).
_ITEMS = ("scenarios", "<value>")

_SAFE_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "str", "timestamp", "binary")
)

class LineMap(Mapping):  # type: ignore[type-arg]
    """path -> 1-based line, as ``plan._line_map`` maps them, stored compactly: the paths under each
    item of the top-level ``scenarios`` list are kept as one shared tuple of suffixes (most items have
    the same keys) and an array of lines, not one tuple-keyed entry each."""

    __slots__ = ("_head", "_items", "_positions")

    def __init__(self) -> None:
        self._head: dict[tuple[Any, ...], int] = {}
        self._items: list[tuple[dict[tuple[Any, ...], int], Any]] = []
        self._positions: dict[tuple[tuple[Any, ...], ...], dict[tuple[Any, ...], int]] = {}

    def _add_item(self, lines: dict[tuple[Any, ...], int]) -> None:
        from array import array

        shape = tuple(lines)
        positions = self._positions.get(shape)
        if positions is None:
            positions = self._positions[shape] = {suffix: i for i, suffix in enumerate(shape)}
        self._items.append((positions, array("I", lines.values())))

    def _item(self, key: Any) -> tuple[int, tuple[Any, ...]] | None:
        if (type(key) is tuple and len(key) >= 3 and key[0] == "scenarios" and key[1] == "<value>"
                and type(key[2]) is int and 0 <= key[2] < len(self._items)):
            return key[2], key[3:]
        return None

    def __getitem__(self, key: Any) -> int:
        item = self._item(key)
        if item is None:
            return self._head[key]
        positions, lines = self._items[item[0]]
        return int(lines[positions[item[1]]])

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        yield from self._head
        for index, (positions, _lines) in enumerate(self._items):
            for suffix in positions:
                yield ("scenarios", "<value>", index) + suffix

    def __len__(self) -> int:
        return len(self._head) + sum(len(positions) for positions, _ in self._items)


def load_yaml_lines(
    text: str, *, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_NESTING
) -> tuple[Any, dict[tuple[Any, ...], int], list[tuple[tuple[Any, ...], int]]] | None:
    """(data, path -> 1-based line, duplicate keys) of one YAML document, read from libyaml's events
    with no node tree; None when libyaml is absent or the document needs the node-based loader
    (``load_yaml``: anchors, aliases, tags, merge keys, limits, errors), which then says the same as
    before. Paths are those ``plan._line_map`` writes: a key at ``path + (key,)``, its value at
    ``path + (key, "<value>")``, a list item at ``path + (index,)``."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", None)
    if loader_class is None:
        return None
    from yaml.events import (
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
    )
    from yaml.nodes import ScalarNode

    loader = loader_class(text)
    constructors = loader.yaml_constructors
    resolved: dict[tuple[str, Any], str] = {}
    duplicates: list[tuple[tuple[Any, ...], int]] = []

    def scalar(event: Any) -> Any:
        if event.anchor is not None:
            raise _SlowPath
        tag = event.tag
        if tag is None or tag == "!":
            key = (event.value, event.implicit)
            tag = resolved.get(key)
            if tag is None:
                tag = loader.resolve(ScalarNode, event.value, event.implicit)
                if len(resolved) < 4096:
                    resolved[key] = tag
        if tag not in _SAFE_SCALAR_TAGS:
            raise _SlowPath
        if tag == "tag:yaml.org,2002:str":
            return event.value
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return constructors[tag](loader, node)
        except (ValueError, yaml.YAMLError):
            raise _SlowPath from None

    try:
        loader.get_event()  # StreamStart
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # DocumentStart
        count = 0
        line_map = LineMap()
        # Frames: [container, path, next index or pending key, line target, path prefix length left
        # out of the target's keys, the current item's lines (the `scenarios` list only)].
        root: list[Any] = []
        stack: list[list[Any]] = [[root, (), None, line_map._head, 0, None]]
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                ended = stack.pop()
                if ended[5]:
                    line_map._add_item(ended[5])
                if len(stack) == 1:
                    break
                continue
            frame = stack[-1]
            container, path, pending, target, base, _item = frame
            if type(container) is dict and pending is None:  # a key
                if kind is not ScalarEvent:
                    raise _SlowPath
                key = scalar(event)  # a merge key (<<) resolves to a tag left to the node-based loader
                line = event.start_mark.line + 1
                key_path = path + (event.value,)
                suffix = key_path[base:]
                if suffix in target:
                    duplicates.append((key_path, line))
                target[suffix] = line
                frame[2] = (key, event.value)
                continue
            count += 1
            if count > max_nodes or len(stack) > max_depth:
                raise _SlowPath
            if type(container) is dict:
                key, raw = pending
                value_path = path + (raw, "<value>")
                frame[2] = None
            elif container is root:
                value_path = ()
            else:
                value_path = path + (frame[2],)
                frame[2] += 1
            if _item is not None:  # an item of `scenarios`: its own lines
                if _item:
                    line_map._add_item(_item)
                frame[5] = target = {}
                base = len(value_path)
            target.setdefault(value_path[base:], event.start_mark.line + 1)
            if kind is ScalarEvent:
                value = scalar(event)
                child = None
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.tag not in (None, "!"):
                    raise _SlowPath
                value = {} if kind is MappingStartEvent else []
                child = [value, value_path, None if kind is MappingStartEvent else 0, target, base, None]
                if value_path == _ITEMS and kind is SequenceStartEvent:
                    if line_map._items:
                        raise _SlowPath  # a second `scenarios` list
                    child[5] = {}  # marks the list whose items get their own lines
            else:  # an alias
                raise _SlowPath
            if type(container) is dict:
                container[key] = value
            else:
                container.append(value)
            if child is not None:
                stack.append(child)
            elif container is root:
                break
        loader.get_event()  # DocumentEnd
        if not loader.check_event(yaml.StreamEndEvent):
            raise _SlowPath  # a second document: the node-based loader says so
        return root[0], line_map, duplicates
    except (_SlowPath, yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()
