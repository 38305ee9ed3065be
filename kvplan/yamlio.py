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


#: Characters libyaml and PyYAML always write alike: printable, no line break, no tab. A string with
#: any other character is double-quoted, and the two fold long double-quoted lines differently.
#: NOTE: spelled as the characters outside ``[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]``
#: (the same set, every code point checked): the negated class takes ~20 ms to compile at start-up, this <1 ms.
_NOT_PLAIN_PATTERN = "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]"
#: The same class over ASCII text (compiles in a tenth of the time; the whole class is compiled on the
#: first non-ASCII string).
_NOT_PLAIN_ASCII = re.compile("[\x00-\x1f\x7f]")
_NOT_PLAIN_FULL: list[re.Pattern[str]] = []


def _not_plain(text: str) -> bool:
    """Whether ``text`` holds a character outside ``_NOT_PLAIN_PATTERN``'s complement (see above)."""
    if text.isascii():
        return _NOT_PLAIN_ASCII.search(text) is not None
    if not _NOT_PLAIN_FULL:
        _NOT_PLAIN_FULL.append(re.compile(_NOT_PLAIN_PATTERN))
    return _NOT_PLAIN_FULL[0].search(text) is not None


def _c_writes_alike(data: Any) -> bool:
    """Whether every string in ``data`` (keys included) is plain text the C emitter writes byte for byte
    as the pure-Python one does."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _not_plain(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def dump(data: Any, *, pure: bool = False) -> str:
    """``yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)``: written by kvplan's block
    writer (``_block_lines``) for a plain report tree, else through libyaml when it writes the same
    bytes (every string plain text), else through PyYAML's own emitter."""
    if not pure:
        try:
            return "".join(_block_lines(data))
        except _Unsupported:
            pass
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
            search = _not_plain

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


class _Unsupported(Exception):
    """Something ``_block_lines`` leaves to PyYAML: a type other than dict, list, str, int, float, bool
    and None, a non-string key, an object reached twice (an anchor), a multi-line or complex-key
    scalar, or a quoted one that could be folded."""


#: Width PyYAML folds plain scalars at (``DUMP_OPTIONS["width"]``).
_WIDTH = 100

#: How PyYAML writes a string on one line as a mapping value (text, is plain) and as a key; filled
#: on first use of each string by PyYAML's own emitter (so its rules decide quoting and escapes).
_VALUES: dict[str, tuple[str, bool]] = {}
_KEYS: dict[str, str] = {}
_FLOATS: dict[float, str] = {}
_FOLDED: dict[tuple[str, int, int], str] = {}
_CACHE_LIMIT = 1 << 16


def _pure_line(data: Any) -> str:
    import yaml

    return yaml.dump(data, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True, width=1 << 30)


#: Plain words PyYAML's resolver reads as a bool or null (a string that starts with a letter resolves to
#: nothing else: numbers, timestamps, ``<<``, ``=`` and ``~`` start otherwise).
_NOT_STR_WORDS = frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF "
                           "null Null NULL".split())


def _quick_text(value: str) -> tuple[str, bool] | None:
    """PyYAML's one-line text of a common string without running its emitter, or None when unsure.

    A string that starts with an ASCII letter (or a digit or ``--``, with a space), ends with neither a space nor ``:``, has only characters
    both emitters write as they are (``_not_plain``) and is not a bool or null word is plain unless it
    holds ``": "`` or ``" #"`` (block indicators); then it is single-quoted (``Emitter.analyze_scalar``,
    ``choose_scalar_style``)."""
    if not value or value[-1] in " :" or value in _NOT_STR_WORDS or _not_plain(value):
        return None
    first = value[0]
    if not ("a" <= first <= "z" or "A" <= first <= "Z"):
        # NOTE: a number, or a flag like "--tp 2", with a space in it resolves to no int or float (their
        # patterns have no space); a timestamp may hold one, so "dddd-" stays with PyYAML, and so does "---".
        if " " not in value or not ("0" <= first <= "9" or (value.startswith("--") and value[2:3] != "-")) \
                or (value[4:5] == "-" and value[:4].isdigit()):
            return None
    if ": " in value or " #" in value:
        return "'" + value.replace("'", "''") + "'", False
    return value, True


def _value_text(value: str) -> tuple[str, bool]:
    known = _VALUES.get(value)
    if known is None:
        known = _quick_text(value)
        if known is None:
            line = _pure_line({"k": value})
            if not line.startswith("k: ") or line.count("\n") != 1:
                raise _Unsupported
            text = line[3:-1]
            known = (text, text == value)
        if len(_VALUES) > _CACHE_LIMIT:
            _VALUES.clear()
        _VALUES[value] = known
    return known


