"""The public Python API: the reach of `kvplan estimate`, `kvplan capacity` and `kvplan compare`, without a
process each. The commands are this module's functions, their flags parsed and their results rendered.

::

    import kvplan

    geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B")     # parsed once, cached per process
    for tp in (1, 2, 4):
        est = kvplan.estimate(geometry, seq_len="32k", batch=8, engine="vllm", tp=tp)
        print(tp, est.kv_cache_bytes_per_gpu)
    cap = kvplan.capacity(geometry, gpu="H100", max_model_len="32k")
    cap.to_dict() == the `kvplan capacity --format json` report
    kvplan.compare(["mha", "gqa", "mla"], model=geometry, seq_len="32k").to_dict()

Every keyword is the command's flag with underscores; results carry the domain object (``Estimate``,
``Capacity``, ``Comparison``) and ``to_dict()``, the command's report. No typer, rich, Hub client or torch is
imported here (the Hub client only when a model is fetched from the Hub).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import shlex
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.adjust import DEFAULT_RESIDUAL_LENGTH, Adjustment, Offload, deployment_from_flags, value_type_name
from kvplan.calc import Estimate, Replicas, replicas, with_adjustments
from kvplan.calc import estimate as calc_estimate
from kvplan.dtypes import DEFAULT_GROUP_SIZE, lookup_dtype
from kvplan.engine_flags import (
    check_engine_version,
    cpu_offload_bytes,
    engine_flag,
    engine_for,
    flash_attn_notes,
    flash_attn_off,
    kv_host_layers,
    kv_types,
    llama_context,
    quantised_for,
    tensor_split_shares,
    typed_length,
    typed_tokens,
    vllm_tokens,
    weights_on_gpu,
)
from kvplan.engines import EngineProfile, get_engine
from kvplan.engines.base import without_mla
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.modelref import Geometry, load, normalise_overrides, resolve
from kvplan.models import (
    WeightsEstimate,
    check_defaults,
    resolve_weights,
)
from kvplan.report import estimate_report
from kvplan.safeload import load_yaml, read_bounded_text
from kvplan.sources import Source
from kvplan.units import format_bytes, parse_size, parse_tokens

if TYPE_CHECKING:
    from kvplan.capacity_types import Capacity
    from kvplan.gpus import GpuSpec
    from kvplan.layouts import Comparison
    from kvplan.logparse import ParsedLog
    from kvplan.recommender import Recommendation

# NOTE: `kvplan estimate` starts without the capacity search and the compare layouts: capacity(), compare(),
# their results and the weights count import their own machinery (kvplan.fit, kvplan.layouts, their report
# builders, the GPU catalog, log and GGUF readers) when called. Imported here, it cost `kvplan estimate` about
# 20 ms of a 140 ms start-up (python benchmarks/bench_estimate.py).

#: Parsed models kept per process (least recently used dropped first).
GEOMETRY_CACHE_SIZE = 64
_CACHE: OrderedDict[tuple[Any, ...], Geometry] = OrderedDict()


def load_geometry(
    model: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    gguf_file: str | None = None,
) -> Geometry:
    """Resolve ``model`` (a path, a bundled id or alias, a Hub id or URL, or a GGUF: a ``.gguf`` path or folder,
    ``org/repo:Q4_K_M``, or a repo with ``gguf_file``) and parse its per-layer geometry
    (:mod:`kvplan.modelref`). Parsed once per process: the same resolved model (and, for a local file, the same
    size and time) with the same overrides returns the same object."""
    resolved = normalise_overrides(overrides)
    ref = resolve(model, revision=revision, gguf_file=gguf_file)
    key = (ref.cache_key(), json.dumps(resolved, sort_keys=True, default=repr))
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    geometry = _CACHE[key] = load(ref, token=token, overrides=resolved)
    while len(_CACHE) > GEOMETRY_CACHE_SIZE:
        _CACHE.popitem(last=False)
    return geometry


def clear_cache() -> None:
    """Forget every parsed model (a config file changed in place is noticed anyway, by size and time)."""
    _CACHE.clear()


def _geometry(
    model: str | Geometry | ModelGeometry, *, revision: str | None, token: str | None,
    overrides: Mapping[str, Any] | Iterable[str] | None, gguf_file: str | None = None,
) -> tuple[ModelGeometry, Source | None, dict[str, Any]]:
    if isinstance(model, Geometry):
        if overrides:
            raise _input_error("overrides apply when a model is loaded", "pass overrides to kvplan.load_geometry")
        return model.model_geometry, model.source, dict(model.overrides)
    if isinstance(model, ModelGeometry):
        return model, None, normalise_overrides(overrides)
    loaded = load_geometry(model, revision=revision, token=token, overrides=overrides, gguf_file=gguf_file)
    return loaded.model_geometry, loaded.source, dict(loaded.overrides)


def _input_error(message: str, hint: str) -> Exception:
    return InputError(message, hint)


def _no_model() -> Exception:
    return InputError("no model given", "pass --model MODEL (a Hub id, a config.json, a .gguf), or the engine's "
                      "launch line as --cmd '...'")


def _from_launch(fn: Any, cmd: str, params: dict[str, Any]) -> Any:
    """``fn(**params)`` with ``cmd`` (an engine's launch line) read into its keywords (:mod:`kvplan.launch`):
    a keyword also given here must agree with the line; the line's reading leads the notes."""
    # NOTE: lazy: the launch-line readers cost `kvplan estimate` 2.8 ms at import; they serve --cmd only.
    from kvplan.launch import merge, read_launch

    launch = read_launch(cmd)
    signature = inspect.signature(fn)
    explicit = {name: value for name, value in params.items()
                if name != "cmd" and value != signature.parameters[name].default}
    kwargs, notes = merge(launch, explicit, accepted=[n for n in signature.parameters if n != "cmd"])
    result = fn(**kwargs)
    if isinstance(result, EstimateResult):
        return replace(result, flag_notes=(*notes, *result.flag_notes))
    return replace(result, weight_notes=(*notes, *result.weight_notes))


# ---- estimate ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateResult:
    """``kvplan.estimate``'s answer: the :class:`~kvplan.calc.Estimate` (its attributes read through:
    ``kv_cache_bytes``, ``kv_cache_bytes_per_gpu``, ``groups``, ``adjustments`` ...) and ``to_dict()``, the
    `kvplan estimate` report. The bytes are priced when the result is made; the adjustment walk (each bend
    of the formula, priced one knob at a time) when ``adjustments``, ``estimate`` or ``to_dict()`` is read,
    so a sweep that reads bytes does not pay for it."""

    priced: Estimate
    """The estimate without its adjustment walk (``adjustments`` empty)."""
    source: Source | None
    """Where the config came from; None for a bare ModelGeometry (the report's source fields are null)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    length_flag: str | None = None
    """The length flag the user typed (``--seq-len`` or ``--max-model-len``): the report names it."""
    flag_notes: tuple[str, ...] = ()
    """Notes on how vLLM-named token counts were read (``"8k"`` = 8,000)."""
    replicas: Replicas | None = None
    """``dp`` > 1: the data-parallel replicas; ``priced`` is then the busiest replica's cache."""
    lightest: Estimate | None = None
    """``dp`` > 1 and a batch that does not divide evenly: the cache of a replica with one sequence less."""

    @property
    def dp(self) -> int:
        return 1 if self.replicas is None else self.replicas.dp

    @property
    def batch(self) -> int:
        """Sequences over all replicas."""
        return self.priced.batch if self.replicas is None else self.replicas.batch

    @property
    def num_gpus(self) -> int:
        """GPUs of the deployment, every replica."""
        return self.priced.num_gpus if self.replicas is None else self.replicas.gpus

    def _over_replicas(self, name: str) -> int:
        busiest: int = getattr(self.priced, name)
        if self.replicas is None:
            return busiest
        group, rest = self.replicas, self.replicas.dp - self.replicas.busiest_count
        return busiest * group.busiest_count + (getattr(self.lightest, name) * rest if self.lightest is not None else 0)

    @property
    def kv_cache_bytes(self) -> int:
        """The whole cache, every replica (``kv_cache_bytes_per_gpu``: the busiest replica's most loaded GPU)."""
        return self._over_replicas("kv_cache_bytes")

    @property
    def peak_bytes(self) -> int:
        return self._over_replicas("peak_bytes")

    @property
    def cpu_bytes(self) -> int:
        return self._over_replicas("cpu_bytes")

    @property
    def state_bytes(self) -> int:
        return self._over_replicas("state_bytes")

    @property
    def cross_attention_bytes(self) -> int:
        return self._over_replicas("cross_attention_bytes")

    @property
    def estimate(self) -> Estimate:
        """The whole :class:`~kvplan.calc.Estimate`, its adjustments listed."""
        return with_adjustments(self.priced)

    @property
    def adjustments(self) -> tuple[Adjustment, ...]:
        """Each bend of the formula, in the order applied."""
        return self.estimate.adjustments

    def __getattr__(self, name: str) -> Any:
        if name == "priced":
            raise AttributeError(name)
        return getattr(self.priced, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan estimate --format json` report."""
        group = self.replicas
        totals = None if group is None else {name: getattr(self, name) for name in (
            "kv_cache_bytes", "state_bytes", "cross_attention_bytes", "peak_bytes", "cpu_bytes")}
        return estimate_report(self.estimate, self.source, overrides=dict(self.overrides),
                               length_flag=self.length_flag, notes=self.flag_notes, dp=self.dp, replicas=group,
                               replica_totals=totals)


def estimate(
    model: str | Geometry | ModelGeometry | None = None,
    *,
    batch: int = 1,
    seq_len: int | str | None = None,
    max_model_len: int | str | None = None,
    kv_dtype: str = "auto",
    encoder_len: int | str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    engine: str | None = None,
    tp: int = 1,
    pp: int = 1,
    block_size: int | None = None,
    beams: int = 1,
    prompt_len: int | str | None = None,
    share_prefix: bool = False,
    shared_prefix_tokens: int | str | None = None,
    no_window: bool = False,
    quant_group_size: int = DEFAULT_GROUP_SIZE,
    residual_length: int = DEFAULT_RESIDUAL_LENGTH,
    offload: str | float | None = None,
    max_num_batched_tokens: int | str | None = None,
    max_num_seqs: int | None = None,
    ubatch_size: int | None = None,
    kv_unified: bool = False,
    swa_full_tokens_ratio: float | None = None,
    max_cache_len: int | str | None = None,
    gguf_file: str | None = None,
    cache_type_k: str | None = None,
    cache_type_v: str | None = None,
    no_mla: bool = False,
    strict: bool = False,
    allow_defaults: bool = False,
    ctx_size: int | str | None = None,
    parallel: int | None = None,
    n_gpu_layers: int | None = None,
    no_kv_offload: bool = False,
    flash_attn: str | None = None,
    cmd: str | None = None,
    enable_prefix_caching: bool | None = None,
    dp: int = 1,
    enable_dp_attention: bool = False,
) -> EstimateResult:
    """`kvplan estimate`: the KV cache of ``batch`` sequences of ``seq_len`` tokens (``"32k"`` = 32,768), or of
    ``max_model_len`` read as vLLM reads it (``"32k"`` = 32,000), with every sizing flag of the command (engine,
    tp, pp, block_size, beams, kv_dtype, llama.cpp's cache_type_k/cache_type_v ...); a config whose
    layer count, heads or hidden size would come from architecture defaults is refused (exit 2) unless
    ``allow_defaults`` (``strict`` refuses a nested sub-config's defaults too). ``engine`` None: llama.cpp for a GGUF,
    else ``ideal``; llama.cpp's ``ctx_size``/``parallel`` (``-c``/``-np``), ``n_gpu_layers`` (``-ngl``),
    ``no_kv_offload`` (``-nkvo``) and ``flash_attn`` (``-fa``); ``cmd``: an engine's launch line, read as that
    engine reads it (:mod:`kvplan.launch`), beside these keywords; ``enable_prefix_caching``: vLLM's flag (None:
    the default of the newest vLLM kvplan read; with it recurrent-state layers hold one more page per sequence);
    ``dp``: data-parallel replicas sharing the ``batch`` (vLLM ``--data-parallel-size`` and SGLang ``--dp``, each
    ``tp`` x ``pp`` GPUs; with SGLang's ``enable_dp_attention`` the ranks split the ``tp`` GPUs instead): the
    busiest holds ceil(batch / dp) sequences, and the result's per-GPU bytes are its, its totals those of every
    replica."""
    if cmd is not None:
        return _from_launch(estimate, cmd, locals())
    if model is None:
        raise _no_model()
    engine, engine_notes = engine_for(model, gguf_file, engine, fallback="ideal")
    kv_dtype, cache_type_v = kv_types(kv_dtype, cache_type_k, cache_type_v, engine)
    flag_notes_fa = flash_attn_notes(flash_attn, engine, cache_type_v or kv_dtype)
    if "," in kv_dtype:
        named = model if isinstance(model, str) else model.model_id
        if ctx_size is not None or parallel is not None:
            # NOTE: compare has no -c/-np: llama.cpp's -c cells over -np slots are the tokens of each slot.
            model_max = None
            if ctx_size is not None and str(ctx_size).strip() == "0":
                model_max = _geometry(model, revision=revision, token=token, overrides=overrides,
                                      gguf_file=gguf_file)[0].max_context_tokens
            per_slot, batch, _note = llama_context(_text(ctx_size), parallel, _text(max_model_len), batch, engine,
                                                   kv_unified=kv_unified, model_max=model_max)
            seq_len, max_model_len = (per_slot, None) if per_slot is not None else (seq_len, max_model_len)
        # NOTE: the hint keeps every flag compare also reads, so running it answers the same question.
        kept = {"--revision": revision, "--gguf-file": gguf_file, "--batch": batch if batch != 1 else None,
                "--seq-len": seq_len, "--max-model-len": max_model_len, "--kv-dtype": kv_dtype,
                "--engine": engine if engine != "ideal" else None, "--tp": tp if tp != 1 else None,
                "--pp": pp if pp != 1 else None, "--block-size": block_size}
        words = ["kvplan", "compare", "model", "--model", str(named)]
        for flag, value in kept.items():
            words += [flag, str(value)] if value is not None else []
        words += [flag for flag, on in (("--strict", strict), ("--allow-defaults", allow_defaults)) if on]
        dropped = [flag for flag, given in (
            ("--set", overrides), ("--encoder-len", encoder_len), ("--beams", beams != 1), ("--prompt-len", prompt_len),
            ("--share-prefix", share_prefix), ("--shared-prefix-tokens", shared_prefix_tokens),
            ("--no-window", no_window), ("--offload", offload), ("--max-num-batched-tokens", max_num_batched_tokens),
            ("--ubatch-size", ubatch_size), ("--kv-unified", kv_unified), ("--dp", dp != 1), ("--no-mla", no_mla), ("--max-cache-len", max_cache_len)) if given]
        raise InputError(f"estimate sizes one KV dtype, got --kv-dtype {kv_dtype}",
                         f"compare them in one run: {shlex.join(words)}" + (
                             f" (compare takes no {', '.join(dropped)}: it sizes without them)" if dropped else ""))
    geometry, source, resolved = _geometry(model, revision=revision, token=token, overrides=overrides,
                                           gguf_file=gguf_file)
    ctx_note = None
    if ctx_size is not None or parallel is not None:
        if seq_len is not None:
            raise InputError("give --ctx-size/-c (llama.cpp) or --seq-len, not both",
                             "-c is the cells over all slots; --seq-len the tokens of one")
        text, batch, ctx_note = llama_context(_text(ctx_size), parallel, _text(max_model_len), batch, engine,
                                              kv_unified=kv_unified, model_max=geometry.max_context_tokens)
        max_model_len = text
    tokens, length_flag, len_note = typed_tokens(seq_len, max_model_len)
    batched, batched_note = vllm_tokens(max_num_batched_tokens, "--max-num-batched-tokens")
    enc = parse_tokens(encoder_len, what="--encoder-len") if encoder_len is not None else None
    check_defaults(geometry, allow_defaults=allow_defaults, strict=strict)
    cpu_layers, layer_notes = kv_host_layers(geometry.num_hidden_layers, n_gpu_layers, no_kv_offload, engine)
    if cpu_layers:
        if offload is not None:
            raise InputError("--offload and llama.cpp's -ngl/-nkvo both place KV in host memory", "pass one of them")
        offload = f"layers:{cpu_layers}"
    deployment = deployment_from_flags(
        engine=engine, tp=tp, pp=pp, block_size=block_size, beams=beams, prompt_len=prompt_len,
        share_prefix=share_prefix, shared_prefix_tokens=shared_prefix_tokens, no_window=no_window,
        quant_group_size=quant_group_size, residual_length=residual_length,
        offload=None if offload is None else str(offload), max_num_batched_tokens=batched,
        max_num_seqs=max_num_seqs, ubatch_size=ubatch_size, kv_unified=kv_unified,
        swa_full_tokens_ratio=swa_full_tokens_ratio, max_cache_len=max_cache_len, cache_type_v=cache_type_v,
    )
    if no_mla:
        geometry = mla_off(geometry, source, deployment.engine)
    v_row, v_notes = get_engine(deployment.engine).padded_v_row(geometry.layers, flash_attn_off=flash_attn_off(flash_attn))
    deployment = replace(deployment, v_row_elems=v_row)
    flag_notes_fa += v_notes
    if enable_prefix_caching is not None:
        engine_flag(deployment.engine, "--enable-prefix-caching")
    caching, caching_notes = get_engine(deployment.engine).resolve_prefix_caching(enable_prefix_caching, None,
                                                                                   geometry.layers)
    deployment = replace(deployment, enable_prefix_caching=caching)
    dp_note = None
    if enable_dp_attention and not get_engine(deployment.engine).dp_within_tp:
        # NOTE: a launch line's vLLM --enable-expert-parallel reads as this flag: the experts move, not the KV cache.
        dp_note = (f"--enable-dp-attention: {deployment.engine}'s --dp replicas each hold their own KV cache "
                   "already (expert or attention data parallelism moves weights, not the cache); the estimate is the "
                   "same without it")
    group = replicas(dp, batch=batch, tp=deployment.tp, pp=deployment.pp, engine=get_engine(deployment.engine),
                     dp_attention=enable_dp_attention)
    deployment = replace(deployment, tp=group.replica_tp)
    est = calc_estimate(geometry, batch=group.busiest_batch, seq_len=tokens, kv_dtype=kv_dtype, encoder_len=enc,
                        deployment=deployment, adjustments=False)
    lightest = None
    if group.lightest_batch and group.lightest_batch != group.busiest_batch:
        lightest = calc_estimate(geometry, batch=group.lightest_batch, seq_len=tokens, kv_dtype=kv_dtype,
                                 encoder_len=enc, deployment=deployment, adjustments=False)
    notes = (*engine_notes, *flag_notes_fa, *layer_notes,
             *(n for n in (ctx_note, len_note, batched_note, *caching_notes, dp_note) if n))
    return EstimateResult(priced=est, source=source, overrides=resolved, length_flag=length_flag, flag_notes=notes,
                          replicas=group if group.dp > 1 else None, lightest=lightest)


def _text(value: int | str | None) -> str | None:
    return None if value is None else str(value)


# ---- capacity ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityResult:
    """``kvplan.capacity``'s answer: the :class:`~kvplan.capacity_types.Capacity` (its attributes read through:
    ``fits``, ``max_context_len``, ``max_concurrent_requests``, ``min_tp`` ...) and ``to_dict()``, the
    `kvplan capacity` report."""

    capacity: Capacity
    source: Source
    weight_notes: tuple[str, ...] = ()
    """Where the weights came from, how the flags were read, what a --compare-log supplied."""
    length_flag: str | None = None
    """The length flag the user typed (``--seq-len`` or ``--max-model-len``): the report names it."""
    log: ParsedLog | None = None
    """The engine start-up log of ``compare_log``, whose KV figures the report puts beside kvplan's."""
    log_source: str | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "capacity":
            raise AttributeError(name)
        return getattr(self.capacity, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan capacity --format json` report."""
        # NOTE: lazy: capacity's report builder (with kvplan.fit) costs `kvplan estimate` 8 ms at import.
        from kvplan.report.capacity import capacity_report

        return capacity_report(self.capacity, self.source, length_flag=self.length_flag, notes=self.weight_notes,
                               log=self.log, log_source=self.log_source)

    def kv_per_gpu_curve(self, seq_lens: Sequence[int], *, batch: int) -> list[int]:
        """KV bytes ``batch`` requests of each length need on the busiest GPU, by the plan's own engine rule
        (what `kvplan capacity --plot` draws against the KV budget)."""
        # NOTE: lazy: kvplan.fit costs `kvplan estimate` 6.6 ms at import.
        from kvplan.fit import kv_per_gpu_curve

        return kv_per_gpu_curve(self.capacity, seq_lens, batch=batch)


def capacity(
    model: str | Geometry | None = None,
    *,
    gpu: str | GpuSpec | None = None,
    gpu_mem: int | str | None = None,
    gpu_bandwidth: str | None = None,
    num_gpus: int | None = None,
    tp: int | None = None,
    pp: int = 1,
    engine: str | None = None,
    kv_dtype: str = "auto",
    dtype: str = "auto",
    max_model_len: int | str | None = None,
    seq_len: int | str | None = None,
    batch: int = 1,
    gpu_memory_utilization: float | None = None,
    mem_fraction_static: float | None = None,
    free_gpu_memory_fraction: float | None = None,
    max_num_batched_tokens: int | str | None = None,
    reserve: int | str | None = None,
    kv_budget: int | str | Sequence[int | str] | None = None,
    weights_bytes: int | str | None = None,
    weights_from: str = "auto",
    weights_quant: str | None = None,
    block_size: int | None = None,
    engine_version: str | None = None,
    dp: int = 1,
    enable_dp_attention: bool = False,
    kv_unified: bool = False,
    ubatch_size: int | None = None,
    tensor_split: str | None = None,
    ctx_size: int | str | None = None,
    parallel: int | None = None,
    compare_log: str | Path | None = None,
    revision: str | None = None,
    token: str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    gguf_file: str | None = None,
    cache_type_k: str | None = None,
    cache_type_v: str | None = None,
    no_window: bool = False,
    no_mla: bool = False,
    strict: bool = False,
    allow_defaults: bool = False,
    max_num_seqs: int | None = None,
    enforce_eager: bool = False,
    cpu_offload_gb: float | None = None,
    quantization: str | None = None,
    n_gpu_layers: int | None = None,
    no_kv_offload: bool = False,
    flash_attn: str | None = None,
    cmd: str | None = None,
    enable_prefix_caching: bool | None = None,
) -> CapacityResult:
    """`kvplan capacity`: what fits on ``gpu`` (a catalog name, ``"local"`` for this machine's first GPU, or a
    ``GpuSpec``; ``gpu_mem`` for any other): KV blocks and tokens, max concurrency and context, minimum TP, decode floor. ``max_model_len``
    reads ``"32k"`` as vLLM does (32,000), ``seq_len`` as kvplan does (32,768); ``compare_log``: an engine's
    start-up log, whose KV figures the report puts beside kvplan's (and whose budget and version it reads
    when not given); a config whose layer count, heads or hidden size would come
    from architecture defaults is refused unless ``allow_defaults`` (``strict`` refuses a sub-config's defaults too).
    ``engine`` None: llama.cpp for a GGUF, else vLLM. vLLM's ``max_num_seqs``, ``enforce_eager`` (no CUDA graph
    memory), ``cpu_offload_gb`` (weights per GPU in host memory) and ``quantization`` (``fp8``: a 16-bit
    checkpoint quantised on load); llama.cpp's ``n_gpu_layers`` (``-ngl``), ``no_kv_offload`` (``-nkvo``) and
    ``flash_attn`` (``-fa``); ``cmd``: an engine's launch line, read as that engine reads it (:mod:`kvplan.launch`),
    beside these keywords; ``enable_prefix_caching``: vLLM's ``--enable-prefix-caching`` (None: the
    engine version's default; with it vLLM's recurrent-state layers hold one more page per request)."""
    if cmd is not None:
        return _from_launch(capacity, cmd, locals())
    if model is None:
        raise _no_model()
    engine, engine_notes = engine_for(model, gguf_file, engine, fallback="vllm")
    check_engine_version(engine, engine_version)
    # NOTE: lazy: the capacity search, GPU catalog and log reader cost `kvplan estimate` 8-10 ms at import.
    from kvplan.capacity_types import CapacityInputs
    from kvplan.fit import plan_capacity
    from kvplan.gpus import GpuSpec
    from kvplan.logparse import log_budget_from_llama, log_context, partial_llamacpp_log_note, read_log

    local_notes: list[str] = []
    if isinstance(gpu, str) and gpu.strip().lower() == "local":
        # NOTE: lazy: --gpu local only (2.4 ms at import; it reaches torch through kvplan.verify).
        from kvplan.localgpu import read_local_gpu

        gpu, local_notes = read_local_gpu()
    text, length_flag = typed_length(_text(seq_len), _text(max_model_len))
    if length_flag == "--seq-len" and text is not None:
        # NOTE: kvplan's --seq-len reads k as 1024; max_model_len (vLLM's name) reads it as vLLM does.
        max_model_len = str(parse_tokens(text, what="--seq-len"))
    kv_dtype, cache_type_v = kv_types(kv_dtype, cache_type_k, cache_type_v, engine)
    engine_notes += flash_attn_notes(flash_attn, engine, cache_type_v or kv_dtype)
    log: ParsedLog | None = None
    log_notes: list[str] = []
    if kv_budget is not None and not isinstance(kv_budget, (int, str)):
        kv_budget = ",".join(str(item) for item in kv_budget)
    kv_budget_given = kv_budget
    if compare_log is not None:
        named_gpu = gpu.name if isinstance(gpu, GpuSpec) else gpu
        log, budget_text, engine_version, log_notes = read_log(
            compare_log, engine, named_gpu if named_gpu is not None else _text(gpu_mem), _text(kv_budget),
            engine_version)
        kv_budget = budget_text
        if enable_prefix_caching is None and log.prefix_caching is not None:
            enable_prefix_caching = log.prefix_caching
            log_notes.append(f"enable_prefix_caching={log.prefix_caching}: as the log echoes vLLM's arguments")
        if log.context is not None and ctx_size is None and max_model_len is None:
            ctx_size, parallel, kv_unified = log_context(log.context, parallel, kv_unified, log_notes)

    # NOTE: with --kv-budget alone the GPU is irrelevant to blocks, tokens and concurrency.
    no_gpu = gpu is None and gpu_mem is None and kv_budget is not None
    gpu_spec = None if no_gpu else resolve_gpu(gpu, gpu_mem, gpu_bandwidth)

    def size(value: int | str | None, what: str) -> int | None:
        return parse_size(value, what=what) if value is not None else None

    if isinstance(model, Geometry):
        if overrides:
            raise InputError("overrides apply when a model is loaded", "pass overrides to kvplan.load_geometry")
        loaded = model
    else:
        loaded = load_geometry(model, revision=revision, token=token, overrides=overrides, gguf_file=gguf_file)
    check_defaults(loaded.model_geometry, allow_defaults=allow_defaults, strict=strict)
    if no_mla:
        loaded = replace(loaded, model_geometry=mla_off(loaded.model_geometry, loaded.source, engine))
    max_model_len, batch, ctx_note = llama_context(
        _text(ctx_size), parallel, _text(max_model_len), batch, engine, kv_unified=kv_unified,
        model_max=loaded.model_geometry.max_context_tokens)
    if ctx_note:
        engine_notes.append(ctx_note)
    if quantization is not None:
        loaded, weights_from = quantised_for(loaded, quantization, engine, weights_from, engine_notes)
    if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:  # before num_gpus // pp below
        raise InputError(f"--pp must be a positive integer, got {pp!r}", "e.g. --pp 2 (pipeline stages)")
    kv_budget_bytes, per_rank, rank_note = rank_budgets(kv_budget, tp if tp is not None else max(1, (num_gpus or 1) // pp),
                                                        pp)
    # NOTE: vLLM-named flags read token counts as vLLM does (32k = 32,000, 32K = 32,768), with a note.
    model_len, len_note = vllm_tokens(max_model_len or None, "--max-model-len")
    batched_tokens, batched_note = vllm_tokens(max_num_batched_tokens or None, "--max-num-batched-tokens")
    split = tensor_split_shares(tensor_split)
    weights, weight_notes = model_weights(
        loaded, engine=engine, weights_bytes=size(weights_bytes, "--weights-bytes"), weights_from=weights_from,
        revision=revision if revision is not None else loaded.revision, token=token, required=kv_budget_bytes is None,
        tensor_split=split, weights_quant=weights_quant,
    )
    # NOTE: --num-gpus without --tp: every GPU of the ranks in tensor parallel (vLLM's DP ranks each take tp x pp).
    ranks = 1 if get_engine(engine).dp_splits_tp(enable_dp_attention) or isinstance(dp, bool) or not isinstance(dp, int) else max(dp, 1)
    num_layers = loaded.model_geometry.num_hidden_layers
    cpu_layers, layer_notes = kv_host_layers(num_layers, n_gpu_layers, no_kv_offload, engine)
    engine_notes += layer_notes
    v_row, v_notes = get_engine(engine).padded_v_row(loaded.model_geometry.layers, flash_attn_off=flash_attn_off(flash_attn))
    engine_notes += v_notes
    if n_gpu_layers is not None and weights is not None:
        weights = weights_on_gpu(weights, n_gpu_layers, engine_notes)
    offload_bytes = cpu_offload_bytes(cpu_offload_gb, engine, engine_notes)
    if enforce_eager:
        engine_flag(engine, "--enforce-eager")
    if enable_prefix_caching is not None:  # NOTE: vLLM's switch; other engines would size nothing different
        engine_flag(engine, "--enable-prefix-caching")
    inputs = CapacityInputs(
        gpu=gpu_spec, engine=engine, tp=tp if tp is not None else max(1, (num_gpus or 1) // (pp * ranks)),
        pp=pp, num_gpus=num_gpus, kv_dtype=kv_dtype, dtype=dtype,
        max_model_len=model_len,
        batch=batch, block_size=block_size, gpu_memory_utilization=gpu_memory_utilization,
        mem_fraction_static=mem_fraction_static, free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_num_batched_tokens=batched_tokens,
        reserve_bytes=size(reserve, "--reserve"), kv_budget_bytes=kv_budget_bytes, engine_version=engine_version,
        dp=dp, enable_dp_attention=enable_dp_attention, kv_unified=kv_unified, ubatch_size=ubatch_size,
        tensor_split=split, cache_type_v=value_type_name(cache_type_v), no_window=no_window,
        max_num_seqs=max_num_seqs, enforce_eager=enforce_eager, cpu_offload_bytes=offload_bytes,
        offload=Offload(layers=cpu_layers) if cpu_layers else None,
        enable_prefix_caching=enable_prefix_caching, kv_budget_per_rank=per_rank,
        v_row_elems=v_row,
    )
    cap = plan_capacity(loaded.model_geometry, weights, inputs)
    if log is not None and log_budget_from_llama(log, given_budget=kv_budget_given, gpu=gpu, gpu_mem=gpu_mem) and \
            kv_budget_bytes is not None and cap.kv_bytes_needed > kv_budget_bytes:
        # NOTE: llama.cpp allocates what -c/-np ask for; a log that shows only some of its caches is not the budget.
        log_notes = [note for note in log_notes if not note.startswith("KV budget read from the log")]
        log_notes.append(partial_llamacpp_log_note(log, cap.kv_bytes_needed, kv_budget_bytes))
        inputs = replace(inputs, kv_budget_bytes=cap.kv_bytes_needed)
        cap = plan_capacity(loaded.model_geometry, weights, inputs)
    notes = (*local_notes, *engine_notes, *weight_notes, *(note for note in (len_note, batched_note, rank_note) if note), *log_notes)
    return CapacityResult(capacity=cap, source=loaded.source, weight_notes=notes, length_flag=length_flag, log=log,
                          log_source=None if compare_log is None else str(compare_log))


# ---- compare -------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CompareResult:
    """``kvplan.compare``'s answer: the :class:`~kvplan.layouts.Comparison` (its attributes read through:
    ``variants``, ``mha``, ``seq_len`` ...) and ``to_dict()``, the `kvplan compare` report."""

    comparison: Comparison
    source: Source | None
    """Where the base model came from; None for bare dims."""
    loaded: Geometry | None = None
    """The base model as loaded (its weights give ``kv_room``); None for bare dims or a bare ModelGeometry."""
    gpu_mem_bytes: int | None = None
    plot: str | None = None
    """The --plot file the report names (the command draws it)."""
    length_flag: str | None = None
    """The length flag the user typed (``--seq-len`` or ``--max-model-len``): the report names it."""
    flag_notes: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        if name == "comparison":
            raise AttributeError(name)
        return getattr(self.comparison, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan compare --format json` report."""
        # NOTE: lazy: compare's report builder (with kvplan.layouts) costs `kvplan estimate` 7.6 ms at import.
        from kvplan.report.compare import compare_report

        return compare_report(self.comparison, self.source, gpu_mem_bytes=self.gpu_mem_bytes, plot=self.plot,
                              length_flag=self.length_flag, notes=self.flag_notes)

    def plot_series(self) -> tuple[list[int], dict[str, list[int]]]:
        """Context lengths and each variant's KV bytes per GPU at each (the lines `kvplan compare --plot` draws)."""
        # NOTE: lazy: kvplan.layouts costs `kvplan estimate` 15 ms at import.
        from kvplan.layouts import plot_series

        return plot_series(self.comparison)

    def kv_room(self) -> tuple[int | None, str | None]:
        """(bytes, label): ``gpu_mem`` less the base model's weights per GPU (counted from config.json, or a
        GGUF's tensor table), the room the KV cache has; (None, None) without a model or ``gpu_mem``."""
        if self.gpu_mem_bytes is None or self.loaded is None:
            return None, None
        dep = self.comparison.mha.deployment
        weights, _notes = model_weights(self.loaded, engine=dep.engine, weights_from="config",
                                        revision=self.loaded.revision, required=False)
        if weights is None or not weights.counted:
            return None, None
        per_gpu = weights.bytes_per_gpu(tp=dep.tp, pp=dep.pp)
        room = self.gpu_mem_bytes - per_gpu
        if room <= 0:
            # NOTE: no room to draw (log axis) and the card is not the room: the plot draws no line, its title says so.
            return room, (f"weights {format_bytes(per_gpu)} per GPU exceed the {format_bytes(self.gpu_mem_bytes)} GPU "
                          "(--gpu-mem): no KV room")
        return room, (f"KV room {format_bytes(room)} = GPU {format_bytes(self.gpu_mem_bytes)} "
                      f"- weights {format_bytes(per_gpu)} per GPU")


