"""Hugging Face transformers: DynamicCache (with QuantizedCache) and StaticCache, as measured."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import ClassVar

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype
from kvplan.engines.base import (
    FLOAT_DTYPES,
    BudgetRequest,
    EngineProfile,
    SizingContext,
    activation_estimate,
    kv_row_bytes,
)
from kvplan.errors import InputError
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    CompressedAttentionSpec,
    CrossAttentionSpec,
    IndexerSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.units import cdiv

#: Model types whose transformers modeling takes no cache at all: every step recomputes the whole sequence.
NO_HF_CACHE = {"openai-gpt": "transformers' OpenAIGPTModel (modeling_openai.py) takes no cache: generate() "
                             "recomputes every token's K/V at each step (measured, 5.25: the cache stays empty)"}


class HfDynamicProfile(EngineProfile):
    name = "hf-dynamic"
    mla_off = "transformers before 5.15 cached the expanded per-head K (qk_nope + qk_rope) and V (v_head_dim)"
    title = "Hugging Face DynamicCache"
    source = "transformers 5.24.0 (cache_utils.py DynamicLayer, DynamicSlidingWindowLayer, QuantizedLayer), measured"
    shares_prefix = False
    hf_quantized = True
    keeps_checkpoint_dtype = True
    checkpoint_kv_dtype = None  # NOTE: transformers has no ModelOpt loader: its cache is in the model dtype
    transient_peaks = True
    allowed_dtypes: ClassVar[tuple[str, ...] | None] = (*FLOAT_DTYPES, "fp8_e4m3", "int8", "int4", "int2")

    def pool_block_size(self, sizes: list[int], dep: Deployment) -> int:
        return 1 if dep.block_size is None else max(sizes)

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """Tokens the model's own forward (or its ``prepare_inputs_for_generation``) adds to every sequence are
        cached like the text: CPM-Ant's prompt tokens, XLM's mask token (the family notes say which)."""
        added = ctx.hf_added_tokens
        if not added:
            return ctx, []
        prompt = ctx.dep.prompt_len
        dep = ctx.dep if prompt is None else replace(ctx.dep, prompt_len=prompt + added)
        note = (f"{self.title}: every sequence caches {added} token{'s' if added > 1 else ''} more than the text "
                "(the model's transformers code adds them; see the model notes)")
        return replace(ctx, seq_len=ctx.seq_len + added, dep=dep), [note]

    def activation(self, req: BudgetRequest) -> tuple[int, int]:
        """Activations of one ``max_model_len`` prefill (generate() prefills the whole prompt at once)."""
        return activation_estimate(req.shape, tokens=req.tokens, logit_rows=1, tp=req.tp), 0

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

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None,
                      model_type: str | None = None) -> tuple[list[LayerSpec], list[str]]:
        if model_type in NO_HF_CACHE:
            reason = NO_HF_CACHE[model_type]
            return [NoCacheSpec(reason=f"{self.title}: no cache") for _ in layers], [reason]
        if hf_cached_kv_heads is None:
            return layers, []
        broadcast = [s for s in layers if isinstance(s, AttentionSpec) and not isinstance(s, CrossAttentionSpec)
                     and s.num_kv_heads != hf_cached_kv_heads]
        if not broadcast:
            return layers, []
        heads = broadcast[0].num_kv_heads
        # NOTE: modeling_falcon (new_decoder_architecture) broadcasts K/V to every query head before
        # cache.update, so the cache holds num_attention_heads heads (measured with transformers 5.24, tests/test_verify_transformers.py).
        out = [replace(s, num_kv_heads=hf_cached_kv_heads) if s in broadcast else s for s in layers]
        note = (f"{self.title} caches K/V broadcast to all {hf_cached_kv_heads} query heads "
                f"({hf_cached_kv_heads // heads}x the {heads} KV heads), as transformers' modeling code does")
        return out, [note]

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, IndexerSpec) and spec.hf_float32:
            return 4 * spec.index_head_dim  # NOTE: the float32 rope promotes the indexer key (measured)
        return super().bytes_per_token(spec, ctx)

    def conv_state_note(self) -> str:
        return (f"state convention ({self.title}): a recurrent layer's conv state holds conv_kernel inputs, the "
                "whole window transformers keeps (one more than the layer detail's conv_kernel - 1, the vLLM, SGLang "
                "and llama.cpp convention of kvplan's other engines)")

    def compressed_attention_note(self) -> str | None:
        return ("transformers' DeepSeek-V4 cache (modeling_deepseek_v4.py DeepseekV4HCACache/CSACache, measured): "
                "sliding-only layers keep K and V as two tensors; compressed layers keep one K=V window, the entries, "
                "the uncompressed tail's kv and gate projections (a view of the last concatenation) and, for CSA, the "
                "previous window's overlap slice (its gate in float32), for the compressor and the indexer")

    def compressed_bytes(self, spec: CompressedAttentionSpec, ctx: SizingContext) -> int:
        s, t, beams = ctx.kv_dtype, ctx.seq_len, ctx.dep.beams
        window = min(t, spec.sliding_window - 1 if beams > 1 else spec.sliding_window)
        row = spec.bytes_per_token(s)
        if not spec.compress_ratio:
            # NOTE: a plain DynamicSlidingWindowLayer: cache.update(kv, kv) stores K and V as separate tensors.
            return 2 * window * row
        m = spec.compress_ratio
        tail = t % m
        if beams > 1:
            tail_held = tail  # reorder_cache's index_select compacts the buffer views
        elif ctx.dep.prompt_len is not None and t <= ctx.dep.prompt_len:
            tail_held = t  # after prefill the buffer is a view of the whole prompt's projection
        else:
            # NOTE: the buffer is kv[:, usable:] of the last torch.cat (old tail + 1 token); when that closed a
            # window the empty view still holds the ratio tokens of the cat.
            tail_held = tail or m
        series = 2 if spec.overlap else 1
        entries = spec.compressed_entries(t)
        total = window * row + entries * spec.entry_bytes(s)
        # kv and gate projections of the tail: the compressor's (and, with an indexer, the indexer's)
        total += 2 * tail_held * (s.bytes_for(series * spec.head_size) + s.bytes_for(series * spec.index_head_size))
        if spec.overlap and entries:
            # the previous window's Ca slice: kv in the model dtype, gate (+ float32 position_bias) in float32
            for width in (spec.head_size, spec.index_head_size):
                total += m * (s.bytes_for(width) + 4 * width) if width else 0
        return total

    def residual_tokens(self, ctx: SizingContext) -> int:
        """Tokens in the full-precision residual of a QuantizedCache: ``(N - 1) mod R``."""
        r = ctx.dep.residual_length
        if ctx.dep.prompt_len is not None:
            return max(ctx.seq_len - ctx.dep.prompt_len, 0) % r
        return min(ctx.seq_len - 1, r - 1)

    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        window = spec.window
        assert window is not None, spec  # asked of sliding and chunked layers only
        # NOTE: logical W - 1 tokens; the kept tensor is a view of the W-token torch.cat result, so
        # storage is min(T, W). Beam reordering (index_select) compacts it to W - 1.
        return min(ctx.seq_len, window - 1 if ctx.dep.beams > 1 else window)

    def state_bytes(self, spec: StateSpec, ctx: SizingContext) -> int:
        if spec.mixer in ("mamba", "mamba2", "gated_delta_net", "kda"):
            shapes = dict(spec.shapes)
            kernel_minus_1, channels = shapes["conv"]
            # NOTE: HF keeps the whole conv window (d_conv) and a float32 ssm/recurrent state (measured on the
            # CPU path, transformers 5.24: Mamba, Mamba-2, gated delta net and KDA; modeling_mamba.py's slow path).
            return ctx.state_dtype.bytes_for(channels * (kernel_minus_1 + 1)) + 4 * math.prod(shapes["ssm"])
        if spec.mixer in ("short_conv", "rg_lru"):
            # NOTE: LinearAttentionLayer keeps the whole conv window (conv_kernel_size inputs), not kernel - 1
            # (measured: LFM3 [B, 2048, 7] for conv_L_cache 7; Inkling's four float32 convs [B, C, 4]); RecurrentGemma's
            # conv1d_state is conv_state[:, :, 1:], a view of the conv1d_width-wide concatenation (measured, 5.25).
            return sum(spec.tensor_bytes(name, (shape[0] + 1, *shape[1:]) if name == "conv" or spec.mixer == "short_conv"
                                         else shape, ctx.state_dtype) for name, shape in spec.shapes)
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
                k, v = kv_row_bytes(spec, ctx.model_dtype)
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
                k, v = kv_row_bytes(spec, ctx.kv_dtype)
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
    knobs = ("max_cache_len",)
    allowed_dtypes: ClassVar[tuple[str, ...] | None] = FLOAT_DTYPES

    def cache_len(self, ctx: SizingContext) -> int:
        return ctx.dep.max_cache_len or ctx.seq_len

    def check_length(self, dep: Deployment, seq_len: int, tokens: str) -> None:
        if dep.max_cache_len is not None and dep.max_cache_len < seq_len:
            raise InputError(
                f"--max-cache-len {dep.max_cache_len:,} cannot hold {tokens}: a StaticCache is preallocated "
                "and never grows",
                f"use --max-cache-len {seq_len} or more, or a shorter --seq-len",
            )

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """A StaticCache must hold the tokens the model adds as well: generate() sizes it for the text alone and
        the model's extra tokens overflow it (IndexError in index_copy_, measured with transformers 5.25 for
        CPM-Ant and XLM), so kvplan prices the StaticCache that fits, ``max_cache_len`` = T + the added tokens."""
        added, cap = ctx.hf_added_tokens, ctx.dep.max_cache_len
        if added and cap is not None and cap < ctx.seq_len + added:
            raise InputError(
                f"--max-cache-len {cap:,} cannot hold {ctx.seq_len:,} tokens and the {added} the model adds to each "
                "sequence",
                f"use --max-cache-len {ctx.seq_len + added} or more",
            )
        ctx, notes = super().prepare(layers, ctx)
        if added and cap is None:
            notes.append(f"{self.title}: generate() sizes it for the text alone and the {added} added token"
                         f"{'s' if added > 1 else ''} overflow it; priced as a StaticCache of max_cache_len = "
                         f"{ctx.seq_len:,}, the one that fits")
        return ctx, notes

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        if any(isinstance(s, CompressedAttentionSpec) for s in layers):
            raise InputError("transformers' DeepSeek-V4 cache layers are dynamic only: they do not build a StaticCache",
                             "use --engine hf-dynamic")
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
                k, v = kv_row_bytes(spec, ctx.kv_dtype)
                extra = max(extra, ctx.seqs * self.tokens_held(spec, ctx) * max(k, v))
        return extra

    def prefill_bytes(self, costs: list[tuple[LayerSpec, int]], ctx: SizingContext) -> int | None:
        return None

    def summary(self, ctx: SizingContext) -> str:
        return (
            f"transformers StaticCache: max_cache_len {self.cache_len(ctx):,} tokens preallocated per sequence; "
            "sliding layers min(W, max_cache_len)"
        )
