"""``kvplan verify --engine llama.cpp``: the real llama.cpp makes its caches, kvplan compares.

llama.cpp (through llama-cpp-python, the ``kvplan[llamacpp]`` extra) creates a context for the GGUF with
the user's flags (``-c``, ``-np``, ``-ctk``, ``-ctv``, ``-fa``, ``-kvu``, ``-ub``, ``-ngl``, ``--swa-full``)
in a child process (:mod:`kvplan.verify.llamacpp_run`; a ``GGML_ASSERT`` there cannot take kvplan down).
Its own accounting is read from the lines it logs for every cache it makes (``llama_kv_cache`` for the
base and the SWA cache, ``llama_memory_recurrent`` for recurrent states) and, with ``--measure
tensors``, from the cache tensors themselves. kvplan's prediction is the llama.cpp engine profile's
(``kvplan capacity --engine llama.cpp``: its ``engine_log`` lines and bytes; recurrent states from
``kvplan estimate --engine llama.cpp``). Each cache passes or fails on its own.

What is compared, by ``--measure``:

- ``log`` (default): llama.cpp's dry run (its ``no_alloc`` mode, the one its memory-fit pass uses): the
  model is created from the GGUF header, no weight is read and no cache is allocated, and every cache
  is logged as it would be made. Compared: cells, layers, sequences and streams (integers), the cache
  types, and the K, V and total sizes as llama.cpp prints them (MiB with two decimals).
- ``buffers``: the model is loaded (mmap) and the caches are allocated in memory: the log's
  ``KV buffer size`` lines are compared too.
- ``tensors``: ``buffers`` and a one-token decode, during which every cache tensor's bytes and every
  cache buffer's size are read from ggml: K, V (R, S) and buffer bytes compared to the byte.

Nothing here imports llama_cpp (:func:`llama_cpp_missing` says whether it is installed): the lines are read
in :mod:`kvplan.verify.llamacpp_lines`, the child process is run by :mod:`kvplan.verify.llamacpp_engine`.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import kvplan
from kvplan import __version__
from kvplan.errors import InputError
from kvplan.gguf.hub import HubSource
from kvplan.report import SCHEMA_VERSION, model_dict
from kvplan.verify.llamacpp_engine import INSTALL_HINT, EngineRun, run_engine
from kvplan.verify.llamacpp_gguf import metadata_for, write_gguf
from kvplan.verify.llamacpp_lines import CacheFigures, is_cache_line, predicted_figures

#: llama-cpp-python release the extra pins (its wheel vendors llama.cpp itself).
LLAMA_CPP_PYTHON = "0.3.36"
MEASURES = ("log", "buffers", "tensors")
#: llama.cpp's -ctk/-ctv types (common/arg.cpp kv_cache_types) and kvplan's spelling of the 16-bit ones.
GGML_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
KVPLAN_NAMES = {"fp32": "f32", "fp16": "f16", "float16": "f16", "half": "f16", "float32": "f32", "bfloat16": "bf16"}
#: Architectures llama.cpp runs without flash attention whatever ``-fa`` says (src/llama-context.cpp
#: llama_init_from_model), so a quantised V cache is refused there even with ``-fa on``.
FLASH_ATTN_OFF = frozenset({"gguf:grok"})
QUANTISED = frozenset({"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"})
#: common/common.h defaults of llama.cpp's tools (llama-server, llama-cli): n_batch, n_ubatch.
LLAMA_BATCH, LLAMA_UBATCH = 2048, 512


def llama_cpp_missing() -> bool:
    return importlib.util.find_spec("llama_cpp") is None


# ---- the user's llama.cpp flags ---------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class LlamaCppFlags:
    """llama.cpp's context flags, with its tools' defaults (common/common.h)."""

    ctx_size: int = 0
    """``-c``: cells over all sequences; 0 = the model's training context (``context_length``)."""
    parallel: int = 1
    """``-np``: sequences (``n_seq_max``)."""
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    """``-fa on|off|auto``."""
    kv_unified: bool = False
    ubatch_size: int = LLAMA_UBATCH
    batch_size: int = LLAMA_BATCH
    n_gpu_layers: int = 0
    """``-ngl``: 0 keeps every layer (and its cache) on the CPU; llama.cpp's own default is ``auto``."""
    swa_full: bool = False

    def context(self, n_ctx: int) -> dict[str, Any]:
        """The ``llama_context_params`` the child sets (``n_ctx`` resolved)."""
        return {"n_ctx": n_ctx, "n_seq_max": self.parallel, "n_batch": self.batch_size, "n_ubatch": self.ubatch_size,
                "type_k": self.cache_type_k, "type_v": self.cache_type_v, "flash_attn": self.flash_attn,
                "kv_unified": self.kv_unified, "swa_full": self.swa_full, "n_gpu_layers": self.n_gpu_layers}


