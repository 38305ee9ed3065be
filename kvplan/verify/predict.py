"""Pure predictions for ``kvplan verify`` (no torch): the cache tensors each layout allocates, and
what the CUDA caching allocator makes of them.

``kvplan verify`` runs a real decode (``kvplan/verify/decode.py``) and compares the bytes of its cache
tensors with :func:`plan_verify`'s prediction for the same inputs. Every prediction here is
arithmetic over the layer specs; the decode never reads these numbers to size its tensors
(except the paged pool, whose peak use is measured separately, see :class:`LayerPlan`).

Token accounting: a prefill of P prompt tokens, then G decode steps, each feeding one token
back, so every layer has seen ``T = P + G`` tokens at the end (Hugging Face ``generate`` with
``max_new_tokens = G + 1`` holds the same T: the last new token is never fed back).

Layouts (R = batch * beams rows, h KV heads of this rank, d_k/d_v head dims, s bytes/element):

- ``dynamic``   grow by concatenation (Hugging Face DynamicCache): full and MLA layers hold T
                tokens; sliding/chunked layers keep the last ``W - 1`` tokens as a *view* of the
                concatenation, as transformers' DynamicSlidingWindowLayer does, so their storage
                is ``min(T, W)`` tokens (the whole prompt right after a prefill, ``--gen-len 0``);
                with ``--beams`` the per-step beam reorder (index_select) compacts it to
                ``min(T, W - 1)`` (transformers ``cache_utils.py``, measured). This is kvplan's ``hf-dynamic`` engine profile.
- ``static``    preallocated to ``M = --max-cache-len`` (default T) tokens (StaticCache); windowed
                layers get a ring buffer of ``min(W, M)`` tokens.
- ``sliding``   like static, but every windowed layer gets a ring buffer of exactly ``W`` tokens.
- ``paged``     per layer a K pool and a V pool of ``R * blocks`` blocks of ``--block-size`` tokens;
                full layers need ``cdiv(T, bs)`` blocks per sequence, windowed layers the most
                blocks their live window ever spans (freed blocks are reused).
- ``quantized`` int8/int4 codes with one scale and one zero point (model dtype) per group of
                ``--quant-group-size`` values along the head dim, plus a full-precision residual
                of the ``G mod --residual-length`` most recent tokens (KIVI / Hugging Face
                QuantizedCache in ``cache_utils.py``). Full-attention and MLA layers only.

MLA layers cache the latent like transformers >= 5.15: a "K" of ``kv_lora_rank`` and a "V" of
``qk_rope_head_dim`` values, one head. State layers hold their per-sequence state tensors in
the model dtype, with one exception: in the Hugging Face layouts (``dynamic``, ``static``,
``quantized``) a Mamba-1 layer holds the whole ``d_conv`` conv window and a float32 ssm state,
as transformers does (measured on the CPU; the ``hf-dynamic`` profile); ``paged`` and ``sliding`` keep
vLLM's ``d_conv - 1`` window in the model dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.calc import resolve_kv_dtype
from kvplan.dtypes import KvDtype, lookup_dtype
from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.specs import (
    ChunkedLocalSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.units import MiB, cdiv

LAYOUTS = ("dynamic", "static", "paged", "sliding", "quantized")
#: KV dtypes a float cache can hold (torch has each of them); the quantized layout takes bits.
FLOAT_KV_DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
QUANT_BITS = {"int8": 8, "int4": 4}

#: Tolerances of the allocator-level comparison on CUDA (relative error).
ALLOCATED_TOLERANCE = 0.001
RESERVED_TOLERANCE = 0.02


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedTensor:
    """One cache tensor the decode allocates, as kvplan predicts it."""

    layer: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    """kvplan dtype name (``bf16``, ``fp8_e4m3``...) or ``uint8`` for quantized codes."""
    nbytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerPlan:
    """What one layer of one rank holds at the end of the decode."""

    index: int
    kind: str
    spec: LayerSpec
    num_kv_heads: int
    """KV heads on this rank (1 latent "head" for MLA)."""
    num_query_heads: int
    head_size: int
    """K width (``kv_lora_rank`` for MLA)."""
    head_size_v: int
    """V width (``qk_rope_head_dim`` for MLA)."""
    window: int | None
    chunk: int | None
    """``attention_chunk_size`` for chunked local layers (the mask), else None."""
    cache_tokens: int
    """Token slots per row: tokens held (dynamic), preallocated slots (static/sliding), 0 (paged)."""
    blocks_per_seq: int
    """Paged layout: blocks of --block-size this layer needs per sequence at its peak."""
    state_shapes: tuple[tuple[str, tuple[int, ...], str], ...]
    """State layers: (name, shape per sequence, kvplan dtype name) of each state tensor."""
    tensors: tuple[PlannedTensor, ...]
    aux_tensors: tuple[PlannedTensor, ...] = ()
    """Bookkeeping the layout allocates with the cache (static/sliding: the int64 position of each slot):
    not cache bytes, but live blocks the CUDA allocator counts, in allocation order after ``tensors``."""

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyPlan:
    geometry: ModelGeometry
    """The geometry truncated to ``num_layers`` layers; the prediction covers exactly these."""
    num_layers: int
    num_layers_total: int
    layout: str
    batch: int
    beams: int
    prompt_tokens: int
    gen_tokens: int
    max_cache_tokens: int
    block_size: int
    kv_dtype: KvDtype
    """Element type of float K/V; for ``quantized`` the model dtype of residual, scales and zeros."""
    kv_dtype_name: str
    """As asked: ``bf16``, ``int4``..."""
    kv_dtype_source: str
    quant_bits: int | None
    quant_group_size: int
    residual_tokens: int
    state_dtype: KvDtype
    tp: int
    num_query_heads: int
    layers: tuple[LayerPlan, ...]
    notes: tuple[str, ...]

    @property
    def rows(self) -> int:
        return self.batch * self.beams

    @property
    def seq_tokens(self) -> int:
        return self.prompt_tokens + self.gen_tokens

    @property
    def tensors(self) -> tuple[PlannedTensor, ...]:
        return tuple(t for layer in self.layers for t in layer.tensors)

    @property
    def predicted_bytes(self) -> int:
        """Cache bytes of one rank (every rank holds the same shapes)."""
        return sum(layer.nbytes for layer in self.layers)

    @property
    def allocation_sizes(self) -> tuple[int, ...]:
        """Bytes of every tensor the layout allocates, cache and bookkeeping, in the decode's order."""
        return tuple(t.nbytes for layer in self.layers for t in (*layer.tensors, *layer.aux_tensors))


