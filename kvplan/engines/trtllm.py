"""TensorRT-LLM: blocks of 32 tokens, KV heads split over ranks by ceiling division."""

from __future__ import annotations

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype, lookup_dtype
from kvplan.engines.base import FLOAT_DTYPES, FP8_DTYPES, EngineProfile, SizingContext, kv_row_bytes
from kvplan.specs import AttentionSpec, LayerSpec, MLASpec

#: TensorRT-LLM ``KvCacheConfig.tokens_per_block`` default.
TRTLLM_TOKENS_PER_BLOCK = 32


class TrtllmProfile(EngineProfile):
    name = "trtllm"
    title = "TensorRT-LLM"
    source = (
        "TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py KvCacheConfig, _torch/pyexecutor/_util.py @ d8ae02ca, "
        "_torch/modules/attention.py)"
    )
    default_block_size = TRTLLM_TOKENS_PER_BLOCK
    tp_rule = "ceil"
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "int8", "nvfp4")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if kv_dtype.name == "int8":
            notes.append("TensorRT-LLM int8 KV keeps one scale per tensor: 1 byte per value")
        return notes

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
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
