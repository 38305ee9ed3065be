"""Engine profiles: what each inference engine really allocates for a layer, read from its source.

One small class per engine answers, for one layer spec (already sharded for tensor parallelism):

- ``tokens_held(spec, ctx)`` - tokens one sequence keeps in the layer, rounded as the engine rounds;
- ``token_slots(spec, ctx)`` - token slots the layer keeps for the whole batch (beams, sharing, pools);
- ``layer_bytes(spec, ctx)`` - bytes of the layer on one rank for the whole batch;
- ``peak_extra_bytes(...)`` - transient bytes above the steady cache (Hugging Face only).

Use :func:`get_engine` (``ideal``, ``vllm``, ``sglang``, ``trtllm``, ``llama.cpp``, ``hf-dynamic``,
``hf-static``). The numbers and the source versions they follow are listed in the README section
"Engine profiles and deployment adjustments";
``calc.estimate(..., deployment=Deployment(engine="vllm", ...))`` is the usual entry point.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from kvplan.adjust import (
    Deployment,
    kv_heads_per_rank,
    round_to_blocks,
    shard_for_tp,
    shared_token_slots,
)
from kvplan.dtypes import GGML_CACHE_TYPES, KvDtype, lookup_dtype
from kvplan.errors import InputError
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    CrossAttentionSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.units import cdiv

#: vLLM ``--max-num-batched-tokens`` default kvplan assumes: ``vllm serve`` on a GPU with at least
#: 70 GiB that is not an A100 (H100, H200, MI300X), from ``EngineArgs.get_batch_defaults``.
#: The same function gives 2048 on smaller GPUs and 16384 for the offline ``LLM`` class.
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: vLLM ``CacheConfig.block_size`` values.
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
#: llama.cpp pads contexts and cell counts to 256 (``GGML_PAD(n_ctx, 256)``).
LLAMA_CPP_PAD = 256
#: llama.cpp ``n_ubatch`` default.
LLAMA_CPP_UBATCH = 512
#: SGLang ``--swa-full-tokens-ratio`` default.
SGLANG_SWA_RATIO = 0.8
#: TensorRT-LLM ``KvCacheConfig.tokens_per_block`` default.
TRTLLM_TOKENS_PER_BLOCK = 32

_FLOAT = ("fp32", "fp16", "bf16")
_FP8 = ("fp8_e4m3", "fp8_e5m2")


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


def _kv_rows(spec: AttentionSpec | MLASpec, dtype: KvDtype) -> tuple[int, int]:
    """(K bytes, V bytes) of one token in one layer."""
    if isinstance(spec, MLASpec):
        return dtype.bytes_for(spec.head_size), 0
    return dtype.bytes_for(spec.num_kv_heads * spec.head_size), dtype.bytes_for(spec.num_kv_heads * spec.head_size_v)


def _state_elements(spec: StateSpec) -> int:
    return spec.state_elements


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
        return notes

    def block_size(self, spec: LayerSpec, ctx: SizingContext) -> int | None:
        if ctx.attn_block_size is not None:
            return ctx.attn_block_size
        return ctx.dep.block_size or self.default_block_size

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """Model-wide decisions (vLLM's Mamba page alignment); default: none."""
        return ctx, []

    def shard(self, spec: LayerSpec, tp: int) -> tuple[LayerSpec, list[str]]:
        return shard_for_tp(spec, tp, rule=self.tp_rule)

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None) -> tuple[list[LayerSpec], list[str]]:
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
        if isinstance(spec, StateSpec) or not isinstance(spec, (AttentionSpec, MLASpec)):
            return 0
        if isinstance(spec, CrossAttentionSpec):
            return round_to_blocks(ctx.encoder_len, bs)
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            return round_to_blocks(self.window_tokens(spec, ctx), bs)
        return round_to_blocks(ctx.seq_len, bs)

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        """Token slots of this layer for the whole batch (beams and prefix sharing included)."""
        if spec.grows_with_tokens and not isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            dep = ctx.dep
            return shared_token_slots(
                seq_len=ctx.seq_len, batch=ctx.batch, beams=dep.beams, block_size=self.block_size(spec, ctx),
                prompt_len=dep.prompt_len, share_prefix=dep.share_prefix, shared_prefix_tokens=dep.shared_prefix_tokens,
            )
        return ctx.seqs * self.tokens_held(spec, ctx)

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, (AttentionSpec, MLASpec)):
            k, v = _kv_rows(spec, ctx.kv_dtype)
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
        return self.token_slots(spec, ctx) * self.bytes_per_token(spec, ctx)

    def peak_extra_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int:
        """Transient bytes above the steady cache on one rank (``costs``: (spec, layer bytes))."""
        return 0

    def prefill_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int | None:
        """Bytes on one rank right after prefill when that exceeds the steady cache, else None."""
        return None

    def summary(self, ctx: SizingContext) -> str:
        return self.source


