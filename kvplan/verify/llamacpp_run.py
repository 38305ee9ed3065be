"""The llama.cpp side of ``kvplan verify --engine llama.cpp``, run in a child process.

``python -m kvplan.verify.llamacpp_run`` reads one JSON request on stdin and writes one JSON line per
answer on stdout. It imports llama-cpp-python (the ``kvplan[llamacpp]`` extra), which runs the real
llama.cpp in this process: a ``GGML_ASSERT`` in llama.cpp aborts the process, so kvplan never runs it
in its own (:mod:`kvplan.verify.llamacpp` starts this module and reads its lines).

Requests:

- ``{"job": "contexts", "gguf": PATH, "measure": "log"|"buffers"|"tensors", "runs": [CONTEXT, ...]}``:
  create one llama.cpp context per CONTEXT (``n_ctx``, ``n_seq_max``, ``type_k``, ``type_v``,
  ``flash_attn``, ``kv_unified``, ``n_ubatch``, ``n_batch``, ``n_gpu_layers``, ``swa_full``) and answer
  with the lines llama.cpp logged while it did (through ``llama_log_set``, not by reading stderr).

  ``log``: llama.cpp's dry run (``no_alloc``, the mode of its memory-fit pass): the model is created from
  the file's header by ``llama_model_init_from_user``, nothing is read or allocated but the metadata, and
  the context logs each cache as it would make it. ``buffers``: the model is loaded with mmap and the
  context allocates its caches for real (the ``KV buffer size`` lines). ``tensors``: ``buffers`` plus a
  one-token decode, during which ggml's eval callback hands over the graph's tensors; the cache tensors
  (``cache_k_l0`` ...) found through their views give each tensor's bytes and each cache buffer's size,
  to the byte.
- ``{"job": "tensor_table", "gguf": PATH, "max_bytes": N}``: the tensors llama.cpp creates for the metadata in PATH (a
  GGUF without tensors), as ``[[name, [ne0, ne1, ...]], ...]``: how kvplan writes small GGUFs of any
  architecture llama.cpp knows, with llama.cpp naming and shaping the weights.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import llama_cpp as lib

#: ggml type ids (``enum ggml_type`` in ggml.h) of the cache types llama.cpp's -ctk/-ctv accept.
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}
#: ``enum ggml_log_level``: DEBUG lines are dropped (but the caches' layer lines), CONT continues the previous line.
LOG_DEBUG, LOG_CONT = 1, 5
#: DEBUG lines kept: which layers each cache holds (``llama_kv_cache: layer   3: dev = CPU`` or ``: filtered``).
DEBUG_KEPT = ("llama_kv_cache: layer", "llama_memory_recurrent, layer", "llama_memory_recurrent: layer",
              "llama_dsv4_comp_state: layer")
LOAD_MODE_NONE = 0  # llama_load_mode: no mmap (llama.cpp's no_alloc pass maps nothing)

_ggml = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
_ggml.ggml_nbytes.restype = ctypes.c_size_t
_ggml.ggml_nbytes.argtypes = [ctypes.c_void_p]
_ggml.ggml_get_name.restype = ctypes.c_char_p
_ggml.ggml_get_name.argtypes = [ctypes.c_void_p]
_ggml.ggml_type_name.restype = ctypes.c_char_p
_ggml.ggml_type_name.argtypes = [ctypes.c_int]
_ggml.ggml_backend_buffer_get_size.restype = ctypes.c_size_t
_ggml.ggml_backend_buffer_get_size.argtypes = [ctypes.c_void_p]
_ggml.ggml_backend_buffer_name.restype = ctypes.c_char_p
_ggml.ggml_backend_buffer_name.argtypes = [ctypes.c_void_p]
_ggml.gguf_free.argtypes = [ctypes.c_void_p]


class _GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


_ggml.gguf_init_from_file.restype = ctypes.c_void_p
_ggml.gguf_init_from_file.argtypes = [ctypes.c_char_p, _GgufInitParams]


class GgmlTensor(ctypes.Structure):
    """``struct ggml_tensor`` of ggml.h (public API), read only to follow views to the cache tensors."""


GgmlTensor._fields_ = [
    ("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4),
    ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
    ("src", ctypes.POINTER(GgmlTensor) * 10), ("view_src", ctypes.POINTER(GgmlTensor)), ("view_offs", ctypes.c_size_t),
    ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64), ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8),
]


class LogCapture:
    """llama.cpp's log through ``llama_log_set``: INFO, WARN and ERROR text (and the DEBUG lines that say
    which layers a cache holds), split into lines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._keep = True

        @lib.llama_log_callback
        def callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            piece = text.decode("utf-8", "replace")
            if level != LOG_CONT:
                self._keep = level != LOG_DEBUG or piece.startswith(DEBUG_KEPT)
            if self._keep:
                self.parts.append(piece)

        self._callback = callback  # kept alive: llama.cpp holds the pointer
        lib.llama_log_set(callback, ctypes.c_void_p(0))

    def take(self) -> list[str]:
        lines = "".join(self.parts).splitlines()
        self.parts.clear()
        return lines


