"""Pure sizing: a ModelGeometry and inputs in, an Estimate out. No printing, no IO."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvplan.adjust import (
    Adjustment,
    Deployment,
    as_full_attention,
    stage_of_layer,
    validate_deployment,
)
from kvplan.deployment_checks import check_lengths, check_query_heads, ignored_knobs
from kvplan.dtypes import DEFAULT_GROUP_SIZE, KvDtype, lookup_dtype
from kvplan.engines import EngineProfile, SizingContext, get_engine
from kvplan.engines.base import value_dtype
from kvplan.errors import ConfigError, InputError
from kvplan.geometry import ModelGeometry, group_specs
from kvplan.limits import MAX_NUM_GPUS, check_limit
from kvplan.models import DTYPE_BYTES, served_dtype
from kvplan.specs import (
    LayerSpec,
)

#: Upper bound on the batch, to catch absurd input.
MAX_BATCH = 1 << 24

#: What ``--kv-dtype auto`` means when the config names no dtype: engines serve such checkpoints
#: in 16 bits (vLLM's ``--dtype auto`` turns a float32/absent dtype into a 16-bit one).
NO_CONFIG_DTYPE = "fp16"


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerGroup:
    """Consecutive or scattered layers that share one spec."""

    spec: LayerSpec
    count: int
    layer_indices: tuple[int, ...]
    tokens_held: int
    """Tokens one sequence keeps in each layer of the group."""
    bytes_per_token: int
    """Bytes one cached token costs in one layer."""
    bytes_per_seq: int
    """Bytes one sequence holds in the whole group."""
    total_bytes: int
    """Bytes of the whole batch in the whole group (all tensor-parallel ranks, GPU and CPU)."""
    rank_spec: LayerSpec | None = None
    """The spec one tensor-parallel rank holds (``None``: same as ``spec``)."""
    layer_bytes_per_rank: int | None = None
    """Bytes one layer of the group holds on one rank for the whole batch."""
    bytes_per_token_per_rank: int | None = None
    """Bytes one cached token costs in one layer on one tensor-parallel rank (``None``: same as
    ``bytes_per_token``, one GPU)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """The KV cache of one deployment: the inputs as resolved and the bytes per layer group."""

    geometry: ModelGeometry
    batch: int
    seq_len: int | None
    seq_len_source: str
    kv_dtype: KvDtype
    kv_dtype_source: str
    state_dtype: KvDtype
    encoder_len: int | None
    encoder_len_source: str | None
    groups: tuple[LayerGroup, ...]
    notes: tuple[str, ...]
    deployment: Deployment = field(default_factory=Deployment)
    """Engine profile and adjustments the estimate was made for (default: ideal, one GPU)."""
    gpu_bytes_per_rank: int | None = None
    """KV bytes on the most loaded GPU (largest pipeline stage, after offload); None = whole cache."""
    peak_total_bytes: int | None = None
    """Transient peak over all ranks (None = the steady cache)."""
    peak_gpu_bytes: int | None = None
    """Transient peak of the most loaded GPU (None = its steady bytes)."""
    cpu_bytes: int = 0
    """KV bytes kept in host memory (``--offload``)."""
    adjustments: tuple[Adjustment, ...] = ()
    """Each bend of the formula, in the order applied."""

    @property
    def kv_cache_bytes(self) -> int:
        """The whole cache: every layer, every sequence of the batch, every GPU (and offloaded part)."""
        return sum(group.total_bytes for group in self.groups)

    @property
    def kv_cache_bytes_per_gpu(self) -> int:
        """KV bytes on the GPU that holds the most (the one that limits)."""
        return self.kv_cache_bytes if self.gpu_bytes_per_rank is None else self.gpu_bytes_per_rank

    @property
    def peak_bytes(self) -> int:
        """The largest cache held at any moment (transients included), over all ranks."""
        return self.kv_cache_bytes if self.peak_total_bytes is None else max(self.peak_total_bytes, self.kv_cache_bytes)

    @property
    def peak_bytes_per_gpu(self) -> int:
        """The most loaded GPU's steady bytes plus the engine's transient (same GPU as ``kv_cache_bytes_per_gpu``)."""
        per_gpu = self.kv_cache_bytes_per_gpu
        return per_gpu if self.peak_gpu_bytes is None else max(self.peak_gpu_bytes, per_gpu)

    @property
    def num_gpus(self) -> int:
        """GPUs the cache is spread over: tensor- times pipeline-parallel size."""
        return self.deployment.tp * self.deployment.pp

    @property
    def bytes_per_sequence(self) -> int:
        return sum(group.bytes_per_seq for group in self.groups)

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token costs summed over every token-caching layer, before any window is full."""
        return sum(g.bytes_per_token * g.count for g in self.groups if g.spec.grows_with_tokens)

    @property
    def state_bytes(self) -> int:
        return sum(g.total_bytes for g in self.groups if g.spec.kind == "state")

    @property
    def cross_attention_bytes(self) -> int:
        return sum(g.total_bytes for g in self.groups if g.spec.kind == "cross_attention")


def served_geometry(geometry: ModelGeometry, engine: EngineProfile, dtype: str = "auto") -> ModelGeometry:
    """The geometry in the dtype ``engine`` holds the model in, which ``--kv-dtype auto`` follows (vLLM's
    ``kv_cache_dtype auto`` is the model dtype). ``dtype`` is ``--dtype`` (:func:`kvplan.models.served_dtype`):
    ``auto`` is the engine's rule (vLLM, SGLang and TensorRT-LLM load a float32 checkpoint in 16 bits,
    transformers keeps it), any other value is the dtype the weights are held in."""
    config = (geometry.config_dtype or "").lower().removeprefix("torch.")
    config = _FLOAT32_NAMES.get(config, config)
    explicit = dtype.strip().lower() != "auto"
    if not config and not explicit:
        return geometry
    name, why = served_dtype(config or "float16", engine=engine, dtype=dtype)
    if name == config or (not explicit and DTYPE_BYTES.get(config) == DTYPE_BYTES[name]):
        return geometry
    return replace(geometry, config_dtype=name, config_dtype_source=f"served dtype ({why})")


#: Spellings of float32 a config may use (the served-dtype rule reads them as float32).
_FLOAT32_NAMES = {"float": "float32", "fp32": "float32"}


#: The element types a model computes in; any other ``torch_dtype`` names how a quantised checkpoint stores weights.
ACTIVATION_DTYPES = frozenset({"fp32", "fp16", "bf16"})
#: What ``--kv-dtype auto`` keeps for a checkpoint whose ``torch_dtype`` is a storage type (int4, fp8, ...).
QUANTISED_ACTIVATION_DTYPE = "bf16"


def _is_storage_dtype(name: str) -> bool:
    """A config dtype that names a weight storage type (``int4``, ``int8``, ``uint8``, ``fp4``, ``float8_e4m3fn``,
    ...): no engine computes or caches in it (vLLM's ``_resolve_auto_dtype`` accepts only the platform's
    float16 / bfloat16 / float32 and falls back to bfloat16 for anything else)."""
    key = name.strip().lower().removeprefix("torch.")
    try:
        return lookup_dtype(key, what="config dtype").name not in ACTIVATION_DTYPES
    except InputError:
        return key.startswith(("int", "uint", "float8", "float4", "fp8", "fp4", "nvfp4", "mxfp"))


def resolve_kv_dtype(
    geometry: ModelGeometry, kv_dtype: str, *, group_size: int = DEFAULT_GROUP_SIZE
) -> tuple[KvDtype, str, KvDtype, list[str]]:
    """(kv dtype, its source, state dtype, notes) for ``--kv-dtype`` (``auto`` = the config's dtype)."""
    notes: list[str] = []
    if geometry.config_dtype is not None and _is_storage_dtype(geometry.config_dtype):
        model_dtype = lookup_dtype(QUANTISED_ACTIVATION_DTYPE)
        model_source = (f"{geometry.config_dtype_source} = {geometry.config_dtype} names the weights' storage type, "
                        "not one a model runs in: bf16, as vLLM's --dtype auto falls back to the first dtype the GPU "
                        "supports (_resolve_auto_dtype) and SGLang, TensorRT-LLM, llama.cpp and transformers run a "
                        "quantised checkpoint's activations in 16 bits; pass --kv-dtype fp16 for a GPU without bf16")
    elif geometry.config_dtype is not None:
        try:
            model_dtype = lookup_dtype(geometry.config_dtype, what="config dtype")
        except InputError:
            raise ConfigError(
                f"{geometry.model_id}: config dtype {geometry.config_dtype!r} is not a known dtype",
                "pass --kv-dtype explicitly, e.g. --kv-dtype bf16",
            ) from None
        model_source = f"{geometry.config_dtype_source} = {geometry.config_dtype}"
    else:
        model_dtype = lookup_dtype(NO_CONFIG_DTYPE)
        model_source = ("default: the config names no torch_dtype, so fp16 (2 bytes, as vLLM's --dtype auto serves "
                        "it); pass --kv-dtype fp32 or bf16 to choose")
    if kv_dtype.strip().lower() == "auto":  # NOTE: a missing torch_dtype is said once, in the source
        return model_dtype, f"auto: {model_source}", model_dtype, notes
    chosen = lookup_dtype(kv_dtype, group_size=group_size)
    if any(spec.kind == "state" for spec in geometry.layers) and chosen != model_dtype:
        notes.append(
            f"recurrent states stay in the model dtype {model_dtype.name}; --kv-dtype {chosen.name} applies "
            "to attention K/V only"
        )
    return chosen, "--kv-dtype", model_dtype, notes


def _distinct(layers: tuple[LayerSpec, ...]) -> tuple[LayerSpec, ...]:
    """The distinct specs of ``layers`` in order of first use: what an engine's model-wide checks read (the
    checks ask which kinds, heads and sizes occur, and name the first offender)."""
    return tuple(dict.fromkeys(layers))


def _distinct_specs(geometry: ModelGeometry, dep: Deployment) -> tuple[LayerSpec, ...]:
    """The distinct specs the deployment caches, before the engine's own recasting (``--no-window`` makes
    windowed layers full)."""
    if dep.no_window:
        return _distinct(tuple(as_full_attention(s) for s in geometry.layers))
    return tuple(spec for spec, _indices in geometry.spec_groups)


def with_adjustments(est: Estimate) -> Estimate:
    """``est``, made with ``adjustments=False``, with its adjustment walk: the numbers are the same, each bend
    of the formula is listed as ``estimate(..., adjustments=True)`` lists it."""
    sizing = _Sizing(geometry=est.geometry, seq_len=est.seq_len or 0, encoder_len=est.encoder_len or 0,
                     batch=est.batch, model_dtype=est.state_dtype, state_dtype=est.state_dtype)
    # NOTE: the walk ends on the whole deployment's steady bytes, which the estimate holds.
    final = Priced(groups=est.groups, total_bytes=est.kv_cache_bytes, per_gpu_bytes=est.kv_cache_bytes_per_gpu,
                   cpu_bytes=est.cpu_bytes, peak_bytes=est.peak_bytes, peak_per_gpu_bytes=est.peak_bytes_per_gpu,
                   notes=())
    walk = _adjustments(sizing, est.deployment, est.kv_dtype, get_engine(est.deployment.engine), final,
                        est.kv_dtype_source)
    return replace(est, adjustments=tuple(walk))


def estimate(
    geometry: ModelGeometry,
    *,
    batch: int = 1,
    seq_len: int | None = None,
    kv_dtype: str = "auto",
    encoder_len: int | None = None,
    deployment: Deployment | None = None,
    adjustments: bool = True,
) -> Estimate:
    """The KV cache of ``batch`` sequences of ``seq_len`` tokens, layer group by group.

    Without ``deployment`` this is the ideal formula: sliding layers hold min(T, W) tokens,
    chunked layers min(T, C), state layers a fixed size per sequence and cross-attention layers
    the encoder length. A :class:`~kvplan.adjust.Deployment` adds an engine profile
    (``engine="vllm"`` ...), tensor/pipeline parallelism, blocks, beams, prefix sharing, windows
    off, quantization options and offload; each effect is listed in ``Estimate.adjustments``.
    ``kv_cache_bytes`` stays the whole cache over all GPUs; ``kv_cache_bytes_per_gpu`` is the
    largest rank's share, ``peak_bytes`` the transient peak and ``cpu_bytes`` the offloaded part.
    """
    dep = deployment or Deployment()
    validate_deployment(dep)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"--batch must be a positive integer, got {batch!r}", "e.g. --batch 8")
    if batch > MAX_BATCH:
        raise InputError(f"--batch {batch:,} is absurdly large (limit {MAX_BATCH:,})", "check the value")
    notes = list(geometry.notes)
    engine = get_engine(dep.engine)

    if seq_len is not None:
        seq_source = "--seq-len"
    elif engine.model_max_len(geometry)[0] is not None:
        seq_len, model_source = engine.model_max_len(geometry)
        seq_source = f"model maximum context ({model_source} = {seq_len})"
    elif geometry.grows_with_tokens:
        raise InputError(
            f"{geometry.model_id}: the config names no maximum context, so the sequence length is unknown",
            "pass --seq-len, e.g. --seq-len 4k",
        )
    else:
        seq_source = "not needed: no layer grows with tokens"
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1):
        raise InputError(f"--seq-len must be a positive integer, got {seq_len!r}", "e.g. --seq-len 4096")

    geometry, dtype, dtype_source, state_dtype, engine, dep, setup_notes = _resolve(geometry, kv_dtype, dep, seq_len)
    notes.extend(setup_notes)

    enc_source = None
    if geometry.has_cross_attention:
        if encoder_len is not None:
            enc_source = "--encoder-len"
            if geometry.default_encoder_len is not None and encoder_len > geometry.default_encoder_len:
                notes.append(
                    f"--encoder-len {encoder_len:,} is beyond the encoder length of the config ("
                    f"{geometry.default_encoder_len_source} = {geometry.default_encoder_len:,})"
                )
        elif geometry.default_encoder_len is not None:
            encoder_len = geometry.default_encoder_len
            enc_source = f"{geometry.default_encoder_len_source} = {encoder_len}"
        else:
            encoder_len = seq_len
            enc_source = "default: the encoder length equals --seq-len"
            notes.append("the config names no encoder length; cross-attention assumes it equals --seq-len")
        if encoder_len is None or encoder_len < 1:
            raise InputError(f"--encoder-len must be a positive integer, got {encoder_len!r}", "e.g. --encoder-len 1500")
    elif encoder_len is not None:
        notes.append("--encoder-len is ignored: the model has no cross-attention layers")
        encoder_len = None

    distinct = _distinct_specs(geometry, dep)
    if dep.no_window and all(as_full_attention(spec) is spec for spec, _indices in geometry.spec_groups):
        notes.append("--no-window changes nothing: the model has no sliding-window or chunked layers")
    notes.extend(engine.check(distinct, dep, dtype))
    check_query_heads(geometry, dep)  # after the engine's own KV-head rule, which names the KV heads
    if dep.max_num_seqs is not None and batch * dep.beams > dep.max_num_seqs:
        notes.append(
            f"{batch * dep.beams} sequences exceed --max-num-seqs {dep.max_num_seqs}: vLLM runs at most "
            f"{dep.max_num_seqs} at once; the estimate still holds all of them"
        )
    sizing = _Sizing(geometry=geometry, seq_len=seq_len or 0, encoder_len=encoder_len or 0, batch=batch,
                     model_dtype=state_dtype, state_dtype=state_dtype)
    priced = sizing.price(dep, dtype)
    notes.extend(priced.notes)
    steps = tuple(_adjustments(sizing, dep, dtype, engine, priced, dtype_source)) if adjustments else ()
    groups = priced.groups
    model_max = engine.model_max_len(geometry)[0]
    if seq_len is not None and model_max is not None and seq_len > model_max:
        notes.append(f"--seq-len {seq_len:,} is beyond the model's maximum context {model_max:,}")
    return Estimate(
        geometry=geometry,
        batch=batch,
        seq_len=seq_len,
        seq_len_source=seq_source,
        kv_dtype=dtype,
        kv_dtype_source=dtype_source,
        state_dtype=state_dtype,
        encoder_len=encoder_len,
        encoder_len_source=enc_source,
        groups=groups,
        notes=tuple(dict.fromkeys(notes)),
        deployment=dep,
        gpu_bytes_per_rank=priced.per_gpu_bytes,
        peak_total_bytes=priced.peak_bytes,
        peak_gpu_bytes=priced.peak_per_gpu_bytes,
        cpu_bytes=priced.cpu_bytes,
        adjustments=steps,
    )


