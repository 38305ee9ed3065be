"""Text that is safe to show on a terminal: control characters from a config or plan are escaped.

A config's ``_name_or_path`` or a plan's scenario name may hold ``ESC ]0;...`` (sets the window
title) or ``ESC [2J`` (clears the screen). Everything kvplan renders for a terminal goes through
:func:`printable`; YAML and JSON output keep the exact text (they escape it themselves).
"""

from __future__ import annotations

import re
from typing import Any

#: C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides that reorder
#: what a reader sees (U+202A-U+202E, U+2066-U+2069).
_CONTROL_PATTERN = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
#: The same class over ASCII text (the whole class is compiled, by re's own cache, on the first non-ASCII text).
_CONTROL_ASCII = "[\x00-\x08\x0b-\x1f\x7f]"


def _control(text: str) -> str:
    return _CONTROL_ASCII if text.isascii() else _CONTROL_PATTERN


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``)."""
    return re.sub(_control(text), _escape, text)


def has_control(text: str) -> bool:
    return re.search(_control(text), text) is not None


def terminal_safe(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples, strings) with every string made :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {terminal_safe(k): terminal_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(terminal_safe(v) for v in value)
    return value
