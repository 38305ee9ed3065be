"""The base of every engine profile: :class:`SizingContext` and :class:`EngineProfile`.

An engine profile answers, for one layer spec (already sharded for tensor parallelism):

- ``tokens_held(spec, ctx)`` - tokens one sequence keeps in the layer, rounded as the engine rounds;
- ``token_slots(spec, ctx)`` - token slots the layer keeps for the whole batch (beams, sharing, pools);
- ``layer_bytes(spec, ctx)`` - bytes of the layer on one rank for the whole batch;
- ``peak_extra_bytes(...)`` - transient bytes above the steady cache (Hugging Face only).

:class:`EngineProfile` is the ideal formula; each engine module overrides what its engine does
differently. The calculator calls these methods and never branches on an engine's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvplan.adjust import (
    Deployment,
    round_to_blocks,
    shard_for_tp,
    shared_token_slots,
)
from kvplan.dtypes import KvDtype
from kvplan.errors import InputError
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    CompressedAttentionSpec,
    CrossAttentionSpec,
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

    @property
    def seqs(self) -> int:
        """Sequences stored: requests times beams."""
        return self.batch * self.dep.beams



def kv_row_bytes(spec: AttentionSpec | MLASpec, dtype: KvDtype) -> tuple[int, int]:
    """(K bytes, V bytes) of one token in one layer."""
    if isinstance(spec, MLASpec):
        return dtype.bytes_for(spec.head_size), 0
    return dtype.bytes_for(spec.num_kv_heads * spec.head_size), dtype.bytes_for(spec.num_kv_heads * spec.head_size_v)



def dsa_fp8_bytes(spec: LayerSpec, kv_dtype: KvDtype) -> int | None:
    """vLLM's and SGLang's DSA layouts: the indexer key is fp8 + scale whatever the cache dtype (132 B);
    an fp8 latent of a DSA model is ``fp8_ds_mla`` (656 B). None for every other layer."""
    if isinstance(spec, IndexerSpec):
        return spec.fp8_key_bytes()
    if isinstance(spec, MLASpec) and spec.fp8_ds_mla and kv_dtype.name in FP8_DTYPES:
        return spec.fp8_ds_mla_bytes()
    return None


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

    # ---- configuration ---------------------------------------------------------------------
    def auto_dtype(self, model_dtype: KvDtype) -> KvDtype:
        """What ``--kv-dtype auto`` means in this engine."""
        return model_dtype

    def check_length(self, dep: Deployment, seq_len: int, tokens: str) -> None:
        """Refuse a sequence length the engine's flags cannot hold (InputError); ``tokens`` describes it."""

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        """Refuse flags the engine contradicts (InputError); return notes on what it changes."""
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
        return notes

    def compressed_attention_note(self) -> str | None:
        """What this engine's price of DeepSeek-V4 compressed attention rests on (None: nothing to say)."""
        return (f"{self.title}: DeepSeek-V4 attention priced by the ideal formula (window + compressed entries + "
                "indexer keys; no block rounding or prefix sharing): kvplan has not read this engine's V4 cache code")

    def block_size(self, spec: LayerSpec, ctx: SizingContext) -> int | None:
        if ctx.attn_block_size is not None:
            return ctx.attn_block_size
        return ctx.dep.block_size or self.default_block_size

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """Model-wide decisions (vLLM's Mamba page alignment); default: none."""
        return ctx, []

    def shard(self, spec: LayerSpec, tp: int) -> tuple[LayerSpec, list[str]]:
        return shard_for_tp(spec, tp, rule=self.tp_rule)

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None,
                      model_type: str | None = None) -> tuple[list[LayerSpec], list[str]]:
        """The specs as this engine caches them, before sharding (default: as the config says).

        ``hf_cached_kv_heads``: heads Hugging Face transformers caches when its modeling code
        broadcasts K/V to every query head before caching (Falcon ``new_decoder_architecture``).
        """
        return layers, []

    # ---- sizing ----------------------------------------------------------------------------
    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Tokens of one sequence a windowed layer holds before block rounding."""
        return min(ctx.seq_len, spec.window)  # type: ignore[attr-defined, type-var]

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

    def layer_bytes(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Bytes of one layer on one rank for the whole batch."""
        if isinstance(spec, StateSpec):
            return ctx.seqs * self.state_bytes(spec, ctx)
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

    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """The lines this engine logs about its KV cache at start-up and the numbers in them
        (keys of ``capacity.engine_log``; absent keys are reported as null). Default: none."""
        return {"version": None, "lines": []}


# ---- start-up log lines (issue 12) -------------------------------------------------------------
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


def version_tuple(text: str, *, engine: str) -> tuple[int, ...]:
    """``"0.11.0"`` -> ``(0, 11, 0)``; a leading ``v`` is accepted."""
    parts = text.strip().lower().removeprefix("v").split(".")
    try:
        return tuple(int(p) for p in parts if p != "")
    except ValueError:
        raise InputError(f"--engine-version {text!r} is not a version number", f"e.g. --engine-version 0.11 for {engine}") from None
