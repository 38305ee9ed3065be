"""vLLM v1: blocks of 16 (64 for MLA), sliding windows plus the batched tokens, Mamba page alignment."""

from __future__ import annotations

import dataclasses

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype
from kvplan.engines.base import (
    FLOAT_DTYPES,
    FP8_DTYPES,
    EngineProfile,
    PoolFacts,
    SizingContext,
    dsa_fp8_bytes,
    version_tuple,
)
from kvplan.errors import InputError
from kvplan.specs import AttentionSpec, ChunkedLocalSpec, LayerSpec, MLASpec, SlidingWindowSpec, StateSpec
from kvplan.units import GiB, cdiv

#: vLLM ``--max-num-batched-tokens`` default kvplan assumes: ``vllm serve`` on a GPU with at least
#: 70 GiB that is not an A100 (H100, H200, MI300X), from ``EngineArgs.get_batch_defaults``.
#: The same function gives 2048 on smaller GPUs and 16384 for the offline ``LLM`` class.
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: The vLLM release whose log lines ``capacity.engine_log`` prints by default (the newest read).
VLLM_DEFAULT_VERSION = "0.33"
#: vLLM V0 ``--swap-space`` default (GiB of CPU blocks logged as ``# CPU blocks``).
VLLM_V0_SWAP_BYTES = 4 * GiB
VLLM_DOCS_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
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
        dsa = dsa_fp8_bytes(spec, ctx.kv_dtype)
        if dsa is not None:
            # NOTE: MLAAttentionSpec.real_page_size_bytes (fp8_ds_mla) and the DSA indexer cache (fp8 + scale).
            return dsa
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

    # ---- start-up log lines ----------------------------------------------------------------------
    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """vLLM's KV lines for ``pool``, in the format of ``pool.version`` (engine_logs.md section 1.1).

        - V0 (< 0.8): ``# GPU blocks: N, # CPU blocks: C`` and concurrency ``N * bs / max_model_len``.
        - 0.8 - 0.9: ``GPU KV cache size`` = ``num_blocks * block_size`` (uniform models only).
        - 0.10 - 0.20: ``num_blocks // num_kv_cache_groups * block_size`` (``_report_kv_cache_config``).
        - 0.21 and later: ``int(max_concurrency * max_model_len)``; one merged line from 0.28.
        GiB figures: ``%.2f`` up to 0.12, ``str(round(x, 2))`` (``format_gib``) from 0.13 (0.14 read).
        """
        version = pool.version or VLLM_DEFAULT_VERSION
        v = version_tuple(version, engine="vllm")[:2]
        gib = _gib_text(pool.available_kv_bytes, v)
        fits = pool.kv_bytes_per_request <= pool.available_kv_bytes and pool.num_blocks >= pool.blocks_per_request
        out: dict[str, object] = {"version": version, "available_kv_bytes": pool.available_kv_bytes,
                                  "num_blocks": pool.num_blocks, "num_kv_cache_groups": pool.num_kv_cache_groups,
                                  "bytes_per_block": _bytes_per_block(pool)}
        if v < (0, 8):
            per_block = pool.block_size * sum(
                sum(1 for i in c.layer_indices if i in pool.layers_on_rank) * (c.k_bytes_per_token + c.v_bytes_per_token)
                for c in pool.caches
            )
            cpu = VLLM_V0_SWAP_BYTES // per_block if per_block else 0
            tokens = pool.num_blocks * pool.block_size
            conc = tokens / pool.max_model_len
            lines = [f"# GPU blocks: {pool.num_blocks}, # CPU blocks: {cpu}",
                     f"Maximum concurrency for {pool.max_model_len} tokens per request: {conc:.2f}x"]
            if tokens < pool.max_model_len:
                lines.append(
                    f"The model's max seq len ({pool.max_model_len}) is larger than the maximum number of tokens that "
                    f"can be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing "
                    "`max_model_len` when initializing the engine."
                )
            return {**out, "lines": lines, "gpu_kv_cache_tokens": tokens, "max_concurrency": round(conc, 4)}
        lines = [f"Available KV cache memory: {gib} GiB"]
        if pool.available_kv_bytes <= 0:
            return {**out, "lines": [*lines, _no_memory_text(v)], "num_blocks": 0}
        if not fits:
            return {**out, "lines": [*lines, _not_enough_text(pool, v)]}
        if v < (0, 10):
            tokens = pool.num_blocks * pool.block_size
        elif v < (0, 21):
            tokens = pool.num_blocks // pool.num_kv_cache_groups * pool.block_size
        else:
            tokens = int(pool.max_concurrency * pool.max_model_len)
        size = f"GPU KV cache size: {tokens:,} tokens"
        conc = f"Maximum concurrency for {pool.max_model_len:,} tokens per request: {pool.max_concurrency:.2f}x"
        lines += [f"{size}, {conc}"] if v >= (0, 28) else [size, conc]
        return {**out, "lines": lines, "gpu_kv_cache_tokens": tokens, "max_concurrency": round(pool.max_concurrency, 4)}


