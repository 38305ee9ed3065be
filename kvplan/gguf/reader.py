"""Read a GGUF file's header (metadata key/values and the tensor table), never its tensor data.

The layout is llama.cpp's (ggml/docs/gguf.md): magic ``GGUF``, version (2 or 3), tensor count,
key/value count, the key/values, the tensor infos, padding to ``general.alignment``, then data.
This parser reads through a :class:`ByteSource` (a local file, or ranged reads of a Hub file), so
memory and time depend on the header's size, not the file's. Every count and length is checked
against the bytes left in the file before anything is allocated: a cut or corrupt header is a
one-line :class:`~kvplan.errors.ConfigError`, never a traceback or a huge allocation.

The value and tensor type tables come from llama.cpp's own ``gguf`` package (``kvplan[gguf]``).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvplan.errors import ConfigError

MAGIC = b"GGUF"
#: NOTE: v1 (2023) counted in u32; v2 moved every count and length to u64 and v3 only added big-endian files, so
#: v2 and v3 read alike (gguf-py's GGUFReader reads both with u64 counts and refuses v1).
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: ggml tensors have at most 4 dimensions (GGML_MAX_DIMS).
MAX_DIMS = 4
#: Arrays longer than this are summarised (tokenizer vocabularies), not kept.
MAX_KEPT_ARRAY = 1 << 16
#: Bounds on what a header may claim, besides the file's size: a corrupt or hostile count must cost seconds, not
#: hours. NOTE: real GGUFs hold 20-60 metadata keys, a few hundred to ~2,000 tensors, and vocabularies of up to
#: 262,144 tokens (Gemma 3) with up to ~500,000 merges.
MAX_KV_COUNT = 1 << 16
MAX_TENSOR_COUNT = 1 << 20
"""64 tensors per layer at kvplan's 16,384-layer limit (:data:`kvplan.limits.MAX_LAYERS`)."""
MAX_ARRAY_LENGTH = 1 << 24
MAX_STRING_BYTES = 1 << 24
MAX_KEPT_BYTES = 1 << 26
"""64 MiB of kept text in all: a 65,536-entry vocabulary of long tokens is a few MiB, a chat template ~100 KiB."""
"""16 MiB, kvplan's limit for a config.json; the longest real strings are chat templates of ~100 KiB."""
#: Smallest possible encodings, for checking counts against the bytes left before reading.
MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, one-byte value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, type, offset

# GGUF value type ids (the file format's own numbering; gguf.GGUFValueType names them).
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
    6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")


def gguf_module() -> Any:
    """llama.cpp's ``gguf`` package, or a ConfigError saying how to install it."""
    try:
        import gguf
    except ImportError:
        raise ConfigError(
            "reading a GGUF file needs llama.cpp's gguf package, which is not installed",
            "pip install '.[gguf]' in the kvplan checkout (or: pip install gguf)",
        ) from None
    return gguf


class ByteSource:
    """Random access to a file's bytes: ``size`` and ``read(offset, n)`` (short only at the end)."""

    label: str
    size: int

    def read(self, offset: int, n: int) -> bytes:
        raise NotImplementedError


class LocalSource(ByteSource):
    def __init__(self, path: str) -> None:
        self.label = path
        try:
            # NOTE: opened without waiting, then refused unless regular: a header is read by seeking, and a FIFO with
            # no writer would block the open forever.
            self._file = open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
            info = os.fstat(self._file.fileno())
            self.size = info.st_size
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the path and its permissions") from None
        if not stat.S_ISREG(info.st_mode):
            self._file.close()
            raise ConfigError(f"{path} is not a regular file (a pipe, device or directory); a GGUF header is read by "
                              "seeking", "pass the .gguf file itself")
        try:
            os.set_blocking(self._file.fileno(), True)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the path and its permissions") from None

    def read(self, offset: int, n: int) -> bytes:
        self._file.seek(offset)
        return self._file.read(n)

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True, kw_only=True, slots=True)
class ArraySummary:
    """A metadata array too long to keep (a tokenizer vocabulary): its element type and length."""

    element_type: str
    length: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    """ggml order: ``shape[0]`` is the row length (the contiguous dimension)."""
    ggml_type: int
    type_name: str
    offset: int
    """Offset of the data from the start of the file's data section."""
    nbytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GgufHeader:
    label: str
    version: int
    file_size: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    """Where the tensor data begins (after the header and its alignment padding)."""
    header_bytes: int
    """Bytes of the file the parser read."""

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None


