"""llama.cpp: cells padded to 256, SWA layers sized from the window and the micro-batch, f16 by default."""

from __future__ import annotations

from kvplan.adjust import Deployment, round_to_blocks
from kvplan.dtypes import GGML_CACHE_TYPES, KvDtype, lookup_dtype
from kvplan.engines.base import EngineProfile, SizingContext
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

#: llama.cpp pads contexts and cell counts to 256 (``GGML_PAD(n_ctx, 256)``).
LLAMA_CPP_PAD = 256
#: llama.cpp ``n_ubatch`` default.
LLAMA_CPP_UBATCH = 512


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
        return 4 * spec.state_elements

    def summary(self, ctx: SizingContext) -> str:
        cells, streams = self.cells(ctx)
        ub = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        return (
            f"llama.cpp: {cells:,} cells x {streams} stream(s) (context padded to 256); SWA layers "
            f"GGML_PAD(min(cells, n_swa * n_seq + n_ubatch {ub}), 256) cells; recurrent states float32"
        )
