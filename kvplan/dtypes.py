"""KV element types: kvplan's own table of storage cost (no torch).

Each type stores ``block_elems`` values in ``block_bytes`` bytes. Plain types use a block of one
value (fp16: 1 value in 2 bytes); packed types use real block sizes (fp4: 2 values per byte;
llama.cpp q8_0: 32 values in 34 bytes, the 32 int8 values plus one fp16 scale).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InputError
from kvplan.units import cdiv


@dataclass(frozen=True, kw_only=True, slots=True)
class KvDtype:
    name: str
    block_elems: int
    """Values per storage block."""
    block_bytes: int
    """Bytes per storage block, scales included."""
    description: str = ""

    def bytes_for(self, num_elements: int) -> int:
        """Bytes to store one row of ``num_elements`` values (whole blocks)."""
        return cdiv(num_elements, self.block_elems) * self.block_bytes

    @property
    def bits_per_element(self) -> float:
        return 8 * self.block_bytes / self.block_elems


def _plain(name: str, nbytes: int, description: str) -> KvDtype:
    return KvDtype(name=name, block_elems=1, block_bytes=nbytes, description=description)


DTYPES: dict[str, KvDtype] = {
    d.name: d
    for d in (
        _plain("fp32", 4, "IEEE float32"),
        _plain("fp16", 2, "IEEE float16"),
        _plain("bf16", 2, "bfloat16"),
        _plain("fp8_e4m3", 1, "float8 e4m3 (vLLM --kv-cache-dtype fp8 / fp8_e4m3)"),
        _plain("fp8_e5m2", 1, "float8 e5m2"),
        _plain("int8", 1, "int8 values (scales not counted; see quantized types)"),
        KvDtype(name="q8_0", block_elems=32, block_bytes=34, description="llama.cpp q8_0: 32 int8 + fp16 scale"),
        KvDtype(name="q5_1", block_elems=32, block_bytes=24, description="llama.cpp q5_1"),
        KvDtype(name="q5_0", block_elems=32, block_bytes=22, description="llama.cpp q5_0"),
        KvDtype(name="q4_1", block_elems=32, block_bytes=20, description="llama.cpp q4_1"),
        KvDtype(name="q4_0", block_elems=32, block_bytes=18, description="llama.cpp q4_0: 32 4-bit + fp16 scale"),
        KvDtype(name="iq4_nl", block_elems=32, block_bytes=18, description="llama.cpp iq4_nl"),
    )
}

ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "float8_e4m3": "fp8_e4m3", "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
}


def lookup_dtype(name: str, *, what: str = "--kv-dtype") -> KvDtype:
    """Resolve a dtype name (kvplan, HF ``torch_dtype`` or vLLM ``--kv-cache-dtype`` spelling)."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = ALIASES.get(key, key)
    if key not in DTYPES:
        known = ", ".join(["auto", *DTYPES, "fp8"])
        raise InputError(f"{what} {name!r} is not a known KV dtype", f"use one of: {known}")
    return DTYPES[key]