def cache_type(text: str, flag: str) -> str:
    """llama.cpp's name of a -ctk/-ctv type (kvplan's fp16/bf16/fp32 spellings accepted)."""
    name = KVPLAN_NAMES.get(text.strip().lower(), text.strip().lower())
    if name not in GGML_CACHE_TYPES:
        raise InputError(f"{flag} {text}: llama.cpp's cache types are {', '.join(GGML_CACHE_TYPES)}",
                         f"e.g. {flag} q8_0")
    return name


def make_flags(*, ctx_size: int = 0, parallel: int = 1, cache_type_k: str = "f16", cache_type_v: str | None = None,
               flash_attn: str = "auto", kv_unified: bool = False, ubatch_size: int = LLAMA_UBATCH,
               n_gpu_layers: int = 0, swa_full: bool = False) -> LlamaCppFlags:
    """The flags as the user typed them, checked as llama.cpp's argument parser checks them."""
    if ctx_size < 0:
        raise InputError(f"-c {ctx_size} is negative", "-c 0 takes the model's context length")
    if parallel < 1:
        raise InputError(f"-np {parallel}: llama.cpp needs at least one sequence", "e.g. -np 4")
    if flash_attn not in ("on", "off", "auto"):
        raise InputError(f"-fa {flash_attn}: llama.cpp takes on, off or auto", "e.g. -fa on")
    if ubatch_size < 1:
        raise InputError(f"-ub {ubatch_size} must be positive", f"llama.cpp's default is -ub {LLAMA_UBATCH}")
    k = cache_type(cache_type_k, "-ctk")
    v = cache_type(cache_type_v, "-ctv") if cache_type_v is not None else "f16"
    return LlamaCppFlags(ctx_size=ctx_size, parallel=parallel, cache_type_k=k, cache_type_v=v, flash_attn=flash_attn,
                         kv_unified=kv_unified, ubatch_size=ubatch_size, batch_size=max(LLAMA_BATCH, ubatch_size),
                         n_gpu_layers=n_gpu_layers, swa_full=swa_full)


# ---- kvplan's prediction ------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    caches: tuple[CacheFigures, ...]
    lines: tuple[str, ...]
    """kvplan's engine_log lines for the same flags (``kvplan capacity --engine llama.cpp``)."""
    n_ctx: int
    refusal: str | None = None
    """What llama.cpp should refuse, and why (then no cache is compared)."""
    notes: tuple[str, ...] = ()


def resolve_ctx(flags: LlamaCppFlags, model_context: int | None) -> int:
    """``-c 0`` is the model's training context (``n_ctx_train``)."""
    if flags.ctx_size:
        return flags.ctx_size
    if not model_context:
        raise InputError("-c 0 takes the model's context length, and this model does not say it",
                         "pass the context, e.g. -c 4096")
    return model_context


