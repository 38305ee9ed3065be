"""The base of every engine profile: :class:`SizingContext` and :class:`EngineProfile`.

An engine profile answers, for one layer spec (already sharded for tensor parallelism):

- ``tokens_held(spec, ctx)`` - tokens one sequence keeps in the layer, rounded as the engine rounds;
- ``token_slots(spec, ctx)`` - token slots the layer keeps for the whole batch (beams, sharing, pools);
- ``layer_bytes(spec, ctx)`` - bytes of the layer on one rank for the whole batch;
- ``peak_extra_bytes(...)`` - transient bytes above the steady cache (Hugging Face only);
- ``kv_budget(request)`` - the KV bytes per GPU the engine leaves after weights and activations.

Engine traits the calculator and the capacity sizer read are class attributes here (never an
engine's name): ``plain_formula``, ``keeps_checkpoint_dtype``, ``knobs``, ``block_pool``,
``splits_layers``.

:class:`EngineProfile` is the ideal formula; each engine module overrides what its engine does
differently. The calculator calls these methods and never branches on an engine's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from kvplan.adjust import (
    Deployment,
    round_to_blocks,
    shard_for_tp,
    shared_token_slots,
)
from kvplan.dtypes import KvDtype, lookup_dtype
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    CompressedAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    IndexerSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
    StateSpec,
)

#: KV dtype names of the float caches every engine accepts.
FLOAT_DTYPES = ("fp32", "fp16", "bf16")
#: KV dtype names of the fp8 caches.
FP8_DTYPES = ("fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True, kw_only=True, slots=True)
class SizingContext:
    """Everything an engine needs besides the layer spec."""

    seq_len: int
    encoder_len: int
    batch: int
    dep: Deployment
    kv_dtype: KvDtype
    state_dtype: KvDtype
    model_dtype: KvDtype
    has_full: bool
    """The model has full-attention (or MLA) layers."""
    has_windowed: bool
    """The model has sliding or chunked layers (after ``--no-window``)."""
    swa_window: int | None = None
    """The largest sliding window or chunk of the model (SGLang sizes its SWA pool with it)."""
    attn_block_size: int | None = None
    """Block size an engine resolved for the whole model (vLLM hybrid Mamba alignment)."""
    state_page_bytes: int | None = None
    """Padded bytes of one state page (vLLM hybrid Mamba alignment)."""
    hf_added_tokens: int = 0
    """Tokens transformers' modeling code adds to every sequence before caching it (CPM-Ant's ``prompt_length``
    prompt tokens, XLM's appended mask token): the config's provenance field ``hf_added_tokens``; only the
    transformers engines hold them."""

    @property
    def seqs(self) -> int:
        """Sequences stored: requests times beams."""
        return self.batch * self.dep.beams



def kv_row_bytes(spec: AttentionSpec | MLASpec, dtype: KvDtype, v_dtype: KvDtype | None = None) -> tuple[int, int]:
    """(K bytes, V bytes) of one token in one layer; ``v_dtype``: V's own type (llama.cpp ``-ctv``), else K's."""
    if isinstance(spec, MLASpec):
        return dtype.bytes_for(spec.head_size), 0
    v_dtype = v_dtype or dtype
    return dtype.bytes_for(spec.num_kv_heads * spec.head_size), v_dtype.bytes_for(spec.num_kv_heads * spec.head_size_v)


def value_dtype(dep: Deployment, kv_dtype: KvDtype) -> KvDtype:
    """The V cache type: ``--cache-type-v`` when given (llama.cpp), else the K type."""
    if dep.cache_type_v is None:
        return kv_dtype
    return lookup_dtype(dep.cache_type_v, what="--cache-type-v")



def dsa_fp8_bytes(spec: LayerSpec, kv_dtype: KvDtype) -> int | None:
    """vLLM's and SGLang's DSA layouts: the indexer key is fp8 + scale whatever the cache dtype (132 B);
    an fp8 latent of a DSA model is ``fp8_ds_mla`` (656 B). None for every other layer."""
    if isinstance(spec, IndexerSpec):
        return spec.fp8_key_bytes()
    if isinstance(spec, MLASpec) and spec.fp8_ds_mla and kv_dtype.name in FP8_DTYPES:
        return spec.fp8_ds_mla_bytes()
    return None


# ---- the KV budget (what an engine leaves for its KV cache) ------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class ModelShape:
    """The weights' figures a budget rule reads (from ``models.WeightsEstimate``; 0 when not counted)."""

    hidden_size: int
    mlp_width: int
    """Per-token MLP width: intermediate size, or experts per token x expert size."""
    qkv_width: int
    vocab_size: int
    dtype_bytes: int
    quant_method: str | None = None
    expert_bytes_per_gpu: int = 0
    experts_per_token: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetRequest:
    """The inputs of one engine's budget rule (capacity's flags, resolved)."""

    memory_bytes: int
    weights_bytes_per_gpu: int
    shape: ModelShape
    tp: int
    pp: int
    tokens: int
    """max_model_len (a Hugging Face prefill)."""
    batch: int
    reserve_bytes: int | None = None
    """``--reserve``: replaces the activation and non-torch estimate."""
    gpu_name: str | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    ubatch_size: int | None = None
    version: str | None = None
    enforce_eager: bool = False
    """vLLM ``--enforce-eager``: no CUDA graphs are captured, so none are reserved."""
    last_stage: bool = True
    """The rank is on the last pipeline stage, the one that computes logits and samples (vLLM's profile run
    computes logits and runs the dummy sampler only ``if get_pp_group().is_last_rank``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetTerm:
    """One subtracted term of a derived budget, with where its rule comes from."""

    name: str
    bytes: int
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """The memory an engine gives the KV cache on one GPU, term by term."""

    memory_bytes: int | None
    usable_bytes: int
    """The part of memory the engine lets itself use (memory x fraction)."""
    weights_bytes_per_gpu: int | None
    activation_bytes: int
    non_torch_bytes: int
    reserve_bytes: int
    """activation + non-torch, or --reserve."""
    kv_bytes_per_gpu: int
    formula: str
    terms: tuple[BudgetTerm, ...] = field(default=())
    """The derived terms (engines that document them: vLLM), weights as loaded included."""
    uncertainty_bytes: int | None = None
    """How much larger the engine's own budget is on its other kernel paths (None: not estimated)."""
    shortfall_bytes: int | None = None
    """How much smaller the engine's own budget can be: what it measures on the GPU beyond kvplan's terms (vLLM's
    CUDA graph estimate, early V1's device-wide non-torch memory); None: not estimated."""