def _resolve(
    geometry: ModelGeometry, kv_dtype: str, dep: Deployment, seq_len: int | None
) -> tuple[ModelGeometry, KvDtype, str, KvDtype, EngineProfile, Deployment, list[str]]:
    """The served geometry, KV dtype (and its source), state dtype, engine and deployment of an estimate,
    with the notes they add; raises what the engine and the lengths refuse."""
    engine = get_engine(dep.engine)
    if dep.dtype is not None or not engine.plain_formula:  # NOTE: the one place the served dtype is applied
        geometry = served_geometry(geometry, engine, dep.dtype or "auto")
    dtype, dtype_source, state_dtype, notes = resolve_kv_dtype(geometry, kv_dtype, group_size=dep.quant_group_size)
    if dep.engine != engine.name:  # an alias (hf -> hf-dynamic): the profile's own name
        dep = dep.with_(engine=engine.name)
    check_lengths(geometry, dep, seq_len)
    notes.extend(ignored_knobs(dep, engine))
    if kv_dtype.strip().lower() == "auto" and engine.auto_dtype(state_dtype) != dtype:
        dtype = engine.auto_dtype(state_dtype)
        dtype_source = f"auto: {engine.title}'s default cache type {dtype.name}"
    if kv_dtype.strip().lower() == "auto" and geometry.checkpoint_kv_dtype is not None:
        named = f"{geometry.checkpoint_kv_dtype_source} (a KV cache in {geometry.checkpoint_kv_dtype})"
        if engine.checkpoint_kv_dtype and geometry.checkpoint_kv_dtype in engine.checkpoint_kv_formats:
            dtype = lookup_dtype(geometry.checkpoint_kv_dtype)
            dtype_source = f"auto: {named}; {engine.checkpoint_kv_dtype}"
        else:
            notes.append(f"{named}; {engine.title} keeps --kv-dtype auto at {dtype.name} (pass --kv-dtype "
                         f"{geometry.checkpoint_kv_dtype} for the checkpoint's format)")
    if dep.cache_type_v is not None and "cache_type_v" in engine.knobs:
        dtype_source += f"; V cache {dep.cache_type_v} (--cache-type-v): kv_dtype is the K type"
    return geometry, dtype, dtype_source, state_dtype, engine, dep, notes