def compare(
    variants: Sequence[str] = (),
    *,
    model: str | Geometry | ModelGeometry | None = None,
    layers: int | None = None,
    heads: int | None = None,
    head_dim: int | None = None,
    hidden_size: int | None = None,
    batch: int = 1,
    seq_len: int | str | None = None,
    max_model_len: int | str | None = None,
    kv_dtype: str = "auto",
    engine: str = "ideal",
    tp: int = 1,
    pp: int = 1,
    block_size: int | None = None,
    sweep_seq: str | Sequence[int | str] | None = None,
    gpu_mem: int | str | None = None,
    plot: str | Path | None = None,
    revision: str | None = None,
    token: str | None = None,
    gguf_file: str | None = None,
    strict: bool = False,
    allow_defaults: bool = False,
) -> CompareResult:
    """`kvplan compare`: attention layouts (``variants``: mha, gqa, gqa:N, mqa, mla, mla:RANK+ROPE, swa:W,
    hybrid:W:R, model) side by side at one model size, the ``model``'s or bare dims (``layers``, ``heads``,
    ``head_dim`` or ``hidden_size``; the 32-layer, 32-head, head-dim-128 example model by default); ``kv_dtype``
    may list several (``"bf16,fp8"``); ``sweep_seq`` sizes every variant at more lengths (``"1k,4k,32k"``);
    ``gpu_mem`` is the memory line of a plot (``kv_room``), ``plot`` the file the report names."""
    # NOTE: lazy: kvplan.layouts costs `kvplan estimate` 15 ms at import.
    from kvplan.layouts import base_from_dims, base_from_model, parse_seq_list
    from kvplan.layouts import compare as compare_layouts

    dims = {"layers": layers, "heads": heads, "head_dim": head_dim, "hidden_size": hidden_size}
    if model is not None and any(v is not None for v in dims.values()):
        raise InputError("pass --model or --layers/--heads/--head-dim/--hidden-size, not both",
                         "drop --model to size bare dims, or drop the dims to use the model's own")
    gpu_mem_bytes = parse_size(gpu_mem, what="--gpu-mem") if gpu_mem is not None else None
    if sweep_seq is None:
        sweep: tuple[int, ...] = ()
    elif isinstance(sweep_seq, str):
        sweep = parse_seq_list(sweep_seq)
    else:
        sweep = parse_seq_list(",".join(str(length) for length in sweep_seq))
    tokens, length_flag, len_note = typed_tokens(_text(seq_len), _text(max_model_len))
    source, loaded = None, None
    if model is None:
        base = base_from_dims(**dims)
    else:
        if isinstance(model, str):
            loaded = load_geometry(model, revision=revision, token=token, gguf_file=gguf_file)
        elif isinstance(model, Geometry):
            loaded = model
        geometry = model if isinstance(model, ModelGeometry) else loaded.model_geometry  # type: ignore[union-attr]
        source = None if loaded is None else loaded.source
        check_defaults(geometry, allow_defaults=allow_defaults, strict=strict)
        base = base_from_model(geometry)
    deployment = deployment_from_flags(engine=engine, tp=tp, pp=pp, block_size=block_size)
    comparison = compare_layouts(base, variants or (), batch=batch, seq_len=tokens, kv_dtype=kv_dtype,
                                 sweep_seq_lens=sweep, deployment=deployment)
    return CompareResult(comparison=comparison, source=source, loaded=loaded, gpu_mem_bytes=gpu_mem_bytes,
                         plot=None if plot is None else str(plot), length_flag=length_flag,
                         flag_notes=(len_note,) if len_note else ())