def activation_estimate(shape: ModelShape, *, tokens: int, logit_rows: int, tp: int) -> int:
    """kvplan's activation peak of one forward pass over ``tokens`` tokens::

        tokens * (3 * mlp_width + qkv_width + 2 * hidden) / tp * act_bytes   # MLP gate/up/act, q/k/v, residual
      + logit_rows * vocab / tp * 4                                        # fp32 logits
    """
    width = 3 * shape.mlp_width + shape.qkv_width + 2 * shape.hidden_size
    act = tokens * width * shape.dtype_bytes // tp
    logits = logit_rows * shape.vocab_size * 4 // tp
    return act + logits


class EngineProfile:
    """The ideal formula; subclasses override what their engine does differently."""

    name: ClassVar[str] = "ideal"
    title: ClassVar[str] = "ideal formula"
    source: ClassVar[str] = "the dense formula: B * T * L * 2 * H_kv * d * s, windows hold min(T, W)"
    default_block_size: ClassVar[int | None] = None
    tp_rule: ClassVar[str] = "floor"
    allowed_dtypes: ClassVar[tuple[str, ...] | None] = None
    """KV dtype names the engine accepts (None = any)."""
    shares_prefix: ClassVar[bool] = True
    beam_search: ClassVar[bool] = True
    hf_quantized: ClassVar[bool] = False
    plain_formula: ClassVar[bool] = False
    """The formula itself, no engine rule (the ideal profile): no ``engine:`` adjustment, no served dtype."""
    keeps_checkpoint_dtype: ClassVar[bool] = False
    """Loads a float32 checkpoint as float32 (transformers 5 ``dtype="auto"``); others serve 16 bits."""
    checkpoint_kv_dtype: ClassVar[str | None] = ("the ideal formula caches in the format the checkpoint was calibrated "
                                                 "for, as vLLM, SGLang and TensorRT-LLM do")
    """How ``--kv-dtype auto`` takes the KV dtype a ModelOpt checkpoint names (``kv_cache_quant_algo``), said in
    the report; None: the engine caches in the model dtype whatever the checkpoint says."""
    checkpoint_kv_formats: ClassVar[tuple[str, ...]] = ("fp8_e4m3", "nvfp4")
    """The checkpoint KV dtypes ``--kv-dtype auto`` takes (another stays in the model dtype)."""
    knobs: ClassVar[tuple[str, ...]] = ()
    """``Deployment`` fields only this engine reads (a note says when another engine ignores them)."""
    block_pool: ClassVar[bool] = False
    """One pool of blocks shared by layer groups (vLLM's KV cache manager): capacity counts blocks."""
    splits_layers: ClassVar[bool] = False
    """Splits layers over devices, not heads (llama.cpp): more GPUs means a larger ``pp``."""
    swa_extra_block: ClassVar[bool] = False
    """A sliding layer holds one block more than its window (vLLM ``SlidingWindowSpec``)."""
    dp_within_tp: ClassVar[bool] = False
    """With DP attention, the data-parallel ranks live inside the ``tp`` GPUs (SGLang ``--tp T --dp D
    --enable-dp-attention``); without it, each ``--dp`` replica holds ``tp`` GPUs of its own."""

    def dp_splits_tp(self, enable_dp_attention: bool) -> bool:
        """Whether ``--dp`` ranks split the ``--tp`` GPUs (SGLang DP attention) instead of adding replicas."""
        return self.dp_within_tp and enable_dp_attention
    dp_splits_experts: ClassVar[bool] = False
    #: The engine refuses a tensor-parallel size that does not divide the query heads (its source, when True).
    query_heads_rule: ClassVar[str | None] = None
    """Data parallel with expert parallel splits the MoE experts over ``dp * tp`` GPUs (vLLM)."""
    mla_off: ClassVar[str | None] = "K of qk_nope_head_dim + qk_rope_head_dim and V of v_head_dim per head"
    """How this engine caches an MLA model with MLA turned off (``--no-mla``); None: it has no such switch."""
    mla_off_pads_v: ClassVar[bool] = False
    """With MLA off, V is padded to K's head size (vLLM's DeepSeek MHA path)."""
    transient_peaks: ClassVar[bool] = False
    pp_extra_layers_last: ClassVar[bool] = False
    """``get_pp_indices`` gives the ``L % pp`` extra layers to the last stages (SGLang), not to the stages before
    the last (vLLM)."""
    pp_encoder_every_stage: ClassVar[bool] = True
    """Pipeline stages each build the multimodal encoder (vLLM constructs it unconditionally); False: the first
    stage only (SGLang's ``if self.pp_group.is_first_rank: self.visual = ...``)."""
    stage_budgets: ClassVar[bool] = False
    """Under pipeline parallelism each stage sizes its pool from its own room and its own layers, and the engine
    takes the fewest blocks (vLLM V1 ``get_kv_cache_configs``, V0 ``min(num_gpu_blocks)`` over workers); False:
    every rank is given the least room of all ranks (SGLang's ``get_available_gpu_memory(distributed=True)``
    all-reduces the minimum over the world group) and the busiest stage's layers set the need."""
    """The engine overrides ``prefill_bytes`` / ``peak_extra_bytes`` (a transient above the steady cache)."""

    # ---- configuration ---------------------------------------------------------------------
    def auto_dtype(self, model_dtype: KvDtype) -> KvDtype:
        """What ``--kv-dtype auto`` means in this engine."""
        return model_dtype

    def check_length(self, dep: Deployment, seq_len: int, tokens: str) -> None:
        """Refuse a sequence length the engine's flags cannot hold (InputError); ``tokens`` describes it."""

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        """Refuse flags the engine contradicts (InputError); return notes on what it changes. ``layers``: the
        model's distinct specs, in order of their first layer."""
        notes: list[str] = []
        if self.allowed_dtypes is not None and kv_dtype.name not in self.allowed_dtypes:
            raise InputError(
                f"{self.title} does not support --kv-dtype {kv_dtype.name}",
                f"{self.name} accepts: {', '.join(self.allowed_dtypes)}",
            )
        if dep.beams > 1 and not self.beam_search:
            raise InputError(f"{self.title} has no beam search", "drop --beams, or pick --engine vllm, trtllm or hf-dynamic")
        if (dep.share_prefix or dep.shared_prefix_tokens) and not self.shares_prefix:
            raise InputError(
                f"{self.title} does not share prompt blocks between sequences",
                "drop --share-prefix/--shared-prefix-tokens, or pick --engine vllm, sglang or trtllm",
            )
        if any(isinstance(s, CompressedAttentionSpec) for s in layers):
            note = self.compressed_attention_note()
            if note:
                notes.append(note)
        if any(isinstance(s, StateSpec) and (s.mixer == "short_conv" or "conv" in dict(s.shapes)) for s in layers):
            notes.append(self.conv_state_note())
        return notes

    def conv_state_note(self) -> str:
        """Which conv-state convention the figures of recurrent layers use."""
        return (f"state convention ({self.title}): a recurrent layer's conv state holds conv_kernel - 1 inputs (the "
                "layer detail's first conv dimension), as vLLM, SGLang and llama.cpp keep it; --engine hf-dynamic "
                "prices transformers' conv_kernel")

    def compressed_attention_note(self) -> str | None:
        """What this engine's price of DeepSeek-V4 compressed attention rests on (None: nothing to say)."""
        return (f"{self.title}: DeepSeek-V4 attention priced by the ideal formula (window + compressed entries + "
                "indexer keys; no block rounding or prefix sharing): kvplan has not read this engine's V4 cache code")

    def block_size(self, spec: LayerSpec, ctx: SizingContext) -> int | None:
        if ctx.attn_block_size is not None:
            return ctx.attn_block_size
        return ctx.dep.block_size or self.default_block_size

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """Model-wide decisions (vLLM's Mamba page alignment); default: none. ``layers``: the distinct specs
        one rank holds, in order of their first layer."""
        return ctx, []

    def shard(self, spec: LayerSpec, tp: int) -> tuple[LayerSpec, list[str]]:
        return shard_for_tp(spec, tp, rule=self.tp_rule)

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None,
                      model_type: str | None = None) -> tuple[list[LayerSpec], list[str]]:
        """The specs as this engine caches them, before sharding (default: as the config says): ``layers``
        itself when the engine changes nothing, else a new list.

        ``hf_cached_kv_heads``: heads Hugging Face transformers caches when its modeling code
        broadcasts K/V to every query head before caching (Falcon ``new_decoder_architecture``).
        """
        return layers, []

    def padded_v_row(self, layers: Sequence[LayerSpec], *, flash_attn_off: bool) -> tuple[int | None, list[str]]:
        """The V row width every attention layer is padded to (:attr:`Deployment.v_row_elems`), with its note;
        None when the engine stores each layer's own width (every engine but llama.cpp with ``-fa off``)."""
        return None, []

    # ---- sizing ----------------------------------------------------------------------------
    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Tokens of one sequence a windowed layer holds before block rounding."""
        window = spec.window
        assert window is not None, spec  # asked of sliding and chunked layers only
        return min(ctx.seq_len, window)

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Tokens one sequence keeps in this layer (block-rounded)."""
        bs = self.block_size(spec, ctx)
        if isinstance(spec, CompressedAttentionSpec):
            return spec.window_tokens(ctx.seq_len) + spec.compressed_entries(ctx.seq_len)
        if isinstance(spec, StateSpec) or not isinstance(spec, (AttentionSpec, MLASpec)):
            return 0
        if isinstance(spec, CrossAttentionSpec):
            return round_to_blocks(ctx.encoder_len, bs)
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            return round_to_blocks(self.window_tokens(spec, ctx), bs)
        return round_to_blocks(ctx.seq_len, bs)

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Token slots of this layer for the whole batch (beams and prefix sharing included)."""
        if spec.grows_with_tokens and not isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec,
                                                            CompressedAttentionSpec)):
            dep = ctx.dep
            return shared_token_slots(
                seq_len=ctx.seq_len, batch=ctx.batch, beams=dep.beams, block_size=self.block_size(spec, ctx),
                prompt_len=dep.prompt_len, share_prefix=dep.share_prefix, shared_prefix_tokens=dep.shared_prefix_tokens,
            )
        return ctx.seqs * self.tokens_held(spec, ctx)

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, CompressedAttentionSpec):
            return spec.bytes_per_token(ctx.kv_dtype)
        if isinstance(spec, (AttentionSpec, MLASpec)):
            k, v = kv_row_bytes(spec, ctx.kv_dtype)
            return k + v
        return 0

    def state_bytes(self, spec: StateSpec, ctx: SizingContext) -> int:
        """Bytes of one sequence's recurrent state in one layer."""
        if ctx.state_page_bytes is not None:
            return ctx.state_page_bytes
        return sum(spec.tensor_bytes(name, shape, ctx.state_dtype) for name, shape in spec.shapes)

    def state_pages(self, dep: Deployment) -> int:
        """Pages of recurrent state one sequence holds in a state layer (vLLM's "align" mode: 2)."""
        return 1

    def resolve_prefix_caching(self, requested: bool | None, version: str | None,
                               layers: tuple[LayerSpec, ...]) -> tuple[bool, list[str]]:
        """Prefix caching as this engine and ``version`` run it (``requested`` None: the engine's default), with
        notes when it changes what kvplan sizes. Default: as requested (off when not), no effect on sizes."""
        return bool(requested), []

    def layer_bytes(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Bytes of one layer on one rank for the whole batch."""
        if isinstance(spec, StateSpec):
            return ctx.seqs * self.state_bytes(spec, ctx) * self.state_pages(ctx.dep)
        if isinstance(spec, CompressedAttentionSpec):
            return ctx.seqs * self.compressed_bytes(spec, ctx)
        return self.token_slots(spec, ctx) * self.bytes_per_token(spec, ctx)

    def compressed_bytes(self, spec: CompressedAttentionSpec, ctx: SizingContext) -> int:
        """Bytes of one sequence in a DeepSeek-V4 layer: ``min(T, W)`` K=V rows + ``T // ratio`` compressed
        entries, each with its indexer key (the ideal formula)."""
        return (spec.window_tokens(ctx.seq_len) * spec.bytes_per_token(ctx.kv_dtype)
                + spec.compressed_entries(ctx.seq_len) * spec.entry_bytes(ctx.kv_dtype))

    def peak_extra_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int:
        """Transient bytes above the steady cache on one rank (``costs``: (spec, layer bytes))."""
        return 0

    def prefill_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int | None:
        """Bytes on one rank right after prefill when that exceeds the steady cache, else None."""
        return None

    def summary(self, ctx: SizingContext) -> str:
        return self.source

    # ---- capacity ------------------------------------------------------------------------------
    def model_max_len(self, geometry: ModelGeometry) -> tuple[int | None, str | None]:
        """The model's maximum context as this engine derives it, and where it comes from (default: the config's)."""
        return geometry.max_context_tokens, geometry.max_context_source

    def attention_tp(self, tp: int, dp: int) -> int:
        """The tensor-parallel width of one KV cache with data-parallel attention on (``--enable-dp-attention``)."""
        raise InputError(f"--enable-dp-attention has no meaning for --engine {self.name}",
                         "use it with --engine sglang, vllm (DP + expert parallel) or trtllm (enable_attention_dp)")

    def pool_block_size(self, sizes: list[int], dep: Deployment) -> int:
        """The pool's block size from the tokens one request holds per layer kind (capacity)."""
        return max(sizes)

    def swa_pool_ratio(self, dep: Deployment) -> float:
        """Sliding-window token slots per full-attention slot in the pool (SGLang's SWA pool)."""
        return 1.0

    def dtype_suggestion(self, kv_dtype: KvDtype) -> str | None:
        """A smaller KV dtype to suggest when a request does not fit."""
        if kv_dtype.bits_per_element > 8:
            return "--kv-dtype fp8 (halves the KV cache of a 16-bit model)"
        return None

    def activation(self, req: BudgetRequest) -> tuple[int, int]:
        """(activation peak, non-torch bytes) the engine subtracts; default none."""
        return 0, 0

    def kv_budget(self, req: BudgetRequest) -> Budget:
        """KV bytes per GPU: ``memory - weights - reserve`` (reserve 0 unless ``--reserve``)."""
        act, non_torch = self.activation(req) if req.reserve_bytes is None else (0, 0)
        reserve = req.reserve_bytes if req.reserve_bytes is not None else act + non_torch
        kv = req.memory_bytes - req.weights_bytes_per_gpu - reserve
        formula = "memory - weights - " + ("reserve" if self.plain_formula else "activation peak")
        return Budget(memory_bytes=req.memory_bytes, usable_bytes=req.memory_bytes,
                      weights_bytes_per_gpu=req.weights_bytes_per_gpu, activation_bytes=act, non_torch_bytes=non_torch,
                      reserve_bytes=reserve, kv_bytes_per_gpu=kv, formula=formula)

    def budget_uncertainty(self, budget: Budget) -> list[str]:
        """Notes on how far a derived budget can be from the engine's own (none by default)."""
        return []

    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """The lines this engine logs about its KV cache at start-up and the numbers in them
        (keys of ``capacity.engine_log``; absent keys are reported as null). Default: none."""
        return {"version": None, "lines": []}

    def kv_rows(self, spec: AttentionSpec | MLASpec, kv_dtype: KvDtype, dep: Deployment) -> tuple[int, int]:
        """(K bytes, V bytes) of one token in one layer as this engine stores them (engine_log's K/V split)."""
        return kv_row_bytes(spec, kv_dtype)

    def log_notes(self, pool: PoolFacts) -> list[str]:
        """Notes on reading this engine's log lines for ``pool`` (version-dependent figures); default none."""
        return []


