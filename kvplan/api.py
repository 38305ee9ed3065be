"""The public Python API: the reach of `kvplan estimate` and `kvplan capacity`, without a process each.

::

    import kvplan

    geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B")     # parsed once, cached per process
    for tp in (1, 2, 4):
        est = kvplan.estimate(geometry, seq_len="32k", batch=8, engine="vllm", tp=tp)
        print(tp, est.kv_cache_bytes_per_gpu)
    cap = kvplan.capacity(geometry, gpu="H100", max_model_len="32k")
    cap.to_dict() == the `kvplan capacity --format json` report

Every keyword is the command's flag with underscores; results carry the domain object
(``Estimate``, ``Capacity``) and ``to_dict()``, the command's report. No typer, rich, Hub client or
torch is imported here (the Hub client only when a model is fetched from the Hub).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.adjust import DEFAULT_RESIDUAL_LENGTH, deployment_from_flags
from kvplan.calc import Estimate
from kvplan.calc import estimate as _estimate
from kvplan.dtypes import DEFAULT_GROUP_SIZE
from kvplan.geometry import ModelGeometry
from kvplan.modelref import Geometry, load, normalise_overrides, resolve
from kvplan.sources import Source
from kvplan.units import parse_tokens

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
    from kvplan.errors import InputError

    return InputError(message, hint)


# ---- estimate ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateResult:
    """``kvplan.estimate``'s answer: the :class:`~kvplan.calc.Estimate` (its attributes read through:
    ``kv_cache_bytes``, ``kv_cache_bytes_per_gpu``, ``groups``, ``adjustments`` ...) and ``to_dict()``, the
    `kvplan estimate` report. The bytes are priced when the result is made; the adjustment walk (each bend
    of the formula, priced one knob at a time) the first time ``adjustments``, ``estimate`` or
    ``to_dict()`` is read, so a sweep that reads bytes does not pay for it."""

    priced: Estimate
    """The estimate without its adjustment walk (``adjustments`` empty)."""
    source: Source | None
    """Where the config came from; None for a bare ModelGeometry (the report's source fields are null)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    length_flag: str | None = None
    """``--max-model-len`` when the length was given as ``max_model_len`` (the report names it)."""
    flag_notes: tuple[str, ...] = ()
    """Notes on how vLLM-named token counts were read (``"8k"`` = 8,000)."""

    @property
    def estimate(self) -> Estimate:
        """The whole :class:`~kvplan.calc.Estimate`, its adjustments listed."""
        from kvplan.calc import with_adjustments

        return with_adjustments(self.priced)

    @property
    def adjustments(self) -> tuple[Any, ...]:
        """Each bend of the formula, in the order applied (walked on first read)."""
        return self.estimate.adjustments

    def __getattr__(self, name: str) -> Any:
        if name == "priced":
            raise AttributeError(name)
        return getattr(self.priced, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan estimate --format json` report."""
        from kvplan.engine_flags import respell_length
        from kvplan.report import estimate_report

        source = self.source if self.source is not None else _NO_SOURCE
        report = estimate_report(self.estimate, source, overrides=dict(self.overrides))  # type: ignore[arg-type]
        respell_length(report, self.length_flag)
        if self.flag_notes:
            report["notes"] = [*report["notes"], *self.flag_notes]
        return report


@dataclass(frozen=True, slots=True)
class _NoSource:
    kind: None = None
    location: None = None
    revision: None = None


_NO_SOURCE = _NoSource()


def estimate(
    model: str | Geometry | ModelGeometry,
    *,
    batch: int = 1,
    seq_len: int | str | None = None,
    max_model_len: int | str | None = None,
    kv_dtype: str = "auto",
    encoder_len: int | str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    engine: str = "ideal",
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
) -> EstimateResult:
    """`kvplan estimate`: the KV cache of ``batch`` sequences of ``seq_len`` tokens (``"32k"`` = 32,768), or of
    ``max_model_len`` read as vLLM reads it (``"32k"`` = 32,000), with every sizing flag of the command (engine,
    tp, pp, block_size, beams, kv_dtype, llama.cpp's cache_type_k/cache_type_v ...); ``strict`` refuses a
    config whose core geometry would come from architecture defaults."""
    from kvplan.engine_flags import kv_types, typed_tokens, vllm_tokens

    kv_dtype, cache_type_v = kv_types(kv_dtype, cache_type_k, cache_type_v, engine)
    if "," in kv_dtype:
        raise _input_error(f"estimate sizes one KV dtype, got kv_dtype {kv_dtype}", "compare them with kvplan compare")
    tokens, length_flag, len_note = typed_tokens(seq_len, max_model_len)  # type: ignore[arg-type]
    batched, batched_note = vllm_tokens(max_num_batched_tokens, "--max-num-batched-tokens")
    enc = parse_tokens(encoder_len, what="--encoder-len") if encoder_len is not None else None
    geometry, source, resolved = _geometry(model, revision=revision, token=token, overrides=overrides,
                                           gguf_file=gguf_file)
    if strict:
        from kvplan.models import require_config_geometry

        require_config_geometry(geometry)
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
    est = _estimate(geometry, batch=batch, seq_len=tokens, kv_dtype=kv_dtype, encoder_len=enc, deployment=deployment,
                    adjustments=False)
    return EstimateResult(priced=est, source=source, overrides=resolved, length_flag=length_flag,
                          flag_notes=tuple(note for note in (len_note, batched_note) if note))


# ---- capacity ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityResult:
    """``kvplan.capacity``'s answer: the :class:`~kvplan.capacity.Capacity` (its attributes read through:
    ``fits``, ``max_context_len``, ``max_concurrent_requests``, ``min_tp`` ...) and ``to_dict()``, the
    `kvplan capacity` report."""

    capacity: Any
    source: Source
    weight_notes: tuple[str, ...] = ()
    length_flag: str | None = None
    """``--seq-len`` when the length was given as ``seq_len`` (the report names it)."""

    def __getattr__(self, name: str) -> Any:
        if name == "capacity":
            raise AttributeError(name)
        return getattr(self.capacity, name)

    def to_dict(self) -> dict[str, Any]:
        """The `kvplan capacity --format json` report."""
        from kvplan.capacity import capacity_report
        from kvplan.engine_flags import respell_length

        report = capacity_report(self.capacity, self.source)
        report["notes"] = list(report["notes"]) + list(self.weight_notes)  # type: ignore[call-overload]
        respell_length(report, self.length_flag)
        return report


def capacity(
    model: str | Geometry,
    *,
    gpu: Any = None,
    gpu_mem: int | str | None = None,
    gpu_bandwidth: str | None = None,
    num_gpus: int | None = None,
    tp: int | None = None,
    pp: int = 1,
    engine: str = "vllm",
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
    kv_budget: int | str | None = None,
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
    revision: str | None = None,
    token: str | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    gguf_file: str | None = None,
    cache_type_k: str | None = None,
    cache_type_v: str | None = None,
    no_window: bool = False,
    no_mla: bool = False,
    strict: bool = False,
) -> CapacityResult:
    """`kvplan capacity`: what fits on ``gpu`` (a catalog name or a ``GpuSpec``; ``gpu_mem`` for any
    other): KV blocks and tokens, max concurrency and context, minimum TP, decode floor. ``max_model_len``
    reads ``"32k"`` as vLLM does (32,000), ``seq_len`` as kvplan does (32,768); ``strict`` refuses a config
    whose core geometry would come from architecture defaults."""
    from kvplan.adjust import value_type_name
    from kvplan.capacity import CapacityInputs, plan_capacity
    from kvplan.engine_flags import kv_types, llama_context, tensor_split_shares, typed_length, vllm_tokens
    from kvplan.units import parse_size

    text, length_flag = typed_length(None if seq_len is None else str(seq_len),
                                     None if max_model_len is None else str(max_model_len))
    if length_flag == "--seq-len" and text is not None:
        # NOTE: kvplan's --seq-len reads k as 1024; max_model_len (vLLM's name) reads it as vLLM does.
        max_model_len = str(parse_tokens(text, what="--seq-len"))
    else:
        length_flag = None  # the report's own spelling
    kv_dtype, cache_type_v = kv_types(kv_dtype, cache_type_k, cache_type_v, engine)

    # NOTE: with --kv-budget alone the GPU is irrelevant to blocks, tokens and concurrency.
    no_gpu = gpu is None and gpu_mem is None and kv_budget is not None
    gpu_spec = None if no_gpu else resolve_gpu(gpu, gpu_mem, gpu_bandwidth)
    max_model_len, batch = llama_context(None if ctx_size is None else str(ctx_size), parallel,
                                         None if max_model_len is None else str(max_model_len), batch, engine)

    def size(value: int | str | None, what: str) -> int | None:
        return parse_size(value, what=what) if value is not None else None

    if isinstance(model, Geometry):
        if overrides:
            raise _input_error("overrides apply when a model is loaded", "pass overrides to kvplan.load_geometry")
        loaded = model
    else:
        loaded = load_geometry(model, revision=revision, token=token, overrides=overrides, gguf_file=gguf_file)
    if strict:
        from kvplan.models import require_config_geometry

        require_config_geometry(loaded.model_geometry)
    if no_mla:
        loaded = replace(loaded, model_geometry=mla_off(loaded.model_geometry, loaded.source, engine))
    kv_budget_bytes = size(kv_budget, "--kv-budget")
    # NOTE: vLLM-named flags read token counts as vLLM does (32k = 32,000, 32K = 32,768), with a note.
    model_len, len_note = vllm_tokens(max_model_len or None, "--max-model-len")
    batched_tokens, batched_note = vllm_tokens(max_num_batched_tokens or None, "--max-num-batched-tokens")
    weights, weight_notes = model_weights(
        loaded, engine=engine, weights_bytes=size(weights_bytes, "--weights-bytes"), weights_from=weights_from,
        revision=revision if revision is not None else loaded.revision, token=token, required=kv_budget_bytes is None,
        tensor_split=tensor_split_shares(tensor_split), weights_quant=weights_quant,
    )
    inputs = CapacityInputs(
        gpu=gpu_spec, engine=engine, tp=tp if tp is not None else max(1, (num_gpus or 1) // pp),
        pp=pp, num_gpus=num_gpus, kv_dtype=kv_dtype, dtype=dtype,
        max_model_len=model_len,
        batch=batch, block_size=block_size, gpu_memory_utilization=gpu_memory_utilization,
        mem_fraction_static=mem_fraction_static, free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_num_batched_tokens=batched_tokens,
        reserve_bytes=size(reserve, "--reserve"), kv_budget_bytes=kv_budget_bytes, engine_version=engine_version,
        dp=dp, enable_dp_attention=enable_dp_attention, kv_unified=kv_unified, ubatch_size=ubatch_size,
        tensor_split=tensor_split_shares(tensor_split), cache_type_v=value_type_name(cache_type_v),
        no_window=no_window,
    )
    cap = plan_capacity(loaded.model_geometry, weights, inputs)
    weight_notes = [*weight_notes, *(note for note in (len_note, batched_note) if note)]
    return CapacityResult(capacity=cap, source=loaded.source, weight_notes=tuple(weight_notes), length_flag=length_flag)


def model_weights(
    loaded: Geometry, *, engine: str, weights_bytes: int | None = None, weights_from: str = "auto",
    revision: str | None = None, token: str | None = None, required: bool = True,
    tensor_split: tuple[float, ...] | None = None, weights_quant: str | None = None,
) -> tuple[Any, list[str]]:
    """The weights capacity counts, and notes on where they came from: a GGUF's tensor table (exact bytes,
    llama.cpp's layer split), else :func:`kvplan.models.resolve_weights` (config.json, safetensors, bytes); for
    llama.cpp, the counted shapes as a ``weights_quant`` GGUF (default Q4_K_M) by llama.cpp's per-tensor rule.
    Counted once per loaded model and options (not for a Hub model, whose answer may depend on the network)."""
    key = (id(loaded), engine, weights_bytes, weights_from, revision, token, required, tensor_split, weights_quant)
    hit = _WEIGHTS.get(key)
    if hit is not None and hit[0] is loaded:
        return hit[1], list(hit[2])
    weights, notes = _model_weights(loaded, engine=engine, weights_bytes=weights_bytes, weights_from=weights_from,
                                    revision=revision, token=token, required=required, tensor_split=tensor_split,
                                    weights_quant=weights_quant)
    if loaded.source.kind != "hub":
        if len(_WEIGHTS) >= GEOMETRY_CACHE_SIZE * 4:
            _WEIGHTS.pop(next(iter(_WEIGHTS)))
        _WEIGHTS[key] = (loaded, weights, tuple(notes))  # the model is kept, so its id is not reused
    return weights, notes


_WEIGHTS: dict[tuple[Any, ...], tuple[Geometry, Any, tuple[str, ...]]] = {}
#: The config's count before any engine's rule, per loaded model and options (``_WEIGHTS`` is per engine too).
_COUNTS: dict[tuple[Any, ...], tuple[Geometry, Any, tuple[str, ...]]] = {}


def _model_weights(
    loaded: Geometry, *, engine: str, weights_bytes: int | None, weights_from: str, revision: str | None,
    token: str | None, required: bool, tensor_split: tuple[float, ...] | None, weights_quant: str | None,
) -> tuple[Any, list[str]]:
    from kvplan.engines import get_engine
    from kvplan.models import resolve_weights

    profile = get_engine(engine)
    if weights_quant is not None:
        _check_weights_quant(loaded, profile, weights_bytes=weights_bytes, weights_from=weights_from)
    if loaded.gguf is not None and weights_bytes is None:
        if weights_from == "safetensors":
            raise _input_error(f"--weights-from safetensors reads the Hub's safetensors, but --model {loaded.model_id} is a GGUF",
                               "drop --weights-from: the GGUF's tensor table gives the exact bytes")
        from kvplan.gguf.weights import weights_estimate

        return weights_estimate(loaded.gguf, engine=profile.name, splits_layers=profile.splits_layers,
                                tensor_split=tensor_split)
    quantise = profile.splits_layers and weights_bytes is None and weights_from != "safetensors"
    # NOTE: llama.cpp runs a quantised GGUF: the checkpoint's safetensors bytes are not what it loads.
    source = "config" if quantise else weights_from
    key = (id(loaded), weights_bytes, source, revision, token, required)
    hit = _COUNTS.get(key)
    if hit is not None and hit[0] is loaded:  # the same count for every engine of a local model
        weights, notes = hit[1], list(hit[2])
    else:
        weights, notes = resolve_weights(
            loaded.config, model_id=loaded.model_id, source_kind=loaded.source.kind, weights_bytes=weights_bytes,
            weights_from=source, revision=revision, token=token, required=required,
        )
        if loaded.source.kind != "hub":
            if len(_COUNTS) >= GEOMETRY_CACHE_SIZE * 4:
                _COUNTS.pop(next(iter(_COUNTS)))
            _COUNTS[key] = (loaded, weights, tuple(notes))
    if weights is not None and weights.counted and quantise:
        # NOTE: llama.cpp users run a llama-quantize GGUF, most often Q4_K_M: its bytes follow llama.cpp's
        # per-tensor rule over the counted shapes (kvplan.gguf.quantise); said in weights.quantization.
        from kvplan.gguf.quantise import quantise_weights

        weights = quantise_weights(weights, num_layers=loaded.model_geometry.num_hidden_layers, ftype=weights_quant,
                                   model_type=loaded.model_geometry.model_type)
    elif weights is not None and weights.source != "--weights-bytes" and profile.splits_layers:
        notes.append(f"llama.cpp: weights counted as the checkpoint stores them ({weights.dtype}) "
                     "(--weights-from safetensors); a quantised GGUF (Q4_K_M, Q8_0 ...) is smaller")
    return weights, notes


def _check_weights_quant(loaded: Geometry, profile: Any, *, weights_bytes: int | None, weights_from: str) -> None:
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


def resolve_gpu(gpu: Any, gpu_mem: int | str | None = None, gpu_bandwidth: str | None = None) -> Any:
    """--gpu from the catalog (or a ``GpuSpec`` as is), with --gpu-mem / --gpu-bandwidth overriding
    its figures; --gpu-mem alone is a custom GPU."""
    from kvplan.gpus import GpuSpec, custom_gpu, lookup, parse_bandwidth
    from kvplan.units import parse_size

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


def mla_off(geometry: ModelGeometry, source: Any, engine: str) -> ModelGeometry:
    """``--no-mla``: the MLA layers as the per-head K/V an engine with MLA off caches (:func:`kvplan.adjust.without_mla`);
    a GGUF says itself whether it was converted with MLA."""
    from kvplan.engines import get_engine
    from kvplan.engines.base import without_mla

    if getattr(source, "kind", None) in ("gguf", "hub-gguf"):
        raise _input_error("--no-mla reads a config.json: a GGUF says itself whether llama.cpp caches the MLA latent "
                           "(attention.key_length_mla) or per-head K/V", "drop --no-mla for a GGUF")
    return without_mla(geometry, get_engine(engine))
