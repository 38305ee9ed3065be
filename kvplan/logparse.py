"""Read a pasted engine start-up log and put each KV figure beside kvplan's prediction.

The lines are found by their text, not by position, and the prefixes (timestamps, ``(EngineCore_DP0
pid=...)``, ``[... DP0 TP0]``, ``[TensorRT-LLM][INFO]``, the llama.cpp function name) are ignored:

========== =========================================================================================
vLLM       ``Available KV cache memory: X GiB``, ``GPU KV cache size: N tokens``, ``Maximum concurrency
           for T tokens per request: C x``, ``(X GiB KV cache is needed, ...)``, V0 ``# GPU blocks: N``
SGLang     ``KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB`` or ``KV size: X GB``
llama.cpp  ``NAME KV buffer size = X MiB``, ``size = X MiB (C cells, L layers, S/N seqs), K (t): X MiB, V (t): Y MiB``;
           DeepSeek-V4's states: ``csa ratio = 4, state = N x W, streams = S, rs_seq = 0, layers = L, size = X MiB``
TRT-LLM    ``Number of tokens per block: B.``, ``Allocated X GiB for max tokens in paged KV cache (N).``;
           0.8: ``Allocate N bytes for k/v cache.``, ``Using N tokens in paged KV cache.``
========== =========================================================================================

Logged GiB/GB/MiB figures are rounded to two decimals, so a figure "matches" when kvplan's number
prints the same; the causes offered for a difference are the roundings and version differences of each engine's log.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any

from kvplan.engines import get_engine
from kvplan.engines.base import version_tuple
from kvplan.errors import InputError
from kvplan.units import GiB, MiB

_NUM = r"(-?[\d.]+)"
VLLM_AVAILABLE = re.compile(r"Available KV cache memory: " + _NUM + r" GiB")
VLLM_TOKENS = re.compile(r"(?:GPU|[A-Z]+(?: \+ host)?) KV cache size: ([\d,]+) tokens")
VLLM_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
VLLM_NEEDED = re.compile(r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \(([-\d.]+) GiB\)")
VLLM_ESTIMATED = re.compile(r"estimated maximum model length is (\d+)")
VLLM_V0_BLOCKS = re.compile(r"# (?:GPU|CUDA|cuda) blocks: (\d+)")
#: V0 prints the CPU (swap) blocks beside the GPU blocks; vLLM 0.7 with VLLM_USE_V1=1 prints "# GPU blocks: N" alone.
VLLM_V0_CPU_BLOCKS = re.compile(r"# CPU blocks: \d+")
VLLM_V0_TOKENS = re.compile(r"maximum number of tokens that can be stored in KV cache \((\d+)\)")
SGLANG_POOL = re.compile(
    r"KV Cache is allocated\.(?: dtype: [\w.]+,)? #tokens: (\d+), "
    r"(?:KV size: ([\d.]+) GB|K size: ([\d.]+) GB, V size: ([\d.]+) GB)"
)
LLAMA_BUFFER = re.compile(r"(\S+) KV buffer size = +([\d.]+) MiB")
LLAMA_SIZE = re.compile(
    r"size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), "
    r"K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB"
)
#: DeepSeek-V4's compressor states (src/llama-kv-cache-dsv4.cpp, ``llama_dsv4_comp_state``).
LLAMA_DSV4_STATE = re.compile(r"llama_dsv4_comp_state: (\w+) ratio = \d+, state = (\d+) x (\d+), streams = (\d+), "
                              r"rs_seq = \d+, layers = (\d+), size = +([\d.]+) MiB")
#: llama.cpp's context parameters as src/llama-context.cpp logs them ("llama_context: n_ctx                 = 8192",
#: "n_seq_max             = 4", "kv_unified            = false"; older builds: "llama_new_context_with_model:").
LLAMA_N_CTX = re.compile(r"(?:^|[\s:])n_ctx +=\s*(\d+)\s*$")
LLAMA_N_SEQ_MAX = re.compile(r"(?:^|[\s:])n_seq_max +=\s*(\d+)\s*$")
LLAMA_KV_UNIFIED = re.compile(r"(?:^|[\s:])kv_unified +=\s*(true|false)\s*$")
LLAMA_OLD_SIZE = re.compile(r"KV self size += +([\d.]+) MiB, K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB")
#: vLLM's own version: "Initializing a V1 LLM engine (v0.24.0)", V0 "Initializing an LLM engine (v0.6.3)", and
#: "vLLM API server version 0.24.0".
VLLM_VERSION = re.compile(r"(?:Initializing an? (?:V1 )?LLM engine \(v|vLLM API server version v?)(\d+\.\d+(?:\.\d+)?)")
#: ``enable_prefix_caching`` as vLLM echoes it: "non-default args: {... 'enable_prefix_caching': True ...}" or
#: "with config: ... enable_prefix_caching=True".
VLLM_PREFIX_CACHING = re.compile(r"""['"]?enable_prefix_caching['"]?(?::\s*|=)(True|False)""")
TRT_BLOCK = re.compile(r"Number of tokens per block: (\d+)")
#: TensorRT-LLM 0.8 and earlier (NVIDIA/TensorRT-LLM#1400): "Allocate N bytes for k/v cache." and "Using N tokens in
#: paged KV cache."
TRT_OLD_ALLOCATE = re.compile(r"Allocate (\d+) bytes for k/v cache")
TRT_OLD_TOKENS = re.compile(r"Using (\d+) tokens in paged KV cache")
TRT_ALLOCATED = re.compile(r"Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Logged:
    """One figure found in the log."""

    figure: str
    """The ``engine_log`` key it compares with (``gpu_kv_cache_tokens``, ``k_size_bytes`` ...)."""
    value: float
    """In the unit of that key (bytes, tokens, a ratio), as logged (so rounded)."""
    text: str
    """The figure as printed (``5.38``, ``78,384``) - compared after kvplan's number is printed alike."""
    unit: str
    """``GiB``, ``MiB``, ``tokens``, ``x`` or ``blocks``: how the text was printed."""
    line_no: int
    line: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LlamaContext:
    """The context a llama.cpp log says it was started with (src/llama-context.cpp's ``llama_context:`` lines)."""

    n_ctx: Logged | None = None
    """Cells over all slots (``-c``, rounded up by llama.cpp)."""
    n_seq_max: Logged | None = None
    """Slots (``-np``)."""
    kv_unified: bool | None = None
    """``--kv-unified``: one cell pool shared by all slots."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedLog:
    engine: str | None
    figures: tuple[Logged, ...]
    version_hint: str | None
    """A vLLM version inferred from the line forms (None: not decidable)."""
    merged_line: bool = False
    notes: tuple[str, ...] = field(default=())
    version: str | None = None
    """The engine version the log itself names (vLLM "Initializing a V1 LLM engine (v0.24.0)")."""
    prefix_caching: bool | None = None
    """vLLM's ``enable_prefix_caching`` as the log echoes it (None: not echoed)."""
    context: LlamaContext | None = None
    """llama.cpp's ``n_ctx`` / ``n_seq_max`` / ``kv_unified`` as the log prints them (None: not printed)."""

    def first(self, figure: str) -> Logged | None:
        return next((f for f in self.figures if f.figure == figure), None)


def parse_log(text: str) -> ParsedLog:
    """Every KV figure of a pasted vLLM, SGLang, llama.cpp or TensorRT-LLM start-up log."""
    found: list[Logged] = []
    engines: list[str] = []
    merged = one_decimal = v0 = early_v1 = named_v1 = trt_old = False
    cache_index = 0
    named_version: str | None = None
    prefix_caching: bool | None = None
    n_ctx: Logged | None = None
    n_seq_max: Logged | None = None
    kv_unified: bool | None = None

    def add(figure: str, value: float, text: str, unit: str, no: int, line: str) -> None:
        found.append(Logged(figure=figure, value=value, text=text, unit=unit, line_no=no, line=line.strip()))

    for no, line in enumerate(text.splitlines(), start=1):
        if named_version is None and (m := VLLM_VERSION.search(line)):
            named_version = m[1]
            named_v1 = "V1 LLM engine" in line
        if m := VLLM_PREFIX_CACHING.search(line):
            prefix_caching = m[1] == "True"
        if m := VLLM_AVAILABLE.search(line):
            engines.append("vllm")
            add("available_kv_bytes", float(m[1]) * GiB, m[1], "GiB", no, line)
            one_decimal = one_decimal or len(m[1].partition(".")[2]) == 1
        if m := VLLM_TOKENS.search(line):
            engines.append("vllm")
            add("gpu_kv_cache_tokens", int(m[1].replace(",", "")), m[1], "tokens", no, line)
            merged = merged or bool(VLLM_CONCURRENCY.search(line))
        if m := VLLM_CONCURRENCY.search(line):
            engines.append("vllm")
            add("max_concurrency", float(m[2]), m[2], "x", no, line)
            v0 = v0 or ("," not in m[1] and int(m[1]) >= 1000 and not early_v1)
        if m := VLLM_NEEDED.search(line):
            engines.append("vllm")
            add("kv_bytes_per_request", float(m[1]) * GiB, m[1], "GiB", no, line)
        if m := VLLM_ESTIMATED.search(line):
            add("estimated_max_model_len", int(m[1]), m[1], "tokens", no, line)
        if m := VLLM_V0_BLOCKS.search(line):
            engines.append("vllm")
            if VLLM_V0_CPU_BLOCKS.search(line):
                v0 = True
            else:
                early_v1 = True
            add("num_blocks", int(m[1]), m[1], "blocks", no, line)
        if m := VLLM_V0_TOKENS.search(line):
            add("gpu_kv_cache_tokens", int(m[1]), m[1], "tokens", no, line)
        if m := SGLANG_POOL.search(line):
            engines.append("sglang")
            add("max_total_num_tokens", int(m[1]), m[1], "tokens", no, line)
            if m[2] is not None:
                add("kv_size_bytes", float(m[2]) * GiB, m[2], "GiB", no, line)
            else:
                add("k_size_bytes", float(m[3]) * GiB, m[3], "GiB", no, line)
                add("v_size_bytes", float(m[4]) * GiB, m[4], "GiB", no, line)
        if n_ctx is None and (m := LLAMA_N_CTX.search(line)):  # NOTE: context lines are settings, not KV figures
            n_ctx = Logged(figure="n_ctx", value=int(m[1]), text=m[1], unit="tokens", line_no=no, line=line.strip())
        if n_seq_max is None and (m := LLAMA_N_SEQ_MAX.search(line)):
            n_seq_max = Logged(figure="n_seq_max", value=int(m[1]), text=m[1], unit="slots", line_no=no,
                               line=line.strip())
        if kv_unified is None and (m := LLAMA_KV_UNIFIED.search(line)):
            kv_unified = m[1] == "true"
        if m := LLAMA_BUFFER.search(line):
            engines.append("llama.cpp")
            add(f"buffer:{m[1]}", float(m[2]) * MiB, m[2], "MiB", no, line)
        if m := LLAMA_SIZE.search(line):
            engines.append("llama.cpp")
            prefix = f"cache{cache_index}:"
            cache_index += 1
            add(prefix + "cells", int(m[2]), m[2], "cells", no, line)
            add(prefix + "layers", int(m[3]), m[3], "layers", no, line)
            add(prefix + "seqs", 0, f"{m[4]}/{m[5]}", "seqs", no, line)
            add(prefix + "k_type", 0, m[6], "type", no, line)
            add(prefix + "k_bytes", float(m[7]) * MiB, m[7], "MiB", no, line)
            add(prefix + "v_type", 0, m[8], "type", no, line)
            add(prefix + "v_bytes", float(m[9]) * MiB, m[9], "MiB", no, line)
        elif m := LLAMA_DSV4_STATE.search(line):
            engines.append("llama.cpp")
            prefix = f"state:{m[1]}:"
            add(prefix + "cells", int(m[2]), m[2], "cells", no, line)
            add(prefix + "width", int(m[3]), m[3], "cells", no, line)
            add(prefix + "seqs", int(m[4]), m[4], "cells", no, line)
            add(prefix + "layers", int(m[5]), m[5], "layers", no, line)
            add(prefix + "size", float(m[6]) * MiB, m[6], "MiB", no, line)
        elif m := LLAMA_OLD_SIZE.search(line):
            engines.append("llama.cpp")
            prefix = f"cache{cache_index}:"
            cache_index += 1
            add(prefix + "k_type", 0, m[2], "type", no, line)
            add(prefix + "k_bytes", float(m[3]) * MiB, m[3], "MiB", no, line)
            add(prefix + "v_bytes", float(m[5]) * MiB, m[5], "MiB", no, line)
        if m := TRT_BLOCK.search(line):
            engines.append("trtllm")
            add("tokens_per_block", int(m[1]), m[1], "tokens", no, line)
        if m := TRT_OLD_ALLOCATE.search(line):
            engines.append("trtllm")
            trt_old = True
            add("allocated_bytes", int(m[1]), m[1], "bytes", no, line)
        if m := TRT_OLD_TOKENS.search(line):
            engines.append("trtllm")
            trt_old = True
            add("paged_kv_max_tokens", int(m[1]), m[1], "tokens", no, line)
        if m := TRT_ALLOCATED.search(line):
            engines.append("trtllm")
            # NOTE: the PyTorch backend logs a warm-up pool first; the last Allocated line is the real one.
            found[:] = [f for f in found if f.figure not in ("allocated_bytes", "paged_kv_max_tokens")]
            add("allocated_bytes", float(m[1]) * GiB, m[1], "GiB", no, line)
            add("paged_kv_max_tokens", int(m[2]), m[2], "tokens", no, line)
    if not found:
        raise InputError(
            "the log has none of the KV cache lines kvplan reads",
            "paste the engine's start-up log: vLLM 'Available KV cache memory' / 'GPU KV cache size', SGLang 'KV Cache "
            "is allocated', llama.cpp 'llama_kv_cache: size =', TensorRT-LLM 'Allocated ... paged KV cache' (0.8: "
            "'Allocate N bytes for k/v cache')",
        )
    kinds = sorted(set(engines))
    if len(kinds) > 1:
        raise InputError(f"the log mixes lines of {', '.join(kinds)}", "pass the start-up log of one engine")
    version = "0.8" if kinds == ["trtllm"] and trt_old else None
    if kinds != ["vllm"]:
        named_version = prefix_caching = None
    if kinds == ["vllm"]:
        if early_v1:
            v0 = False  # the concurrency line without separators is V0's form and early V1's alike
        version = "0.7-v1" if early_v1 else "0.6" if v0 else "0.33" if merged else "0.21" if one_decimal else None
        if named_version is not None and named_v1 and version_tuple(named_version, engine="vllm")[:2] < (0, 8):
            named_version += "-v1"  # "Initializing a V1 LLM engine (v0.7.3)": VLLM_USE_V1=1 before 0.8
    context = None
    if kinds == ["llama.cpp"] and (n_ctx is not None or n_seq_max is not None or kv_unified is not None):
        context = LlamaContext(n_ctx=n_ctx, n_seq_max=n_seq_max, kv_unified=kv_unified)
    return ParsedLog(engine=kinds[0], figures=tuple(found), version_hint=version, merged_line=merged,
                     version=named_version, prefix_caching=prefix_caching, context=context)


#: A llama.cpp device buffer over its K/V tensors by at most this is the backend's per-tensor alignment padding
#: (ik_llama.cpp PR #370: +0.02 MiB per buffer), not a different layer split.
LLAMA_PADDING_BYTES = MiB // 10
#: Largest log --compare-log reads: an engine's start-up log is kilobytes; a day of serving logs is not needed.
MAX_LOG_BYTES = 64 * 1024**2


def _read_log_text(path: Any) -> str:
    """The text of a regular log file of at most MAX_LOG_BYTES (undecodable bytes replaced): never a device or a
    FIFO, which could be endless or never answer."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"--compare-log {path} is a directory, not a log file", "pass the log file itself")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"--compare-log {path} is not a regular file (a device, FIFO or socket)",
                             "save the log to a file first, e.g. vllm serve ... 2>&1 | tee vllm.log")
        if info.st_size > MAX_LOG_BYTES:
            raise InputError(f"--compare-log {path} is larger than kvplan's {MAX_LOG_BYTES // 1024**2} MiB limit "
                             "for a log", "pass the start-up part of the log (the KV cache lines come first)")
        with open(path, "rb") as handle:
            data = handle.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise InputError(f"--compare-log {path}: cannot read it ({exc.strerror or exc})", "pass a text file") from None
    if len(data) > MAX_LOG_BYTES:
        raise InputError(f"--compare-log {path} is larger than kvplan's {MAX_LOG_BYTES // 1024**2} MiB limit for a log",
                         "pass the start-up part of the log (the KV cache lines come first)")
    return data.decode("utf-8", errors="replace")


def read_log(path: Any, engine: str, gpu: str | None, kv_budget: str | None,
             engine_version: str | None) -> tuple[ParsedLog, str | None, str | None, list[str]]:
    """``--compare-log``: the parsed log, and the --kv-budget and --engine-version it supplies when not given."""
    parsed = parse_log(_read_log_text(path))
    name = get_engine(engine).name
    if parsed.engine != name:
        raise InputError(f"--compare-log {path} is a {parsed.engine} log, but --engine is {name}",
                         f"add --engine {parsed.engine}")
    notes = []
    available = parsed.first("available_kv_bytes")
    if kv_budget is None and gpu is None and available is not None:
        kv_budget = str(int(available.value))
        notes.append(f"KV budget read from the log: {available.text} GiB (line {available.line_no}); logged GiB are "
                     "rounded, so the budget is known to +-0.005 GiB only: pass --kv-budget in bytes to pin it")
    pool = parsed.first("allocated_bytes")
    if kv_budget is None and gpu is None and parsed.engine == "trtllm" and pool is not None:
        kv_budget = str(int(pool.value))
        notes.append(f"KV budget read from the log: the pool TensorRT-LLM allocated, {pool.text} "
                     f"{'bytes' if pool.unit == 'bytes' else 'GiB (rounded: known to +-0.005 GiB)'} (line "
                     f"{pool.line_no})")
    if kv_budget is None and gpu is None and parsed.engine == "llama.cpp":
        logged = _llamacpp_logged_bytes(parsed)
        if logged:
            # NOTE: llama.cpp sizes its cache by -c/-np, not by free memory: the log's own buffers are the budget.
            kv_budget = str(logged)
            notes.append(f"KV budget read from the log: its KV buffers, {logged / MiB:,.2f} MiB (each figure rounded "
                         "to 0.01 MiB, taken at its upper end); llama.cpp sizes its cache by -c and -np, so the "
                         "comparison needs no GPU")
    if engine_version is None and parsed.version is not None:
        engine_version = parsed.version
        notes.append(f"--engine-version {engine_version}: the version the log names")
    elif engine_version is None and parsed.version_hint is not None:
        engine_version = parsed.version_hint
        notes.append(f"--engine-version {engine_version}: the form of the log's lines")
    return parsed, kv_budget, engine_version, notes


def log_budget_from_llama(parsed: ParsedLog, *, given_budget: object, gpu: object, gpu_mem: object) -> bool:
    """Whether :func:`read_log` took the KV budget from a llama.cpp log's own buffers (no --gpu, no --kv-budget)."""
    return parsed.engine == "llama.cpp" and given_budget is None and gpu is None and gpu_mem is None and \
        _llamacpp_logged_bytes(parsed) > 0


def partial_llamacpp_log_note(parsed: ParsedLog, allocated: int, logged: int) -> str:
    """The note when a llama.cpp log shows less KV than -c/-np make llama.cpp allocate: an excerpt."""
    shown = len({f.figure.partition(":")[0] for f in parsed.figures if f.figure.startswith("cache")})
    return (f"KV budget: the log shows {shown} cache line(s) and {logged / MiB:,.2f} MiB of KV buffers, less than the "
            f"{allocated / MiB:,.2f} MiB llama.cpp allocates for these -c/-np (an excerpt?); kvplan takes that "
            "allocation as the budget, so the verdict says only that llama.cpp made it: pass --gpu for a device")


def log_context(context: LlamaContext, parallel: int | None, kv_unified: bool,
                notes: list[str]) -> tuple[str | None, int | None, bool]:
    """``--compare-log`` of a llama.cpp log when no -c / --max-model-len is given: the ``-c``, ``-np`` and
    ``--kv-unified`` the log says it ran with (src/llama-context.cpp prints ``n_ctx``, ``n_seq_max`` and
    ``kv_unified``), so its cache is compared like for like, not the model's maximum context; a note per value."""
    if context.n_ctx is None:
        return None, parallel, kv_unified
    notes.append(f"-c {context.n_ctx.text}: the log's n_ctx (line {context.n_ctx.line_no}), as no -c or "
                 "--max-model-len was given")
    if parallel is None and context.n_seq_max is not None:
        parallel = int(context.n_seq_max.value)
        notes.append(f"-np {parallel}: the log's n_seq_max (line {context.n_seq_max.line_no})")
    if context.kv_unified and not kv_unified:
        kv_unified = True
        notes.append("--kv-unified: the log's kv_unified = true")
    return context.n_ctx.text, parallel, kv_unified


def _llamacpp_logged_bytes(parsed: ParsedLog) -> int:
    """The KV bytes a llama.cpp log shows: its per-device buffers, else its caches' K + V, each at the top of its
    0.01 MiB rounding (0 when it shows none)."""
    buffers = [f for f in parsed.figures if f.figure.startswith("buffer:")]
    sizes = buffers or [f for f in parsed.figures if f.figure.endswith(("k_bytes", "v_bytes"))]
    return int(sum(f.value + 0.005 * MiB for f in sizes))


# ---- comparison ---------------------------------------------------------------------------------------
def _printed(value: float, unit: str, like: str) -> str:
    """kvplan's number printed as the engine printed ``like`` (same decimals, same separators)."""
    if unit in ("GiB", "MiB"):
        scaled = value / (GiB if unit == "GiB" else MiB)
        decimals = len(like.partition(".")[2])
        return f"{scaled:.{decimals}f}" if decimals == 2 else str(round(scaled, 2))
    if unit == "x":
        return f"{value:.2f}"
    if unit == "bytes":
        return str(int(value))
    return f"{int(value):,}" if "," in like else str(int(value))


def _predicted(log: dict[str, Any], figure: str) -> Any:
    if figure.startswith("buffer:"):
        device = figure.partition(":")[2]
        return next((b["bytes"] for b in log["buffers"] if b["device"] == device), None)
    if figure.startswith("state:"):
        _state, name, key = figure.split(":")
        state = next((c for c in log["llama_caches"] if c["name"] == f"{name}_state"), None)
        if state is None:
            return None
        return state["k_bytes"] + state["v_bytes"] if key == "size" else state[key]
    if figure.startswith("cache"):
        index, _, key = figure[5:].partition(":")
        caches = log["llama_caches"]
        if int(index) >= len(caches):
            return None
        cache = caches[int(index)]
        return f"{cache['seqs']}/{cache['streams']}" if key == "seqs" else cache[key]
    return log.get(figure)


def compare_log(parsed: ParsedLog, report: dict[str, Any], *, source: str) -> dict[str, Any]:
    """The ``log_comparison`` block: each logged figure, kvplan's, the difference and a likely cause."""
    log = report["capacity"]["engine_log"]
    rows = []
    for f in parsed.figures:
        predicted = _predicted(log, f.figure)
        if f.figure == "kv_bytes_per_request":
            predicted = report["capacity"]["kv_bytes_per_request"]
        if f.figure == "estimated_max_model_len":
            predicted = report["capacity"]["max_context_len"]
        if f.unit == "type":
            match = predicted == f.text
            rows.append({"figure": f.figure, "line_no": f.line_no, "logged": f.text, "predicted": predicted,
                         "difference": None, "match": match, "cause": None if match else
                         (f"the V cache type: pass -ctv {f.text}" if f.figure.endswith("v_type") else
                          f"the K cache type: pass -ctk {f.text} (= --kv-dtype {f.text}; V follows it unless -ctv)")})
            continue
        if f.unit == "seqs" and predicted is not None:
            match = predicted == f.text
            rows.append({"figure": f.figure, "line_no": f.line_no, "logged": f.text, "predicted": predicted,
                         "difference": None, "match": match, "cause": None if match else _streams_cause(f, log)})
            continue
        if predicted is None:
            rows.append({"figure": f.figure, "line_no": f.line_no, "logged": f.text, "predicted": None,
                         "difference": None, "match": False, "cause": "kvplan predicts no such figure for these flags"})
            continue
        shown = _printed(float(predicted), f.unit, f.text)
        match = shown == f.text
        diff = float(predicted) - f.value
        rows.append({"figure": f.figure, "line_no": f.line_no, "logged": f.text, "predicted": shown,
                     "difference": round(diff / (GiB if f.unit == "GiB" else MiB if f.unit == "MiB" else 1), 4),
                     "match": match, "cause": None if match else _cause(f, report, parsed)})
    return {"source": source, "engine": parsed.engine, "version_hint": parsed.version_hint, "rows": rows,
            "matches": sum(r["match"] for r in rows), "differs": sum(not r["match"] for r in rows)}


def _streams_cause(f: Logged, log: dict[str, Any]) -> str:
    """Why a llama.cpp cache's ``seqs/streams`` differ: -np, -kvu, or DeepSeek-V4's per-sequence streams."""
    caches = log["llama_caches"]
    if any(cache["name"] in ("csa", "hca") for cache in caches):
        empty = caches[int(f.figure[5:].partition(":")[0])]["layers"] == 0
        return ("a llama.cpp version difference: llama.cpp as in llama-cpp-python 0.3.36 keeps DeepSeek-V4's caches "
                "one stream per sequence even under -kvu (src/llama-kv-cache-dsv4.cpp), where the build that wrote "
                "this log unified its raw cache (ggml-org/llama.cpp#22319 logged 4/1)"
                + ("; a cache of 0 layers is 0 bytes either way" if empty else ""))
    return "-np (the sequences, n_seq_max) or -kvu (one stream for all: n/1)"


def _cause(f: Logged, report: dict[str, Any], parsed: ParsedLog) -> str:
    """The likeliest reason a logged figure differs from kvplan's."""
    inputs = report["inputs"]
    engine = inputs["engine"]
    if f.figure == "available_kv_bytes":
        return ("the KV budget: kvplan derived it (an estimate); pass --kv-budget with the logged figure, e.g. "
                f"--kv-budget {f.text}GiB (logged GiB are rounded to +-0.005 GiB)")
    if engine == "vllm" and f.figure == "gpu_kv_cache_tokens":
        return _vllm_tokens_cause(f, report, parsed)
    if engine == "vllm" and f.figure in ("num_blocks", "max_concurrency") and _derived(report, parsed):
        return _derived_budget_cause(f, report)
    if engine == "vllm" and f.figure == "max_concurrency":
        cause = _budget_cause(f, report, parsed, explains=_rounding_gives_concurrency(f, report, parsed))
        if cause.startswith("the budget") and _groups(report) > 1:
            return ("--max-num-batched-tokens: a sliding/chunked group needs min(W - 1 + max_num_batched_tokens, T) per "
                    "request (vLLM's default depends on version, GPU and usage context); --enable-prefix-caching: a "
                    "recurrent-state group holds 2 pages per request; or the budget")
        return cause
    if engine == "sglang":
        if f.figure == "max_total_num_tokens":
            return ("the budget: SGLang sizes from free memory x --mem-fraction-static after weights; pass --kv-budget "
                    "(#tokens x bytes per token), or --block-size (page_size) / --kv-dtype")
        return ("with #tokens matching: --kv-dtype, --tp/--dp (--enable-dp-attention), or the version (DSA 'KV size' "
                "includes the indexer since sglang#11309)")
    if engine == "llama.cpp":
        if f.figure.startswith("state:"):
            return ("DeepSeek-V4's compressor states: llama.cpp as in llama-cpp-python 0.3.36 keeps one per sequence "
                    "(-np) even under -kvu, float32, with rows and width from head_dim and index_head_dim "
                    "(src/llama-kv-cache-dsv4.cpp); another build may differ")
        if f.figure.endswith("cells"):
            return "-c/-np (per-slot context padded to 256), -kvu, -ub (SWA cache slack), or --swa-full"
        if f.figure.startswith("buffer:"):
            predicted = _predicted(report["capacity"]["engine_log"], f.figure)
            if predicted is not None and 0 < f.value - predicted <= LLAMA_PADDING_BYTES:
                return (f"backend padding, not the layer split: the device buffer is {(f.value - predicted) / MiB:.2f} "
                        "MiB over the K/V tensors' bytes because the backend rounds each tensor's allocation up to its "
                        "alignment (ik_llama.cpp PR #370 logs 816.02 / 782.02 MiB for 816.00 / 782.00 MiB of tensors); "
                        "the cache itself is as predicted")
            return "the layer split: --tensor-split/-ts (llama.cpp's default splits by free memory per device), or -ngl"
        return "-ctk/-ctv (cache types), flash attention (V transposed), or a layer count (MTP/NextN layers excluded)"
    if engine == "trtllm":
        if f.figure == "tokens_per_block":
            return f"tokens_per_block: pass --block-size {f.text}"
        return ("the budget: free_gpu_memory_fraction applies to the memory free after weights and warm-up, and "
                "max_tokens caps it; pass --kv-budget (the pool bytes) and --block-size")
    return "a flag kvplan was not told"


def _vllm_tokens_cause(f: Logged, report: dict[str, Any], parsed: ParsedLog) -> str:
    """Which vLLM token formula (0.10-0.20 or >= 0.21) and which budget within the logged GiB's rounding
    give the logged count (vLLM ``v1/core/kv_cache_utils.py``)."""
    log, cap = report["capacity"]["engine_log"], report["capacity"]
    blocks, bs, groups = log["num_blocks"] or 0, cap["block_size"], _groups(report)
    if not blocks:
        return _budget_cause(f, report, parsed)
    per_block = log["bytes_per_block"] or report["budget"]["kv_bytes_per_gpu"] / blocks
    per_request = blocks / cap["max_concurrency"] if cap["max_concurrency"] else 0
    mml = report["inputs"]["max_model_len"]
    avail = parsed.first("available_kv_bytes")
    lo, hi = blocks, blocks
    if avail is not None:
        lo, hi = int((avail.value - 0.005 * GiB) // per_block), int((avail.value + 0.005 * GiB) // per_block)
    legacy = {b // groups * bs for b in range(lo, hi + 1)}
    current = {int(b / per_request * mml) for b in range(lo, hi + 1)} if per_request else set()
    rounding = f"; the logged {avail.text} GiB stands for {lo:,}-{hi:,} blocks" if avail is not None else ""
    if f.value in legacy:
        exact = sorted(b for b in range(lo, hi + 1) if b // groups * bs == f.value)
        return (f"a version difference: vLLM 0.10-0.20 print num_blocks // {groups} groups * block_size; pass "
                f"--engine-version 0.11" + (f"{rounding}; {f.text} tokens = {exact[0]:,} blocks: pass --kv-budget "
                                            f"{int(exact[0] * per_block + 0.5)}" if exact[0] != blocks else ""))
    if f.value in current:
        exact = sorted(b for b in range(lo, hi + 1) if int(b / per_request * mml) == f.value)
        return (f"rounding{rounding}; {f.text} tokens = {exact[0]:,} blocks (vLLM >= 0.21: concurrency x "
                f"max_model_len): pass --kv-budget {int(exact[0] * per_block + 0.5)}")
    return _budget_cause(f, report, parsed)


def _derived(report: dict[str, Any], parsed: ParsedLog) -> bool:
    """kvplan derived the budget and the log gives none to take (a log with only blocks and concurrency)."""
    return report["inputs"]["kv_budget_bytes"] is None and parsed.first("available_kv_bytes") is None


def _derived_budget_cause(f: Logged, report: dict[str, Any]) -> str:
    """``# GPU blocks: N`` or the concurrency differs on a derived budget: whether kvplan's range reaches the
    logged figure, and (blocks) the --kv-budget that gives it (any budget of N to N + 1 blocks' bytes)."""
    cap, per_block = report["capacity"], report["capacity"]["engine_log"]["bytes_per_block"]
    blocks = f.figure == "num_blocks"
    span = cap.get("num_blocks_range" if blocks else "max_concurrency_range")
    shown = (f"{span[0]:,}-{span[1]:,} blocks" if blocks else f"{span[0]:.2f}-{span[1]:.2f}x") if span else ""
    reach = (f", within the {shown} kvplan's derivation can give (the range row)"
             if span and span[0] <= f.value <= span[1] else f", outside the {shown} kvplan's derivation can give"
             if span else "")
    pin = (f": pass --kv-budget {int(f.value) * per_block} ({f.text} blocks x {per_block:,} B) to compare the rest"
           if blocks and per_block else ": pass --kv-budget with the engine's KV bytes (its '# GPU blocks' x the "
           "bytes of a block)")
    return f"the KV budget kvplan derived (an estimate of vLLM's profile run){reach}{pin}"


def _budget_cause(f: Logged, report: dict[str, Any], parsed: ParsedLog, *, explains: bool = True) -> str:
    """The budget as the cause; its rounding only when a budget within the logged GiB's rounding (``explains``)
    can give the logged figure."""
    logged = parsed.first("available_kv_bytes")
    given = report["inputs"]["kv_budget_bytes"]
    if logged is not None and given is not None and abs(given - logged.value) <= 0.005 * GiB:
        if explains:
            return (f"rounding of the logged {logged.text} GiB: it stands for any budget within +-0.005 GiB, several "
                    "blocks either way; pass the exact --kv-budget in bytes to pin it")
        return (f"not the budget: no budget within the logged {logged.text} GiB's rounding gives {f.text}; the blocks "
                "one request needs differ: --max-model-len, --max-num-batched-tokens (sliding layers), "
                "--enable-prefix-caching (recurrent-state layers), --block-size or --kv-dtype")
    return "the budget, or --block-size / --kv-dtype / --max-model-len"


def _rounding_gives_concurrency(f: Logged, report: dict[str, Any], parsed: ParsedLog) -> bool:
    """Whether some block count within the logged budget's +-0.005 GiB prints the logged concurrency."""
    log, cap = report["capacity"]["engine_log"], report["capacity"]
    avail, blocks = parsed.first("available_kv_bytes"), log["num_blocks"] or 0
    if avail is None or not blocks or not cap["max_concurrency"]:
        return True  # nothing to check against: the rounding stays a candidate
    per_block = log["bytes_per_block"] or report["budget"]["kv_bytes_per_gpu"] / blocks
    per_request = blocks / cap["max_concurrency"]
    lo, hi = int((avail.value - 0.005 * GiB) // per_block), int((avail.value + 0.005 * GiB) // per_block)
    return any(f"{b / per_request:.2f}" == f.text for b in range(lo, hi + 1))


def _groups(report: dict[str, Any]) -> int:
    return report["capacity"]["engine_log"]["num_kv_cache_groups"] or 1
