"""Engine profiles: what each inference engine really allocates for a layer, read from its source.

One module per engine over the small base in :mod:`kvplan.engines.base`: ``ideal``, ``vllm``,
``sglang``, ``trtllm``, ``llamacpp`` (``llama.cpp``) and ``transformers`` (``hf-dynamic``,
``hf-static``). Use :func:`get_engine`. The numbers and the source versions they follow are listed
in the docs page docs/concepts/engines.md;
``calc.estimate(..., deployment=Deployment(engine="vllm", ...))`` is the usual entry point.
Adding an engine: one module with an ``EngineProfile`` subclass, and its class in ``_PROFILES`` below.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from kvplan.adjust import kv_heads_per_rank
from kvplan.engines.base import EngineProfile, SizingContext
from kvplan.errors import InputError

#: Engine name -> (module of this package, profile class): a command imports only the engines it uses.
_PROFILES = {
    "ideal": ("ideal", "IdealProfile"), "vllm": ("vllm", "VllmProfile"), "sglang": ("sglang", "SglangProfile"),
    "trtllm": ("trtllm", "TrtllmProfile"), "llama.cpp": ("llamacpp", "LlamaCppProfile"),
    "hf-dynamic": ("transformers", "HfDynamicProfile"), "hf-static": ("transformers", "HfStaticProfile"),
}
#: Names this package re-exports from its engine modules, imported on first use.
_LAZY = {cls: module for module, cls in _PROFILES.values()} | {
    "LLAMA_CPP_PAD": "llamacpp", "LLAMA_CPP_UBATCH": "llamacpp", "SGLANG_SWA_RATIO": "sglang",
    "TRTLLM_TOKENS_PER_BLOCK": "trtllm", "VLLM_BLOCK_SIZES": "vllm", "VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS": "vllm",
}


class _Profiles(Mapping[str, type[EngineProfile]]):
    """``ENGINES``: engine name -> profile class, each engine's module imported when its class is asked for."""

    def __init__(self) -> None:
        self._classes: dict[str, type[EngineProfile]] = {}

    def __getitem__(self, name: str) -> type[EngineProfile]:
        found = self._classes.get(name)
        if found is None:
            module, cls = _PROFILES[name]
            found = self._classes[name] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(_PROFILES)

    def __len__(self) -> int:
        return len(_PROFILES)

    def __contains__(self, name: object) -> bool:
        return name in _PROFILES


ENGINES: Mapping[str, type[EngineProfile]] = _Profiles()
ENGINE_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "trt-llm": "trtllm", "tensorrt-llm": "trtllm",
                  "hf": "hf-dynamic", "transformers": "hf-dynamic"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_engine(name: str) -> EngineProfile:
    """The profile for ``name`` (``ideal``, ``vllm``, ``sglang``, ``trtllm``, ``llama.cpp``,
    ``hf-dynamic``, ``hf-static``)."""
    key = str(name).strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    if key not in ENGINES:
        raise InputError(f"--engine {name!r} is not a known engine profile", f"use one of: {', '.join(ENGINES)}")
    return _profile(key)


@functools.cache
def _profile(name: str) -> EngineProfile:
    """One instance per engine: profiles hold no state (class attributes and methods only)."""
    return ENGINES[name]()


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
