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
    """A cache element type: how many bytes a block of values takes, scales included."""

    name: str
    block_elems: int
    """Values per storage block."""
    block_bytes: int
    """Bytes per storage block, scales included."""
    description: str = ""
    scheme: str = "float"
    """``float`` (plain), ``ggml`` (llama.cpp block), ``grouped`` (int with per-group scale and
    zero point, Hugging Face quanto/HQQ style) or ``nvfp4`` (fp4 with an fp8 scale per 16 values)."""
    bits: int = 0
    """Bits per stored value before scales (0 for plain floats: see ``block_bytes``)."""

    def bytes_for(self, num_elements: int) -> int:
        """Bytes to store one row of ``num_elements`` values (whole blocks).

        Grouped integer types pack the values themselves and add one scale + zero point per
        group, so a partial last group costs its scale, never a whole group of padding.
        """
        if self.scheme == "grouped":
            return cdiv(num_elements * self.bits, 8) + cdiv(num_elements, self.block_elems) * GROUP_SCALE_ZERO_BYTES
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
        # NOTE: ggml block sizes (ggml-common.h): 32 values per block; the fp16 scale (and the fp16
        # min for *_1 types, the 32 high bits for q5_*) are part of the block.
        KvDtype(name="q8_0", block_elems=32, block_bytes=34, scheme="ggml", bits=8,
                description="llama.cpp q8_0: 32 int8 + fp16 scale"),
        KvDtype(name="q5_1", block_elems=32, block_bytes=24, scheme="ggml", bits=5,
                description="llama.cpp q5_1: 32 x 5 bits + fp16 scale + fp16 min"),
        KvDtype(name="q5_0", block_elems=32, block_bytes=22, scheme="ggml", bits=5,
                description="llama.cpp q5_0: 32 x 5 bits + fp16 scale"),
        KvDtype(name="q4_1", block_elems=32, block_bytes=20, scheme="ggml", bits=4,
                description="llama.cpp q4_1: 32 x 4 bits + fp16 scale + fp16 min"),
        KvDtype(name="q4_0", block_elems=32, block_bytes=18, scheme="ggml", bits=4,
                description="llama.cpp q4_0: 32 4-bit + fp16 scale"),
        KvDtype(name="iq4_nl", block_elems=32, block_bytes=18, scheme="ggml", bits=4,
                description="llama.cpp iq4_nl: 32 x 4-bit non-linear codes + fp16 scale"),
        # NOTE: NVFP4 (vLLM FullAttentionSpec comment, TRT-LLM): per 16 values, 8 bytes of packed
        # e2m1 plus one fp8 e4m3 block scale; the per-tensor fp32 global scale is not per token.
        KvDtype(name="nvfp4", block_elems=16, block_bytes=9, scheme="nvfp4", bits=4,
                description="NVFP4: 16 x fp4 e2m1 + 1 fp8 scale per 16 values"),
    )
}

ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "float8_e4m3": "fp8_e4m3", "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "fp4": "nvfp4", "uint4": "int4", "quanto_int4": "int4", "quanto_int2": "int2",
}


#: Integer types quantized per group of ``--quant-group-size`` values with a scale and a zero point
#: (Hugging Face QuantizedCache with quanto/HQQ, KIVI): name -> bits per value.
GROUPED_BITS: dict[str, int] = {"int8": 8, "int4": 4, "int2": 2}

#: Default ``--quant-group-size`` (transformers QuantizedCache ``q_group_size`` default 64).
DEFAULT_GROUP_SIZE = 64

#: Bytes of one group's scale plus zero point: both in the model's 16-bit dtype (quanto, HQQ).
GROUP_SCALE_ZERO_BYTES = 2 + 2

#: Cache types llama.cpp accepts for --cache-type-k/-v (common/arg.cpp ``kv_cache_types``).
GGML_CACHE_TYPES: tuple[str, ...] = ("fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

#: Every name ``lookup_dtype`` accepts besides aliases.
KNOWN_NAMES: tuple[str, ...] = (*DTYPES, *GROUPED_BITS)


def grouped_dtype(name: str, group_size: int = DEFAULT_GROUP_SIZE) -> KvDtype:
    """``int8``/``int4``/``int2`` with one scale and one zero point (16-bit each) per group.

    A group of G values costs ``G * bits / 8 + 4`` bytes: int4 at G = 64 is 32 + 4 = 36 bytes,
    4.5 bits per value.
    """
    bits = GROUPED_BITS[name]
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise InputError(f"--quant-group-size must be a positive integer, got {group_size!r}", "e.g. 32, 64 or 128")
    if group_size * bits % 8:
        raise InputError(
            f"--quant-group-size {group_size} does not pack into whole bytes at {bits} bits per value",
            f"use a multiple of {8 // bits}",
        )
    return KvDtype(
        name=name,
        block_elems=group_size,
        block_bytes=group_size * bits // 8 + GROUP_SCALE_ZERO_BYTES,
        scheme="grouped",
        bits=bits,
        description=f"{name}: {bits}-bit values, fp16 scale + fp16 zero point per {group_size} values",
    )


def lookup_dtype(name: str, *, what: str = "--kv-dtype", group_size: int = DEFAULT_GROUP_SIZE) -> KvDtype:
    """Resolve a dtype name (kvplan, HF ``torch_dtype`` or vLLM ``--kv-cache-dtype`` spelling).

    ``int8``, ``int4`` and ``int2`` are group-quantized: ``group_size`` values share a 16-bit scale
    and a 16-bit zero point (``--quant-group-size``).
    """
    key = str(name).strip().lower().removeprefix("torch.")
    key = ALIASES.get(key, key)
    if key in GROUPED_BITS:
        return grouped_dtype(key, group_size)
    if key not in DTYPES:
        known = ", ".join(["auto", *KNOWN_NAMES, "fp8"])
        raise InputError(f"{what} {name!r} is not a known KV dtype", f"use one of: {known}")
    return DTYPES[key]
