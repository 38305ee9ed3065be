"""Pure unit helpers: integer bytes in, human text out only at the edge."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kvplan.errors import InputError

if TYPE_CHECKING:
    from fractions import Fraction

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

_TOKEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_SIZE_SUFFIX = {
    "": 1, "b": 1,
    "k": KiB, "kb": 1000, "kib": KiB,
    "m": MiB, "mb": 1000**2, "mib": MiB,
    "g": GiB, "gb": 1000**3, "gib": GiB,
    "t": TiB, "tb": 1000**4, "tib": TiB,
}
_NUM_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")

#: Largest token count we accept: 2**40 tokens is far beyond any model.
MAX_TOKENS = 2**40
#: Largest byte size we accept: 2**64 bytes (16 EiB), the whole 64-bit address space. Past it a size is a typo, and
#: past float range (about 10**308) it could not even be shown as GiB.
MAX_SIZE_BYTES = 2**64


def shown_int(value: int) -> str:
    """``value`` with thousands separators, or in scientific notation (``1.00e400``) past 2**128."""
    if value.bit_length() <= 128:
        return f"{value:,}"
    digits = str(abs(value))
    return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:3]}e{len(digits) - 1}"


#: Digits a number on the command line or in a plan may have: 10**30 bytes is far past any memory.
MAX_DIGITS = 30


def _check_digits(number: str, text: object, what: str) -> None:
    if len(number.replace(".", "").lstrip("0")) > MAX_DIGITS:
        shown = str(text) if len(str(text)) <= 40 else str(text)[:37] + "..."
        raise InputError(f"{what} {shown!r} has more than {MAX_DIGITS} digits", "check the value")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def parse_tokens(text: str | int, *, what: str = "--seq-len") -> int:
    """Parse a token count: ``4096``, ``4k`` (= 4096), ``128k``, ``1M`` (= 1,048,576).

    ``k`` and ``M`` are binary (1024, 1024**2) because context lengths are.
    """
    if isinstance(text, int):
        value = text
    else:
        match = _NUM_RE.match(str(text))
        if not match or match.group(2).lower() not in _TOKEN_SUFFIX:
            raise InputError(
                f"{what} {text!r} is not a token count",
                "use an integer or a k/M suffix, e.g. 4096, 32k (= 32768) or 1M",
            )
        number, suffix = match.group(1), match.group(2).lower()
        _check_digits(number, text, what)
        scaled = _exact(number) * _TOKEN_SUFFIX[suffix]
        if scaled != int(scaled):
            raise InputError(f"{what} {text!r} is not a whole number of tokens", "e.g. 1.5k = 1536 works, 1.0001k does not")
        value = int(scaled)
    if value <= 0:
        raise InputError(f"{what} must be a positive number of tokens, got {value}", "e.g. 4096 or 32k")
    if value > MAX_TOKENS:
        raise InputError(f"{what} {shown_int(value)} tokens is absurdly large (limit {MAX_TOKENS:,})", "check the value and its suffix")
    return value


def _exact(number: str) -> int | Fraction:
    """``number`` (digits, maybe a point and digits) exactly: an int, else a Fraction (imported on first use,
    a start-up cost of a few ms)."""
    if number.isdigit():
        return int(number)
    from fractions import Fraction

    return Fraction(number)


def parse_size(text: str | int, *, what: str = "size") -> int:
    """Parse a byte size: ``80GiB``, ``80G`` (binary), ``80GB`` (decimal), ``1024``."""
    if isinstance(text, int):
        value = text
    else:
        match = _NUM_RE.match(str(text))
        if not match or match.group(2).lower() not in _SIZE_SUFFIX:
            raise InputError(f"{what} {text!r} is not a size", "use bytes or a unit, e.g. 80GiB, 24G, 512MiB, 40GB")
        _check_digits(match.group(1), text, what)
        value = int(_exact(match.group(1)) * _SIZE_SUFFIX[match.group(2).lower()])
    if value < 0:
        raise InputError(f"{what} must not be negative, got {shown_int(value)}")
    if value > MAX_SIZE_BYTES:
        raise InputError(f"{what} {shown_int(value)} bytes is past kvplan's limit of 16 EiB (2**64 bytes, the 64-bit "
                         "address space)", "check the value and its unit")
    return value


def format_bytes(num_bytes: int) -> str:
    """Binary units with two decimals: ``2.00 GiB``; plain bytes under 1 KiB; a negative size with its sign
    (``-1.20 GiB``, a budget the weights overran)."""
    if num_bytes < 0:
        return "-" + format_bytes(-num_bytes)
    if num_bytes < KiB:
        return f"{num_bytes} B"
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if num_bytes >= size:
            return f"{num_bytes / size:.2f} {unit}"
    raise AssertionError("unreachable")


def format_tokens(num_tokens: int) -> str:
    return f"{num_tokens:,}"