def predict(geometry: Any, flags: LlamaCppFlags) -> Prediction:
    """kvplan's llama.cpp profile for ``geometry`` (a :class:`kvplan.Geometry`) under ``flags``."""
    n_ctx = resolve_ctx(flags, geometry.max_context_tokens)
    notes: list[str] = []
    if geometry.architecture in FLASH_ATTN_OFF and flags.flash_attn != "off":
        # NOTE: src/llama-context.cpp llama_init_from_model: "flash_attn is not compatible with Grok - forcing off".
        notes.append(f"llama.cpp turns flash attention off for {geometry.architecture.removeprefix('gguf:')} "
                     "whatever -fa says")
        flags = replace(flags, flash_attn="off")
    if flags.flash_attn == "off" and flags.cache_type_v in QUANTISED:
        # NOTE: src/llama-context.cpp llama_init_from_model: "quantized V cache requires flash_attn to be enabled".
        return Prediction(caches=(), lines=(), n_ctx=n_ctx, refusal=(
            f"-ctv {flags.cache_type_v} with -fa off: llama.cpp refuses a quantised V cache without flash attention"))
    n_seq = flags.parallel
    n_ctx_used = n_ctx // n_seq * n_seq  # llama.cpp rounds n_ctx down to a multiple of n_seq_max
    if n_ctx_used != n_ctx:
        notes.append(f"-c {n_ctx} is not a multiple of -np {n_seq}: llama.cpp rounds n_ctx down to {n_ctx_used}")
    ubatch = min(flags.ubatch_size, flags.batch_size)
    try:
        est = kvplan.estimate(geometry, seq_len=n_ctx_used // n_seq, batch=n_seq, engine="llama.cpp",
                              kv_unified=flags.kv_unified, ubatch_size=ubatch, cache_type_k=flags.cache_type_k,
                              cache_type_v=flags.cache_type_v, no_window=flags.swa_full,
                              flash_attn=flags.flash_attn)
        budget = max(int(est.kv_cache_bytes), 1)
        cap = kvplan.capacity(geometry, kv_budget=budget, ctx_size=str(n_ctx_used), parallel=n_seq, engine="llama.cpp",
                              kv_unified=flags.kv_unified, ubatch_size=ubatch, cache_type_k=flags.cache_type_k,
                              cache_type_v=flags.cache_type_v, no_window=flags.swa_full,
                              flash_attn=flags.flash_attn)
    except InputError as exc:
        if "llama.cpp" not in exc.message:  # not a rule of llama.cpp's: the user's input is wrong
            raise
        return Prediction(caches=(), lines=(), n_ctx=n_ctx, refusal=exc.message, notes=tuple(notes))
    log = cap.to_dict()["capacity"]["engine_log"]
    swa_members, base_members = _members(est)
    caches: list[CacheFigures] = []
    for entry in log["llama_caches"]:
        members = swa_members if entry["name"] == "swa" else base_members
        state = "ratio" in entry  # NOTE: a DeepSeek-V4 compressor state: no rollback snapshots (rs_seq 0)
        if state:
            members = _state_members(est, entry["ratio"], indexer=entry["name"] == "lid_state")
        caches.append(predicted_figures(
            entry["name"], cells=entry["cells"], layers=entry["layers"], seqs=entry["seqs"],
            streams=0 if state else entry["streams"], k_type=entry["k_type"], v_type=entry["v_type"],
            k_bytes=entry["k_bytes"], v_bytes=entry["v_bytes"], layer_indices=members, ratio=entry.get("ratio"),
            width=entry.get("width")))
    recurrent = _recurrent(est, geometry, n_seq)
    if recurrent is not None:
        caches.append(recurrent)
        notes.append("kvplan's engine_log has no llama_memory_recurrent line: the recurrent cache is predicted from "
                     "kvplan estimate --engine llama.cpp (float32 states, one per sequence)")
    lines = tuple(line for line in log["lines"] if "buffer size" not in line)
    return Prediction(caches=tuple(caches), lines=lines, n_ctx=n_ctx, notes=tuple(notes))


WINDOWED = ("sliding_window", "chunked_local")
NOT_KV = ("state", "no_cache", "cross_attention")


