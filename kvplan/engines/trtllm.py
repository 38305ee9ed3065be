"""TensorRT-LLM: blocks of 32 tokens, KV heads split over ranks by ceiling division."""

from __future__ import annotations

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype, lookup_dtype
from kvplan.engines.base import (
    FLOAT_DTYPES,
    FP8_DTYPES,
    Budget,
    BudgetRequest,
    EngineProfile,
    PoolFacts,
    SizingContext,
    activation_estimate,
    kv_row_bytes,
    version_tuple,
)
from kvplan.specs import AttentionSpec, IndexerSpec, LayerSpec, MLASpec
from kvplan.units import GiB

#: TensorRT-LLM ``KvCacheConfig.tokens_per_block`` default.
TRTLLM_TOKENS_PER_BLOCK = 32
#: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` default.
TRTLLM_FREE_FRACTION = 0.9
#: The batched tokens kvplan assumes TensorRT-LLM's warm-up runs (vLLM's default, for want of a read figure).
TRTLLM_WARMUP_TOKENS = 8192


class TrtllmProfile(EngineProfile):
    name = "trtllm"
    mla_off = None  # NOTE: no MLA-off switch read in TensorRT-LLM
    title = "TensorRT-LLM"
    source = (
        "TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py KvCacheConfig, _torch/pyexecutor/_util.py @ d8ae02ca, "
        "_torch/modules/attention.py)"
    )
    default_block_size = TRTLLM_TOKENS_PER_BLOCK
    tp_rule = "ceil"
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "int8", "nvfp4")
    checkpoint_kv_dtype = ("TensorRT-LLM sets its KV cache quantisation from it: tensorrt_llm/llmapi/llm_utils.py "
                           "_update_from_hf_quant_config")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if kv_dtype.name == "int8":
            notes.append("TensorRT-LLM int8 KV keeps one scale per tensor: 1 byte per value")
        return notes

    def attention_tp(self, tp: int, dp: int) -> int:
        """``enable_attention_dp: true``: the KV heads are computed for ``tp = 1`` (``_util.py``)."""
        return 1

    def activation(self, req: BudgetRequest) -> tuple[int, int]:
        tokens = req.max_num_batched_tokens or TRTLLM_WARMUP_TOKENS
        return activation_estimate(req.shape, tokens=tokens, logit_rows=req.batch, tp=req.tp), 0

    def kv_budget(self, req: BudgetRequest) -> Budget:
        """``(memory - weights - activation peak) x free_gpu_memory_fraction`` (TensorRT-LLM ``_torch/pyexecutor/_util.py``)."""
        act, non_torch = self.activation(req) if req.reserve_bytes is None else (0, 0)
        reserve = req.reserve_bytes if req.reserve_bytes is not None else act + non_torch
        fraction = req.free_gpu_memory_fraction or TRTLLM_FREE_FRACTION
        free = req.memory_bytes - req.weights_bytes_per_gpu - reserve
        kv = int(free * fraction) if free > 0 else free
        return Budget(memory_bytes=req.memory_bytes, usable_bytes=req.memory_bytes,
                      weights_bytes_per_gpu=req.weights_bytes_per_gpu, activation_bytes=act, non_torch_bytes=non_torch,
                      reserve_bytes=reserve, kv_bytes_per_gpu=kv,
                      formula=f"(memory - weights - activation peak) x free_gpu_memory_fraction {fraction:g}")

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, IndexerSpec):
            return spec.fp8_key_bytes()  # indexer_k_cache_manager: fp8 keys, one scale per 128 values
        if ctx.kv_dtype.name == "int8" and isinstance(spec, (AttentionSpec, MLASpec)):
            k, v = kv_row_bytes(spec, lookup_dtype("fp8_e4m3"))
            return k + v
        return super().bytes_per_token(spec, ctx)

    def summary(self, ctx: SizingContext) -> str:
        bs = ctx.dep.block_size or TRTLLM_TOKENS_PER_BLOCK
        return (
            f"TensorRT-LLM: tokens_per_block {bs}; windowed layers keep min(T, max_attention_window) tokens "
            f"in blocks; each TP rank keeps cdiv(H_kv, tp) heads"
        )

    # ---- start-up log lines ----------------------------------------------------------------------
    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """``KVCacheManager::allocatePools`` (C++, INFO): ``Number of tokens per block: B.`` and
        ``[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N).`` with
        ``N = primary blocks * tokens_per_block`` and X = the pool bytes (every layer of the rank)."""
        n = pool.max_tokens
        per_token = sum(
            sum(1 for i in c.layer_indices if i in pool.layers_on_rank) * (c.k_bytes_per_token + c.v_bytes_per_token)
            for c in pool.caches if c.kind != "state"
        )
        allocated = n * per_token
        if pool.version is not None and version_tuple(pool.version, engine="trtllm")[:2] < (0, 9):
            # NOTE: 0.8 and earlier (NVIDIA/TensorRT-LLM#1400): the pool in bytes, then its tokens.
            lines = [f"[TensorRT-LLM][INFO] Allocate {allocated} bytes for k/v cache.",
                     f"[TensorRT-LLM][INFO] Using {n} tokens in paged KV cache."]
            return {"version": pool.version, "lines": lines, "num_blocks": n // pool.block_size,
                    "paged_kv_max_tokens": n, "allocated_bytes": allocated, "tokens_per_block": pool.block_size}
        lines = [f"[TensorRT-LLM][INFO] Number of tokens per block: {pool.block_size}.",
                 f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {allocated / GiB:.2f} GiB for max tokens in "
                 f"paged KV cache ({n})."]
        out: dict[str, object] = {"version": pool.version, "lines": lines, "num_blocks": n // pool.block_size,
                                  "paged_kv_max_tokens": n, "allocated_bytes": allocated,
                                  "tokens_per_block": pool.block_size}
        if any(c.window for c in pool.caches):
            out["notes"] = ["TensorRT-LLM keeps one pool per attention window; the Allocated line sums them "
                            "and kvplan counts every layer at the full pool size"]
        return out