class KvSizer:
    """``estimate(geometry, batch=b, seq_len=t, kv_dtype=..., deployment=...)``'s layer groups and
    ``kv_cache_bytes_per_gpu`` for any ``b`` and ``t``, without re-running the estimate.

    Once the deployment and dtype are fixed, which layers share a spec, what one rank holds of each and
    which pipeline stage holds which layer do not change with tokens or batch: they are laid out once
    here, and each question prices only one layer per group (the engine's ``layer_bytes``) and sums
    the group counts per stage. Capacity's searches (max context, max batch, minimum TP) ask this.
    Raises what ``estimate`` raises for the model, dtype and deployment.
    """

    def __init__(self, geometry: ModelGeometry, *, kv_dtype: str = "auto", deployment: Deployment | None = None,
                 encoder_len: int | None = None) -> None:
        dep = deployment or Deployment()
        validate_deployment(dep)
        geometry, dtype, _source, state_dtype, engine, dep, _notes = _resolve(geometry, kv_dtype, dep, None)
        engine.check(_distinct_specs(geometry, dep), dep, dtype)
        check_query_heads(geometry, dep)
        self.geometry, self.kv_dtype, self.deployment, self.engine = geometry, dtype, dep, engine
        self.encoder_len = encoder_len
        self.layout = _layout(geometry, dep, dtype, state_dtype=state_dtype, model_dtype=state_dtype)
        self._cross = geometry.has_cross_attention  # NOTE: a scan of every layer: once, not per probe

    def price(self, batch: int, seq_len: int) -> Priced:
        """The steady cache of ``batch`` sequences of ``seq_len`` tokens (no transient peaks)."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InputError(f"--batch must be a positive integer, got {batch!r}", "e.g. --batch 8")
        if batch > MAX_BATCH:
            raise InputError(f"--batch {batch:,} is absurdly large (limit {MAX_BATCH:,})", "check the value")
        encoder_len = 0
        if self._cross:
            encoder_len = self.encoder_len or self.geometry.default_encoder_len or seq_len
        return _price(self.layout, seq_len=seq_len, encoder_len=encoder_len, batch=batch, peaks=False)

    def kv_cache_bytes_per_gpu(self, batch: int, seq_len: int) -> int:
        return self.price(batch, seq_len).per_gpu_bytes


# ---- deployment pricing ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Priced:
    """Layer groups priced for a deployment: totals across GPUs, per GPU, offloaded and at peak."""

    groups: tuple[LayerGroup, ...]
    total_bytes: int
    per_gpu_bytes: int
    cpu_bytes: int
    peak_bytes: int
    peak_per_gpu_bytes: int
    notes: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class _Sizing:
    """The fixed inputs; ``price`` sizes them for one deployment and one KV dtype. The deployments an
    adjustment walk prices share their layer grouping where engine, windows, TP and PP agree: it is made
    once per sizing (``groupings``)."""

    geometry: ModelGeometry
    seq_len: int
    encoder_len: int
    batch: int
    model_dtype: KvDtype
    state_dtype: KvDtype
    groupings: dict[tuple[str, bool, int, int], _Grouping] = field(default_factory=dict, compare=False, repr=False)

    def price(self, dep: Deployment, kv_dtype: KvDtype, *, peaks: bool = True) -> Priced:
        engine = get_engine(dep.engine)
        key = (engine.name, dep.no_window, dep.tp, dep.pp)
        grouping = self.groupings.get(key)
        if grouping is None:
            grouping = self.groupings[key] = _group_layers(self.geometry, engine, dep)
        layout = _Layout(grouping=grouping, engine=engine, dep=dep, kv_dtype=kv_dtype, state_dtype=self.state_dtype,
                         model_dtype=self.model_dtype)
        return _price(layout, seq_len=self.seq_len, encoder_len=self.encoder_len, batch=self.batch, peaks=peaks)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Grouping:
    """One engine's cached specs for a model, sharded once per distinct spec, grouped, and counted per
    pipeline stage: what an engine, ``--no-window``, TP and PP decide, whatever the tokens, batch and dtype."""

    geometry: ModelGeometry
    num_layers: int
    """Cached layer entries (a parallel hybrid or encoder-decoder has more than ``num_hidden_layers``)."""
    groups: tuple[tuple[LayerSpec, LayerSpec, tuple[int, ...]], ...]
    """(spec, rank spec, layer indices) per distinct spec, in order of first layer."""
    stage_counts: tuple[tuple[int, ...], ...]
    """Per pipeline stage: how many layers of each group it holds."""
    has_full: bool
    has_windowed: bool
    swa_window: int | None
    hf_added_tokens: int
    """Tokens transformers' modeling code adds to every sequence (provenance ``hf_added_tokens``; 0: none)."""
    notes: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """What pricing needs that tokens and batch do not change: the grouping, the deployment and the dtypes."""

    grouping: _Grouping
    engine: EngineProfile
    dep: Deployment
    kv_dtype: KvDtype
    state_dtype: KvDtype
    model_dtype: KvDtype


