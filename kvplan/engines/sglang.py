"""SGLang: pages of one token; hybrid sliding-window models get an SWA pool beside the full pool."""

from __future__ import annotations

import math
from dataclasses import replace

from kvplan.adjust import Deployment, round_to_blocks, shared_token_slots
from kvplan.engines.base import (
    FLOAT_DTYPES,
    FP8_DTYPES,
    Budget,
    BudgetRequest,
    EngineProfile,
    PoolFacts,
    SizingContext,
    dsa_fp8_bytes,
    version_tuple,
)
from kvplan.errors import InputError
from kvplan.specs import ChunkedLocalSpec, IndexerSpec, LayerSpec, SlidingWindowSpec
from kvplan.units import GiB

#: The SGLang release whose log lines ``capacity.engine_log`` follows by default (the one read).
SGLANG_DEFAULT_VERSION = "0.5.23"
#: The first release whose "KV Cache is allocated" line counts a DSA pool's indexer keys (sglang#11309).
SGLANG_INDEX_LOGGED = (0, 5, 4)
#: ``torch`` dtype names SGLang prints in ``KV Cache is allocated. dtype: ...``.
SGLANG_TORCH_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16", "fp32": "torch.float32",
                       "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2", "nvfp4": "torch.uint8"}
#: SGLang's page size for NSA models on CUDA (``NSATokenToKVPool``: ``assert self.page_size == 64``).
SGLANG_NSA_PAGE_SIZE = 64
#: SGLang ``--swa-full-tokens-ratio`` default.
SGLANG_SWA_RATIO = 0.8


def sglang_mem_fraction_static(tp: int) -> float:
    """SGLang's classic default ``--mem-fraction-static`` by TP size (server_args, 0.4 era).

    Newer releases derive it from GPU memory and chunked-prefill size; pass the flag to match yours.
    """
    if tp >= 16:
        return 0.79
    if tp >= 8:
        return 0.81
    if tp >= 4:
        return 0.85
    if tp >= 2:
        return 0.87
    return 0.88