@lib.llama_model_set_tensor_data_t
def _leave_data(_tensor: ctypes.c_void_p, _user: ctypes.c_void_p) -> None:
    """``llama_model_init_from_user``'s data hook: the dry run and the tensor table need no data."""


@contextmanager
def _header_model(path: str, *, n_gpu_layers: int, no_alloc: bool) -> Iterator[Any]:
    """A model created by llama.cpp from the GGUF header alone (``llama_model_init_from_user``)."""
    meta = _ggml.gguf_init_from_file(path.encode(), _GgufInitParams(True, None))
    if not meta:
        raise RuntimeError(f"llama.cpp cannot read the GGUF header of {path}")
    params = lib.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    params.no_alloc = no_alloc
    params.load_mode = LOAD_MODE_NONE
    model = lib.llama_model_init_from_user(meta, _leave_data, None, params)
    try:
        if not model:
            raise RuntimeError("llama.cpp refused to create the model")
        yield model
    finally:
        if model:
            lib.llama_model_free(model)
        _ggml.gguf_free(meta)


@contextmanager
def _file_model(path: str, *, n_gpu_layers: int) -> Iterator[Any]:
    params = lib.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers  # the load mode stays llama.cpp's default: mmap
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp refused to load the model")
    try:
        yield model
    finally:
        lib.llama_model_free(model)