def _key_text(key: Any) -> str:
    if type(key) is not str:
        raise _Unsupported
    text = _KEYS.get(key)
    if text is None:
        # NOTE: a one-line simple key is styled as a value is (Emitter.choose_scalar_style); PyYAML counts the
        # key with its tag ("!!str") and writes one of 128 characters or more as a complex key ("? key").
        quick = _quick_text(key) if len(key) + len("!!str") < 128 else None
        if quick is not None:
            text = quick[0]
        else:
            line = _pure_line({key: None})
            if line.startswith("?") or not line.endswith(": null\n") or line.count("\n") != 1:
                raise _Unsupported
            text = line[: -len(": null\n")]
        if len(_KEYS) > _CACHE_LIMIT:
            _KEYS.clear()
        _KEYS[key] = text
    return text


def _scalar(value: Any, column: int, indent: int) -> str:
    """``value`` as PyYAML writes it starting at ``column`` (after ``key: `` or ``- ``), continuation
    lines of a folded plain scalar at ``indent``."""
    kind = type(value)
    if kind is str:
        text, plain = _value_text(value)
        if column + len(text) <= _WIDTH:
            return text
        key = (value, column, indent)
        folded = _FOLDED.get(key)
        if folded is None:
            if plain:
                folded = _fold_plain(text, column, indent)
            elif text.startswith("'"):
                folded = _fold_single_quoted(value, column, indent)
            else:
                raise _Unsupported  # a long double-quoted scalar: PyYAML folds it with escapes
            if len(_FOLDED) > _CACHE_LIMIT // 16:
                _FOLDED.clear()
            _FOLDED[key] = folded  # long notes and reasons recur in every report of a model or engine
        return folded
    if kind is int:
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is float:
        text = _FLOATS.get(value)
        if text is None:
            text = repr(value)
            # NOTE: PyYAML's represent_float writes repr(value) for a finite float whose repr has a point and
            # no exponent (a plain scalar its resolver reads back as a float); anything else goes to PyYAML.
            if "." in text and "e" not in text and "n" not in text:
                return text
            line = _pure_line([value])
            if not line.startswith("- ") or line.count("\n") != 1:
                raise _Unsupported
            text = line[2:-1]
            if len(_FLOATS) < _CACHE_LIMIT:
                _FLOATS[value] = text
        return text
    raise _Unsupported


def _fold_plain(text: str, column: int, indent: int) -> str:
    """PyYAML's ``Emitter.write_plain`` with split on, for text without line breaks: a single space
    reached past the width becomes a line break and ``indent`` spaces; runs of spaces are kept."""
    out: list[str] = []
    spaces = False
    start = end = 0
    size = len(text)
    while end <= size:
        ch = text[end] if end < size else None
        if spaces:
            if ch != " ":
                if start + 1 == end and column > _WIDTH:
                    out.append("\n" + " " * indent)
                    column = indent
                else:
                    out.append(text[start:end])
                    column += end - start
                start = end
        elif ch is None or ch == " ":
            out.append(text[start:end])
            column += end - start
            start = end
        if ch is not None:
            spaces = ch == " "
        end += 1
    return "".join(out)


def _fold_single_quoted(text: str, column: int, indent: int) -> str:
    """PyYAML's ``Emitter.write_single_quoted`` with split on, for text without line breaks: quotes
    doubled, a single inner space reached past the width becomes a line break and ``indent`` spaces."""
    out: list[str] = ["'"]
    column += 1
    spaces = False
    start = end = 0
    size = len(text)
    while end <= size:
        ch = text[end] if end < size else None
        if spaces:
            if ch != " ":
                if start + 1 == end and column > _WIDTH and start != 0 and end != size:
                    out.append("\n" + " " * indent)
                    column = indent
                else:
                    out.append(text[start:end])
                    column += end - start
                start = end
        elif (ch is None or ch == " " or ch == "'") and start < end:
            out.append(text[start:end])
            column += end - start
            start = end
        if ch == "'":
            out.append("''")
            column += 2
            start = end + 1
        if ch is not None:
            spaces = ch == " "
        end += 1
    out.append("'")
    return "".join(out)


#: indent -> key -> (the key's line head: ``indent`` spaces, the key as PyYAML writes it, ``:``; the same
#: without the indent, for a sequence item's first key; the column its value starts at).
_HEADS: dict[int, dict[str, tuple[str, str, int]]] = {}


