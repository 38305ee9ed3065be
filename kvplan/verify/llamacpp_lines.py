"""llama.cpp's cache lines: read from its log, and written from kvplan's numbers in the same format.

llama.cpp 0.3.36 (llama-cpp-python's vendored copy) logs, for every cache it makes
(``src/llama-kv-cache.cpp``, ``llama-kv-cache-iswa.cpp``, ``llama-memory-recurrent.cpp``)::

    llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells
    llama_kv_cache:        CPU KV buffer size =     0.40 MiB
    llama_kv_cache: size =    0.40 MiB (   768 cells,   2 layers,  2/2 seqs), K (q8_0):    0.20 MiB, V (q8_0): ...
    llama_memory_recurrent: size =    0.06 MiB (     2 cells,   4 layers,  2 seqs  0 rs_seq), R (f32): ...

and, at DEBUG level, which layers each cache holds (``llama_kv_cache: layer   3: dev = CPU``). DeepSeek-V4's
compressor states (``src/llama-kv-cache-dsv4.cpp``, ``llama_dsv4_comp_state``) log::

    llama_dsv4_comp_state:        CPU DSV4 csa state buffer size =     0.02 MiB
    llama_dsv4_comp_state: csa ratio = 4, state = 8 x 128, streams = 2, rs_seq = 0, layers = 1, size =    0.02 MiB
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.units import MiB


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheFigures:
    """One cache: llama.cpp's ``size = ...`` line in numbers (logged) or kvplan's (predicted)."""

    name: str
    """``base`` (the non-SWA or only KV cache), ``swa``, ``recurrent``; DeepSeek-V4's ``csa``, ``hca``, ``lid`` and
    their compressor states ``csa_state``, ``hca_state``, ``lid_state``."""
    cells: int
    layers: int
    seqs: int
    streams: int
    """KV caches: streams (1 unified, else one per sequence); recurrent and compressor states: ``rs_seq``
    snapshots (0). A state's ``cells`` are its rows per stream, its ``seqs`` its streams."""
    k_type: str
    v_type: str
    k_bytes: int | None = None
    """K (recurrent: R, state: kv) bytes; None where only the log's MiB are known."""
    v_bytes: int | None = None
    """V (recurrent: S, state: score) bytes."""
    k_mib: str = ""
    """As llama.cpp prints them: ``%.2f`` MiB of K, V, their sum, and the cache's buffers."""
    v_mib: str = ""
    size_mib: str = ""
    buffer_mib: str | None = None
    buffer_bytes: int | None = None
    layer_indices: tuple[int, ...] = ()
    line: str = ""
    ratio: int | None = None
    """A compressor state's compression ratio."""
    width: int | None = None
    """A compressor state's row width (``n_embd_state``)."""

    @property
    def kind(self) -> str:
        if self.name == "recurrent":
            return "recurrent"
        return "state" if self.name.endswith("_state") else "kv"


_KV_SIZE = re.compile(
    r"^llama_kv_cache: size = *(?P<size>[\d.]+) MiB \( *(?P<cells>\d+) cells, *(?P<layers>\d+) layers, "
    r"*(?P<seqs>\d+)/(?P<streams>\d+) seqs\), K \((?P<kt>\w+)\): *(?P<k>[\d.]+) MiB, V \((?P<vt>\w+)\): *(?P<v>[\d.]+) MiB")
_RS_SIZE = re.compile(
    r"^llama_memory_recurrent: size = *(?P<size>[\d.]+) MiB \( *(?P<cells>\d+) cells, *(?P<layers>\d+) layers, "
    r"*(?P<seqs>\d+) seqs *(?P<rs>\d+) rs_seq\), R \((?P<kt>\w+)\): *(?P<k>[\d.]+) MiB, S \((?P<vt>\w+)\): "
    r"*(?P<v>[\d.]+) MiB(?:, P \((?P<pt>\w+)\): *(?P<p>[\d.]+) MiB)?")
_BUFFER = re.compile(r"^(?P<who>llama_kv_cache|llama_memory_recurrent): *(?P<dev>\S+) (?:KV|RS) buffer size = "
                     r"*(?P<mib>[\d.]+) MiB")
_ISWA = re.compile(r"^llama_kv_cache_iswa: creating +(?P<which>non-SWA|SWA) KV cache")
#: DeepSeek-V4's own caches after its raw iSWA one (src/llama-kv-cache-dsv4.cpp), named as kvplan's engine log names them.
_DSV4 = re.compile(r"^llama_kv_cache_dsv4: creating DSV4 (?P<which>CSA compressed|HCA compressed|lightning-indexer) KV cache")
DSV4_NAMES = {"CSA compressed": "csa", "HCA compressed": "hca", "lightning-indexer": "lid"}
_LAYER = re.compile(r"^(?:llama_kv_cache|llama_memory_recurrent|llama_dsv4_comp_state)[:,] layer +(?P<il>\d+): dev = ")
_STATE_BUFFER = re.compile(r"^llama_dsv4_comp_state: *(?P<dev>\S+) DSV4 (?P<name>\w+) state buffer size = "
                           r"*(?P<mib>[\d.]+) MiB")
_STATE_SIZE = re.compile(
    r"^llama_dsv4_comp_state: (?P<name>\w+) ratio = (?P<ratio>\d+), state = (?P<rows>\d+) x (?P<width>\d+), "
    r"streams = (?P<streams>\d+), rs_seq = (?P<rs>\d+), layers = (?P<layers>\d+), size = *(?P<size>[\d.]+) MiB")