class SglangProfile(EngineProfile):
    name = "sglang"
    title = "SGLang"
    source = "SGLang 0.5.23 (model_executor/pool_configurator.py, mem_cache/memory_pool.py, server_args.py)"
    default_block_size = 1
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "nvfp4")
    checkpoint_kv_dtype = ("SGLang's --kv-cache-dtype auto takes an FP8 kv_cache_quant_algo: "
                           "model_runner.py configure_kv_cache_dtype")
    checkpoint_kv_formats = ("fp8_e4m3",)  # NOTE: an NVFP4 kv_cache_quant_algo leaves auto at the model dtype
    knobs = ("swa_full_tokens_ratio",)
    mla_off = None  # NOTE: the 0.5.23 wheel has no MLA-disable switch (no disable_mla / SGLANG_DISABLE_MLA)
    dp_within_tp = True
    pp_extra_layers_last = True
    pp_encoder_every_stage = False
    query_heads_rule = "sglang/srt/models/llama.py LlamaAttention: assert total_num_heads % tp_size == 0"

    def attention_tp(self, tp: int, dp: int) -> int:
        """``attn_tp = tp // dp`` (``layers/dp_attention.py::compute_dp_attention_world_info``)."""
        if dp < 2 or tp % dp:
            raise InputError(
                f"SGLang --enable-dp-attention needs --dp > 1 dividing --tp; got --tp {tp} --dp {dp}",
                f"e.g. --tp {tp} --dp {tp} --enable-dp-attention",
            )
        return tp // dp

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        """NSA (DeepSeek-V3.2's sparse attention): pages of 64 tokens. ``server_args`` sets ``page_size = 64`` for
        NSA models on CUDA and ``NSATokenToKVPool`` asserts it; the latent pool then has ``N + 64`` rows and the
        indexer ``(N + 65) // 64`` pages."""
        if ctx.dep.block_size is not None or not any(isinstance(s, IndexerSpec) for s in layers):
            return ctx, []
        return replace(ctx, attn_block_size=SGLANG_NSA_PAGE_SIZE), [
            f"SGLang NSA (sparse attention): page_size {SGLANG_NSA_PAGE_SIZE} on CUDA (server_args sets it for NSA "
            "models; NSATokenToKVPool asserts it): the latent pool has N + 64 rows and the indexer (N + 65) // 64 "
            "pages of 64 x 132 B"]

    def swa_pool_ratio(self, dep: Deployment) -> float:
        return dep.swa_full_tokens_ratio or SGLANG_SWA_RATIO

    def kv_budget(self, req: BudgetRequest) -> Budget:
        """``memory x mem_fraction_static - weights``: the rest of memory is SGLang's own reserve."""
        fraction = req.mem_fraction_static or sglang_mem_fraction_static(req.tp)
        usable = int(req.memory_bytes * fraction)
        reserve = req.reserve_bytes if req.reserve_bytes is not None else 0
        return Budget(memory_bytes=req.memory_bytes, usable_bytes=usable, weights_bytes_per_gpu=req.weights_bytes_per_gpu,
                      activation_bytes=0, non_torch_bytes=0, reserve_bytes=reserve,
                      kv_bytes_per_gpu=usable - req.weights_bytes_per_gpu - (req.reserve_bytes or 0),
                      formula=f"memory x mem_fraction_static {fraction:g} - weights")

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        # NOTE: kv_cache_configurator.py::calculate_mla_kv_cache_dim (fp8 DSA: 656 B) and index_key_cache.py (132 B).
        dsa = dsa_fp8_bytes(spec, ctx.kv_dtype)
        return dsa if dsa is not None else super().bytes_per_token(spec, ctx)

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

    # ---- start-up log lines ----------------------------------------------------------------------
    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """``KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB`` (MHA pools) or
        ``..., KV size: X GB`` (MLA pools; DSA adds the indexer key cache since sglang#11309).

        ``memory_pool.py``: every layer buffer has ``N + page_size`` rows (slot 0 is a dummy); the DSA
        indexer has ``(N + page_size + 1) // page_size`` pages of ``page_size * 132`` bytes; "GB" is GiB.
        ``dtype:`` is printed by 0.5.23 (read); 2025 logs (before it) have no dtype field.
        """
        version = pool.version or SGLANG_DEFAULT_VERSION
        v = version_tuple(version, engine="sglang")
        n, page = pool.max_tokens, pool.block_size or 1
        dtype = f"dtype: {SGLANG_TORCH_DTYPES.get(pool.kv_dtype, pool.kv_dtype)}, " if v >= (0, 5, 23) else ""
        if any(c.kind in ("sliding_window", "chunked_local") for c in pool.caches):
            return self._hybrid_swa_lines(pool, version, dtype)
        k = v_ = latent = index = 0
        single = False
        for cache in pool.caches:
            layers = sum(1 for i in cache.layer_indices if i in pool.layers_on_rank)
            if cache.kind == "indexer":
                index += layers * ((n + page + 1) // page) * page * cache.k_bytes_per_token
                single = True
            elif cache.kind == "mla":
                latent += layers * (n + page) * cache.k_bytes_per_token
                single = True
            elif cache.kind != "state":
                k += layers * (n + page) * cache.k_bytes_per_token
                v_ += layers * (n + page) * cache.v_bytes_per_token
        head = f"KV Cache is allocated. {dtype}#tokens: {n}, "
        out: dict[str, object] = {"version": version, "max_total_num_tokens": n}
        if single:
            total = latent + index + k + v_
            # NOTE: sglang#11309 (merged 2025-10-09, after the 0.5.3 bump of 2025-10-06, sglang#11263) put the DSA
            # indexer in the logged KV size: 0.5.4 and later print both, 0.5.3 the latent alone.
            logged = total if v >= SGLANG_INDEX_LOGGED else total - index
            lines = [head + f"KV size: {logged / GiB:.2f} GB"]
            out.update(kv_size_bytes=logged, latent_size_bytes=latent if index else None,
                       index_size_bytes=index if index else None)
            if index and v >= SGLANG_INDEX_LOGGED:
                out["notes"] = [f"SGLang before sglang#11309 (0.5.3 and earlier) logged the latent only for this pool: "
                                f"KV size: {latent / GiB:.2f} GB (with the indexer: {total / GiB:.2f} GB)"]
            elif index:
                out["notes"] = [f"SGLang {version} logs the latent only for this pool (KV size: {logged / GiB:.2f} GB); "
                                f"the indexer adds {index / GiB:.2f} GB it does not print (sglang#11309, 0.5.4, "
                                "prints both)"]
        else:
            lines = [head + f"K size: {k / GiB:.2f} GB, V size: {v_ / GiB:.2f} GB"]
            out.update(k_size_bytes=k, v_size_bytes=v_)
        return {**out, "lines": lines}

    @staticmethod
    def _hybrid_swa_lines(pool: PoolFacts, version: str, dtype: str) -> dict[str, object]:
        """``SWAKVPool`` (``mem_cache/swa_memory_pool.py``): two ``MHATokenToKVPool`` sub-pools labelled
        ``Full`` and ``SWA``, each logging ``<label> KV Cache is allocated. ... #tokens: N, K size: X GB, V size:
        Y GB`` over its own layers; the SWA pool has ``align_page_size(int(full * swa_full_tokens_ratio))``
        tokens (``pool_configurator.py``), every buffer ``N + page_size`` rows."""
        page = pool.block_size or 1
        n_full = pool.max_tokens
        n_swa = int(n_full * pool.swa_ratio) // page * page
        sizes = {"Full": [0, 0], "SWA": [0, 0]}
        for cache in pool.caches:
            if cache.kind in ("state", "no_cache"):
                continue
            label, rows = ("SWA", n_swa) if cache.kind in ("sliding_window", "chunked_local") else ("Full", n_full)
            layers = sum(1 for i in cache.layer_indices if i in pool.layers_on_rank)
            sizes[label][0] += layers * (rows + page) * cache.k_bytes_per_token
            sizes[label][1] += layers * (rows + page) * cache.v_bytes_per_token
        lines = [f"{label} KV Cache is allocated. {dtype}#tokens: {rows}, K size: {k / GiB:.2f} GB, "
                 f"V size: {v / GiB:.2f} GB"
                 for (label, (k, v)), rows in zip(sizes.items(), (n_full, n_swa))]
        return {"version": version, "lines": lines, "max_total_num_tokens": n_full,
                "k_size_bytes": sizes["Full"][0] + sizes["SWA"][0], "v_size_bytes": sizes["Full"][1] + sizes["SWA"][1],
                "notes": [f"SGLang hybrid SWA: a full pool of {n_full:,} tokens and an SWA pool of {n_swa:,} "
                          f"(swa_full_tokens_ratio {pool.swa_ratio:g}); K/V sizes in engine_log are the two pools' sums"]}
