"""kvplan: a KV-cache memory planner for LLM inference.

The public API (no typer, rich, Hub client or torch is imported with it)::

    >>> import kvplan
    >>> geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B")
    >>> kvplan.estimate(geometry, seq_len=8192).kv_cache_bytes
    1073741824
    >>> kvplan.estimate(geometry, seq_len="32k", batch=8, engine="vllm", tp=2).kv_cache_bytes_per_gpu
    17179869184
"""

# NOTE: first, so a module that reads kvplan.__version__ while the API loads finds it.
from kvplan.version import __version__

# isort: split
from kvplan.api import (
    CapacityResult,
    CompareResult,
    EstimateResult,
    Geometry,
    RecommendResult,
    capacity,
    compare,
    estimate,
    load_geometry,
    recommend,
)

__all__ = [
    "CapacityResult",
    "CompareResult",
    "EstimateResult",
    "Geometry",
    "RecommendResult",
    "__version__",
    "capacity",
    "compare",
    "estimate",
    "load_geometry",
    "recommend",
]