def truncate(geometry: ModelGeometry, num_layers: int | None) -> ModelGeometry:
    """The first ``num_layers`` layers of ``geometry``, in order (all of them for None)."""
    total = len(geometry.layers)
    if num_layers is None or num_layers == total:
        return geometry
    if num_layers < 1 or num_layers > total:
        raise InputError(f"--layers must be between 1 and {total}, got {num_layers}", f"e.g. --layers {min(2, total)}")
    return replace(geometry, layers=geometry.layers[:num_layers], num_hidden_layers=num_layers)


def query_heads(geometry: ModelGeometry) -> int:
    """``num_attention_heads`` as the parser recorded it (0 when no layer attends)."""
    for prov in geometry.provenance:
        if prov.field == "num_attention_heads" and isinstance(prov.value, int):
            return prov.value
    heads = [getattr(spec, "num_kv_heads", 0) for spec in geometry.layers if not isinstance(spec, (StateSpec, NoCacheSpec))]
    return max(heads, default=0)


def plan_verify(
    geometry: ModelGeometry,
    *,
    layout: str = "dynamic",
    num_layers: int | None = None,
    batch: int = 1,
    beams: int = 1,
    prompt_len: int = 16,
    gen_len: int = 8,
    kv_dtype: str = "auto",
    block_size: int = 16,
    max_cache_len: int | None = None,
    quant_group_size: int = 64,
    residual_length: int = 128,
    tp: int = 1,
) -> VerifyPlan:
    """Predict every cache tensor of one rank of the verify decode, for the first ``num_layers`` layers."""
    if layout not in LAYOUTS:
        raise InputError(f"unknown --layout {layout!r}", f"use one of: {', '.join(LAYOUTS)}")
    for flag, value in (("--batch", batch), ("--beams", beams), ("--prompt-len", prompt_len), ("--block-size", block_size),
                        ("--quant-group-size", quant_group_size), ("--residual-length", residual_length), ("--tp", tp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{flag} must be a positive integer, got {value!r}", f"e.g. {flag} 2")
    if isinstance(gen_len, bool) or not isinstance(gen_len, int) or gen_len < 0:
        raise InputError(f"--gen-len must be 0 or more, got {gen_len!r}", "e.g. --gen-len 8")
    total_layers = len(geometry.layers)
    geo = truncate(geometry, num_layers)
    n_layers = len(geo.layers)
    if any(isinstance(spec, CrossAttentionSpec) for spec in geo.layers):
        raise InputError(
            f"{geometry.model_id} is an encoder-decoder model; kvplan verify decodes decoder-only stacks",
            "use `kvplan estimate` for its cross-attention cache",
        )
    seq_tokens = prompt_len + gen_len
    max_cache = seq_tokens if max_cache_len is None else max_cache_len
    if max_cache < seq_tokens:
        raise InputError(
            f"--max-cache-len {max_cache:,} is shorter than --prompt-len + --gen-len = {seq_tokens:,}",
            f"use --max-cache-len {seq_tokens} or more",
        )
    notes: list[str] = []
    if n_layers < total_layers:
        notes.append(
            f"--layers {n_layers}: the decode and the prediction both cover the first {n_layers} of {total_layers} layers"
        )

    model_dtype, model_source, state_dtype, _ = resolve_kv_dtype(geo, "auto")
    asked = kv_dtype.strip().lower()
    quant_bits = None
    if layout == "quantized":
        if asked not in QUANT_BITS:
            raise InputError(
                f"--layout quantized stores int8 or int4 codes, not --kv-dtype {kv_dtype!r}",
                "use --kv-dtype int8 or --kv-dtype int4 (fp8 is a plain dtype: --layout static --kv-dtype fp8)",
            )
        quant_bits = QUANT_BITS[asked]
        dtype, dtype_source, dtype_name = model_dtype, f"--kv-dtype {asked}; residual/scales: {model_source}", asked
        if dtype.name not in FLOAT_KV_DTYPES[:3]:
            raise InputError(f"the model dtype {dtype.name} cannot hold quantization scales", "pass a bf16/fp16 model")
    else:
        if asked in QUANT_BITS or asked.startswith("q") or asked == "iq4_nl":
            raise InputError(
                f"--kv-dtype {kv_dtype} needs scales; only --layout quantized stores them",
                "use --layout quantized --kv-dtype int8|int4, or a float dtype: fp32, fp16, bf16, fp8, fp8_e5m2",
            )
        dtype, dtype_source, _, dtype_notes = resolve_kv_dtype(geo, kv_dtype)
        notes.extend(dtype_notes)
        if dtype.name not in FLOAT_KV_DTYPES:
            raise InputError(f"--kv-dtype {dtype.name} is not a torch element type", f"use one of: {', '.join(FLOAT_KV_DTYPES)}")
        dtype_name = dtype.name

    hq_total = query_heads(geo)
    specs = list(geo.layers)
    if layout in HF_LAYOUTS:
        # NOTE: the specs as transformers caches them (Falcon new_decoder_architecture broadcasts K/V to
        # every query head before caching), the same rule as the hf-dynamic/hf-static engine profiles.
        hf_heads = next((p.value for p in geo.provenance if p.field == "hf_cached_kv_heads"), None)
        specs, hf_notes = get_engine("hf-dynamic").cached_layers(
            specs, hf_cached_kv_heads=hf_heads if isinstance(hf_heads, int) else None
        )
        notes.extend(hf_notes)
    layers = tuple(
        _plan_layer(
            index, spec, layout=layout, rows=batch * beams, batch=batch, prompt=prompt_len, seq=seq_tokens, max_cache=max_cache,
            block_size=block_size, dtype=dtype, state_dtype=state_dtype, quant_bits=quant_bits,
            group=quant_group_size, residual=residual_length, tp=tp, hq_total=hq_total, gen=gen_len,
        )
        for index, spec in enumerate(specs)
    )
    if layout == "dynamic" and any(layer.window is not None for layer in layers):
        notes.append(
            "dynamic: sliding/chunked layers keep their last W - 1 tokens as a view of the concatenation, as "
            "transformers' DynamicSlidingWindowLayer does, so each holds min(T, W) tokens of storage "
            "(the whole prompt after a prefill alone; W - 1 with --beams, whose reorder copies the view)"
        )
    if layout in HF_LAYOUTS and any(getattr(layer.spec, "mixer", None) in HF_FP32_STATE_MIXERS for layer in layers):
        notes.append(
            f"{layout}: Mamba, Mamba-2 and gated-delta-net layers hold the whole conv window and a float32 recurrent state, "
            "as transformers does on the CPU"
        )
    if tp > 1:
        notes.append(
            f"--tp {tp}: each rank holds max(1, H_kv // {tp}) KV heads (replicated when fewer heads than ranks), "
            "MLA latents are replicated, state tensors split their channel dimension"
        )
    if beams > 1:
        notes.append(f"--beams {beams}: {batch} x {beams} = {batch * beams} independent rows, the prompt copied per beam")
    return VerifyPlan(
        geometry=geo, num_layers=n_layers, num_layers_total=total_layers, layout=layout, batch=batch, beams=beams,
        prompt_tokens=prompt_len, gen_tokens=gen_len, max_cache_tokens=max_cache, block_size=block_size,
        kv_dtype=dtype, kv_dtype_name=dtype_name, kv_dtype_source=dtype_source, quant_bits=quant_bits,
        quant_group_size=quant_group_size, residual_tokens=residual_length, state_dtype=state_dtype, tp=tp,
        num_query_heads=hq_total, layers=layers, notes=tuple(dict.fromkeys(notes)),
    )


def shard_heads(heads: int, tp: int, what: str) -> int:
    """Heads of one rank: ``heads // tp``, or 1 (replicated) when there are fewer heads than ranks."""
    if heads % tp and tp % heads:
        raise InputError(f"{what} {heads} cannot be split over --tp {tp}", f"use a --tp that divides {heads} or is a multiple of it")
    return max(1, heads // tp)


def _plan_layer(
    index: int, spec: LayerSpec, *, layout: str, rows: int, batch: int, prompt: int, seq: int, gen: int, max_cache: int,
    block_size: int, dtype: KvDtype, state_dtype: KvDtype, quant_bits: int | None, group: int, residual: int,
    tp: int, hq_total: int,
) -> LayerPlan:
    if isinstance(spec, NoCacheSpec):
        return LayerPlan(index=index, kind=spec.kind, spec=spec, num_kv_heads=0, num_query_heads=0, head_size=0, head_size_v=0, window=None, chunk=None,
                         cache_tokens=0, blocks_per_seq=0, state_shapes=(), tensors=())
    if isinstance(spec, StateSpec):
        shapes = tuple(
            (name, _shard_state(name, shape, tp, index), dtype_name)
            for name, shape, dtype_name in _state_tensors(spec, layout, state_dtype)
        )
        tensors = tuple(
            PlannedTensor(layer=index, name=name, shape=(rows, *shape), dtype=dtype_name,
                          nbytes=rows * lookup_dtype(dtype_name).bytes_for(_count(shape)))
            for name, shape, dtype_name in shapes
        )
        return LayerPlan(index=index, kind=spec.kind, spec=spec, num_kv_heads=0, num_query_heads=0, head_size=0,
                         head_size_v=0, window=None, chunk=None, cache_tokens=0, blocks_per_seq=0, state_shapes=shapes,
                         tensors=tensors)

    if isinstance(spec, MLASpec):
        heads, dk, dv = 1, spec.kv_lora_rank, spec.qk_rope_head_dim
    elif isinstance(spec, (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalSpec)):
        heads, dk, dv = shard_heads(spec.num_kv_heads, tp, "num_kv_heads"), spec.head_size, spec.head_size_v
    else:  # pragma: no cover - every spec kind is handled above
        raise InputError(f"kvplan verify cannot decode a {spec.kind} layer", "use --layers to stop before it")
    hq = shard_heads(hq_total, tp, "num_attention_heads") if hq_total else heads
    if hq % heads:
        raise InputError(
            f"layer {index}: {hq} query heads per rank do not group over {heads} KV heads per rank",
            "use a --tp that keeps num_attention_heads / num_kv_heads whole on every rank",
        )
    window = spec.window if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)) else None
    chunk = spec.attention_chunk_size if isinstance(spec, ChunkedLocalSpec) else None

    def attention(cache_tokens: int, blocks_per_seq: int, tensors: tuple[PlannedTensor, ...],
                  aux_tensors: tuple[PlannedTensor, ...] = ()) -> LayerPlan:
        return LayerPlan(index=index, kind=spec.kind, spec=spec, num_kv_heads=heads, num_query_heads=hq, head_size=dk,
                         head_size_v=dv, window=window, chunk=chunk, cache_tokens=cache_tokens,
                         blocks_per_seq=blocks_per_seq, state_shapes=(), tensors=tensors, aux_tensors=aux_tensors)

    def kv(tokens: int, *, prefix: str = "") -> tuple[PlannedTensor, ...]:
        return tuple(
            PlannedTensor(layer=index, name=f"{prefix}{name}", shape=(rows, heads, tokens, d), dtype=dtype.name,
                          nbytes=dtype.bytes_for(rows * heads * tokens * d))
            for name, d in (("k", dk), ("v", dv))
        )

    if layout == "dynamic":
        if window is None:
            tokens = seq
        elif rows > batch:
            tokens = min(seq, window - 1)  # the beam reorder copies the W - 1 kept tokens
        elif gen == 0:
            tokens = prompt  # the kept view holds the whole prefill concatenation alive
        else:
            tokens = min(seq, window)  # W - 1 kept tokens, a view of the W-token concatenation
        return attention(tokens, 0, kv(tokens))
    if layout in ("static", "sliding"):
        if window is None:
            slots = max_cache
        else:
            slots = min(window, max_cache) if layout == "static" else window
        positions = PlannedTensor(layer=index, name="slot_pos", shape=(slots,), dtype="int64", nbytes=8 * slots)
        return attention(slots, 0, kv(slots), (positions,))
    if layout == "paged":
        blocks = cdiv(seq, block_size) if window is None else window_blocks_peak(prompt, seq, window, block_size)
        num_blocks = rows * blocks
        pools = tuple(
            PlannedTensor(layer=index, name=f"{name}_pool", shape=(num_blocks, block_size, heads, d), dtype=dtype.name,
                          nbytes=dtype.bytes_for(num_blocks * block_size * heads * d))
            for name, d in (("k", dk), ("v", dv))
        )
        return attention(0, blocks, pools)
    # quantized
    assert quant_bits is not None
    if window is not None:
        raise InputError(
            f"layer {index} is a {spec.kind} layer; the quantized layout (like Hugging Face QuantizedCache) "
            "supports full-attention and MLA layers only",
            "use --layers to stop before the first windowed layer, or another --layout",
        )
    residual_tokens = gen % residual
    quant_tokens = seq - residual_tokens
    quantized: list[PlannedTensor] = []
    for name, d in (("k", dk), ("v", dv)):
        if d % group:
            raise InputError(
                f"--quant-group-size {group} does not divide the {name.upper()} head dim {d} of layer {index}",
                f"use a group size that divides {d}, e.g. --quant-group-size {_largest_divisor(d, group)}",
            )
        if quant_bits == 4 and d % 2:
            raise InputError(f"int4 packs two values per byte; head dim {d} is odd", "use --kv-dtype int8")
        packed = d * quant_bits // 8
        groups = d // group
        shape = (rows, heads, quant_tokens)
        quantized.append(PlannedTensor(layer=index, name=f"{name}_codes", shape=(*shape, packed), dtype="uint8",
                                     nbytes=rows * heads * quant_tokens * packed))
        for part in ("scale", "zero"):
            quantized.append(PlannedTensor(layer=index, name=f"{name}_{part}", shape=(*shape, groups), dtype=dtype.name,
                                         nbytes=dtype.bytes_for(rows * heads * quant_tokens * groups)))
        if residual_tokens:
            quantized.append(PlannedTensor(layer=index, name=f"{name}_residual", shape=(rows, heads, residual_tokens, d),
                                         dtype=dtype.name, nbytes=dtype.bytes_for(rows * heads * residual_tokens * d)))
    return attention(seq, 0, tuple(quantized))


#: Layouts that follow Hugging Face transformers' caches (the hf-dynamic / hf-static profiles).
HF_LAYOUTS = ("dynamic", "static", "quantized")
#: State mixers whose transformers cache keeps the whole conv window and a float32 state (CPU path).
HF_FP32_STATE_MIXERS = ("mamba", "mamba2", "gated_delta_net")


def _state_tensors(spec: StateSpec, layout: str, state_dtype: KvDtype) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of a state layer's tensors per sequence in ``layout``."""
    if layout in HF_LAYOUTS and spec.mixer in HF_FP32_STATE_MIXERS:
        shapes = dict(spec.shapes)
        kernel_minus_1, channels = shapes["conv"]
        # NOTE: transformers keeps the whole conv window and a float32 ssm/recurrent state (the slow path
        # of modeling_mamba.py; measured the same for Nemotron-H Mamba-2 and Qwen3-Next gated delta net layers, transformers 5.24, CPU).
        return [("conv", (kernel_minus_1 + 1, channels), state_dtype.name), ("ssm", shapes["ssm"], "fp32")]
    return [(name, shape, state_dtype.name) for name, shape in spec.shapes]


def window_blocks_peak(prompt: int, seq: int, window: int, block_size: int) -> int:
    """Most blocks one sequence of a windowed layer holds at once in the paged layout.

    After the prefill the cache keeps positions ``P - W + 1 .. P - 1`` (what the next token needs);
    decode step t writes position t and attends to ``t - W + 1 .. t``, then frees blocks that only
    hold positions before ``t - W + 2``. The live range [lo, hi] spans ``hi // bs - lo // bs + 1``
    blocks; the peak is the largest span over the prefill and every step.
    """

    def span(lo: int, hi: int) -> int:
        return hi // block_size - max(0, lo) // block_size + 1

    peak = span(prompt - window + 1, prompt - 1)
    for t in range(prompt, seq):
        peak = max(peak, span(t - window + 1, t))
    return peak


def _shard_state(name: str, shape: tuple[int, ...], tp: int, layer: int) -> tuple[int, ...]:
    """Split a state tensor over ranks: conv states along channels (last dim), others along the first."""
    if tp == 1:
        return shape
    axis = len(shape) - 1 if name == "conv" else 0
    if shape[axis] % tp:
        raise InputError(
            f"state {name!r} of layer {layer} has {shape[axis]} channels, not divisible by --tp {tp}",
            "use a --tp that divides it",
        )
    return tuple(dim // tp if i == axis else dim for i, dim in enumerate(shape))


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _largest_divisor(d: int, at_most: int) -> int:
    return max(g for g in range(1, min(d, at_most) + 1) if d % g == 0)


def layers_that_fit(bytes_for_layers: Callable[[int], int], total_layers: int, budget_bytes: int) -> int:
    """The largest N whose plan (cache plus working memory) fits ``budget_bytes``; 0 when none does."""
    best = 0
    for n in range(1, total_layers + 1):
        if bytes_for_layers(n) <= budget_bytes:
            best = n
        else:
            break
    return best



# ---- the CUDA caching allocator (PyTorch c10/cuda/CUDACachingAllocator.cpp) ------------------------------------------------

MIN_BLOCK_BYTES = 512
SMALL_SIZE_BYTES = 1 * MiB
SMALL_BUFFER_BYTES = 2 * MiB
MIN_LARGE_ALLOC_BYTES = 10 * MiB
LARGE_BUFFER_BYTES = 20 * MiB
ROUND_LARGE_BYTES = 2 * MiB


def round_size(nbytes: int) -> int:
    """Block size the allocator hands out for a request: a multiple of 512 bytes (at least 512)."""
    return MIN_BLOCK_BYTES if nbytes < MIN_BLOCK_BYTES else MIN_BLOCK_BYTES * cdiv(nbytes, MIN_BLOCK_BYTES)


def segment_size(rounded: int) -> int:
    """Bytes cudaMalloc'd for a fresh segment serving a request of ``rounded`` bytes."""
    if rounded <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if rounded < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return ROUND_LARGE_BYTES * cdiv(rounded, ROUND_LARGE_BYTES)


@dataclass(frozen=True, kw_only=True, slots=True)
class AllocatorPrediction:
    allocated_bytes: int
    """``torch.cuda.memory_allocated()`` growth: block sizes, unsplit tails included."""
    reserved_bytes: int
    """``torch.cuda.memory_reserved()`` growth: the segments cudaMalloc'd."""
    segments: int


def predict_allocator(sizes: list[int] | tuple[int, ...]) -> AllocatorPrediction:
    """Replay fresh allocations (no frees) through the caching allocator's rules, in order.

    Requests of at most 1 MiB come from 2 MiB small-pool segments, split while 512 bytes or more
    remain; larger ones from the large pool: a 20 MiB segment below 10 MiB, else the request
    rounded up to 2 MiB. A large block is split only when more than 1 MiB would remain, otherwise
    the whole block counts as allocated. Free blocks are reused best fit (smallest that fits).
    Empty requests allocate nothing.
    """
    free: dict[bool, list[int]] = {True: [], False: []}
    allocated = reserved = segments = 0
    for nbytes in sizes:
        if nbytes <= 0:
            continue
        size = round_size(nbytes)
        small = size <= SMALL_SIZE_BYTES
        pool = free[small]
        fits = [block for block in pool if block >= size]
        if fits:
            block = min(fits)
            pool.remove(block)
        else:
            block = segment_size(size)
            reserved += block
            segments += 1
        remaining = block - size
        split = remaining >= MIN_BLOCK_BYTES if small else remaining > SMALL_SIZE_BYTES
        if split:
            pool.append(remaining)
            allocated += size
        else:
            allocated += block
    return AllocatorPrediction(allocated_bytes=allocated, reserved_bytes=reserved, segments=segments)


def relative_error(measured: int | None, predicted: int | None) -> float | None:
    if measured is None or predicted is None:
        return None
    if predicted == 0:
        return 0.0 if measured == 0 else float("inf")
    return abs(measured - predicted) / predicted


# ---- decode speed --------------------------------------------------------------------------------

#: Peak memory bandwidth (bytes/s) by a substring of ``torch.cuda.get_device_name()``; most specific first.
GPU_BANDWIDTH: tuple[tuple[str, int], ...] = (
    ("H200", 4_800 * 10**9),
    ("H100 PCIe", 2_000 * 10**9),
    ("H100 NVL", 3_900 * 10**9),
    ("H100", 3_350 * 10**9),
    ("GH200", 4_000 * 10**9),
    ("B200", 8_000 * 10**9),
    ("A100-SXM4-80GB", 2_039 * 10**9),
    ("A100 80GB PCIe", 1_935 * 10**9),
    ("A100", 1_555 * 10**9),
    ("L40S", 864 * 10**9),
    ("L40", 864 * 10**9),
    ("L4", 300 * 10**9),
    ("A10G", 600 * 10**9),
    ("A10", 600 * 10**9),
    ("RTX 4090", 1_008 * 10**9),
    ("RTX 3090", 936 * 10**9),
    ("V100", 900 * 10**9),
    ("T4", 320 * 10**9),
)


def bandwidth_for(device_name: str) -> int | None:
    for key, bandwidth in GPU_BANDWIDTH:
        if key.lower() in device_name.lower():
            return bandwidth
    return None


def bandwidth_floor_seconds(bytes_read: int, bandwidth_bytes_per_s: int) -> float:
    """The fastest one decode step can be: every cache byte read once at peak bandwidth."""
    return bytes_read / bandwidth_bytes_per_s