def model_first(variants: Sequence[str], model: str | None) -> tuple[list[str], str | None]:
    """`kvplan compare Qwen/Qwen3-8B mha gqa`: a first argument that is no layout (nor a misspelt one, which stays
    a variant for its did-you-mean) is the model, when ``model`` is not given."""
    # NOTE: lazy: kvplan.layouts costs `kvplan estimate` 15 ms at import.
    from kvplan.layouts import KINDS

    if model is not None or not variants:
        return list(variants), model
    head = variants[0].split(":", 1)[0].lower()
    if head in KINDS or difflib.get_close_matches(head, KINDS, n=1, cutoff=0.6):
        return list(variants), model
    return list(variants[1:]), variants[0]


def model_weights(
    loaded: Geometry, *, engine: str, weights_bytes: int | None = None, weights_from: str = "auto",
    revision: str | None = None, token: str | None = None, required: bool = True,
    tensor_split: tuple[float, ...] | None = None, weights_quant: str | None = None,
) -> tuple[WeightsEstimate | None, list[str]]:
    """The weights capacity counts, and notes on where they came from: a GGUF's tensor table (exact bytes,
    llama.cpp's layer split), else :func:`kvplan.models.resolve_weights` (config.json, safetensors, bytes); for
    llama.cpp, the counted shapes as a ``weights_quant`` GGUF (default Q4_K_M) by llama.cpp's per-tensor rule.
    A local model's count is remembered per config and options (:func:`_counted_weights`); a Hub model's is not,
    its answer may depend on the network."""
    profile = get_engine(engine)
    if weights_quant is not None:
        _check_weights_quant(loaded, profile, weights_bytes=weights_bytes, weights_from=weights_from)
    if loaded.gguf is not None and weights_bytes is None:
        if weights_from == "safetensors":
            raise _input_error(f"--weights-from safetensors reads the Hub's safetensors, but --model {loaded.model_id} is a GGUF",
                               "drop --weights-from: the GGUF's tensor table gives the exact bytes")
        # NOTE: lazy: the GGUF tensor table (9 ms at import) serves a GGUF model only.
        from kvplan.gguf.weights import weights_estimate

        return weights_estimate(loaded.gguf, engine=profile.name, splits_layers=profile.splits_layers,
                                tensor_split=tensor_split)
    quantise = profile.splits_layers and weights_bytes is None and weights_from != "safetensors"
    # NOTE: llama.cpp runs a quantised GGUF: the checkpoint's safetensors bytes are not what it loads.
    count = _count_weights if loaded.source.kind == "hub" else _counted_weights
    weights, counted_notes, quantised = count(
        json.dumps(loaded.config, sort_keys=True, default=repr), model_id=loaded.model_id,
        source_kind=loaded.source.kind, weights_bytes=weights_bytes, weights_from="config" if quantise else weights_from,
        revision=revision, token=token, required=required, quantise=quantise, weights_quant=weights_quant,
        num_layers=loaded.model_geometry.num_hidden_layers, model_type=loaded.model_geometry.model_type,
    )
    notes = list(counted_notes)
    if weights is not None and not quantised and weights.source != "--weights-bytes" and profile.splits_layers:
        notes.append(f"llama.cpp: weights counted as the checkpoint stores them ({weights.dtype}) "
                     "(--weights-from safetensors); a quantised GGUF (Q4_K_M, Q8_0 ...) is smaller")
    return weights, notes


