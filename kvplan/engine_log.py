"""The ``engine_log`` block of ``kvplan capacity``: the lines an engine logs about its KV cache at
start-up, filled with kvplan's numbers, and those numbers as integers and floats.

Each engine module owns its line formats (``EngineProfile.log_figures``); this module only gathers
what they need from a :class:`~kvplan.capacity_types.Capacity` into a
:class:`~kvplan.engines.base.PoolFacts`. Keys are always present (null when the engine does not log
that figure), so the report's shape does not depend on the engine.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.adjust import stage_of_layer
from kvplan.calc import LayerGroup, estimate
from kvplan.capacity_types import Capacity
from kvplan.dtypes import KvDtype
from kvplan.engines import get_engine
from kvplan.engines.base import LogCache, PoolFacts, value_dtype
from kvplan.engines.vllm import kv_cache_group_count
from kvplan.specs import AttentionSpec, MLASpec

#: Every key of ``capacity.engine_log`` (the report schema lists the same).
ENGINE_LOG_KEYS: dict[str, object] = {
    "engine": None, "version": None, "lines": [],
    "available_kv_bytes": None, "num_blocks": None,
    "gpu_kv_cache_tokens": None, "max_concurrency": None, "num_kv_cache_groups": None,  # vLLM
    "bytes_per_block": None,
    "max_total_num_tokens": None, "kv_size_bytes": None, "latent_size_bytes": None,  # SGLang
    "index_size_bytes": None, "k_size_bytes": None, "v_size_bytes": None,
    "llama_caches": [], "buffers": [],                                              # llama.cpp
    "paged_kv_max_tokens": None, "allocated_bytes": None, "tokens_per_block": None,  # TensorRT-LLM
}


def pool_facts(cap: Capacity, priced: tuple[tuple[LayerGroup, ...], KvDtype] | None = None) -> PoolFacts:
    """The numbers of ``cap`` in the terms the engines log them (busiest rank and stage). ``priced``: the
    layer groups and KV dtype of ``cap``'s batch at its length when the caller has them (capacity's
    ``KvSizer``, the same groups ``calc.estimate`` gives), so the estimate is not run again."""
    geometry, dep = cap.geometry, cap.deployment
    n_layers = geometry.num_hidden_layers
    stage_of = stage_of_layer(n_layers, dep.pp, extra_to_last=get_engine(dep.engine).pp_extra_layers_last)
    busiest = max(range(dep.pp), key=lambda s: stage_of.count(s))
    on_rank = tuple(i for i in range(len(geometry.layers)) if stage_of[i % n_layers] == busiest)
    if priced is None:
        est = estimate(geometry, batch=cap.inputs.batch, seq_len=cap.max_model_len, kv_dtype=cap.inputs.kv_dtype,
                       deployment=dep)
        priced = est.groups, est.kv_dtype
    caches = tuple(_caches(*priced, cap))
    v_type = value_dtype(dep, priced[1]).name
    kinds: dict[str, int] = {}
    on = set(on_rank)
    for c in caches:
        if c.kind != "no_cache":
            kinds[c.kind] = kinds.get(c.kind, 0) + sum(1 for i in c.layer_indices if i in on)
    per_request = cap.num_blocks / cap.max_concurrency if cap.max_concurrency else float("inf")
    offload = cap.deployment.offload
    host = offload.layers if offload is not None and offload.layers is not None else 0
    split = getattr(cap.weights, "device_split", None) if cap.weights is not None else None
    start = split.gpu_start()[0] if split is not None and hasattr(split, "gpu_start") else 0
    return PoolFacts(
        version=cap.inputs.engine_version, available_kv_bytes=cap.budget.kv_bytes_per_gpu, num_blocks=cap.num_blocks,
        block_size=cap.block_size, blocks_per_request=per_request, num_kv_cache_groups=kv_cache_group_count(list(kinds.values())),
        max_model_len=cap.max_model_len, max_concurrency=cap.max_concurrency, max_tokens=cap.max_tokens,
        batch=cap.inputs.batch, kv_bytes_per_request=cap.kv_bytes_per_request,
        estimated_max_model_len=cap.max_context_len if cap.inputs.batch == 1 else 0, kv_dtype=cap.kv_dtype_name,
        layers_on_rank=on_rank, caches=caches, num_layers=n_layers, tensor_split=cap.inputs.tensor_split, pp=dep.pp,
        swa_ratio=get_engine(dep.engine).swa_pool_ratio(dep),
        v_dtype=v_type if v_type != cap.kv_dtype_name else None, swa_full_layers=_swa_full_layers(cap),
        host_kv_layers=host, gpu_layer_start=start, gpu_vendor=cap.inputs.gpu.vendor if cap.inputs.gpu else "",
    )


def _swa_full_layers(cap: Capacity) -> tuple[int, ...]:
    """With ``--no-window``/``--swa-full``: the layers that are windowed as the engine caches them (they keep
    their own cache object, sized like the base one: llama.cpp's ``using full-size SWA cache``)."""
    if not cap.deployment.no_window:
        return ()
    geometry = cap.geometry
    layers, _ = get_engine(cap.deployment.engine).cached_layers(list(geometry.layers), hf_cached_kv_heads=None,
                                                                model_type=geometry.model_type)
    return tuple(i for i, s in enumerate(layers) if s.kind in ("sliding_window", "chunked_local"))


def _caches(groups: tuple[LayerGroup, ...], kv_dtype: KvDtype, cap: Capacity) -> list[LogCache]:
    streams = 1 if cap.deployment.kv_unified else cap.inputs.batch
    out = []
    for g in groups:
        spec = g.rank_spec or g.spec
        total = g.bytes_per_token_per_rank if g.bytes_per_token_per_rank is not None else g.bytes_per_token
        if isinstance(spec, (AttentionSpec, MLASpec)):
            k, v = get_engine(cap.deployment.engine).kv_rows(spec, kv_dtype, cap.deployment)
            k, v = (total - v, v) if k + v != total else (k, v)
        else:
            k, v = total, 0
        out.append(LogCache(kind=g.spec.kind, layer_indices=g.layer_indices, cells=g.tokens_held, streams=streams,
                            k_bytes_per_token=k, v_bytes_per_token=v, window=g.spec.window, spec=spec))
    return out


def engine_log(cap: Capacity, priced: tuple[tuple[LayerGroup, ...], KvDtype] | None = None
               ) -> tuple[dict[str, object], list[str]]:
    """(the ``engine_log`` block, notes) for one capacity answer (``priced``: see :func:`pool_facts`)."""
    engine = get_engine(cap.deployment.engine)
    pool = pool_facts(cap, priced)
    figures = engine.log_figures(pool)
    notes = list(figures.pop("notes", []))  # type: ignore[call-overload]
    block = {**{k: list(v) if isinstance(v, list) else v for k, v in ENGINE_LOG_KEYS.items()}, "engine": engine.name,
             **figures}
    notes.extend(engine.log_notes(pool))
    return block, notes


def attach_engine_log(cap: Capacity, priced: tuple[tuple[LayerGroup, ...], KvDtype] | None = None) -> Capacity:
    """``cap`` with its ``engine_log`` block and the notes it brings (``priced``: see :func:`pool_facts`)."""
    block, notes = engine_log(cap, priced)
    return replace(cap, engine_log=block, notes=tuple(dict.fromkeys((*cap.notes, *notes))))