def _layout(geometry: ModelGeometry, dep: Deployment, kv_dtype: KvDtype, *, state_dtype: KvDtype,
            model_dtype: KvDtype) -> _Layout:
    engine = get_engine(dep.engine)
    return _Layout(grouping=_group_layers(geometry, engine, dep), engine=engine, dep=dep, kv_dtype=kv_dtype,
                   state_dtype=state_dtype, model_dtype=model_dtype)


def _group_layers(geometry: ModelGeometry, engine: EngineProfile, dep: Deployment) -> _Grouping:
    given = [as_full_attention(s) for s in geometry.layers] if dep.no_window else list(geometry.layers)
    hf_heads = next((p.value for p in geometry.provenance if p.field == "hf_cached_kv_heads"), None)
    hf_added = next((p.value for p in geometry.provenance if p.field == "hf_added_tokens"), 0)
    layers, cached_notes = engine.cached_layers(given, hf_cached_kv_heads=hf_heads if isinstance(hf_heads, int) else None,
                                                model_type=geometry.model_type)
    notes = list(cached_notes)
    # NOTE: the geometry holds its grouping by value; only --no-window or an engine that recasts layers (it
    # returns a new list) needs another.
    spec_groups = geometry.spec_groups if layers is given and not dep.no_window else group_specs(layers)
    members = dict(spec_groups)
    rank_of: dict[LayerSpec, LayerSpec] = {}
    for spec in members:
        # NOTE: sharding is a function of the spec: once per distinct spec gives every layer's rank spec
        # (and, de-duplicated, the same notes in the same order as sharding layer by layer).
        rank_of[spec], shard_notes = engine.shard(spec, dep.tp)
        notes.extend(shard_notes)
    windows = [w for s in rank_of.values() if (w := s.window) is not None]
    num_layers = geometry.num_hidden_layers
    if dep.pp == 1:
        counts = [[len(indices) for indices in members.values()]]
    else:
        stage_of = stage_of_layer(num_layers, dep.pp, extra_to_last=engine.pp_extra_layers_last)
        counts = [[0] * len(members) for _ in range(dep.pp)]
        wrap = len(layers) > num_layers
        for gi, indices in enumerate(members.values()):
            for index in indices:
                counts[stage_of[index % num_layers if wrap else index]][gi] += 1
    return _Grouping(
        geometry=geometry, num_layers=len(layers),
        groups=tuple((spec, rank_of[spec], tuple(indices)) for spec, indices in members.items()),
        stage_counts=tuple(tuple(c) for c in counts),
        has_full=any(s.grows_with_tokens and s.window is None for s in rank_of.values()),
        has_windowed=bool(windows), swa_window=max(windows) if windows else None,
        hf_added_tokens=hf_added if isinstance(hf_added, int) else 0, notes=tuple(notes),
    )