def _count_weights(
    config_json: str, *, model_id: str, source_kind: str, weights_bytes: int | None, weights_from: str,
    revision: str | None, token: str | None, required: bool, quantise: bool, weights_quant: str | None,
    num_layers: int, model_type: str,
) -> tuple[WeightsEstimate | None, tuple[str, ...], bool]:
    """:func:`kvplan.models.resolve_weights` over a config (as JSON text), its notes, and whether the counted
    shapes were sized (``quantise``) as a llama.cpp GGUF of type ``weights_quant``
    (:func:`kvplan.gguf.quantise.quantise_weights`)."""
    weights, notes = resolve_weights(
        json.loads(config_json), model_id=model_id, source_kind=source_kind, weights_bytes=weights_bytes,
        weights_from=weights_from, revision=revision, token=token, required=required,
    )
    if weights is None or not weights.counted or not quantise:
        return weights, tuple(notes), False
    # NOTE: llama.cpp users run a llama-quantize GGUF, most often Q4_K_M: its bytes follow llama.cpp's
    # per-tensor rule over the counted shapes (kvplan.gguf.quantise); said in weights.quantization. Lazy: 10 ms at
    # import, for llama.cpp capacity only.
    from kvplan.gguf.quantise import quantise_weights

    weights = quantise_weights(weights, num_layers=num_layers, ftype=weights_quant, model_type=model_type)
    return weights, tuple(notes), True


