"""The parent side of the llama.cpp child process (:mod:`kvplan.verify.llamacpp_run`): start it, read its
answers, and turn them into caches (their log lines, and with ``--measure tensors`` their exact bytes).

A ``GGML_ASSERT`` in llama.cpp aborts the process it runs in: a context that aborts is answered with the
assert's text and the remaining contexts run in a new child.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import kvplan
from kvplan.errors import InputError, KvplanError
from kvplan.verify.llamacpp_lines import CacheFigures, parse_log

INSTALL_HINT = (
    "pip install '.[llamacpp]' from the kvplan checkout (llama-cpp-python==0.3.36: from the package index it builds "
    "llama.cpp from source, 10-35 minutes on 2 cores; a prebuilt wheel installs with pip install --no-index "
    "--find-links DIR llama-cpp-python==0.3.36)"
)
#: Largest float32 model llama.cpp may create to name the weights of a GGUF kvplan writes (1 GiB).
MAX_WEIGHT_BYTES = 1 << 30
#: Seconds one child process may take (a dry run takes about a second for any model).
ENGINE_TIMEOUT_S = 900


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineRun:
    ok: bool
    error: str | None
    lines: tuple[str, ...]
    caches: tuple[CacheFigures, ...]
    """The caches llama.cpp logged; with tensors measured, their exact K/V (R/S) and buffer bytes."""
    tensors: tuple[dict[str, Any], ...] = ()
    model_failed: bool = False
    """llama.cpp could not load the model itself (before any context): the file, not the cache rules."""
    unattributed: tuple[str, ...] = ()
    """Caches whose tensors --measure tensors cannot tell from another cache's (they share a layer's tensor
    names): compared by their log and buffer lines."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineAnswer:
    runs: tuple[EngineRun, ...]
    llama_cpp_python: str | None


def run_engine(gguf: Path, contexts: Sequence[dict[str, Any]], *, measure: str,
               timeout_s: float = ENGINE_TIMEOUT_S) -> EngineAnswer:
    """Create each context with the real llama.cpp in a child process; a run that aborts llama.cpp is
    answered with its assert and the rest run in a new child."""
    answers: dict[int, dict[str, Any]] = {}
    remaining = list(range(len(contexts)))
    version = None
    while remaining:
        request = {"job": "contexts", "gguf": str(gguf), "measure": measure,
                   "runs": [contexts[i] for i in remaining]}
        header, got, stderr = _child(request, timeout_s)
        version = header.get("llama_cpp_python")
        for answer in got:
            answers[remaining[answer["index"]]] = answer
        if len(got) >= len(remaining):
            break
        crashed = remaining[len(got)]
        answers[crashed] = {"ok": False, "error": "llama.cpp aborted: " + _abort_reason(stderr), "lines": [],
                            "tensors": [], "buffers": []}
        remaining = remaining[len(got) + 1:]
    runs = tuple(_engine_run(answers[i]) for i in range(len(contexts)))
    return EngineAnswer(runs=runs, llama_cpp_python=version)


def engine_tensor_table(meta_gguf: Path, *, max_bytes: int = MAX_WEIGHT_BYTES,
                        timeout_s: float = ENGINE_TIMEOUT_S) -> list[tuple[str, tuple[int, ...]]]:
    """The tensors (name, ggml shape) llama.cpp creates for the metadata in ``meta_gguf``."""
    _header, got, stderr = _child({"job": "tensor_table", "gguf": str(meta_gguf), "max_bytes": max_bytes}, timeout_s)
    if not got:
        raise KvplanError("llama.cpp aborted while creating the model: " + _abort_reason(stderr),
                          "the metadata kvplan wrote is not a model llama.cpp accepts: report it to kvplan")
    answer = got[0]
    if not answer["ok"] and answer["error"].startswith("the weights"):
        raise InputError(f"a GGUF with this cache geometry is too large to write: {answer['error']}",
                         "use --measure log (llama.cpp's dry run needs no weights)")
    if not answer["ok"]:
        reason = next((line for line in reversed(answer["lines"]) if "error" in line.lower()), answer["error"])
        raise KvplanError(f"llama.cpp refused the metadata kvplan wrote: {reason.strip()}",
                          "report the model to kvplan")
    return [(name, tuple(shape)) for name, shape in answer["tensors"]]