# ---- start-up log lines --------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class LogCache:
    """One group of layers as an engine's log counts it, on the busiest rank."""

    kind: str
    """The layer spec kind (``full_attention``, ``sliding_window``, ``mla``, ``indexer``, ``state`` ...)."""
    layer_indices: tuple[int, ...]
    """Decoder layers of the group (the whole model)."""
    cells: int
    """Tokens one stream keeps in each layer (llama.cpp cells; engine rounding applied)."""
    streams: int
    """Streams (llama.cpp: 1 when unified, else the number of sequences)."""
    k_bytes_per_token: int
    """K bytes of one token in one layer on one rank (the whole row for MLA and indexer caches)."""
    v_bytes_per_token: int
    window: int | None = None
    spec: LayerSpec | None = field(default=None, compare=False)
    """The group's layer spec (engines whose caches depend on more than the rows, e.g. DeepSeek-V4's)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PoolFacts:
    """What kvplan computed for a capacity question, in the terms the engines log."""

    version: str | None
    """``--engine-version`` (None: the engine module's default)."""
    available_kv_bytes: int
    num_blocks: int
    block_size: int
    blocks_per_request: float
    num_kv_cache_groups: int
    max_model_len: int
    max_concurrency: float
    max_tokens: int
    batch: int
    kv_bytes_per_request: int
    estimated_max_model_len: int
    kv_dtype: str
    layers_on_rank: tuple[int, ...]
    """Decoder layers on the busiest pipeline stage."""
    caches: tuple[LogCache, ...]
    num_layers: int = 0
    """Decoder layers of the whole model."""
    tensor_split: tuple[float, ...] | None = None
    pp: int = 1
    swa_ratio: float = 1.0
    """Sliding-window pool slots per full-pool slot (SGLang ``--swa-full-tokens-ratio``)."""
    v_dtype: str | None = None
    """The V cache type when it differs from ``kv_dtype`` (llama.cpp ``-ctv``)."""
    swa_full_layers: tuple[int, ...] = ()
    """Windowed layers accounted as full attention by ``--swa-full``/``--no-window`` (llama.cpp keeps them in
    their own, full-size, SWA cache)."""
    host_kv_layers: int = 0
    """llama.cpp ``-ngl``/``-nkvo``: the first layers whose KV cache is in host memory (a ``CPU`` buffer)."""
    gpu_layer_start: int = 0
    """llama.cpp ``-ngl``: ``i_gpu_start``, the first layer on a GPU (the split counts from it)."""
    gpu_vendor: str = ""
    """The GPU's vendor (``nvidia``, ``amd``, ``apple``; empty for a --kv-budget): llama.cpp names its buffers by
    backend (``CUDA0``, ``ROCm0``, ``MTL0``)."""


def version_tuple(text: str, *, engine: str) -> tuple[int, ...]:
    """``"0.11.0"`` -> ``(0, 11, 0)``; a leading ``v`` and a ``-tag`` or ``+tag`` suffix (``0.7-v1``) are accepted."""
    parts = text.strip().lower().removeprefix("v").partition("+")[0].partition("-")[0].split(".")
    try:
        return tuple(int(p) for p in parts if p != "")
    except ValueError:
        raise InputError(f"--engine-version {text!r} is not a version number", f"e.g. --engine-version 0.11 for {engine}") from None


def without_mla(geometry: ModelGeometry, engine: EngineProfile) -> ModelGeometry:
    """``--no-mla``: every MLA layer as the per-head K/V ``engine`` caches with MLA off (``num_attention_heads`` KV
    heads, K of ``qk_nope_head_dim + qk_rope_head_dim``, V of ``v_head_dim``, or K's size where the engine pads V).
    Raises for models without MLA, sparse (DSA) and compressed (DeepSeek-V4) attention, and engines with no switch."""
    if engine.mla_off is None:
        raise InputError(f"--no-mla: {engine.title} has no switch that turns MLA off",
                         "use --engine vllm (VLLM_MLA_DISABLE=1), llama.cpp, hf-dynamic or ideal")
    layers = geometry.layers
    if not any(type(s) is MLASpec for s in layers):
        raise InputError(f"--no-mla: {geometry.model_id} has no MLA layers", "drop --no-mla")
    if any(isinstance(s, (IndexerSpec, CompressedAttentionSpec)) for s in layers):
        raise InputError(f"--no-mla: {geometry.model_id} uses sparse or compressed attention over the MLA latent",
                         "drop --no-mla: its engines always cache the latent")
    values = {p.field: p.value for p in reversed(geometry.provenance)}  # the first record wins
    dims = [x for k in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
            if isinstance(x := values.get(k), int) and x > 0]
    if len(dims) != 4:
        raise InputError(f"--no-mla: {geometry.model_id} does not name num_attention_heads, qk_nope_head_dim, "
                         "qk_rope_head_dim and v_head_dim, so the per-head K/V is unknown",
                         "add them with --set, e.g. --set qk_nope_head_dim=128")
    heads, nope, rope, v_dim = dims
    k_dim = nope + rope
    spec = FullAttentionSpec(num_kv_heads=heads, head_size=k_dim, head_size_v=k_dim if engine.mla_off_pads_v else v_dim)
    latent = next(s for s in layers if type(s) is MLASpec).head_size
    note = (f"--no-mla: MLA off, {engine.mla_off}: {heads} KV heads x (K {k_dim} + V {spec.head_size_v}) per layer "
            f"instead of one latent of {latent}")
    return replace(geometry, layers=tuple(spec if type(s) is MLASpec else s for s in layers),
                      notes=(*geometry.notes, note))