#: A sweep over engines, GPUs and lengths of one local model counts its weights once per options.
_counted_weights = functools.lru_cache(maxsize=256)(_count_weights)


def _check_weights_quant(loaded: Geometry, profile: EngineProfile, *, weights_bytes: int | None, weights_from: str) -> None:
    """--weights-quant sizes a llama.cpp GGUF from config.json: refuse it where it cannot apply."""
    if not profile.splits_layers:
        raise _input_error(f"--weights-quant picks a llama.cpp GGUF type, but --engine is {profile.name}",
                           "use --engine llama.cpp, or --dtype / --weights-bytes for this engine")
    if loaded.gguf is not None:
        raise _input_error(f"--model {loaded.model_id} is a GGUF: its tensor table gives the real types",
                           "drop --weights-quant (or pass another .gguf file)")
    if weights_bytes is not None:
        raise _input_error("--weights-bytes and --weights-quant both give the weights", "pass one of them")
    if weights_from == "safetensors":
        raise _input_error("--weights-from safetensors counts the checkpoint, --weights-quant a llama.cpp GGUF",
                           "pass one of them")


def rank_budgets(kv_budget: int | str | Sequence[int | str] | None, tp: int, pp: int,
                 ) -> tuple[int | None, tuple[int, ...] | None, str | None]:
    """``--kv-budget``: one size, or one per rank (a comma list or a sequence, vLLM's global rank order). vLLM (V0 and
    V1) and SGLang size the pool by the rank with the least room (the minimum of the ranks' blocks), so the answer is
    (that minimum, the per-rank tuple, a note naming the rank)."""
    if kv_budget is None:
        return None, None, None
    items = kv_budget.split(",") if isinstance(kv_budget, str) else (
        [kv_budget] if isinstance(kv_budget, int) else list(kv_budget))
    if len(items) == 1:
        return parse_size(items[0], what="--kv-budget"), None, None
    sizes = tuple(parse_size(item.strip() if isinstance(item, str) else item, what="--kv-budget") for item in items)
    if len(sizes) != tp * pp:
        raise InputError(f"--kv-budget lists {len(sizes)} budgets for tp {tp} x pp {pp} = {tp * pp} ranks",
                         f"give one budget, or one per rank ({tp * pp}, comma-separated, rank 0 first)")
    low = min(range(len(sizes)), key=lambda i: sizes[i])
    note = (f"--kv-budget per rank: the pool is sized by the rank with the least room, rank {low} "
            f"({format_bytes(sizes[low])}; the others up to {format_bytes(max(sizes))}): vLLM (V0 and V1) takes the "
            "minimum of the workers' blocks and SGLang the minimum over TP ranks"
            + ("; each pipeline stage is sized by its own smallest rank" if pp > 1 else ""))
    return sizes[low], sizes, note


