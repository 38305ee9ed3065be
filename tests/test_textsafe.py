"""kvplan.textsafe: control characters and bidi overrides are shown as escapes on a terminal."""

from __future__ import annotations

import re

from kvplan import textsafe


def test_ascii_fast_path_matches_the_whole_class() -> None:
    full = re.compile(textsafe._CONTROL_PATTERN)
    for code in range(0x3000):
        ch = chr(code)
        assert textsafe.has_control("a" + ch) == (full.search(ch) is not None), code
        assert textsafe.printable("a" + ch + "b") == full.sub(textsafe._escape, "a" + ch + "b")