def _child(request: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    package_root = str(Path(kvplan.__file__).resolve().parent.parent)
    env = {**os.environ, "GGML_NO_BACKTRACE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-m", "kvplan.verify.llamacpp_run"], input=json.dumps(request),
                              capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise KvplanError(f"llama.cpp took more than {timeout_s:.0f} s", "try --measure log (a dry run)") from None
    out = proc.stdout.splitlines()
    if not out:
        raise KvplanError("llama.cpp could not be started: " + _abort_reason(proc.stderr),
                          "check the llama-cpp-python install: " + INSTALL_HINT)
    return json.loads(out[0]), [json.loads(line) for line in out[1:] if line.strip()], proc.stderr


def _abort_reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    failed = [line for line in lines if "GGML_ASSERT" in line or "error" in line.lower() or "abort" in line.lower()]
    picked = failed[-1] if failed else (lines[-1] if lines else "no output")
    return re.sub(r"^\S*/(src|ggml)/", r"\1/", picked)


def _engine_run(answer: dict[str, Any]) -> EngineRun:
    lines = tuple(answer.get("lines", ()))
    caches = parse_log(lines)
    tensors = tuple(answer.get("tensors", ()))
    unattributed: tuple[str, ...] = ()
    if tensors:
        # NOTE: DeepSeek-V4's caches each name a layer's tensor cache_k_l<il>: a layer in two caches cannot tell
        # whose tensor is whose, so those caches keep their log lines (0.01 MiB) and buffer lines.
        held = Counter(il for cache in caches if cache.kind == "kv" for il in cache.layer_indices)
        shared = {il for il, count in held.items() if count > 1}
        unattributed = tuple(c.name for c in caches if c.kind == "kv" and shared & set(c.layer_indices))
        buffers = answer.get("buffers", [])
        caches = [cache if cache.name in unattributed else
                  _state_with_tensors(cache, tensors, buffers) if cache.kind == "state" else
                  _with_tensors(cache, tensors, buffers) for cache in caches]
    error = answer.get("error")
    if error and not answer.get("ok"):
        said = [line.split(": ", 1)[-1] for line in lines if line.startswith("llama_init_from_model:")
                or (("error" in line.lower() or "failed" in line) and "size =" not in line)]
        if said:
            error = f"{error}: {said[-1].strip()}"
    return EngineRun(ok=bool(answer.get("ok")), error=error, lines=lines, caches=tuple(caches), tensors=tensors,
                     model_failed=answer.get("stage") == "model", unattributed=unattributed)


_TENSOR = re.compile(r"^cache_(?P<part>[a-z_]+?)_l(?P<il>\d+)$")


_STATE_TENSOR = re.compile(r"^dsv4_(?P<name>[a-z]+)_state_(?P<part>kv|score)_l(?P<il>\d+)$")


def _state_with_tensors(cache: CacheFigures, tensors: Sequence[dict[str, Any]],
                        buffers: Sequence[dict[str, Any]]) -> CacheFigures:
    """A DeepSeek-V4 compressor state's exact bytes: its own tensors (``dsv4_csa_state_kv_l2``,
    ``dsv4_csa_state_score_l2`` ...: named per state, so told apart from the caches) and their buffers. A layer
    the decode did not reach leaves the bytes unknown (compared by the log lines)."""
    kv = score = 0
    used: set[int] = set()
    reached: set[int] = set()
    for tensor in tensors:
        match = _STATE_TENSOR.match(tensor["name"])
        if not match or f"{match['name']}_state" != cache.name:
            continue
        if match["part"] == "kv":
            kv += int(tensor["bytes"])
        else:
            score += int(tensor["bytes"])
        reached.add(int(match["il"]))
        if tensor.get("buffer") is not None:
            used.add(int(tensor["buffer"]))
    if reached != set(cache.layer_indices) or len(reached) != cache.layers:
        return cache
    buffer_bytes = sum(int(b["bytes"]) for b in buffers if int(b["id"]) in used) if used else None
    return replace(cache, k_bytes=kv, v_bytes=score, buffer_bytes=buffer_bytes)


def _with_tensors(cache: CacheFigures, tensors: Sequence[dict[str, Any]],
                  buffers: Sequence[dict[str, Any]]) -> CacheFigures:
    """The cache's exact bytes: its layers' tensors (``cache_k_l3``, ``cache_r_l0`` ...) and their buffers."""
    first, second = ("r", "s") if cache.kind == "recurrent" else ("k", "v")
    members = set(cache.layer_indices)
    k = v = 0
    used: set[int] = set()
    reached: set[int] = set()
    for tensor in tensors:
        match = _TENSOR.match(tensor["name"])
        if not match or int(match["il"]) not in members:
            continue
        part = match["part"]
        if part not in (first, second, "ple_r"):
            continue
        if part == second:
            v += int(tensor["bytes"])
        else:
            k += int(tensor["bytes"])
        if tensor.get("buffer") is not None:
            used.add(int(tensor["buffer"]))
        reached.add(int(match["il"]))
    buffer_bytes = sum(int(b["bytes"]) for b in buffers if int(b["id"]) in used) if used else None
    if cache.kind != "recurrent" and reached < members:
        # NOTE: the decode reads no tensor of a layer without attention (Deci's head_count_kv 0): its K/V bytes are
        # unknown from the graph, so only the buffer (which holds them) is compared to the byte.
        return replace(cache, k_bytes=None, v_bytes=None, buffer_bytes=buffer_bytes)
    return replace(cache, k_bytes=k, v_bytes=v, buffer_bytes=buffer_bytes)
