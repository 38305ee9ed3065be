"""Engine profiles: what each inference engine really allocates for a layer, read from its source.

One module per engine over the small base in :mod:`kvplan.engines.base`: ``ideal``, ``vllm``,
``sglang``, ``trtllm``, ``llamacpp`` (``llama.cpp``) and ``transformers`` (``hf-dynamic``,
``hf-static``). Use :func:`get_engine`. The numbers and the source versions they follow are listed
in the README section "Engine profiles and deployment adjustments";
``calc.estimate(..., deployment=Deployment(engine="vllm", ...))`` is the usual entry point.
Adding an engine: one module with an ``EngineProfile`` subclass, and its class in ``ENGINES`` below.
"""

from __future__ import annotations

from kvplan.adjust import kv_heads_per_rank
from kvplan.engines.base import EngineProfile, SizingContext
from kvplan.engines.ideal import IdealProfile
from kvplan.engines.llamacpp import LLAMA_CPP_PAD, LLAMA_CPP_UBATCH, LlamaCppProfile
from kvplan.engines.sglang import SGLANG_SWA_RATIO, SglangProfile
from kvplan.engines.transformers import HfDynamicProfile, HfStaticProfile
from kvplan.engines.trtllm import TRTLLM_TOKENS_PER_BLOCK, TrtllmProfile
from kvplan.engines.vllm import VLLM_BLOCK_SIZES, VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, VllmProfile
from kvplan.errors import InputError

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




__all__ = [
    "ENGINES",
    "ENGINE_ALIASES",
    "LLAMA_CPP_PAD",
    "LLAMA_CPP_UBATCH",
    "SGLANG_SWA_RATIO",
    "TRTLLM_TOKENS_PER_BLOCK",
    "VLLM_BLOCK_SIZES",
    "VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "EngineProfile",
    "HfDynamicProfile",
    "HfStaticProfile",
    "IdealProfile",
    "LlamaCppProfile",
    "SglangProfile",
    "SizingContext",
    "TrtllmProfile",
    "VllmProfile",
    "get_engine",
    "kv_heads_per_rank",
]