def _price(layout: _Layout, *, seq_len: int, encoder_len: int, batch: int, peaks: bool = True) -> Priced:
    """Bytes of every group at ``seq_len`` tokens and ``batch`` sequences; ``peaks=False`` skips the
    transient peak (capacity asks only for the steady cache)."""
    engine, dep, grouping = layout.engine, layout.dep, layout.grouping
    ctx = SizingContext(
        seq_len=seq_len, encoder_len=encoder_len, batch=batch, dep=dep, kv_dtype=layout.kv_dtype,
        state_dtype=layout.state_dtype, model_dtype=layout.model_dtype, has_full=grouping.has_full,
        has_windowed=grouping.has_windowed, swa_window=grouping.swa_window, hf_added_tokens=grouping.hf_added_tokens,
    )
    ctx, prep_notes = engine.prepare([rank for _spec, rank, _indices in grouping.groups], ctx)
    seqs = batch * dep.beams
    groups: list[LayerGroup] = []
    group_bytes: list[int] = []
    for spec, rank_spec, indices in grouping.groups:
        layer_bytes = engine.layer_bytes(rank_spec, ctx)
        per_token = engine.bytes_per_token(rank_spec, ctx)
        total = layer_bytes * len(indices) * dep.tp
        group_bytes.append(layer_bytes)
        groups.append(
            LayerGroup(
                spec=spec,
                count=len(indices),
                layer_indices=indices,
                tokens_held=engine.tokens_held(rank_spec, ctx),
                bytes_per_token=per_token * dep.tp,
                bytes_per_seq=total // seqs,
                total_bytes=total,
                rank_spec=rank_spec,
                layer_bytes_per_rank=layer_bytes,
                bytes_per_token_per_rank=per_token,
            )
        )
    if dep.offload is None:
        per_gpu = max(sum(c * b for c, b in zip(counts, group_bytes)) for counts in grouping.stage_counts)
        cpu_rank = 0
    else:
        rank_bytes = [0] * grouping.num_layers
        for (_spec, _rank, indices), layer_bytes in zip(grouping.groups, group_bytes):
            for index in indices:
                rank_bytes[index] = layer_bytes
        per_gpu, cpu_rank = _placement(grouping.geometry, rank_bytes, dep)
    steady_rank = sum(len(indices) * b for (_s, _r, indices), b in zip(grouping.groups, group_bytes))
    peak_rank = steady_rank
    if peaks and engine.transient_peaks:  # NOTE: the base rule has no transient: the peak is the steady cache
        costs = [(rank, b) for (_s, rank, indices), b in zip(grouping.groups, group_bytes) for _ in indices]
        prefill_rank = engine.prefill_bytes(costs, ctx) or 0
        peak_rank = max(steady_rank, prefill_rank) + engine.peak_extra_bytes(costs, ctx)
    return Priced(
        groups=tuple(groups),
        total_bytes=steady_rank * dep.tp,
        per_gpu_bytes=per_gpu,
        cpu_bytes=cpu_rank * dep.tp,
        peak_bytes=peak_rank * dep.tp,
        # NOTE: the transient (one layer's copy, a prefill view) sits on the most loaded GPU in the worst case.
        peak_per_gpu_bytes=per_gpu + (peak_rank - steady_rank),
        notes=grouping.notes + tuple(prep_notes),
    )


