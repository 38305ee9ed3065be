"""kvplan: a KV-cache memory planner for LLM inference.

The pure API (no typer, rich, hub or torch imports; each name is imported on first use)::

    >>> import kvplan
    >>> geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B")
    >>> kvplan.estimate(geometry, seq_len=8192).kv_cache_bytes
    1073741824
    >>> kvplan.estimate(geometry, seq_len="32k", batch=8, engine="vllm", tp=2).kv_cache_bytes_per_gpu
    17179869184
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kvplan.api import CapacityResult, EstimateResult, Geometry, capacity, estimate, load_geometry

#: The public API, imported from kvplan.api on first use (``import kvplan`` stays light).
_API = ("CapacityResult", "EstimateResult", "Geometry", "capacity", "estimate", "load_geometry")

__all__ = ["CapacityResult", "EstimateResult", "Geometry", "__version__", "capacity", "estimate", "load_geometry"]


def __getattr__(name: str) -> Any:
    if name == "capacity":  # the module kvplan.capacity, callable as kvplan.api.capacity
        import importlib

        return importlib.import_module("kvplan.capacity")
    if name in _API:
        from kvplan import api

        return getattr(api, name)
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
