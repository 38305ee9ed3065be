from __future__ import annotations

import pytest

from kvplan.dtypes import lookup_dtype
from kvplan.errors import InputError
from kvplan.units import GiB, MiB, cdiv, format_bytes, parse_size, parse_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("4096", 4096), ("4k", 4 * 1024), ("4K", 4 * 1024), ("32k", 32 * 1024), ("128k", 128 * 1024),
     ("1M", 1024 * 1024), ("1.5k", 1536), (8192, 8192), ("0032", 32)],
)
def test_parse_tokens(text, tokens: int) -> None:
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["0", "-1", "abc", "4kb", "1.0001k", "", "2G"])
def test_parse_tokens_rejects(text: str) -> None:
    with pytest.raises(InputError):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [("80GiB", 80 * GiB), ("80G", 80 * GiB), ("80GB", 80 * 1000**3), ("512MiB", 512 * MiB), ("1024", 1024),
     ("1.5GiB", 3 * GiB // 2)],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_cdiv_and_format() -> None:
    assert (cdiv(20000, 16), cdiv(16, 16), cdiv(0, 16)) == (1250, 1, 0)
    assert format_bytes(2 * GiB) == "2.00 GiB" and format_bytes(512) == "512 B" and format_bytes(1536) == "1.50 KiB"
    # a budget the weights overran reads as a size, not as -1288490189 B
    assert format_bytes(-round(1.2 * GiB)) == "-1.20 GiB" and format_bytes(-512) == "-512 B"


@pytest.mark.parametrize(
    ("name", "canonical", "bytes_for_64"),
    [("bfloat16", "bf16", 64 * 2), ("torch.float16", "fp16", 64 * 2), ("fp8", "fp8_e4m3", 64 * 1),
     ("float32", "fp32", 64 * 4), ("q8_0", "q8_0", 64 // 32 * 34), ("q4_0", "q4_0", 64 // 32 * 18)],
)
def test_dtype_lookup(name: str, canonical: str, bytes_for_64: int) -> None:
    dtype = lookup_dtype(name)
    assert dtype.name == canonical and dtype.bytes_for(64) == bytes_for_64


def test_unknown_dtype() -> None:
    with pytest.raises(InputError, match="not a known KV dtype"):
        lookup_dtype("fp7")