class IdealProfile(EngineProfile):
    """The formula: full layers T, sliding min(T, W), chunked min(T, C); ``--block-size`` rounds."""


class VllmProfile(EngineProfile):
    name = "vllm"
    title = "vLLM"
    source = (
        "vLLM v1 (vllm/v1/kv_cache_interface.py @ 001cabc1, kv_cache_utils.py, platforms/cuda.py): "
        "max_memory_usage_bytes per layer"
    )
    default_block_size = 16
    allowed_dtypes = (*_FLOAT, *_FP8, "int8", "nvfp4")

    def mnbt(self, ctx: SizingContext) -> int:
        return ctx.dep.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        has_mla = any(isinstance(s, MLASpec) for s in layers)
        if dep.block_size is not None and dep.block_size not in VLLM_BLOCK_SIZES:
            raise InputError(
                f"vLLM does not support --block-size {dep.block_size}",
                f"vLLM's CacheConfig accepts {', '.join(map(str, VLLM_BLOCK_SIZES))}",
            )
        for heads in sorted({s.num_kv_heads for s in layers if isinstance(s, AttentionSpec)}):
            # NOTE: QKVParallelLinear divides KV heads over ranks (tp <= H_kv) or replicates them (tp > H_kv);
            # both need an exact division.
            if (dep.tp <= heads and heads % dep.tp) or (dep.tp > heads and dep.tp % heads):
                fits = [t for t in range(1, 2 * heads + 1) if heads % t == 0 or t % heads == 0]
                raise InputError(
                    f"vLLM cannot split {heads} KV heads over --tensor-parallel-size {dep.tp}: one must divide the other",
                    f"use a tensor-parallel size such as {', '.join(map(str, fits[:8]))}",
                )
        if has_mla and dep.block_size not in (None, 64):
            notes.append(f"vLLM's MLA backends (FlashMLA) force block size 64; --block-size {dep.block_size} is overridden")
        if kv_dtype.name == "int8":
            notes.append("vLLM int8 KV (int8_per_token_head, newer main) stores a float32 scale per token per head")
        if kv_dtype.name == "nvfp4":
            notes.append("vLLM nvfp4 KV is on newer main only (KVQuantMode)")
        return notes

    def block_size(self, spec: LayerSpec, ctx: SizingContext) -> int | None:
        if isinstance(spec, MLASpec):
            return 64
        return super().block_size(spec, ctx)

    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        m = self.mnbt(ctx)
        if isinstance(spec, SlidingWindowSpec):
            return min(spec.sliding_window - 1 + m, ctx.seq_len)
        assert isinstance(spec, ChunkedLocalSpec)
        return min(spec.attention_chunk_size + m, ctx.seq_len)

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        held = super().tokens_held(spec, ctx)
        if isinstance(spec, SlidingWindowSpec):
            # NOTE: +1 block: the window may not start on a block boundary (SlidingWindowSpec).
            held += self.block_size(spec, ctx) or 1
        return held

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if ctx.kv_dtype.name == "int8" and isinstance(spec, AttentionSpec):
            # NOTE: int8_per_token_head: one float32 scale per token per head, for K and for V.
            return spec.num_kv_heads * (spec.head_size + 4) + spec.num_kv_heads * (spec.head_size_v + 4)
        return super().bytes_per_token(spec, ctx)

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        states = [s for s in layers if isinstance(s, StateSpec)]
        attention = [s for s in layers if isinstance(s, (AttentionSpec, MLASpec)) and s.grows_with_tokens]
        if not states or not attention:
            return ctx, []
        mamba_page = max(EngineProfile.state_bytes(self, s, ctx) for s in states)
        spec = attention[0]
        per_token = self.bytes_per_token(spec, ctx)
        align = 64 if isinstance(spec, MLASpec) else 16
        needed = align * cdiv(mamba_page, align * per_token)
        block = max(ctx.dep.block_size or self.default_block_size or 1, needed)
        page = block * per_token
        note = (
            f"vLLM hybrid: attention block size set to {block} tokens (= {align} * cdiv({mamba_page:,}, {align} * "
            f"{per_token:,})) so an attention page holds a Mamba state; the state page is padded from "
            f"{mamba_page:,} to {page:,} bytes"
        )
        notes = [note]
        return dataclasses.replace(ctx, attn_block_size=block, state_page_bytes=page), notes

    def summary(self, ctx: SizingContext) -> str:
        return (
            f"vLLM v1 max_memory_usage_bytes: blocks of {ctx.attn_block_size or ctx.dep.block_size or 16} tokens "
            f"(64 for MLA); sliding layers cdiv(min(W - 1 + {self.mnbt(ctx)}, T), bs) + 1 blocks; chunked "
            f"cdiv(min(C + {self.mnbt(ctx)}, T), bs) blocks (max_num_batched_tokens {self.mnbt(ctx)}); Mamba one page per sequence"
        )


