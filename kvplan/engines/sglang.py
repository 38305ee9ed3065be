"""SGLang: pages of one token; hybrid sliding-window models get an SWA pool beside the full pool."""

from __future__ import annotations

import math

from kvplan.adjust import round_to_blocks, shared_token_slots
from kvplan.engines.base import FLOAT_DTYPES, FP8_DTYPES, EngineProfile, SizingContext
from kvplan.specs import ChunkedLocalSpec, LayerSpec, SlidingWindowSpec

#: SGLang ``--swa-full-tokens-ratio`` default.
SGLANG_SWA_RATIO = 0.8


class SglangProfile(EngineProfile):
    name = "sglang"
    title = "SGLang"
    source = "SGLang 0.5.23 (model_executor/pool_configurator.py, mem_cache/memory_pool.py, server_args.py)"
    default_block_size = 1
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "nvfp4")

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
