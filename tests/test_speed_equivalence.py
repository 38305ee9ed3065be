"""The start-up and per-scenario shortcuts of the speed work write exactly what they replace."""

from __future__ import annotations

import random
import re

import yaml

from kvplan import yamlio
from kvplan.units import parse_size, parse_tokens


def _pyyaml(data: object) -> str:
    return yaml.dump(data, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True, width=100)


def test_floats_are_written_as_pyyaml_writes_them() -> None:
    rng = random.Random(16)
    values = [rng.random() * 10 ** rng.randint(-12, 22) * rng.choice((1, -1)) for _ in range(3000)]
    values += [0.0, -0.0, 1.0, 0.5, 1e16, 1e-5, 123456789012345.6, float("inf"), float("-inf"), float("nan")]
    for value in values:
        data = {"ratio": value, "nested": {"values": [value, {"x": value}]}}
        assert yamlio.dump(data) == _pyyaml(data), value


def test_plain_text_class_is_the_complement_it_replaced() -> None:
    # the class as first written (slow to compile); its complement must flag the very same code points
    written = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
    every = "".join(map(chr, range(0x110000)))
    full = re.compile(yamlio._NOT_PLAIN_PATTERN)
    assert [m.start() for m in written.finditer(every)] == [m.start() for m in full.finditer(every)]
    # the ASCII fast path flags the same characters as the whole class, one code point at a time
    assert all(yamlio._not_plain(ch) == (full.search(ch) is not None) for ch in every[:0x800])


def test_control_characters_ascii_fast_path_matches_the_whole_class() -> None:
    from kvplan import textsafe

    full = re.compile(textsafe._CONTROL_PATTERN)
    for code in range(0x3000):
        ch = chr(code)
        assert textsafe.has_control("a" + ch) == (full.search(ch) is not None), code
        assert textsafe.printable("a" + ch + "b") == full.sub(textsafe._escape, "a" + ch + "b")


def test_whole_and_fractional_counts_parse_exactly() -> None:
    assert parse_tokens("32k") == 32 * 1024  # whole: no Fraction
    assert parse_tokens("1.5k") == 3 * 1024 // 2  # fractional: exact through Fraction
    assert parse_tokens("0032") == 32
    assert parse_size("80GB") == 80 * 1000**3
    assert parse_size("1.5GiB") == 3 * 1024**3 // 2