class SglangProfile(EngineProfile):
    name = "sglang"
    title = "SGLang"
    source = "SGLang 0.5.23 (model_executor/pool_configurator.py, mem_cache/memory_pool.py, server_args.py)"
    default_block_size = 1
    allowed_dtypes = (*_FLOAT, *_FP8, "nvfp4")

    def ratio(self, ctx: SizingContext) -> float:
        return ctx.dep.swa_full_tokens_ratio or SGLANG_SWA_RATIO

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if not (ctx.has_full and ctx.has_windowed):
            if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
                # NOTE: SGLang builds an SWA pool only for hybrid models; all-window models get full tokens.
                return ctx.seqs * round_to_blocks(ctx.seq_len, self.block_size(spec, ctx))
            return super().token_slots(spec, ctx)
        full_need, swa_need = self._needs(ctx)
        full_pool, swa_pool = self._pool_sizes(full_need, swa_need, self.ratio(ctx))
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            return swa_pool
        if spec.grows_with_tokens:
            return full_pool
        return super().token_slots(spec, ctx)

    def _needs(self, ctx: SizingContext) -> tuple[int, int]:
        page = ctx.dep.block_size or 1
        dep = ctx.dep
        full_need = shared_token_slots(
            seq_len=ctx.seq_len, batch=ctx.batch, beams=dep.beams, block_size=page,
            prompt_len=dep.prompt_len, share_prefix=dep.share_prefix, shared_prefix_tokens=dep.shared_prefix_tokens,
        )
        window = ctx.swa_window or ctx.seq_len
        # NOTE: a request needs min(extend + decode, W) + page_size SWA tokens.
        swa_need = ctx.seqs * (min(ctx.seq_len, window) + page)
        return full_need, swa_need

    @staticmethod
    def _pool_sizes(full_need: int, swa_need: int, ratio: float) -> tuple[int, int]:
        """The pools SGLang must allocate: swa = int(full * ratio), both large enough."""
        full = max(full_need, math.ceil(swa_need / ratio))
        while int(full * ratio) < swa_need:
            full += 1
        return full, int(full * ratio)

    def summary(self, ctx: SizingContext) -> str:
        page = ctx.dep.block_size or 1
        return (
            f"SGLang: pages of {page} token(s); hybrid SWA models keep an SWA pool of swa_full_tokens_ratio "
            f"{self.ratio(ctx):g} x the full pool, each request needing min(T, W) + {page} SWA tokens"
        )