def vllm_token_lines(pool: PoolFacts) -> dict[str, int]:
    """The ``GPU KV cache size`` figure of each vLLM formula for one pool (they differ for hybrid models)."""
    return {
        "0.10-0.20": pool.num_blocks // max(pool.num_kv_cache_groups, 1) * pool.block_size,
        ">=0.21": int(pool.max_concurrency * pool.max_model_len),
    }


def _bytes_per_block(pool: PoolFacts) -> int | None:
    """Bytes one block id takes over all tensors: ``page * group_size`` (None when pages differ)."""
    rows = {c.k_bytes_per_token + c.v_bytes_per_token for c in pool.caches if c.kind not in ("no_cache", "state")}
    counts = [sum(1 for i in c.layer_indices if i in pool.layers_on_rank) for c in pool.caches
              if c.kind not in ("no_cache", "state")]
    if len(rows) != 1 or any(c.kind == "state" for c in pool.caches):
        return None
    counts = [c for c in counts if c]
    lo, hi = min(counts), max(counts)
    if len(counts) == 1 or len(set(counts)) == 1:
        group_size = sum(counts) if len(counts) == 1 else counts[0]
    else:
        group_size = hi if hi < 1.5 * lo else lo
    return pool.block_size * rows.pop() * group_size


def kv_cache_group_count(counts: list[int]) -> int:
    """vLLM's hybrid allocator: layers of each kind in groups of ``group_size`` (the smallest kind's count
    unless the kinds are within 1.5x of each other), ``sum(cdiv(count, group_size))`` groups."""
    counts = [c for c in counts if c]
    if not counts:
        return 1
    lo, hi = min(counts), max(counts)
    group_size = hi if hi < 1.5 * lo else lo
    return sum(cdiv(c, group_size) for c in counts)


def _gib_text(num_bytes: int, v: tuple[int, ...]) -> str:
    """``%.2f`` up to 0.12; ``format_gib`` = ``str(round(b / GiB, 2))`` after (``1.7``, ``49.0``)."""
    return f"{num_bytes / GiB:.2f}" if v < (0, 13) else str(round(num_bytes / GiB, 2))


def _no_memory_text(v: tuple[int, ...]) -> str:
    text = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine"
    if v < (0, 13):
        return text + "."
    if v >= (0, 24):
        text += " (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
    return text + f". See {VLLM_DOCS_URL} for more details."


def _not_enough_text(pool: PoolFacts, v: tuple[int, ...]) -> str:
    """``check_enough_kv_cache_memory``'s ValueError, per version (0.10-0.12, 0.13-0.21, 0.24+ read)."""
    needed, avail, est = pool.kv_bytes_per_request, pool.available_kv_bytes, pool.estimated_max_model_len
    owner = "model's" if v >= (0, 24) else "models's"
    head = (f"To serve at least one request with the {owner} max seq len ({pool.max_model_len}), "
            f"({_gib_text(needed, v)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({_gib_text(avail, v)} GiB). ")
    if v < (0, 13):
        estimated = f"Based on the available memory, the estimated maximum model length is {est}." if est > 0 else ""
        return head + estimated + " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    estimated = f"Based on the available memory, the estimated maximum model length is {est}. " if est > 0 else ""
    cpu = " (which also controls CPU memory on the CPU backend)" if v >= (0, 24) else ""
    return (head + estimated + f"Try increasing `gpu_memory_utilization`{cpu} or decreasing `max_model_len` when "
            f"initializing the engine. See {VLLM_DOCS_URL} for more details.")