def _placement(geometry: ModelGeometry, rank_bytes: list[int], dep: Deployment) -> tuple[int, int]:
    """(GPU bytes of the most loaded rank, CPU bytes of one TP slice) after PP and offload."""
    num_layers = geometry.num_hidden_layers
    stage_of = stage_of_layer(num_layers, dep.pp, extra_to_last=get_engine(dep.engine).pp_extra_layers_last)
    stage_gpu = [0] * dep.pp
    cpu = 0
    for index, layer_bytes in enumerate(rank_bytes):
        decoder_layer = index % num_layers if len(rank_bytes) > num_layers else index
        on_cpu = 0
        if dep.offload is not None:
            if dep.offload.layers is not None:
                on_cpu = layer_bytes if decoder_layer < dep.offload.layers else 0
            else:
                # NOTE: exact decimal arithmetic, so 0.1 of a layer is never off by one byte (fractions is
                # imported here: only --offload needs it, and it costs `kvplan estimate` a few ms to start).
                from fractions import Fraction

                on_cpu = int(Fraction(repr(dep.offload.fraction or 0.0)) * layer_bytes)
        cpu += on_cpu
        stage_gpu[stage_of[decoder_layer]] += layer_bytes - on_cpu
    return max(stage_gpu), cpu


def _adjustments(sizing: _Sizing, dep: Deployment, kv_dtype: KvDtype, engine: EngineProfile, final: Priced,
                 dtype_source: str = "") -> list[Adjustment]:
    """Apply the deployment one knob at a time and record each effect (before -> after); ``final`` is the
    whole deployment already priced (its steady bytes end the last step); ``dtype_source`` says where the KV
    dtype came from."""
    out: list[Adjustment] = []
    ideal = get_engine("ideal")
    # NOTE: dtype is already in the served geometry (_resolve): it bends no byte here
    cur = Deployment(quant_group_size=dep.quant_group_size, residual_length=dep.residual_length, prompt_len=dep.prompt_len,
                     dtype=dep.dtype)
    cur_dtype = ideal.auto_dtype(sizing.model_dtype)
    priced = sizing.price(cur, cur_dtype, peaks=False)  # NOTE: adjustments compare steady bytes only
    geometry = sizing.geometry

    def step(name: str, reason: str, new: Deployment, dtype: KvDtype | None = None, *, per_gpu: bool = False) -> None:
        nonlocal cur, cur_dtype, priced
        # NOTE: steady bytes do not depend on peaks: the whole deployment's own price ends the walk.
        after = final if new == dep and (dtype or cur_dtype) == kv_dtype else sizing.price(new, dtype or cur_dtype,
                                                                                            peaks=False)
        before_bytes = priced.per_gpu_bytes if per_gpu else priced.total_bytes
        after_bytes = after.per_gpu_bytes if per_gpu else after.total_bytes
        out.append(Adjustment(name=name, reason=reason, before_bytes=before_bytes, after_bytes=after_bytes,
                              scope="per_gpu" if per_gpu else "all_gpus"))
        cur, cur_dtype, priced = new, dtype or cur_dtype, after

    if dep.no_window and any(s.window is not None for s in geometry.layers):
        step("no_window", "--no-window: sliding and chunked layers hold every token, as engines do with their "
             "hybrid allocator off (vLLM --disable-hybrid-kv-cache-manager, llama.cpp --swa-full)",
             cur.with_(no_window=True))
    elif dep.no_window:
        cur = cur.with_(no_window=True)  # no windowed layer: nothing changes (estimate() adds a note)
    engine_knobs: dict[str, object] = {
        "engine": dep.engine, "max_num_batched_tokens": dep.max_num_batched_tokens, "max_num_seqs": dep.max_num_seqs,
        "ubatch_size": dep.ubatch_size, "kv_unified": dep.kv_unified,
        "swa_full_tokens_ratio": dep.swa_full_tokens_ratio, "max_cache_len": dep.max_cache_len,
        "enable_prefix_caching": dep.enable_prefix_caching,
    }
    if not engine.plain_formula:
        new = cur.with_(**engine_knobs)
        ctx_reason = engine.summary(_summary_ctx(sizing, new, cur_dtype))
        step(f"engine:{engine.name}", f"{ctx_reason} [{engine.source}]", new, engine.auto_dtype(sizing.model_dtype))
    else:
        new = cur.with_(**engine_knobs)
        if new != cur:
            priced = final if new == dep and cur_dtype == kv_dtype else sizing.price(new, cur_dtype, peaks=False)
        cur = new
    if dep.block_size is not None:
        step("block_size", f"--block-size {dep.block_size}: each sequence's tokens in each layer round up to whole "
             f"blocks of {dep.block_size}", cur.with_(block_size=dep.block_size))
    if kv_dtype != cur_dtype:
        flag = (f"--kv-dtype auto ({kv_dtype.name}, as the checkpoint names it)" if dtype_source.startswith("auto")
                else f"--kv-dtype {kv_dtype.name}")
        reason = f"{flag}: {kv_dtype.description or kv_dtype.name}, {kv_dtype.bits_per_element:.4g} bits per value"
        if engine.hf_quantized and (kv_dtype.scheme == "grouped"):
            reason += (f"; Hugging Face QuantizedCache keeps up to --residual-length {dep.residual_length} - 1 recent "
                       "tokens in full precision")
        step("kv_dtype", reason, cur, kv_dtype)
    if dep.cache_type_v is not None and "cache_type_v" not in engine.knobs:
        cur = cur.with_(cache_type_v=dep.cache_type_v)  # ignored by this engine (a note says so): no bytes change
    elif dep.cache_type_v is not None:
        v = value_dtype(dep, kv_dtype)
        step("cache_type_v", f"--cache-type-v {v.name}: the V cache in {v.description or v.name} "
             f"({v.bits_per_element:.4g} bits per value), K stays {kv_dtype.name}", cur.with_(cache_type_v=v.name))
    if dep.v_row_elems is not None:
        step("v_row_padding", f"llama.cpp -fa off: V is stored transposed and its width differs between layers, so "
             f"every layer's V row holds {dep.v_row_elems} values, the widest (src/llama-kv-cache.cpp)",
             cur.with_(v_row_elems=dep.v_row_elems))
    if dep.beams > 1:
        step("beams", f"--beams {dep.beams}: {sizing.batch} x {dep.beams} sequences each keep their own cache "
             "(the prompt is copied per beam, as Hugging Face generate does)", cur.with_(beams=dep.beams))
    if dep.share_prefix:
        step("share_prefix", f"--share-prefix: the full blocks of each {dep.prompt_len}-token prompt are kept once per "
             "request, only the generated part per beam (prefix caching)", cur.with_(share_prefix=True))
    if dep.shared_prefix_tokens:
        step("shared_prefix_tokens", f"--shared-prefix-tokens {dep.shared_prefix_tokens}: the full blocks of a common "
             f"prefix are kept once for all {sizing.batch} sequences", cur.with_(shared_prefix_tokens=dep.shared_prefix_tokens))
    if dep.tp > 1:
        step("tensor_parallel", f"--tensor-parallel-size {dep.tp}: each rank keeps {(engine.tp_rule == 'ceil' and 'cdiv') or 'max(1, '}"
             f"H_kv / {dep.tp}{'' if engine.tp_rule == 'ceil' else ')'} KV heads, MLA latents and un-split heads are "
             "replicated; bytes are the sum over all ranks", cur.with_(tp=dep.tp))
    if dep.pp > 1:
        step("pipeline_parallel", f"--pipeline-parallel-size {dep.pp}: {geometry.num_hidden_layers} layers split "
             f"over stages as {'SGLang' if engine.pp_extra_layers_last else 'vLLM'} get_pp_indices does; bytes are the "
             "most loaded GPU", cur.with_(pp=dep.pp), per_gpu=True)
    if dep.offload is not None:
        what = (f"the caches of the first {dep.offload.layers} layers" if dep.offload.layers is not None
                else f"{dep.offload.fraction:g} of every layer's cache")
        step("offload", f"--offload {dep.offload.describe()}: {what} kept in CPU memory; bytes are the most loaded "
             "GPU", cur.with_(offload=dep.offload), per_gpu=True)
    assert cur == dep, (cur, dep)
    return out