class TrtllmProfile(EngineProfile):
    name = "trtllm"
    title = "TensorRT-LLM"
    source = (
        "TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py KvCacheConfig, _torch/pyexecutor/_util.py @ d8ae02ca, "
        "_torch/modules/attention.py)"
    )
    default_block_size = TRTLLM_TOKENS_PER_BLOCK
    tp_rule = "ceil"
    allowed_dtypes = (*_FLOAT, *_FP8, "int8", "nvfp4")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if kv_dtype.name == "int8":
            notes.append("TensorRT-LLM int8 KV keeps one scale per tensor: 1 byte per value")
        return notes

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if ctx.kv_dtype.name == "int8" and isinstance(spec, (AttentionSpec, MLASpec)):
            k, v = _kv_rows(spec, lookup_dtype("fp8_e4m3"))
            return k + v
        return super().bytes_per_token(spec, ctx)

    def summary(self, ctx: SizingContext) -> str:
        bs = ctx.dep.block_size or TRTLLM_TOKENS_PER_BLOCK
        return (
            f"TensorRT-LLM: tokens_per_block {bs}; windowed layers keep min(T, max_attention_window) tokens "
            f"in blocks; each TP rank keeps cdiv(H_kv, tp) heads"
        )


class LlamaCppProfile(EngineProfile):
    name = "llama.cpp"
    title = "llama.cpp"
    source = (
        "llama.cpp (src/llama-kv-cache.cpp @ 3514e9f6, src/llama-kv-cache-iswa.cpp @ 2aef9767, "
        "llama-context.cpp, common/arg.cpp)"
    )
    allowed_dtypes = GGML_CACHE_TYPES
    shares_prefix = False
    beam_search = False

    def auto_dtype(self, model_dtype: KvDtype) -> KvDtype:
        # NOTE: llama.cpp's --cache-type-k/-v default is f16 whatever the weights are.
        return lookup_dtype("fp16")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if dep.tp > 1:
            raise InputError(
                "llama.cpp splits layers across devices, not KV heads",
                "use --pipeline-parallel-size N for llama.cpp's layer split (-sm layer)",
            )
        if dep.block_size is not None:
            raise InputError("llama.cpp has no block size: it pads cells to 256", "drop --block-size for --engine llama.cpp")
        if dep.pp > 1:
            notes.append("llama.cpp splits layers by --tensor-split proportions; kvplan assumes vLLM's even split")
        if any(isinstance(s, CrossAttentionSpec) for s in layers):
            notes.append("llama.cpp keeps the encoder output, not a cross-attention KV cache: cross layers count 0 bytes")
        if any(isinstance(s, StateSpec) for s in layers):
            notes.append("llama.cpp keeps recurrent states in float32, one per sequence")
        return notes

    def cells(self, ctx: SizingContext) -> tuple[int, int]:
        """(cells per stream, streams): ``-c B*T -np B``; context padded to 256 (FACTS b.3)."""
        n_seq = ctx.batch
        n_ctx = round_to_blocks(ctx.batch * ctx.seq_len, LLAMA_CPP_PAD)
        if ctx.dep.kv_unified:
            return n_ctx, 1
        return round_to_blocks(n_ctx // n_seq, LLAMA_CPP_PAD), n_seq

    def swa_cells(self, spec: LayerSpec, ctx: SizingContext) -> int:
        size_base, _streams = self.cells(ctx)
        n_swa = spec.window  # type: ignore[attr-defined]
        ubatch = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        seqs = ctx.batch if ctx.dep.kv_unified else 1
        return round_to_blocks(min(size_base, n_swa * seqs + ubatch), LLAMA_CPP_PAD)

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, CrossAttentionSpec) or not isinstance(spec, (AttentionSpec, MLASpec)):
            return 0
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            return self.swa_cells(spec, ctx)
        return self.cells(ctx)[0]

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        return self.tokens_held(spec, ctx) * self.cells(ctx)[1]

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, MLASpec):
            # NOTE: llama.cpp caches the MLA latent in K only (kv_lora_rank + qk_rope_head_dim).
            return ctx.kv_dtype.bytes_for(spec.head_size)
        return super().bytes_per_token(spec, ctx)

    def state_bytes(self, spec: StateSpec, ctx: SizingContext) -> int:
        return 4 * _state_elements(spec)

    def summary(self, ctx: SizingContext) -> str:
        cells, streams = self.cells(ctx)
        ub = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        return (
            f"llama.cpp: {cells:,} cells x {streams} stream(s) (context padded to 256); SWA layers "
            f"GGML_PAD(min(cells, n_swa * n_seq + n_ubatch {ub}), 256) cells; recurrent states float32"
        )


