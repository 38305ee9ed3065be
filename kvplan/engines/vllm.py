"""vLLM v1: blocks of 16 (64 for MLA), sliding windows plus the batched tokens, Mamba page alignment."""

from __future__ import annotations

import dataclasses

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype
from kvplan.engines.base import FLOAT_DTYPES, FP8_DTYPES, EngineProfile, SizingContext
from kvplan.errors import InputError
from kvplan.specs import AttentionSpec, ChunkedLocalSpec, LayerSpec, MLASpec, SlidingWindowSpec, StateSpec
from kvplan.units import cdiv

#: vLLM ``--max-num-batched-tokens`` default kvplan assumes: ``vllm serve`` on a GPU with at least
#: 70 GiB that is not an A100 (H100, H200, MI300X), from ``EngineArgs.get_batch_defaults``.
#: The same function gives 2048 on smaller GPUs and 16384 for the offline ``LLM`` class.
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: vLLM ``CacheConfig.block_size`` values.
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


class VllmProfile(EngineProfile):
    name = "vllm"
    title = "vLLM"
    source = (
        "vLLM v1 (vllm/v1/kv_cache_interface.py @ 001cabc1, kv_cache_utils.py, platforms/cuda.py): "
        "max_memory_usage_bytes per layer"
    )
    default_block_size = 16
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "int8", "nvfp4")

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