def resolve_gpu(gpu: str | GpuSpec | None, gpu_mem: int | str | None = None,
                gpu_bandwidth: str | None = None) -> GpuSpec:
    """--gpu from the catalog (or a ``GpuSpec`` as is), with --gpu-mem / --gpu-bandwidth overriding
    its figures; --gpu-mem alone is a custom GPU."""
    # NOTE: lazy: the GPU catalog costs `kvplan estimate` 1.6 ms at import; capacity and recommend read it.
    from kvplan.gpus import GpuSpec, custom_gpu, lookup, parse_bandwidth

    bandwidth = parse_bandwidth(gpu_bandwidth) if gpu_bandwidth is not None else None
    if gpu is not None:
        spec = gpu if isinstance(gpu, GpuSpec) else lookup(gpu)
        if gpu_mem is not None:
            spec = replace(spec, memory_bytes=parse_size(gpu_mem, what="--gpu-mem"), memory_source="--gpu-mem")
        if bandwidth is not None:
            spec = replace(spec, bandwidth_bytes_per_s=bandwidth)
        return spec
    if gpu_mem is None:
        raise _input_error("no GPU given", "pass --gpu NAME (kvplan gpus lists them), --gpu-mem SIZE, or --kv-budget "
                           "SIZE (the KV memory per GPU; no GPU needed)")
    return custom_gpu(parse_size(gpu_mem, what="--gpu-mem"), bandwidth, name=f"custom {gpu_mem}")