class HfDynamicProfile(EngineProfile):
    name = "hf-dynamic"
    title = "Hugging Face DynamicCache"
    source = "transformers 5.24.0 (cache_utils.py DynamicLayer, DynamicSlidingWindowLayer, QuantizedLayer), measured"
    shares_prefix = False
    hf_quantized = True
    allowed_dtypes: ClassVar[tuple[str, ...] | None] = (*_FLOAT, "fp8_e4m3", "int8", "int4", "int2")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if dep.block_size is not None:
            raise InputError("Hugging Face caches are contiguous tensors, not blocks", "drop --block-size for the hf engines")
        quantized = kv_dtype.scheme == "grouped" or kv_dtype.name == "fp8_e4m3"
        if quantized and any(not isinstance(s, (AttentionSpec, MLASpec)) or not s.grows_with_tokens
                             or isinstance(s, (SlidingWindowSpec, ChunkedLocalSpec, CrossAttentionSpec)) for s in layers):
            raise InputError(
                "Hugging Face QuantizedCache only supports models with only full attention layers",
                "use --kv-dtype auto with this model, or --engine ideal to see the quantized formula",
            )
        if any(isinstance(s, MLASpec) for s in layers):
            notes.append("transformers >= 5.15 caches the MLA latent; 4.x cached expanded per-head K/V (71x more for V3)")
        return notes

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None) -> tuple[list[LayerSpec], list[str]]:
        if hf_cached_kv_heads is None:
            return layers, []
        broadcast = [s for s in layers if isinstance(s, AttentionSpec) and not isinstance(s, CrossAttentionSpec)
                     and s.num_kv_heads != hf_cached_kv_heads]
        if not broadcast:
            return layers, []
        heads = broadcast[0].num_kv_heads
        # NOTE: modeling_falcon (new_decoder_architecture) broadcasts K/V to every query head before
        # cache.update, so the cache holds num_attention_heads heads (measured, FACTS h.9).
        out = [dataclasses.replace(s, num_kv_heads=hf_cached_kv_heads) if s in broadcast else s for s in layers]
        note = (f"{self.title} caches K/V broadcast to all {hf_cached_kv_heads} query heads "
                f"({hf_cached_kv_heads // heads}x the {heads} KV heads), as transformers' modeling code does")
        return out, [note]

    def residual_tokens(self, ctx: SizingContext) -> int:
        """Tokens in the full-precision residual of a QuantizedCache: ``(N - 1) mod R``."""
        r = ctx.dep.residual_length
        if ctx.dep.prompt_len is not None:
            return max(ctx.seq_len - ctx.dep.prompt_len, 0) % r
        return min(ctx.seq_len - 1, r - 1)

    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        window = spec.window  # type: ignore[attr-defined]
        # NOTE: logical W - 1 tokens; the kept tensor is a view of the W-token torch.cat result, so
        # storage is min(T, W). Beam reordering (index_select) compacts it to W - 1.
        return min(ctx.seq_len, window - 1 if ctx.dep.beams > 1 else window)

    def state_bytes(self, spec: StateSpec, ctx: SizingContext) -> int:
        if spec.mixer in ("mamba", "mamba2", "gated_delta_net"):
            shapes = dict(spec.shapes)
            kernel_minus_1, channels = shapes["conv"]
            # NOTE: HF keeps the whole conv window (d_conv) and a float32 ssm/recurrent state (measured on the
            # CPU path: FACTS h.11 for Mamba; the same for Mamba-2 and gated delta net, transformers 5.24).
            return ctx.state_dtype.bytes_for(channels * (kernel_minus_1 + 1)) + 4 * math.prod(shapes["ssm"])
        return super().state_bytes(spec, ctx)

    def layer_bytes(self, spec: LayerSpec, ctx: SizingContext) -> int:
        dtype = ctx.kv_dtype
        if isinstance(spec, (AttentionSpec, MLASpec)) and (dtype.scheme == "grouped" or dtype.name == "fp8_e4m3"):
            return self._quantized_layer_bytes(spec, ctx)
        return super().layer_bytes(spec, ctx)

    def _quantized_layer_bytes(self, spec: AttentionSpec | MLASpec, ctx: SizingContext) -> int:
        s = ctx.model_dtype.block_bytes
        tokens = self.tokens_held(spec, ctx)
        if isinstance(spec, MLASpec):
            widths = (spec.kv_lora_rank, spec.qk_rope_head_dim)
        else:
            widths = (spec.num_kv_heads * spec.head_size, spec.num_kv_heads * spec.head_size_v)
        if ctx.kv_dtype.name == "fp8_e4m3":
            # NOTE: Fp8QuantizedLayer: 1 byte per value plus one float32 scale per tensor, no residual.
            return sum(ctx.seqs * tokens * w + 4 for w in widths)
        bits, group = ctx.kv_dtype.bits, ctx.kv_dtype.block_elems
        t_res = self.residual_tokens(ctx) if tokens else 0
        t_q = tokens - t_res
        total = 0
        for width in widths:
            n = ctx.seqs * t_q * width
            total += ctx.seqs * t_res * width * s + n * bits // 8 + 2 * cdiv(n, group) * s
        return total

    def peak_extra_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int:
        extra = 0
        for spec, _layer_bytes in costs:
            if not isinstance(spec, (AttentionSpec, MLASpec)) or isinstance(spec, CrossAttentionSpec):
                continue
            tokens = self.tokens_held(spec, ctx)
            if ctx.kv_dtype.scheme == "grouped":
                # NOTE: every step dequantizes the whole layer and concatenates it with the residual:
                # two full-precision copies of one layer's K and V are alive at once.
                k, v = _kv_rows(spec, ctx.model_dtype)
                extra = max(extra, 2 * ctx.seqs * tokens * (k + v))
            elif ctx.kv_dtype.name == "fp8_e4m3":
                # NOTE: Fp8QuantizedLayer.update returns the whole layer dequantized to the model dtype;
                # each _dequantize goes through two float32 temporaries (.float(), then * scale), so while
                # V is dequantized the returned K (s bytes per value) and 8 bytes per V value are alive.
                n_k, n_v = (spec.kv_lora_rank, spec.qk_rope_head_dim) if isinstance(spec, MLASpec) else (
                    spec.num_kv_heads * spec.head_size, spec.num_kv_heads * spec.head_size_v)
                s = ctx.model_dtype.block_bytes
                extra = max(extra, ctx.seqs * tokens * max(8 * n_k, s * n_k + 8 * n_v))
            else:
                # NOTE: torch.cat allocates the grown K (then V) of one layer while the old one is alive;
                # beam reordering (index_select) does the same.
                k, v = _kv_rows(spec, ctx.kv_dtype)
                extra = max(extra, ctx.seqs * tokens * max(k, v))
        return extra

    def prefill_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int | None:
        prompt = ctx.dep.prompt_len
        if prompt is None or ctx.dep.beams > 1:
            return None
        total = 0
        grew = False
        for spec, layer_bytes in costs:
            if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)) and prompt > self.tokens_held(spec, ctx):
                # NOTE: right after prefill the cropped view keeps the whole prompt's K/V alive.
                total += ctx.seqs * prompt * self.bytes_per_token(spec, ctx)
                grew = True
            elif spec.grows_with_tokens and not isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
                total += ctx.seqs * min(prompt, ctx.seq_len) * self.bytes_per_token(spec, ctx)
            else:
                total += layer_bytes
        return total if grew else None

    def summary(self, ctx: SizingContext) -> str:
        return (
            "transformers DynamicCache: full layers T tokens; sliding/chunked layers store min(T, W) "
            "(the W - 1 kept tokens are a view of the W-token cat; W - 1 with beams); "
            "QuantizedCache: residual of < residual_length tokens in full precision"
        )