def _summary_ctx(sizing: _Sizing, dep: Deployment, dtype: KvDtype) -> SizingContext:
    return SizingContext(
        seq_len=sizing.seq_len, encoder_len=sizing.encoder_len, batch=sizing.batch, dep=dep, kv_dtype=dtype,
        state_dtype=sizing.state_dtype, model_dtype=sizing.model_dtype, has_full=True, has_windowed=False,
    )


# ---- data parallelism (`kvplan estimate --dp`) -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Replicas:
    """``--dp D``: D data-parallel replicas, each with its own KV cache, share the ``batch`` sequences. vLLM's
    ``--data-parallel-size`` and SGLang's ``--dp`` replicas each hold ``tp x pp`` GPUs; with SGLang's
    ``--enable-dp-attention`` the ranks split the ``--tp`` GPUs, so a rank holds ``tp / D`` of them
    (``layers/dp_attention.py::compute_dp_attention_world_info``)."""

    dp: int
    batch: int
    """The whole batch, over all replicas."""
    tp: int
    """The ``--tp`` given (SGLang: over all replicas)."""
    replica_tp: int
    """The tensor-parallel width of one replica's KV cache."""
    gpus: int
    """GPUs of the deployment, all replicas."""
    dp_attention: bool = False
    """SGLang ``--enable-dp-attention``: the ranks split the ``--tp`` GPUs."""

    @property
    def busiest_batch(self) -> int:
        """Sequences of the busiest replica: ceil(batch / dp)."""
        return self.batch if self.dp == 1 else -(-self.batch // self.dp)

    @property
    def lightest_batch(self) -> int:
        """Sequences of the least loaded replica: floor(batch / dp) (0: some replicas hold none)."""
        return self.batch // self.dp

    @property
    def busiest_count(self) -> int:
        """Replicas that hold ``busiest_batch`` sequences (the rest hold ``lightest_batch``)."""
        return self.batch % self.dp or self.dp


def replicas(dp: int, *, batch: int, tp: int, pp: int, engine: EngineProfile, dp_attention: bool = False) -> Replicas:
    """Check ``--dp`` against the batch and the GPU limit (InputError, exit 2) and lay the replicas out
    (``dp_attention``: SGLang's ``--enable-dp-attention``, whose ranks split the ``tp`` GPUs)."""
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise InputError(f"--dp must be a positive integer, got {dp!r}", "e.g. --dp 2 (1: no data parallelism)")
    check_limit(dp, MAX_NUM_GPUS, "--dp")
    replica_tp = tp
    within = engine.dp_splits_tp(dp_attention)
    if within and dp > 1:
        if tp % dp:
            raise InputError(f"SGLang's DP attention splits the --tp GPUs: --dp {dp} must divide --tp {tp}",
                             f"use a --dp that divides {tp} (e.g. --dp {tp}), or --tp {dp * -(-tp // dp)} --dp {dp}")
        replica_tp = tp // dp
    gpus = tp * pp * (1 if within else dp)
    check_limit(gpus, MAX_NUM_GPUS, f"--tp {tp} x --pp {pp} x --dp {dp} GPUs")
    return Replicas(dp=dp, batch=batch, tp=tp, replica_tp=replica_tp, gpus=gpus, dp_attention=dp_attention)