class CacheTensors:
    """The cache tensors a decode's graph reaches (through views), read in ggml's eval callback."""

    def __init__(self) -> None:
        self.found: dict[str, dict[str, Any]] = {}
        self.layout_error: str | None = None

        @lib.ggml_backend_sched_eval_callback
        def callback(tensor: ctypes.c_void_p, _ask: bool, _user: ctypes.c_void_p) -> bool:
            self._visit(ctypes.cast(tensor, ctypes.POINTER(GgmlTensor)), 0)
            return False  # observe nothing: the graph runs as without a callback

        self.callback = callback

    def _visit(self, pointer: Any, depth: int) -> None:
        if not pointer or depth > 6:
            return
        tensor = pointer.contents
        address = ctypes.addressof(tensor)
        name = tensor.name.decode("utf-8", "replace")
        if name != (_ggml.ggml_get_name(address) or b"").decode("utf-8", "replace"):
            self.layout_error = "struct ggml_tensor of this build does not match ggml.h"
            return
        # NOTE: DeepSeek-V4's compressor states name theirs dsv4_csa_state_kv_l2 ... (src/llama-kv-cache-dsv4.cpp).
        if name.startswith(("cache_", "dsv4_")) and not tensor.view_src and name not in self.found:
            self.found[name] = {
                "name": name, "type": (_ggml.ggml_type_name(tensor.type) or b"?").decode(),
                "ne": [int(n) for n in tensor.ne], "bytes": int(_ggml.ggml_nbytes(address)),
                "buffer": int(tensor.buffer or 0),
            }
        self._visit(tensor.view_src, depth + 1)
        for src in tensor.src:
            self._visit(src, depth + 1)

    def answer(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        buffers: dict[int, dict[str, Any]] = {}
        for item in self.found.values():
            address = item["buffer"]
            if address and address not in buffers:
                buffers[address] = {
                    "id": len(buffers), "bytes": int(_ggml.ggml_backend_buffer_get_size(address)),
                    "name": (_ggml.ggml_backend_buffer_name(address) or b"?").decode(),
                }
        tensors = [{**item, "buffer": buffers[item["buffer"]]["id"] if item["buffer"] else None}
                   for item in sorted(self.found.values(), key=lambda t: t["name"])]
        return tensors, sorted(buffers.values(), key=lambda b: b["id"])


def _context_params(run: dict[str, Any], cache: CacheTensors | None) -> Any:
    params = lib.llama_context_default_params()
    params.n_ctx = run["n_ctx"]
    params.n_seq_max = run["n_seq_max"]
    params.n_batch = run["n_batch"]
    params.n_ubatch = run["n_ubatch"]
    params.type_k = GGML_TYPES[run["type_k"]]
    params.type_v = GGML_TYPES[run["type_v"]]
    params.flash_attn_type = FLASH_ATTN[run["flash_attn"]]
    params.kv_unified = run["kv_unified"]
    params.swa_full = run["swa_full"]  # llama.cpp's C default is true; its tools' (common.h) is false
    params.n_threads = params.n_threads_batch = 1
    params.no_perf = True
    if cache is not None:
        params.cb_eval = cache.callback
        params.cb_eval_user_data = None
    return params


def run_contexts(request: dict[str, Any], log: LogCapture) -> Iterator[dict[str, Any]]:
    measure = request["measure"]
    runs = request["runs"]
    ngl = runs[0]["n_gpu_layers"] if runs else 0
    try:
        opened = (_header_model(request["gguf"], n_gpu_layers=ngl, no_alloc=True) if measure == "log"
                  else _file_model(request["gguf"], n_gpu_layers=ngl))
        with opened as model:
            load_lines = log.take()
            for index, run in enumerate(runs):
                yield _one_context(model, index, run, measure, log, load_lines)
    except RuntimeError as exc:
        lines = log.take()
        for index in range(len(runs)):
            yield {"index": index, "ok": False, "error": str(exc), "lines": lines, "tensors": [], "buffers": [],
                   "stage": "model"}


def _one_context(model: Any, index: int, run: dict[str, Any], measure: str, log: LogCapture,
                 load_lines: list[str]) -> dict[str, Any]:
    cache = CacheTensors() if measure == "tensors" else None
    context = lib.llama_init_from_model(model, _context_params(run, cache))
    if not context:
        return {"index": index, "ok": False, "error": "llama.cpp refused to create the context",
                "lines": log.take(), "load_lines": load_lines, "tensors": [], "buffers": []}
    try:
        lines = log.take()
        tensors: list[dict[str, Any]] = []
        buffers: list[dict[str, Any]] = []
        error = None
        if cache is not None:
            token = (lib.llama_token * 1)(0)
            status = lib.llama_decode(context, lib.llama_batch_get_one(token, 1))
            if status != 0:
                error = f"llama_decode of one token returned {status}"
            elif cache.layout_error:
                error = cache.layout_error
            else:
                tensors, buffers = cache.answer()
            log.take()
        return {"index": index, "ok": error is None, "error": error, "lines": lines, "load_lines": load_lines,
                "tensors": tensors, "buffers": buffers}
    finally:
        lib.llama_free(context)


def tensor_table(request: dict[str, Any], log: LogCapture) -> dict[str, Any]:
    import gguf  # the saved model's tensor table, read with llama.cpp's own GGUF reader

    try:
        with _header_model(request["gguf"], n_gpu_layers=0, no_alloc=False) as model, \
                tempfile.TemporaryDirectory(prefix="kvplan-llamacpp-") as tmp:
            size = int(lib.llama_model_size(model))
            if size > request["max_bytes"]:
                return {"ok": False, "error": f"the weights llama.cpp creates for this metadata take {size:,} bytes "
                        f"(float32), over the {request['max_bytes']:,} allowed", "lines": [], "tensors": []}
            saved = os.path.join(tmp, "saved.gguf")
            lib.llama_model_save_to_file(model, saved.encode())
            reader = gguf.GGUFReader(saved)
            tensors = [[t.name, [int(n) for n in t.shape]] for t in reader.tensors]
            del reader
    except RuntimeError as exc:
        return {"ok": False, "error": str(exc), "lines": log.take(), "tensors": []}
    return {"ok": True, "error": None, "lines": [], "tensors": tensors}


def main() -> None:
    request = json.loads(sys.stdin.read())
    log = LogCapture()
    lib.llama_backend_init()
    out = sys.stdout
    out.write(json.dumps({"llama_cpp_python": llama_cpp.__version__,
                          "system_info": (lib.llama_print_system_info() or b"").decode("utf-8", "replace")}) + "\n")
    out.flush()
    if request["job"] == "tensor_table":
        out.write(json.dumps(tensor_table(request, log)) + "\n")
    else:
        for answer in run_contexts(request, log):
            out.write(json.dumps(answer) + "\n")
            out.flush()
    out.flush()


if __name__ == "__main__":
    main()