def _members(est: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(SWA cache layers, base cache layers) of the estimate's groups. With ``--swa-full`` llama.cpp keeps the
    split (the SWA layers in their own, full-size, cache), so the windowed kind still decides."""
    swa: list[int] = []
    base: list[int] = []
    for group in est.groups:
        kind = group.spec.kind
        if kind in NOT_KV:
            continue
        (swa if kind in WINDOWED else base).extend(group.layer_indices)
    return tuple(sorted(swa)), tuple(sorted(base))


def _state_members(est: Any, ratio: int, *, indexer: bool) -> tuple[int, ...]:
    """The layers of a DeepSeek-V4 compressor state: those compressed by ``ratio`` (the indexer's: with an indexer
    key)."""
    return tuple(sorted(i for g in est.groups if getattr(g.spec, "compress_ratio", None) == ratio
                        and (not indexer or getattr(g.spec, "index_head_size", 0)) for i in g.layer_indices))


def _recurrent(est: Any, geometry: Any, n_seq: int) -> CacheFigures | None:
    """llama.cpp's ``llama_memory_recurrent``: float32 R (conv) and S (the rest) rows, ``max(1, n_seq_max)``
    cells; it logs ``n_layer`` (every layer of the model) although only recurrent layers get tensors."""
    groups = [g for g in est.groups if g.spec.kind == "state"]
    if not groups:
        return None
    mem_size = max(1, n_seq)
    r_bytes = s_bytes = 0
    indices: list[int] = []
    for group in groups:
        for name, shape in group.spec.shapes:
            count = 1
            for dim in shape:
                count *= dim
            row = 4 * count * mem_size * group.count
            if name == "conv":
                r_bytes += row
            else:
                s_bytes += row
        indices.extend(group.layer_indices)
    total = sum(int(g.total_bytes) for g in groups)
    if total != r_bytes + s_bytes:  # kvplan prices the states otherwise: keep its total, split unknown
        r_bytes, s_bytes = total, 0
    return predicted_figures("recurrent", cells=mem_size, layers=len(indices), seqs=n_seq, streams=0,
                             k_type="f32", v_type="f32", k_bytes=r_bytes, v_bytes=s_bytes,
                             layer_indices=tuple(sorted(indices)), logged_layers=geometry.num_hidden_layers)


# ---- the comparison ----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class CacheVerdict:
    name: str
    logged: CacheFigures | None
    predicted: CacheFigures | None
    differences: tuple[str, ...] = field(default_factory=tuple)

    @property
    def match(self) -> bool:
        return self.logged is not None and self.predicted is not None and not self.differences


def compare_caches(logged: Sequence[CacheFigures], predicted: Sequence[CacheFigures], *,
                   measure: str) -> list[CacheVerdict]:
    """Each cache llama.cpp made against kvplan's cache of the same name (base, swa, recurrent)."""
    verdicts: list[CacheVerdict] = []
    by_name = {c.name: c for c in predicted}
    seen: set[str] = set()
    for cache in logged:
        seen.add(cache.name)
        guess = by_name.get(cache.name)
        if guess is None:
            verdicts.append(CacheVerdict(name=cache.name, logged=cache, predicted=None,
                                         differences=(f"llama.cpp made a {cache.name} cache kvplan does not predict",)))
            continue
        verdicts.append(CacheVerdict(name=cache.name, logged=cache, predicted=guess,
                                     differences=tuple(_differences(cache, guess, measure=measure))))
    for guess in predicted:
        if guess.name not in seen:
            verdicts.append(CacheVerdict(name=guess.name, logged=None, predicted=guess,
                                         differences=(f"kvplan predicts a {guess.name} cache llama.cpp did not make",)))
    return verdicts


def _differences(got: CacheFigures, want: CacheFigures, *, measure: str) -> list[str]:
    if got.kind == "state":
        return _state_differences(got, want, measure=measure)
    out: list[str] = []
    k, v = ("R", "S") if got.kind == "recurrent" else ("K", "V")
    for label, a, b in (("cells", got.cells, want.cells), ("layers", got.layers, want.layers),
                        ("seqs", got.seqs, want.seqs), ("streams" if got.kind == "kv" else "rs_seq", got.streams,
                                                        want.streams),
                        (f"{k} type", got.k_type, want.k_type), (f"{v} type", got.v_type, want.v_type),
                        (f"{k} MiB", got.k_mib, want.k_mib), (f"{v} MiB", got.v_mib, want.v_mib),
                        ("size MiB", got.size_mib, want.size_mib)):
        if a != b:
            out.append(f"{label}: llama.cpp {a}, kvplan {b}")
    if measure in ("buffers", "tensors") and got.buffer_mib is not None and got.buffer_mib != want.buffer_mib:
        out.append(f"buffer MiB: llama.cpp {got.buffer_mib}, kvplan {want.buffer_mib}")
    if measure == "tensors":
        for name, measured, predicted in ((f"{k} bytes", got.k_bytes, want.k_bytes),
                                          (f"{v} bytes", got.v_bytes, want.v_bytes),
                                          ("buffer bytes", got.buffer_bytes, want.buffer_bytes)):
            if measured is not None and measured != predicted:
                shown = "none" if predicted is None else f"{predicted:,}"
                out.append(f"{name}: llama.cpp {measured:,}, kvplan {shown}")
    return out


def _state_differences(got: CacheFigures, want: CacheFigures, *, measure: str) -> list[str]:
    """A DeepSeek-V4 compressor state's line (``ratio``, ``state = rows x width``, ``streams``, ``rs_seq``,
    ``layers``, ``size``; float32), its buffer line and, with tensors, its kv and score tensors' bytes."""
    out = [f"{label}: llama.cpp {a}, kvplan {b}" for label, a, b in (
        ("ratio", got.ratio, want.ratio), ("rows", got.cells, want.cells), ("width", got.width, want.width),
        ("streams", got.seqs, want.seqs), ("rs_seq", got.streams, want.streams), ("layers", got.layers, want.layers),
        ("kv type", got.k_type, want.k_type), ("score type", got.v_type, want.v_type),
        ("size MiB", got.size_mib, want.size_mib)) if a != b]
    if measure in ("buffers", "tensors") and got.buffer_mib != want.buffer_mib:
        out.append(f"buffer MiB: llama.cpp {got.buffer_mib}, kvplan {want.buffer_mib}")
    if measure == "tensors":
        for name, measured, predicted in (("kv bytes", got.k_bytes, want.k_bytes),
                                          ("score bytes", got.v_bytes, want.v_bytes),
                                          ("buffer bytes", got.buffer_bytes, want.buffer_bytes)):
            if measured is not None and measured != predicted:
                out.append(f"{name}: llama.cpp {measured:,}, kvplan {predicted if predicted is None else f'{predicted:,}'}")
    return out


# ---- the report ------------------------------------------------------------------------------------------------
#: What --measure compared, said once under the table.
_MEASURED_NOTE = {
    "log": "measured: llama.cpp's dry run (no_alloc, as its memory-fit pass): its cache lines are compared at "
           "their printed resolution (0.01 MiB); --measure tensors compares bytes",
    "buffers": "measured: the caches allocated for real (mmap'd weights); the buffer lines are compared at 0.01 MiB; "
               "--measure tensors compares bytes",
    "tensors": "measured: a one-token decode; every cache tensor's bytes and every cache buffer's size read from "
               "ggml, compared to the byte",
}


def cache_row(verdict: CacheVerdict, *, measure: str) -> dict[str, Any]:
    got, want = verdict.logged, verdict.predicted
    exact = measure == "tensors"

    def pick(obj: CacheFigures | None, attr: str) -> Any:
        return getattr(obj, attr) if obj is not None else None

    def total(obj: CacheFigures | None) -> int | None:
        if obj is None or obj.k_bytes is None or obj.v_bytes is None:
            return None
        return obj.k_bytes + obj.v_bytes

    either = got if got is not None else want
    return {
        "name": verdict.name,
        "kind": either.kind if either is not None else "kv",
        "match": verdict.match,
        "differences": list(verdict.differences),
        "measured_cells": pick(got, "cells"), "predicted_cells": pick(want, "cells"),
        "measured_layers": pick(got, "layers"), "predicted_layers": pick(want, "layers"),
        "measured_seqs": pick(got, "seqs"), "predicted_seqs": pick(want, "seqs"),
        "measured_streams": pick(got, "streams"), "predicted_streams": pick(want, "streams"),
        "k_type": pick(got, "k_type") or pick(want, "k_type"), "v_type": pick(got, "v_type") or pick(want, "v_type"),
        "measured_k_bytes": pick(got, "k_bytes") if exact else None, "predicted_k_bytes": pick(want, "k_bytes"),
        "measured_v_bytes": pick(got, "v_bytes") if exact else None, "predicted_v_bytes": pick(want, "v_bytes"),
        "measured_bytes": total(got) if exact else None, "predicted_bytes": total(want),
        "measured_buffer_bytes": pick(got, "buffer_bytes") if exact else None,
        "predicted_buffer_bytes": pick(want, "buffer_bytes"),
        # NOTE: a compressor state's line prints its size only (no K/V split): its kv and score MiB are null.
        "logged_k_mib": pick(got, "k_mib") or None, "logged_v_mib": pick(got, "v_mib") or None,
        "logged_mib": pick(got, "size_mib"),
        "logged_buffer_mib": pick(got, "buffer_mib") if measure != "log" else None,
        "layer_indices": list(pick(got, "layer_indices") or pick(want, "layer_indices") or []),
        "logged_line": pick(got, "line"), "predicted_line": pick(want, "line"),
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """One context: what llama.cpp did, what kvplan said, and the verdict."""

    flags: LlamaCppFlags
    measure: str
    prediction: Prediction
    run: EngineRun
    verdicts: tuple[CacheVerdict, ...]

    @property
    def passed(self) -> bool:
        if self.prediction.refusal is not None or not self.run.ok:
            return self.prediction.refusal is not None and not self.run.ok
        return bool(self.verdicts) and all(v.match for v in self.verdicts)

    def reason(self) -> str:
        """Why it failed (empty when it passed)."""
        if self.passed:
            return ""
        if self.prediction.refusal is not None and self.run.ok:
            return f"kvplan expects a refusal ({self.prediction.refusal}); llama.cpp made the context"
        if self.prediction.refusal is None and not self.run.ok:
            return f"llama.cpp refused: {self.run.error}"
        if not self.verdicts:
            return "llama.cpp logged no cache"
        return "; ".join(f"{v.name}: {', '.join(v.differences)}" for v in self.verdicts if not v.match)


def judge(geometry: Any, flags: LlamaCppFlags, run: EngineRun, *, measure: str,
          prediction: Prediction | None = None) -> Outcome:
    prediction = prediction if prediction is not None else predict(geometry, flags)
    verdicts = () if (prediction.refusal or not run.ok) else tuple(
        compare_caches(run.caches, prediction.caches, measure=measure))
    return Outcome(flags=flags, measure=measure, prediction=prediction, run=run, verdicts=verdicts)


def verify_report(outcome: Outcome, geometry: Any, *, gguf: str, generated_notes: Sequence[str] = (),
                  llama_cpp_python: str | None = None) -> dict[str, Any]:
    """The ``kvplan verify --engine llama.cpp`` report (``report["verify"]["passed"]``)."""
    flags, measure, prediction, run = outcome.flags, outcome.measure, outcome.prediction, outcome.run
    rows = [cache_row(v, measure=measure) for v in outcome.verdicts]
    exact = measure == "tensors"
    measured_total = sum(r["measured_bytes"] for r in rows) if exact and rows and all(
        r["measured_bytes"] is not None for r in rows) else None
    predicted_total = sum(c.k_bytes or 0 for c in prediction.caches) + sum(c.v_bytes or 0 for c in prediction.caches)
    notes = [*generated_notes, *prediction.notes]
    unattributed = set(run.unattributed)
    exact_ones = [r["name"] for r in rows if r["name"] not in unattributed]
    if exact and unattributed:
        # NOTE: only the caches whose tensors could be told apart are compared to the byte (the note before says why
        # the others are not).
        notes.append("measured: a one-token decode; the tensors' bytes and their buffers' sizes read from ggml, "
                     + (f"compared to the byte for the {', '.join(exact_ones)} only" if exact_ones else
                        "but no cache could be compared to the byte"))
    else:
        notes.append(_MEASURED_NOTE[measure])
    source = geometry.source

    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "verify",
        "model": model_dict(geometry.model_geometry, source=source.kind, location=source.location,
                            revision=source.revision),
        "inputs": {
            "engine": "llama.cpp",
            "gguf": gguf,
            "ctx_size": flags.ctx_size,
            "n_ctx": prediction.n_ctx,
            "parallel": flags.parallel,
            "cache_type_k": flags.cache_type_k,
            "cache_type_v": flags.cache_type_v,
            "flash_attn": flags.flash_attn,
            "kv_unified": flags.kv_unified,
            "ubatch_size": flags.ubatch_size,
            "n_gpu_layers": flags.n_gpu_layers,
            "swa_full": flags.swa_full,
            "measure": measure,
        },
        "caches": rows,
        "verify": {
            "engine": "llama.cpp",
            "llama_cpp_python": llama_cpp_python,
            "measure": measure,
            "resolution_bytes": 1 if exact else None,
            "measured_bytes": measured_total,
            "predicted_bytes": predicted_total if prediction.refusal is None else None,
            "refused": None if run.ok else run.error,
            "predicted_refusal": prediction.refusal,
            "logged_lines": [line.strip() for line in run.lines if is_cache_line(line)],
            "predicted_lines": list(prediction.lines) + [c.line for c in prediction.caches if c.kind == "recurrent"],
            "passed": outcome.passed,
            "reason": outcome.reason() or None,
        },
        "notes": list(dict.fromkeys(notes)),
    }


# ---- the command ----------------------------------------------------------------------------------------
def verify_llamacpp(model: str, flags: LlamaCppFlags, *, measure: str = "log", revision: str | None = None,
                    token: str | None = None, gguf_file: str | None = None,
                    overrides: Sequence[str] | None = None, workdir: Path | None = None) -> dict[str, Any]:
    """``kvplan verify --engine llama.cpp``: the report of one context (``report["verify"]["passed"]``).

    ``model`` is a GGUF (a file, or ``org/repo:QUANT`` whose header is fetched) or anything else
    ``kvplan.load_geometry`` reads, for which a small GGUF with the same cache geometry is written."""
    if llama_cpp_missing():
        raise InputError("kvplan verify --engine llama.cpp needs llama-cpp-python, which is not installed",
                         INSTALL_HINT)
    if measure not in MEASURES:
        raise InputError(f"--measure {measure}: one of {', '.join(MEASURES)}", "e.g. --measure tensors")
    geometry = kvplan.load_geometry(model, revision=revision, token=token, overrides=overrides, gguf_file=gguf_file)
    prediction = predict(geometry, flags)
    if measure != "log":
        _check_memory(prediction)
    with tempfile.TemporaryDirectory(prefix="kvplan-verify-", dir=workdir) as tmp:
        gguf_path, label, notes = _gguf_for(geometry, Path(tmp), measure=measure, token=token)
        answer = run_engine(gguf_path, [flags.context(flags.ctx_size)], measure=measure)
    run = answer.runs[0]
    if run.model_failed and geometry.gguf is not None:
        # NOTE: the user's file failed to load: nothing of kvplan's cache rules was tried, so no FAIL (exit 1).
        said = [line.strip() for line in run.lines if "error" in line.lower() or "failed" in line.lower()]
        raise InputError(f"llama.cpp (llama-cpp-python {answer.llama_cpp_python}) could not load {label}: "
                         f"{said[0] if said else run.error}",
                         "check the file with llama.cpp itself; `kvplan estimate -m FILE` still sizes its cache")
    outcome = judge(geometry, flags, answer.runs[0], measure=measure, prediction=prediction)
    if run.unattributed:
        notes.append(f"--measure tensors: the {', '.join(run.unattributed)} caches name a layer's tensors alike "
                     "(cache_k_l<il> in each: DeepSeek-V4), so they are compared by llama.cpp's log and buffer lines "
                     "(0.01 MiB), not to the byte")
    return verify_report(outcome, geometry, gguf=label, generated_notes=notes,
                         llama_cpp_python=answer.llama_cpp_python)


def _check_memory(prediction: Prediction) -> None:
    needed = sum((c.k_bytes or 0) + (c.v_bytes or 0) for c in prediction.caches)
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if needed > available // 2:
        raise InputError(f"allocating the caches takes {needed:,} bytes, more than half of the {available:,} bytes "
                         "of free memory", "use --measure log (llama.cpp's dry run allocates nothing) or a smaller -c")


def _gguf_for(geometry: Any, tmp: Path, *, measure: str, token: str | None) -> tuple[Path, str, list[str]]:
    """(the GGUF llama.cpp reads, how the report names it, notes)."""
    source = geometry.source
    if geometry.gguf is not None and source.kind == "gguf":
        return Path(source.location), str(source.location), []
    if geometry.gguf is not None:
        if measure != "log":
            raise InputError(f"--measure {measure} loads the weights, and {source.location} is on the Hub",
                             "download the file and pass its path, or use --measure log (reads the header only)")
        return _hub_header(geometry, tmp, token=token), f"{source.location} (header)", [
            "llama.cpp read the GGUF's header only (fetched by ranged reads), for its dry run"]
    arch, meta, notes = metadata_for(geometry.model_geometry)
    path = write_gguf(tmp / "model.gguf", arch, meta, tensors=measure != "log")
    weights = "random weights" if measure != "log" else "no weights (the dry run needs none)"
    notes.insert(0, f"llama.cpp read a GGUF kvplan wrote for {geometry.model_id}: llama.cpp's {arch} architecture "
                    f"with the cache geometry kvplan parsed from the config, small widths elsewhere, {weights}; the "
                    "comparison checks llama.cpp's cache rules, the config parsing is checked against transformers")
    return path, f"written by kvplan ({arch})", notes


def _hub_header(geometry: Any, tmp: Path, *, token: str | None) -> Path:
    """The first shard's header (metadata and tensor table) of a Hub GGUF, by kvplan's ranged reads, as a file."""
    location = str(geometry.source.location)
    repo_id, filename = "/".join(location.split("/")[:2]), "/".join(location.split("/")[2:])
    header = geometry.gguf.header
    size = int(getattr(header, "data_offset", 0) or header.header_bytes)
    source = HubSource(repo_id, filename, revision=geometry.source.revision, token=token)
    path = tmp / "header.gguf"
    path.write_bytes(source.read(0, size))
    return path