class _Cursor:
    """Sequential reads over a ByteSource with a growing buffer, and bounds checks that name the file."""

    def __init__(self, source: ByteSource, *, chunk: int = 1 << 16) -> None:
        self.source = source
        self.pos = 0
        self._buf = b""
        self._buf_start = 0
        self._chunk = chunk
        self.read_bytes = 0
        self.kept_bytes = 0
        """Bytes of the strings kept (keys, tensor names, text values), bounded by :data:`MAX_KEPT_BYTES`."""

    @property
    def left(self) -> int:
        return self.source.size - self.pos

    def cut(self, what: str) -> ConfigError:
        return ConfigError(
            f"{self.source.label} is not a complete GGUF file: it ends inside the header ({what} at byte {self.pos:,} "
            f"of {self.source.size:,})",
            "the download is truncated or the file is corrupt; download it again",
        )

    def take(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self.cut(what)
        end = self.pos + n
        if not (self._buf_start <= self.pos and end <= self._buf_start + len(self._buf)):
            want = max(n, self._chunk)
            self._chunk = min(self._chunk * 2, 64 << 20)
            data = self.source.read(self.pos, min(want, self.left))
            self.read_bytes += len(data)
            if len(data) < n:
                raise self.cut(what)
            self._buf, self._buf_start = data, self.pos
        start = self.pos - self._buf_start
        self.pos = end
        return self._buf[start:start + n]

    def unpack(self, fmt: str, size: int, what: str) -> Any:
        return struct.unpack(fmt, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return self.unpack("<I", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("<Q", 8, what)

    def skip(self, n: int, what: str) -> None:
        """Step over ``n`` bytes without reading them (a vocabulary's scores: no memory, no Hub download)."""
        if n > self.left:
            raise self.cut(what)
        self.pos += n

    def skip_strings(self, n: int, what: str) -> None:
        """Step over ``n`` length-prefixed strings, reading only their lengths (a tokenizer's vocabulary)."""
        unpack = _U64.unpack_from
        while n:
            if not self._buf_start <= self.pos < self._buf_start + len(self._buf) - 8:
                self.skip(self.u64(f"length of {what}"), what)  # reads the next buffer
                n -= 1
                continue
            # NOTE: a tight loop over the buffer (a vocabulary of 262,144 tokens, or a hostile 2**24 of them)
            buf, at, end, done = self._buf, self.pos - self._buf_start, len(self._buf) - 8, 0
            while done < n and at <= end:
                at += 8 + unpack(buf, at)[0]
                done += 1
            self.pos = self._buf_start + at
            n -= done
            if self.pos > self.source.size:
                raise self.cut(what)

    def count(self, what: str, *, each: int, version: int, most: int | None = None) -> int:
        """A u64 count (every version kvplan reads), refused when ``count * each`` bytes cannot fit in the file or
        it is past ``most``."""
        value = self.u64(what)
        if most is not None and value > most:
            raise ConfigError(
                f"{self.source.label}: {what} is {value:,}, past kvplan's limit of {most:,} (real GGUF files stay far "
                "below it)",
                "the GGUF header is corrupt; download the file again",
            )
        if value * each > self.left:
            raise ConfigError(
                f"{self.source.label}: {what} is {value:,}, but only {self.left:,} bytes of the file are left "
                f"(each needs at least {each})",
                "the GGUF header is corrupt; download the file again",
            )
        return value

    def string(self, what: str, version: int) -> bytes:
        length = self.count(f"length of {what}", each=1, version=version, most=MAX_STRING_BYTES)
        self.kept_bytes += length
        if self.kept_bytes > MAX_KEPT_BYTES:
            raise ConfigError(
                f"{self.source.label}: the header's keys, names and text values pass {MAX_KEPT_BYTES // 1024**2} MiB at "
                f"{what} (real GGUF headers keep a few MiB; long vocabularies are counted, not kept)",
                "the GGUF header is corrupt; download the file again",
            )
        return self.take(length, what)


def read_header(source: ByteSource) -> GgufHeader:
    """Parse the GGUF header of ``source``: metadata and tensor infos, no tensor data."""
    gguf = gguf_module()
    cur = _Cursor(source)
    label = source.label
    magic = cur.take(4, "magic") if source.size >= 4 else b""
    if magic != MAGIC:
        raise ConfigError(
            f"{label} is not a GGUF file (it starts with {magic[:4]!r}, not b'GGUF')",
            "pass a .gguf file from llama.cpp's converter, or a Hugging Face config.json",
        )
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        old = " (GGUF v1, 2023, counted in 32 bits; llama.cpp and gguf-py no longer read it)" if version == 1 else ""
        raise ConfigError(
            f"{label}: GGUF version {version} is not supported{old}; kvplan reads versions 2 and 3",
            "re-convert the model with a current llama.cpp (convert_hf_to_gguf.py)",
        )
    n_tensors = cur.count("tensor count", each=MIN_TENSOR_INFO_BYTES, version=version, most=MAX_TENSOR_COUNT)
    n_kv = cur.count("metadata key/value count", each=MIN_KV_BYTES, version=version, most=MAX_KV_COUNT)
    metadata: dict[str, Any] = {}
    for index in range(n_kv):
        key = _text(cur.string(f"key {index}", version), label, f"key {index}")
        vtype = cur.u32(f"type of {key}")
        metadata[key] = _value(cur, vtype, key, version)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise ConfigError(f"{label}: general.alignment = {alignment!r} is not a power of two", "the file is corrupt")

    sizes = gguf.GGML_QUANT_SIZES
    tensors: list[TensorInfo] = []
    for index in range(n_tensors):
        name = _text(cur.string(f"name of tensor {index}", version), label, f"tensor {index}")
        n_dims = cur.u32(f"dimensions of {name}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise ConfigError(f"{label}: tensor {name} has {n_dims} dimensions (ggml allows 1-{MAX_DIMS})", "the file is corrupt")
        shape = tuple(cur.u64(f"shape of {name}") for _ in range(n_dims))
        ggml_type = cur.u32(f"type of {name}")
        offset = cur.u64(f"offset of {name}")
        try:
            qtype = gguf.GGMLQuantizationType(ggml_type)
            block, type_size = sizes[qtype]
        except (ValueError, KeyError):
            raise ConfigError(
                f"{label}: tensor {name} has ggml type {ggml_type}, which this gguf package does not know",
                "upgrade the gguf package (pip install -U gguf)",
            ) from None
        if shape[0] % block:
            raise ConfigError(
                f"{label}: tensor {name} rows of {shape[0]} values are not whole {qtype.name} blocks of {block}",
                "the file is corrupt",
            )
        elements = 1
        for dim in shape:
            elements *= dim
        tensors.append(TensorInfo(name=name, shape=shape, ggml_type=ggml_type, type_name=qtype.name, offset=offset,
                                  nbytes=elements // block * type_size))
    data_offset = -(-cur.pos // alignment) * alignment
    for tensor in tensors:
        if data_offset + tensor.offset + tensor.nbytes > source.size:
            raise ConfigError(
                f"{label}: tensor {tensor.name} ends at byte {data_offset + tensor.offset + tensor.nbytes:,}, past the "
                f"end of the file ({source.size:,} bytes)",
                "the download is truncated; download the file again",
            )
    return GgufHeader(label=label, version=version, file_size=source.size, metadata=metadata, tensors=tuple(tensors),
                      data_offset=data_offset, header_bytes=cur.read_bytes)


def _text(raw: bytes, label: str, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{label}: {what} is not UTF-8", "the GGUF header is corrupt") from None


def _value(cur: _Cursor, vtype: int, key: str, version: int) -> Any:
    if vtype in _SCALARS:
        fmt, size = _SCALARS[vtype]
        return cur.unpack(fmt, size, key)
    if vtype == _STRING:
        return _text(cur.string(key, version), cur.source.label, key)
    if vtype == _ARRAY:
        etype = cur.u32(f"element type of {key}")
        if etype == _ARRAY:
            raise ConfigError(f"{cur.source.label}: {key} is an array of arrays", "the GGUF header is corrupt")
        if etype == _STRING:
            length = cur.count(f"length of {key}", each=8, version=version, most=MAX_ARRAY_LENGTH)
            read: Callable[[], Any] = lambda: _text(cur.string(key, version), cur.source.label, key)  # noqa: E731
        elif etype in _SCALARS:
            fmt, size = _SCALARS[etype]
            length = cur.count(f"length of {key}", each=size, version=version, most=MAX_ARRAY_LENGTH)
            if length > MAX_KEPT_ARRAY:
                cur.skip(length * size, key)  # a vocabulary's scores or types: skipped, not read
                return ArraySummary(element_type=fmt, length=length)
            raw = cur.take(length * size, key)
            return list(struct.unpack(f"<{length}{fmt[1]}", raw))
        else:
            raise ConfigError(f"{cur.source.label}: {key} has unknown element type {etype}", "the GGUF header is corrupt")
        if length > MAX_KEPT_ARRAY:
            cur.skip_strings(length, key)
            return ArraySummary(element_type="str", length=length)
        return [read() for _ in range(length)]
    raise ConfigError(f"{cur.source.label}: {key} has unknown value type {vtype}", "the GGUF header is corrupt")