class HfStaticProfile(HfDynamicProfile):
    name = "hf-static"
    title = "Hugging Face StaticCache"
    source = "transformers 5.24.0 (cache_utils.py StaticLayer, StaticSlidingWindowLayer), measured"
    hf_quantized = False
    allowed_dtypes: ClassVar[tuple[str, ...] | None] = _FLOAT

    def cache_len(self, ctx: SizingContext) -> int:
        return ctx.dep.max_cache_len or ctx.seq_len

    def check_length(self, dep: Deployment, seq_len: int, tokens: str) -> None:
        if dep.max_cache_len is not None and dep.max_cache_len < seq_len:
            raise InputError(
                f"--max-cache-len {dep.max_cache_len:,} cannot hold {tokens}: a StaticCache is preallocated "
                "and never grows",
                f"use --max-cache-len {seq_len} or more, or a shorter --seq-len",
            )

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        return EngineProfile.check(self, layers, dep, kv_dtype) + (
            [] if dep.block_size is None else self._no_blocks()
        )

    @staticmethod
    def _no_blocks() -> list[str]:
        raise InputError("Hugging Face caches are contiguous tensors, not blocks", "drop --block-size for the hf engines")

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, CrossAttentionSpec):
            return ctx.encoder_len
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            # NOTE: StaticSlidingWindowLayer preallocates min(W, max_cache_len): W, not W - 1.
            return min(spec.window or 0, self.cache_len(ctx))
        if isinstance(spec, (AttentionSpec, MLASpec)):
            return self.cache_len(ctx)
        return 0

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        return ctx.seqs * self.tokens_held(spec, ctx)

    def layer_bytes(self, spec: LayerSpec, ctx: SizingContext) -> int:
        return EngineProfile.layer_bytes(self, spec, ctx)

    def peak_extra_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int:
        if ctx.dep.beams == 1:
            return 0  # preallocated: every step holds the same bytes
        extra = 0
        for spec, _b in costs:
            if isinstance(spec, (AttentionSpec, MLASpec)) and not isinstance(spec, CrossAttentionSpec):
                k, v = _kv_rows(spec, ctx.kv_dtype)
                extra = max(extra, ctx.seqs * self.tokens_held(spec, ctx) * max(k, v))
        return extra

    def prefill_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int | None:
        return None

    def summary(self, ctx: SizingContext) -> str:
        return (
            f"transformers StaticCache: max_cache_len {self.cache_len(ctx):,} tokens preallocated per sequence; "
            "sliding layers min(W, max_cache_len)"
        )


ENGINES: dict[str, type[EngineProfile]] = {
    cls.name: cls
    for cls in (IdealProfile, VllmProfile, SglangProfile, TrtllmProfile, LlamaCppProfile, HfDynamicProfile, HfStaticProfile)
}
ENGINE_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "trt-llm": "trtllm", "tensorrt-llm": "trtllm",
                  "hf": "hf-dynamic", "transformers": "hf-dynamic"}


def get_engine(name: str) -> EngineProfile:
    """The profile for ``name`` (``ideal``, ``vllm``, ``sglang``, ``trtllm``, ``llama.cpp``,
    ``hf-dynamic``, ``hf-static``)."""
    key = str(name).strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    if key not in ENGINES:
        raise InputError(f"--engine {name!r} is not a known engine profile", f"use one of: {', '.join(ENGINES)}")
    return ENGINES[key]()


__all__ = ["ENGINES", "EngineProfile", "SizingContext", "get_engine", "kv_heads_per_rank"]