def mla_off(geometry: ModelGeometry, source: Source | None, engine: str) -> ModelGeometry:
    """``--no-mla``: the MLA layers as the per-head K/V an engine with MLA off caches
    (:func:`kvplan.engines.base.without_mla`); a GGUF says itself whether it was converted with MLA."""
    if getattr(source, "kind", None) in ("gguf", "hub-gguf"):
        raise _input_error("--no-mla reads a config.json: a GGUF says itself whether llama.cpp caches the MLA latent "
                           "(attention.key_length_mla) or per-head K/V", "drop --no-mla for a GGUF")
    return without_mla(geometry, get_engine(engine))


# ---- recommend -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class RecommendResult:
    """``kvplan.recommend``'s answer: the :class:`~kvplan.recommender.Recommendation` (its attributes read
    through: ``deployments`` best first, ``rejected``, ``candidates``) and ``to_dict()``, the `kvplan recommend`
    report."""

    recommendation: Recommendation
    geometry: ModelGeometry
    source: Source
    model_args: Mapping[str, str]
    """Per engine, the model as its command names it (a Hub id, a path, a .gguf file)."""
    inputs: Mapping[str, Any]
    top: int
    notes: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        if name == "recommendation":
            raise AttributeError(name)
        return getattr(self.recommendation, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan recommend --format json` report."""
        # NOTE: lazy: recommend's report builder (with kvplan.recommender) costs `kvplan estimate` 26 ms at import.
        from kvplan.report.recommend import recommend_report

        return recommend_report(self.recommendation, self.geometry, self.source, model_args=self.model_args,
                                inputs=self.inputs, top=self.top, notes=self.notes)


def recommend(
    model: str | Geometry,
    *,
    max_model_len: int | str,
    concurrency: int = 1,
    gpu: str | Sequence[str | GpuSpec] = "all",
    engine: str | Sequence[str] | None = None,
    kv_dtype: str | Sequence[str] | None = None,
    max_gpus: int | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    prices: str | Path | Mapping[str, float] | None = None,
    max_itl: float | None = None,
    top: int | None = None,
    revision: str | None = None,
    token: str | None = None,
    gguf_file: str | None = None,
) -> RecommendResult:
    """`kvplan recommend`: the cheapest deployments that hold ``concurrency`` requests of ``max_model_len`` tokens
    (read as vLLM reads it: ``"32k"`` = 32,000): every catalog GPU in ``gpu`` (names, comma-separated or a list, or
    ``"all"``; or ``GpuSpec`` objects, e.g. :func:`kvplan.gpus.custom_gpu`) x layout x ``engine`` (default: llama.cpp for a GGUF, else vLLM) x ``kv_dtype`` (default: the model's dtype and fp8 where the engine takes it)
    priced by capacity's code; ``prices``: a YAML file (or a mapping) of GPU name to price per GPU-hour, which
    ranks by cost; ``max_itl``: drop candidates whose decode floor is above this many ms."""
    # NOTE: lazy: the recommender costs `kvplan estimate` 22 ms at import.
    from kvplan.gpus import load_catalog, lookup
    from kvplan.recommender import (
        DEFAULT_GPUS_PER_NODE,
        DEFAULT_MAX_GPUS,
        DEFAULT_TOP,
        Target,
        default_kv_dtypes,
        parse_prices,
    )
    from kvplan.recommender import recommend as search

    tokens, len_note = vllm_tokens(_text(max_model_len), "--max-model-len")
    if tokens is None:
        raise InputError("recommend needs --max-model-len", "e.g. --max-model-len 32k (tokens per request)")
    engine_notes: list[str] = []
    if engine is None:  # as capacity: llama.cpp for a GGUF, else vLLM
        default, engine_notes = engine_for(model, gguf_file, None, fallback="vllm")
        engine = default
    engines = _names(engine, "--engine")
    for name in engines:
        get_engine(name)
    engines = list(dict.fromkeys(get_engine(name).name for name in engines))
    from kvplan.gpus import GpuSpec  # NOTE: lazy, as in resolve_gpu

    specs = [g for g in ([] if isinstance(gpu, str) else gpu) if isinstance(g, GpuSpec)]
    gpu_names = _names([g for g in ([gpu] if isinstance(gpu, str) else gpu) if isinstance(g, str)], "--gpu") \
        if not specs else [g for g in gpu if isinstance(g, str)]
    if [n.lower() for n in gpu_names] == ["all"]:
        specs = [*load_catalog(), *specs]
    else:
        specs += [lookup(n) for n in gpu_names]
    gpus = list({spec.name: spec for spec in specs}.values())
    if kv_dtype is None:
        dtypes = {name: default_kv_dtypes(name) for name in engines}
    else:
        named = tuple(_names(kv_dtype, "--kv-dtype"))
        for name in named:  # NOTE: an unknown dtype is the user's error (exit 2), not a layout that "fits nowhere"
            if name != "auto":
                lookup_dtype(name)
        dtypes = {name: named for name in engines}
    price_map = None
    if prices is not None:
        label = "--prices" if isinstance(prices, Mapping) else f"--prices {prices}"
        price_map = parse_prices(prices if isinstance(prices, Mapping) else _read_yaml(Path(prices), label), label=label)
    loaded = model if isinstance(model, Geometry) else load_geometry(model, revision=revision, token=token,
                                                                       gguf_file=gguf_file)
    weights: dict[str, WeightsEstimate] = {}
    notes: list[str] = [*engine_notes, *([len_note] if len_note else [])]
    for name in engines:
        counted, weight_notes = model_weights(loaded, engine=name, revision=loaded.revision, token=token)
        assert counted is not None  # required=True: resolve_weights raises when the size is unknown
        weights[name] = counted
        notes.extend(weight_notes)
    target = Target(max_model_len=tokens, concurrency=concurrency,
                    max_gpus=max_gpus if max_gpus is not None else DEFAULT_MAX_GPUS,
                    gpus_per_node=gpus_per_node if gpus_per_node is not None else DEFAULT_GPUS_PER_NODE,
                    max_nodes=nodes, max_itl_ms=max_itl)
    rec = search(loaded.model_geometry, weights, gpus=gpus, engines=engines, kv_dtypes=dtypes, target=target,
                 prices=price_map)
    keep = DEFAULT_TOP if top is None else top
    if keep < 0:
        raise InputError(f"--top must be 0 (all) or more, got {keep}", "e.g. --top 5")
    model_args = {name: loaded.source.location if loaded.gguf is not None else loaded.model_id for name in engines}
    if "llama.cpp" in engines and loaded.gguf is None:
        model_args["llama.cpp"] = f"{loaded.model_id.rsplit('/', 1)[-1]}-Q4_K_M.gguf"
        notes.append(f"llama.cpp loads a GGUF: its command names {model_args['llama.cpp']} (convert_hf_to_gguf.py, "
                     "then llama-quantize Q4_K_M), the file whose weights were sized")
    inputs = {
        "max_model_len": tokens, "concurrency": concurrency, "gpus": [g.name for g in gpus], "engines": engines,
        "kv_dtypes": {name: list(values) for name, values in dtypes.items()}, "max_gpus": target.max_gpus,
        "gpus_per_node": target.gpus_per_node, "nodes": nodes, "prices": price_map, "max_itl_ms": max_itl,
        "top": keep,
    }
    return RecommendResult(recommendation=rec, geometry=loaded.model_geometry, source=loaded.source,
                           model_args=model_args, inputs=inputs, top=keep, notes=tuple(dict.fromkeys(notes)))


def _names(value: str | Sequence[str], flag: str) -> list[str]:
    """A comma-separated flag (or a list of them) as names."""
    parts = [value] if isinstance(value, str) else list(value)
    names = [n.strip() for part in parts for n in str(part).split(",") if n.strip()]
    if not names:
        raise InputError(f"{flag} is empty", f"name at least one, e.g. {flag} {'H100' if flag == '--gpu' else 'vllm'}")
    return names


def _read_yaml(path: Path, label: str) -> Any:
    """A YAML file's data; an unreadable or malformed file is an InputError naming it."""
    import yaml

    text = read_bounded_text(path, label=label)
    try:
        return load_yaml(text, label=label)
    except yaml.YAMLError as exc:
        raise InputError(f"{label} is not valid YAML: {str(exc).splitlines()[0]}",
                         "write one 'GPU: price' line per GPU, e.g. 'H100: 2.49'") from None
