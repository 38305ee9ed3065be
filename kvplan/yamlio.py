"""YAML in and out through libyaml's C loader and dumper when PyYAML was built with them (its wheels
are), the pure-Python ones otherwise. Both write the same bytes for kvplan's reports
(``tests/test_yamlio.py`` checks saved reports against each); PyYAML is imported on first use.
"""

from __future__ import annotations

import re
from typing import Any

#: The dump options of every report: key order kept, UTF-8 text as is, lines folded at 100 columns.
DUMP_OPTIONS: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "width": 100}


def safe_loader(*, pure: bool = False) -> Any:
    """``yaml.CSafeLoader`` (libyaml), or ``yaml.SafeLoader`` when absent or ``pure``."""
    import yaml

    return yaml.SafeLoader if pure else getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_dumper(*, pure: bool = False) -> Any:
    """``yaml.CSafeDumper`` (libyaml), or ``yaml.SafeDumper`` when absent or ``pure``."""
    import yaml

    return yaml.SafeDumper if pure else getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """``yaml.safe_load``. A document libyaml rejects is parsed again by the pure-Python loader, so
    the error (message and line) is the one PyYAML's own parser gives."""
    import yaml

    loader = safe_loader()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        if loader is yaml.SafeLoader:
            raise
    return yaml.load(text, Loader=yaml.SafeLoader)


def compose(text: str) -> Any:
    """``yaml.compose`` with the safe loader (nodes with line marks)."""
    import yaml

    loader = safe_loader()
    try:
        return yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        if loader is yaml.SafeLoader:
            raise
    return yaml.compose(text, Loader=yaml.SafeLoader)


#: Characters libyaml and PyYAML always write alike: printable, no line break, no tab. A string with
#: any other character is double-quoted, and the two fold long double-quoted lines differently.
_NOT_PLAIN_TEXT = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")


def _c_writes_alike(data: Any) -> bool:
    """Whether every string in ``data`` (keys included) is plain text the C emitter writes byte for byte
    as the pure-Python one does."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _NOT_PLAIN_TEXT.search(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def dump(data: Any, *, pure: bool = False) -> str:
    """``yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)``: through libyaml when
    it writes the same bytes (every string plain text), else through PyYAML's own emitter."""
    import yaml

    if not pure and hasattr(yaml, "CSafeDumper"):
        try:
            return yaml.dump(data, Dumper=_fast_dumper(), **DUMP_OPTIONS)
        except _NotAlike:
            pass
    return yaml.dump(data, Dumper=safe_dumper(pure=True), **DUMP_OPTIONS)


_FAST_DUMPER: Any = None


class _Fallback(Exception):
    """The fast representer met something only PyYAML's own represents faithfully."""


class _NotAlike(Exception):
    """A string libyaml would write differently from PyYAML (see ``_c_writes_alike``)."""


def _fast_dumper() -> Any:
    """``yaml.CSafeDumper`` (raising ``_NotAlike`` for a string it would write differently) with two
    shortcuts that leave every node as SafeRepresenter makes it: plain trees (dict, list, str, int, float, bool, None; no object reached twice, so no anchors) are
    turned into nodes directly, and libyaml's per-scalar tag resolution is memoised."""
    global _FAST_DUMPER
    if _FAST_DUMPER is not None:
        return _FAST_DUMPER
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    str_tag, int_tag, bool_tag = "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool"
    null_tag, map_tag, seq_tag = "tag:yaml.org,2002:null", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
    resolved: dict[tuple[str, tuple[bool, bool]], str] = {}

    class FastDumper(yaml.CSafeDumper):  # type: ignore[misc, name-defined]
        def represent(self, data: Any) -> None:
            seen: set[int] = set()
            search = _NOT_PLAIN_TEXT.search

            def node(item: Any) -> Any:
                kind = type(item)
                if kind is str:
                    if search(item):
                        raise _NotAlike
                    return ScalarNode(str_tag, item)
                if kind is int:
                    return ScalarNode(int_tag, str(item))
                if kind is bool:
                    return ScalarNode(bool_tag, "true" if item else "false")
                if item is None:
                    return ScalarNode(null_tag, "null")
                if kind is float:
                    return self.represent_float(item)
                if kind is dict or kind is list:
                    if id(item) in seen:  # reached twice: PyYAML writes an anchor and an alias
                        raise _Fallback
                    seen.add(id(item))
                    if kind is dict:
                        return MappingNode(map_tag, [(node(k), node(v)) for k, v in item.items()], flow_style=False)
                    return SequenceNode(seq_tag, [node(v) for v in item], flow_style=False)
                raise _Fallback

            try:
                tree = node(data)
            except _Fallback:
                if not _c_writes_alike(data):
                    raise _NotAlike from None
                yaml.CSafeDumper.represent(self, data)
                return
            self.serialize(tree)

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            if kind is not ScalarNode:
                return yaml.CSafeDumper.resolve(self, kind, value, implicit)  # type: ignore[no-any-return]
            key = (value, implicit)
            tag = resolved.get(key)
            if tag is None:
                if len(resolved) > 8192:
                    resolved.clear()
                tag = resolved[key] = yaml.CSafeDumper.resolve(self, kind, value, implicit)
            return tag

    _FAST_DUMPER = FastDumper
    return FastDumper