def parse_log(lines: Sequence[str]) -> list[CacheFigures]:
    """Every cache llama.cpp logged, in the order it made them."""
    caches: list[CacheFigures] = []
    which = "base"
    buffers: list[str] = []
    layers: list[int] = []
    for line in lines:
        if match := _ISWA.match(line):
            which = "swa" if match["which"] == "SWA" else "base"
        elif match := _DSV4.match(line):
            which = DSV4_NAMES[match["which"]]
        elif match := _LAYER.match(line):
            layers.append(int(match["il"]))
        elif (match := _BUFFER.match(line)) or (match := _STATE_BUFFER.match(line)):
            buffers.append(match["mib"])
        elif match := _STATE_SIZE.match(line):
            # NOTE: a state prints no K/V split: its kv and score tensors are the same size, float32.
            caches.append(CacheFigures(
                name=f"{match['name']}_state", cells=int(match["rows"]), layers=int(match["layers"]),
                seqs=int(match["streams"]), streams=int(match["rs"]), k_type="f32", v_type="f32",
                size_mib=match["size"], buffer_mib=f"{sum(float(b) for b in buffers):.2f}" if buffers else None,
                layer_indices=tuple(layers), line=line.strip(), ratio=int(match["ratio"]), width=int(match["width"])))
            buffers, layers, which = [], [], "base"
        elif (match := _KV_SIZE.match(line)) or (match := _RS_SIZE.match(line)):
            recurrent = line.startswith("llama_memory_recurrent")
            buffer_mib = f"{sum(float(b) for b in buffers):.2f}" if buffers else None
            caches.append(CacheFigures(
                name="recurrent" if recurrent else which, cells=int(match["cells"]), layers=int(match["layers"]),
                seqs=int(match["seqs"]), streams=int(match["rs"] if recurrent else match["streams"]),
                k_type=match["kt"], v_type=match["vt"], k_mib=match["k"], v_mib=match["v"], size_mib=match["size"],
                buffer_mib=buffer_mib, layer_indices=tuple(layers), line=line.strip()))
            buffers, layers, which = [], [], "base"
    return caches


def _mib_f32(num_bytes: int) -> str:
    """``%.2f`` of ``(float) bytes / (1024.0f * 1024.0f)``, as llama.cpp prints a cache's K, V and size."""
    return f"{ctypes.c_float(num_bytes).value / MiB:.2f}"


def _mib(num_bytes: int) -> str:
    """``%.2f`` of ``bytes / 1024.0 / 1024.0`` (double), as llama.cpp prints a buffer's size."""
    return f"{num_bytes / MiB:.2f}"


def predicted_figures(name: str, *, cells: int, layers: int, seqs: int, streams: int, k_type: str, v_type: str,
                      k_bytes: int, v_bytes: int, layer_indices: tuple[int, ...] = (), buffer_bytes: int | None = None,
                      logged_layers: int | None = None, ratio: int | None = None,
                      width: int | None = None) -> CacheFigures:
    """kvplan's numbers for one cache, with the line llama.cpp would print for them."""
    size = k_bytes + v_bytes
    shown = logged_layers if logged_layers is not None else layers
    buffer = size if buffer_bytes is None else buffer_bytes
    if name.endswith("_state"):
        # NOTE: llama_dsv4_comp_state's line: n_stream, n_rs_seq, layers.size(), total_size() (its buffers).
        line = (f"llama_dsv4_comp_state: {name.removesuffix('_state')} ratio = {ratio}, state = {cells} x {width}, "
                f"streams = {seqs}, rs_seq = {streams}, layers = {shown}, size = {_mib(buffer):>7} MiB")
        return CacheFigures(name=name, cells=cells, layers=shown, seqs=seqs, streams=streams, k_type=k_type,
                            v_type=v_type, k_bytes=k_bytes, v_bytes=v_bytes, size_mib=_mib(buffer),
                            buffer_mib=_mib(buffer) if shown else None, buffer_bytes=buffer if shown else None,
                            layer_indices=layer_indices, line=line, ratio=ratio, width=width)
    if name == "recurrent":
        line = (f"llama_memory_recurrent: size = {_mib_f32(size):>7} MiB ({cells:6d} cells, {shown:3d} layers, "
                f"{seqs:2d} seqs {streams:2d} rs_seq), R ({k_type}): {_mib_f32(k_bytes):>7} MiB, S ({v_type}): "
                f"{_mib_f32(v_bytes):>7} MiB, P ({k_type}): {_mib_f32(0):>7} MiB")
    else:
        line = (f"llama_kv_cache: size = {_mib_f32(size):>7} MiB ({cells:6d} cells, {shown:3d} layers, "
                f"{seqs:2d}/{streams} seqs), K ({k_type}): {_mib_f32(k_bytes):>7} MiB, V ({v_type}): "
                f"{_mib_f32(v_bytes):>7} MiB")
    return CacheFigures(name=name, cells=cells, layers=shown, seqs=seqs, streams=streams, k_type=k_type, v_type=v_type,
                        k_bytes=k_bytes, v_bytes=v_bytes, k_mib=_mib_f32(k_bytes), v_mib=_mib_f32(v_bytes),
                        size_mib=_mib_f32(size), buffer_mib=_mib(buffer), buffer_bytes=buffer,
                        layer_indices=layer_indices, line=line)


def is_cache_line(line: str) -> bool:
    """A line llama.cpp logs about a cache it makes (sizes, buffers, the iSWA split)."""
    return bool(_KV_SIZE.match(line) or _RS_SIZE.match(line) or _BUFFER.match(line) or _ISWA.match(line)
                or _STATE_BUFFER.match(line) or _STATE_SIZE.match(line)
                or line.startswith("llama_kv_cache_iswa: using full-size SWA cache"))