def _head(key: Any, indent: int) -> tuple[str, str, int]:
    heads = _HEADS.get(indent)
    if heads is None:
        heads = _HEADS[indent] = {}
    elif len(heads) > _CACHE_LIMIT:
        heads.clear()
    inline = _key_text(key) + ":"
    full = " " * indent + inline
    heads[key] = found = (full, inline, len(full) + 1)  # the value column is the same after "- " for a first key
    return found


#: Value types of a mapping whose text ``_block_lines`` remembers (see ``_LEAVES``).
_LEAF_TYPES = frozenset({str, int, bool, type(None)})
_STR_KEYS = {str}
#: (indent, first key inline, the mapping's items, their types when one is a bool) -> its lines, for
#: mappings of ``_LEAF_TYPES`` values.
_LEAVES: dict[tuple[Any, ...], str] = {}
_LEAF_LIMIT = 4096


def _block_lines(data: Any) -> list[str]:
    """``data`` as PyYAML's block style writes it (indent 2, block sequences in mappings indentless,
    plain scalars folded at 100 columns), for plain trees; raises ``_Unsupported`` otherwise."""
    out: list[str] = []
    append = out.append
    seen: set[int] = set()
    values = _VALUES
    no_heads: dict[str, tuple[str, str, int]] = {}

    def mapping(item: dict[Any, Any], indent: int, first_inline: bool) -> None:
        leaf = None
        kinds = set(map(type, item.values())) if len(item) > 2 else None
        if kinds is not None and kinds <= _LEAF_TYPES and set(map(type, item)) == _STR_KEYS:
            # NOTE: a mapping of str, int, bool and None values only is the same text wherever it recurs at this
            # indent: the model, inputs, totals, provenance and weight parts of every scenario of a check. With a
            # bool the value types are part of the key (True == 1); floats are left out (-0.0 == 0.0). Keys
            # must be plain str (a str subclass equal to a key would hit; it goes to PyYAML below).
            leaf = (indent, first_inline, tuple(item.items()),
                    tuple(map(type, item.values())) if bool in kinds else None)
            text = _LEAVES.get(leaf)
            if text is not None:
                append(text)
                return
            start = len(out)
        first = first_inline
        heads = _HEADS.get(indent, no_heads)
        for key, value in item.items():
            known = heads.get(key) if type(key) is str else None
            if known is None:
                known = _head(key, indent)  # raises _Unsupported for a key that is not a string
                heads = _HEADS[indent]
            if first:
                head = known[1]
                first = False
            else:
                head = known[0]
            kind = type(value)
            if kind is str:
                text = (values.get(value) or _value_text(value))[0]
                if known[2] + len(text) > _WIDTH:
                    text = _scalar(value, known[2], indent + 2)
                append(head + " " + text + "\n")
            elif kind is int:
                append(f"{head} {value}\n")
            elif value is None:
                append(head + " null\n")
            elif kind is dict or kind is list:
                if id(value) in seen:
                    raise _Unsupported  # reached twice: PyYAML writes an anchor and an alias
                seen.add(id(value))
                if not value:
                    append(head + (" {}\n" if kind is dict else " []\n"))
                elif kind is dict:
                    append(head + "\n")
                    mapping(value, indent + 2, False)
                else:
                    append(head + "\n")
                    sequence(value, indent, False)
            else:
                append(head + " " + _scalar(value, known[2], indent + 2) + "\n")
        if leaf is not None:
            if len(_LEAVES) >= _LEAF_LIMIT:
                _LEAVES.clear()
            _LEAVES[leaf] = "".join(out[start:])

    def sequence(item: list[Any], indent: int, first_inline: bool) -> None:
        first = first_inline
        pad = " " * indent + "- "
        for value in item:
            head = "- " if first else pad
            first = False
            kind = type(value)
            if kind is dict or kind is list:
                if id(value) in seen:
                    raise _Unsupported
                seen.add(id(value))
                if not value:
                    append(head + ("{}\n" if kind is dict else "[]\n"))
                elif kind is dict:
                    append(head)
                    mapping(value, indent + 2, True)
                else:
                    append(head)
                    sequence(value, indent + 2, True)
            else:
                append(head + _scalar(value, indent + 2, indent + 2) + "\n")

    kind = type(data)
    if (kind is dict or kind is list) and data:
        seen.add(id(data))
        if kind is dict:
            mapping(data, 0, False)
        else:
            sequence(data, 0, False)
    else:
        raise _Unsupported  # an empty or scalar document (PyYAML adds its own endings)
    return out
