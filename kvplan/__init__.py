"""kvplan: a KV-cache memory planner for LLM inference.

The pure API (no typer, rich, yaml, hub or torch imports)::

    >>> import kvplan
    >>> est = kvplan.estimate("meta-llama/Llama-3.1-8B", seq_len=8192)
    >>> est.kv_cache_bytes
    1073741824
"""

from __future__ import annotations

__version__ = "0.1.0"

from kvplan.api import estimate, load_geometry

__all__ = ["__version__", "estimate", "load_geometry"]
