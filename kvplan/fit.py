"""What fits on a GPU: the capacity search. Pure: a geometry, weights, a GPU and a deployment in
(:class:`~kvplan.capacity_types.CapacityInputs`); a :class:`~kvplan.capacity_types.Capacity` out.

The KV budget per GPU is :mod:`kvplan.budget`'s (each engine's own rule).

Blocks follow vLLM's pool: uniform models ``num_blocks = budget // (page * layers)``; hybrid
models (sliding + full, attention + Mamba) group layers as ``get_kv_cache_groups`` does and
``num_blocks = budget // (page * group_size)``; concurrency divides by the blocks one request
needs summed over groups, so windowed layers count their real need, not a full context.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvplan.adjust import Deployment, pp_partitions, stage_of_layer
from kvplan.budget import Budget, budget_uncertainty, compute_budget, stage_budgets
from kvplan.calc import Estimate, KvSizer, LayerGroup, Priced, estimate
from kvplan.capacity_types import Capacity, CapacityInputs, StagePlan
from kvplan.dp import attention_tp, dp_notes
from kvplan.engine_log import attach_engine_log
from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.limits import MAX_BATCH, MAX_NUM_GPUS, MAX_PP, MAX_TP, check_limit
from kvplan.models import WeightsEstimate, serve_weights
from kvplan.units import format_bytes

#: Per pipeline stage, the KV bytes of its rank with the least room; None: one budget for every stage.
Rooms = tuple[int, ...] | None

#: TP sizes tried for ``min_tp``.
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


# ---- KV views per engine --------------------------------------------------------------------
class _Kv:
    """The KV function of one deployment on the busiest GPU.

    ``est(batch, tokens)`` prices the layer groups laid out once by a :class:`~kvplan.calc.KvSizer`
    (the numbers of ``calc.estimate`` for that batch and length, without re-running it), so the searches
    below cost one engine formula per layer group and probe."""

    def __init__(self, geometry: ModelGeometry, dep: Deployment, kv_dtype: str) -> None:
        self.geometry, self.dep, self.kv_dtype = geometry, dep, kv_dtype
        self.engine = get_engine(dep.engine)
        self._sizer: KvSizer | None = None
        self._cache: dict[tuple[int, int], Priced] = {}
        self._stage_counts: list[list[tuple[int, int]]] | None = None
        self._block_size: int | None = None
        self._pools: dict[tuple[int, int, Rooms], tuple[int, int, int, list[str]]] = {}

    def full(self, batch: int, tokens: int) -> Estimate:
        """The estimate's notes, dtype and its source (its adjustments are not needed here)."""
        return estimate(self.geometry, batch=batch, seq_len=tokens, kv_dtype=self.kv_dtype, deployment=self.dep,
                        adjustments=False)

    @property
    def sizer(self) -> KvSizer:
        if self._sizer is None:
            self._sizer = KvSizer(self.geometry, kv_dtype=self.kv_dtype, deployment=self.dep)
        return self._sizer

    def est(self, batch: int, tokens: int) -> Priced:
        key = (batch, tokens)
        priced = self._cache.get(key)
        if priced is None:
            if len(self._cache) >= 1024:  # NOTE: bounded, as the views are: a long sweep keeps no more
                self._cache.clear()
            priced = self._cache[key] = self.sizer.price(batch, tokens)
        return priced

    def need(self, batch: int, tokens: int) -> int:
        return self.est(batch, tokens).per_gpu_bytes

    # stages ---------------------------------------------------------------------------------
    def _stages(self, est: Priced) -> list[list[tuple[LayerGroup, int]]]:
        """Per PP stage: (group, layers of the group on that stage)."""
        if self._stage_counts is None:  # which groups each stage holds does not change with tokens or batch
            num_layers = self.geometry.num_hidden_layers
            stage_of = stage_of_layer(num_layers, self.dep.pp, extra_to_last=self.engine.pp_extra_layers_last)
            stages: list[dict[int, int]] = [{} for _ in range(self.dep.pp)]
            for gi, group in enumerate(est.groups):
                for index in group.layer_indices:
                    layer = index % num_layers if len(self.geometry.layers) > num_layers else index
                    stages[stage_of[layer]][gi] = stages[stage_of[layer]].get(gi, 0) + 1
            self._stage_counts = [list(s.items()) for s in stages]
        return [[(est.groups[gi], n) for gi, n in s] for s in self._stage_counts]

    @staticmethod
    def _per_token(group: LayerGroup, tp: int) -> int:
        return group.bytes_per_token // tp

    # vLLM pool -----------------------------------------------------------------------------------
    def block_size(self) -> int:
        if self._block_size is None:
            self._block_size = self._find_block_size()
        return self._block_size

    def _find_block_size(self) -> int:
        one = self.est(1, 1)
        sizes = []
        for g in one.groups:
            kind = g.spec.kind
            # cross-attention holds the encoder length from the first token: it does not show the block size
            if kind in ("full_attention", "mla", "chunked_local"):
                sizes.append(g.tokens_held)
            elif kind == "sliding_window":
                sizes.append(g.tokens_held // 2 if self.engine.swa_extra_block else g.tokens_held)
        if not sizes:
            return 1
        return self.engine.pool_block_size(sizes, self.dep)

    def vllm_pool(self, budget: int, tokens: int, rooms: Rooms = None) -> tuple[int, int, int, list[str]]:
        """(num_blocks, blocks one request needs, block size, notes), min over PP stages. ``rooms``: per stage, the
        KV bytes of its rank with the least room (stages that differ); None: ``budget`` for every stage."""
        key = (budget, tokens, rooms)
        pool = self._pools.get(key)
        if pool is None:
            if len(self._pools) >= 1024:
                self._pools.clear()
            pool = self._pools[key] = self._vllm_pool(budget, tokens, rooms)
        return pool[0], pool[1], pool[2], list(pool[3])

    def _vllm_pool(self, budget: int, tokens: int, rooms: Rooms) -> tuple[int, int, int, list[str]]:
        stages, notes = self.stage_pools(budget, tokens, rooms)
        bs = self.block_size()
        if not stages:
            return 0, 1, bs, notes
        # NOTE: vLLM V1 get_kv_cache_configs gives every worker the fewest blocks of any (V0: min num_gpu_blocks).
        _index, num_blocks, per_request = min(stages, key=lambda s: (s[1] / s[2], s[0]))
        return num_blocks, per_request, bs, notes

    def stage_pools(self, budget: int, tokens: int, rooms: Rooms = None) -> tuple[list[tuple[int, int, int]], list[str]]:
        """Per pipeline stage holding cache layers: (stage, num_blocks, blocks one request needs), each stage
        sized by its own room (``rooms``, else ``budget``) and its own layers; and the notes."""
        one = self.est(1, tokens)
        base = self.est(1, 1)
        bs = self.block_size()
        out: list[tuple[int, int, int]] = []
        notes: list[str] = []
        for index, (stage, stage_base) in enumerate(zip(self._stages(one), self._stages(base))):
            stage_budget = rooms[index] if rooms else budget
            pages: list[int] = []
            types: list[tuple[int, int]] = []  # (layers, blocks per request)
            for (group, count), (group1, _c) in zip(stage, stage_base):
                if group.spec.kind == "no_cache" or not (group.layer_bytes_per_rank or group.tokens_held):
                    continue
                if group.spec.kind == "state":
                    blocks = self.engine.state_pages(self.dep)
                    page = (group1.layer_bytes_per_rank or 0) // blocks
                else:
                    page = bs * self._per_token(group1, self.dep.tp)
                    blocks = -(-group.tokens_held // bs)
                pages.append(page)
                types.append((count, blocks))
            if not types:
                continue
            if len(set(pages)) != 1:
                notes.append("layers have different page sizes; vLLM would unify them, kvplan sizes blocks by bytes")
                per_block = sum(p * c for p, (c, _b) in zip(pages, types))
                num_blocks = stage_budget // per_block
                per_request = max(b for _c, b in types)
            else:
                counts = [c for c, _b in types]
                lo, hi = min(counts), max(counts)
                group_size = hi if hi < 1.5 * lo else lo
                if len(types) > 1:
                    padding = sum(-(-c // group_size) * group_size - c for c in counts)
                    notes.append(
                        f"vLLM hybrid allocator: {len(types)} layer kinds grouped {group_size} layers per group"
                        + (f" ({padding} padding layers)" if padding else "")
                    )
                num_blocks = stage_budget // (pages[0] * group_size)
                per_request = sum(-(-c // group_size) * b for c, b in types)
            out.append((index, max(num_blocks, 0), per_request))
        return out, list(dict.fromkeys(notes))

    def tokens_per_budget(self, budget: int) -> int:
        """Tokens the pool holds counting every token-caching layer (the engine's token line)."""
        one = self.est(1, 1)
        ratio = self.engine.swa_pool_ratio(self.dep)
        windowed = any(g.spec.kind in ("sliding_window", "chunked_local") for g in one.groups)
        full = any(g.spec.kind in ("full_attention", "mla") for g in one.groups)
        worst = 0.0
        for stage in self._stages(one):
            per_token = 0.0
            for group, count in stage:
                if not group.spec.grows_with_tokens:
                    continue
                weight = ratio if (windowed and full and group.spec.kind in ("sliding_window", "chunked_local")) else 1.0
                per_token += weight * self._per_token(group, self.dep.tp) * count
            worst = max(worst, per_token)
        if not worst:
            return 0
        tokens = int(budget // worst)
        bs = self.block_size()
        return tokens // bs * bs


# ---- the plan ----------------------------------------------------------------------------------
def plan_capacity(geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs) -> Capacity:
    """Every capacity answer for one model, GPU and deployment."""
    _validate(inputs)
    notes: list[str] = []
    engine = get_engine(inputs.engine)
    if inputs.max_model_len is not None:
        tokens, tokens_source = inputs.max_model_len, "--max-model-len"
    elif engine.model_max_len(geometry)[0] is not None:
        model_tokens, model_source = engine.model_max_len(geometry)
        tokens = model_tokens or 0
        tokens_source = f"model maximum context ({model_source} = {tokens:,})"
    else:
        tokens, tokens_source = 0, ""  # no length named: sized from memory below (_size_without_max)
    tp, pp = inputs.tp, inputs.pp
    if inputs.num_gpus is not None:
        if tp * pp > inputs.num_gpus:
            raise InputError(
                f"--tp {tp} x --pp {pp} = {tp * pp} GPUs, more than --num-gpus {inputs.num_gpus}",
                f"use --num-gpus {tp * pp}, or a smaller --tp/--pp",
            )
        if inputs.num_gpus % (tp * pp):
            notes.append(f"--num-gpus {inputs.num_gpus} is not a multiple of tp x pp = {tp * pp}; spare GPUs idle")
        replicas = inputs.num_gpus // (tp * pp)
        if replicas > 1:
            notes.append(
                f"{inputs.num_gpus} GPUs = {replicas} data-parallel replicas of tp {tp} x pp {pp}: "
                f"the answers are per replica; total concurrency is {replicas}x"
            )
    checkpoint_dtype = weights.dtype if weights is not None and weights.counted else None
    quantised_from = getattr(weights.quantisation, "checkpoint_dtype", None) if weights is not None else None
    if isinstance(quantised_from, str) and quantised_from:  # llama.cpp's quant rule: a GGUF made from the checkpoint
        checkpoint_dtype = quantised_from
    if weights is not None:
        weights, serve_note = serve_weights(weights, engine=engine, dtype=inputs.dtype)
        if serve_note:
            notes.append(serve_note)
    caching, caching_notes = engine.resolve_prefix_caching(inputs.enable_prefix_caching, inputs.engine_version,
                                                           geometry.layers)
    inputs = replace(inputs, enable_prefix_caching=caching)
    notes.extend(caching_notes)
    dep = _deployment(inputs, attention_tp(inputs, tp))
    notes.extend(dp_notes(geometry, inputs, tp))
    views: _Views = {}
    kv = _kv_view(views, geometry, dep, inputs.kv_dtype)
    state_only = sized = False
    if not tokens:
        sized = True
        tokens, tokens_source, state_only, sized_note = _size_without_max(kv, geometry, weights, inputs)
        notes.append(sized_note)
    est_one = kv.full(1, tokens)
    notes.extend(n for n in est_one.notes if n not in geometry.notes)
    notes.extend(geometry.notes)

    budget = compute_budget(inputs, weights, tp=tp, pp=pp, tokens=tokens)
    staged = stage_budgets(inputs, weights, tp=tp, pp=pp, tokens=tokens, num_layers=geometry.num_hidden_layers)
    rooms: Rooms = None
    if staged is not None:
        budget, rooms = _stage_budget(kv, staged[1], tokens)
    notes.extend(budget_uncertainty(engine.name, inputs, budget))
    avail = max(budget.kv_bytes_per_gpu, 0)
    per_request = kv.need(1, tokens)
    needed = kv.need(inputs.batch, tokens)

    if inputs.kv_budget_per_rank is not None and pp > 1:
        ranks = inputs.kv_budget_per_rank
        rooms = tuple(min(ranks[stage * tp:(stage + 1) * tp]) for stage in range(pp))
    pool = _pool(kv, avail, tokens, per_request, rooms)
    stage_plans, limiting_rank = _stage_plans(kv, inputs, staged, avail, tokens, rooms)
    spread = None if inputs.kv_budget_bytes is not None else _spread(kv, budget, avail, tokens, per_request, rooms)
    if limiting_rank is not None and stage_plans is not None and len(stage_plans) > 1:
        notes.append(_stages_note(stage_plans, limiting_rank, engine.stage_budgets))
    notes.extend(pool.notes)
    bs, num_blocks, max_tokens = pool.block_size, pool.num_blocks, pool.max_tokens
    concurrency, requests = pool.max_concurrency, pool.requests
    fits = pool.fits
    is_fit = fits(inputs.batch, tokens)

    limit = max(tokens, engine.model_max_len(geometry)[0] or 0)
    max_context = _largest(lambda t: fits(inputs.batch, t), hi_start=limit, cap=limit)
    context_limit = "model maximum" if max_context >= limit else "memory"
    if sized:  # no maximum named: memory sized the length, or (a fixed state) no length limits it
        context_limit = "any length" if state_only else "memory"
    if context_limit == "model maximum" and max_context:
        notes.append(f"{inputs.batch} sequence(s) fit the whole searched context ({limit:,} tokens)")

    # the GPUs one request needs are decided by the weights against the GPU's memory: unknown without a GPU
    min_tp, min_gpus = (None, None) if inputs.gpu is None else _min_parallel(geometry, weights, inputs, tokens, views)
    if inputs.gpu is not None and inputs.kv_budget_bytes is not None and inputs.kv_budget_bytes > inputs.gpu.memory_bytes:
        notes.append(f"WARNING: --kv-budget {format_bytes(inputs.kv_budget_bytes)} is more than the whole "
                     f"{_gpu_name(inputs)} ({format_bytes(inputs.gpu.memory_bytes)}): no engine can allocate it")

    decode_bytes = seconds = tok_s = None
    if inputs.gpu is None:
        notes.append("no GPU given (--kv-budget only): the decode floor and the weights-vs-memory check are left out")
    elif weights is not None:
        decode_bytes, seconds = _decode_floor(weights, inputs, needed)
        if seconds is not None:
            tok_s = inputs.batch / seconds if seconds else None
        else:
            notes.append("no GPU bandwidth (pass --gpu-bandwidth): the decode floor is not computed")
    else:
        notes.append("weights unknown: the decode floor is not computed")

    suggestions = () if is_fit else tuple(
        _suggest(kv, inputs, tokens, max_context, requests, min_tp, budget, needed, avail, engine.name, min_gpus)
    )
    cap = Capacity(
        geometry=geometry, inputs=inputs, deployment=dep, kv_dtype_name=est_one.kv_dtype.name,
        kv_dtype_source=est_one.kv_dtype_source, max_model_len=tokens, max_model_len_source=tokens_source,
        weights=weights, checkpoint_dtype=checkpoint_dtype, budget=budget, fits=is_fit, block_size=bs, num_blocks=num_blocks, max_tokens=max_tokens,
        max_concurrency=concurrency, max_concurrent_requests=requests, max_context_len=max_context,
        max_context_limit=context_limit, min_tp=min_tp, min_num_gpus=min_gpus, kv_bytes_per_request=per_request,
        kv_bytes_needed=needed, decode_bytes_per_step=decode_bytes, decode_floor_seconds=seconds,
        decode_tokens_per_s=tok_s, suggestions=suggestions, notes=tuple(dict.fromkeys(notes)),
        stages=stage_plans, limiting_rank=limiting_rank,
        kv_bytes_range=spread[0] if spread else None, num_blocks_range=spread[1] if spread else None,
        max_concurrency_range=spread[2] if spread else None,
    )
    return attach_engine_log(cap, (kv.est(inputs.batch, tokens).groups, kv.sizer.kv_dtype))


def _spread(kv: _Kv, budget: Budget, avail: int, tokens: int, per_request: int, rooms: Rooms,
            ) -> tuple[tuple[int, int], tuple[int, int], tuple[float, float]] | None:
    """(KV bytes, blocks, max concurrency) at the two ends of a derived budget's reach: less what the engine
    measures beyond kvplan's terms (``shortfall_bytes``), more on its other kernel paths (``uncertainty_bytes``)."""
    less, more = budget.shortfall_bytes or 0, budget.uncertainty_bytes or 0
    if not (less or more):
        return None
    ends = []
    for delta in (-less, more):
        shifted = None if rooms is None else tuple(max(room + delta, 0) for room in rooms)
        ends.append((max(avail + delta, 0), _pool(kv, max(avail + delta, 0), tokens, per_request, shifted)))
    (lo, low), (hi, high) = ends
    return (lo, hi), (low.num_blocks, high.num_blocks), (low.max_concurrency, high.max_concurrency)


def _stage_budget(kv: _Kv, budgets: tuple[Budget, ...], tokens: int) -> tuple[Budget, Rooms]:
    """(the budget that sizes the pool, each stage's room) when each pipeline stage has its own: a stage-budget
    engine (vLLM) sizes each stage's pool by its own room and layers and keeps the fewest blocks, so the limiting
    stage's budget; otherwise (SGLang) every rank gets the least room of all (no per-stage rooms)."""
    least = min(budgets, key=lambda b: b.kv_bytes_per_gpu)
    if not kv.engine.stage_budgets:
        return least, None
    rooms = tuple(max(b.kv_bytes_per_gpu, 0) for b in budgets)
    stages, _notes = kv.stage_pools(0, tokens, rooms)
    if not stages:
        return least, rooms
    index, _blocks, _per = min(stages, key=lambda s: (s[1] / s[2], s[0]))
    return budgets[index], rooms


def _stage_plans(kv: _Kv, inputs: CapacityInputs, staged: tuple[tuple[int, ...], tuple[Budget, ...]] | None,
                 avail: int, tokens: int, rooms: Rooms) -> tuple[tuple[StagePlan, ...] | None, int | None]:
    """Each pipeline stage's ranks, room and blocks, and the rank that sizes the pool; (None, None) when every rank
    is alike (one stage, one budget)."""
    tp, pp, per_rank = inputs.tp, inputs.pp, inputs.kv_budget_per_rank
    if (pp == 1 or kv.engine.splits_layers) and per_rank is None:
        return None, None  # NOTE: llama.cpp splits layers and buffers per device by its own rule (-ts)
    layers = staged[0] if staged is not None else tuple(
        pp_partitions(kv.geometry.num_hidden_layers, pp, extra_to_last=kv.engine.pp_extra_layers_last))
    pools = {index: (blocks, per) for index, blocks, per in kv.stage_pools(avail, tokens, rooms)[0]} \
        if kv.engine.block_pool else {}
    plans = []
    for stage in range(pp):
        ranks = tuple(range(stage * tp, (stage + 1) * tp))
        if per_rank is not None:
            low = min(ranks, key=lambda r: per_rank[r])
            room = per_rank[low]
        else:
            low = ranks[0]
            room = max(staged[1][stage].kv_bytes_per_gpu, 0) if staged is not None else avail
        plans.append(StagePlan(
            stage=stage, ranks=ranks, num_layers=layers[stage],
            weights_bytes_per_gpu=staged[1][stage].weights_bytes_per_gpu if staged is not None else None,
            kv_budget_bytes=room, low_rank=low, num_blocks=pools[stage][0] if stage in pools else None))
    if pools:
        limiting = min(pools, key=lambda s: (pools[s][0] / pools[s][1], s))
    else:
        limiting = min(range(pp), key=lambda s: (plans[s].kv_budget_bytes, s))
    return tuple(plans), plans[limiting].low_rank


def _stages_note(plans: tuple[StagePlan, ...], rank: int, own_budgets: bool) -> str:
    """One line: each stage's layers and room, and which rank sizes the pool and why."""
    parts = [f"stage {p.stage}: {p.num_layers} layers, {format_bytes(p.kv_budget_bytes)}"
             + (f" ({p.num_blocks:,} blocks)" if p.num_blocks is not None else "") for p in plans]
    rule = ("each stage sizes blocks by its own room and layers and vLLM keeps the fewest (V1 get_kv_cache_configs, "
            "V0 min num_gpu_blocks)" if own_budgets else
            "every rank gets the least free memory of all (SGLang get_available_gpu_memory(distributed=True))")
    return f"pipeline stages: {'; '.join(parts)}: rank {rank} sizes the pool ({rule})"


#: The KV views one capacity call builds, per deployment and KV dtype: its searches (max context, max batch,
#: minimum TP) probe the same few deployments many times.
_Views = dict[tuple[Deployment, str], _Kv]
#: What a sweep keeps across :func:`screen_capacity` calls of one model and engine.
KvViews = _Views


def _kv_view(views: _Views, geometry: ModelGeometry, dep: Deployment, kv_dtype: str) -> _Kv:
    view = views.get((dep, kv_dtype))
    if view is None:
        view = views[(dep, kv_dtype)] = _Kv(geometry, dep, kv_dtype)
    return view


def _deployment(inputs: CapacityInputs, tp: int) -> Deployment:
    return Deployment(engine=get_engine(inputs.engine).name, tp=tp, pp=inputs.pp, block_size=inputs.block_size,
                      max_num_batched_tokens=inputs.max_num_batched_tokens, kv_unified=inputs.kv_unified,
                      ubatch_size=inputs.ubatch_size, cache_type_v=inputs.cache_type_v, v_row_elems=inputs.v_row_elems,
                      no_window=inputs.no_window, offload=inputs.offload,
                      enable_prefix_caching=bool(inputs.enable_prefix_caching), dtype=inputs.dtype)


def _validate(inputs: CapacityInputs) -> None:
    for name, value in (("--gpu-memory-utilization", inputs.gpu_memory_utilization),
                        ("--mem-fraction-static", inputs.mem_fraction_static),
                        ("--free-gpu-memory-fraction", inputs.free_gpu_memory_fraction)):
        if value is not None and not 0 < value <= 1:
            raise InputError(f"{name} must be in (0, 1], got {value}", f"e.g. {name} 0.9")
    for name, value in (("--tp", inputs.tp), ("--pp", inputs.pp), ("--batch", inputs.batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}", f"e.g. {name} 2")
    if inputs.num_gpus is not None and inputs.num_gpus < 1:
        raise InputError(f"--num-gpus must be a positive integer, got {inputs.num_gpus}", "e.g. --num-gpus 8")
    check_limit(inputs.num_gpus, MAX_NUM_GPUS, "--num-gpus")
    check_limit(inputs.tp, MAX_TP, "--tp")
    check_limit(inputs.pp, MAX_PP, "--pp")
    check_limit(inputs.batch, MAX_BATCH, "--batch")
    if isinstance(inputs.dp, bool) or not isinstance(inputs.dp, int) or inputs.dp < 1:
        raise InputError(f"--dp must be a positive integer, got {inputs.dp!r}", "e.g. --dp 2")
    # NOTE: DP ranks each hold tp x pp GPUs, except SGLang DP attention: its ranks split the --tp GPUs.
    ranks_gpus = inputs.tp * inputs.pp * (1 if get_engine(inputs.engine).dp_splits_tp(inputs.enable_dp_attention)
                                          else inputs.dp)
    check_limit(inputs.dp, MAX_NUM_GPUS, "--dp")
    check_limit(ranks_gpus, MAX_NUM_GPUS, f"--tp {inputs.tp} x --pp {inputs.pp} x --dp {inputs.dp} GPUs")
    if inputs.num_gpus is not None and inputs.dp > 1 and ranks_gpus > inputs.num_gpus:
        raise InputError(
            f"--dp {inputs.dp} ranks of --tp {inputs.tp} x --pp {inputs.pp} need {ranks_gpus:,} GPUs, more than "
            f"--num-gpus {inputs.num_gpus}", f"use --num-gpus {ranks_gpus}, or a smaller --dp")
    if inputs.gpu is None:
        if inputs.kv_budget_bytes is None:
            raise InputError("no GPU given", "pass --gpu NAME, --gpu-mem SIZE, or --kv-budget SIZE (KV bytes per GPU)")
    elif inputs.gpu.memory_bytes <= 0:
        raise InputError("the GPU has no memory", "pass --gpu-mem, e.g. --gpu-mem 80GiB")


def _size_without_max(
    kv: _Kv, geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs
) -> tuple[int, str, bool, str]:
    """(length, its source, state only?, note) when neither the config nor --max-model-len names a length.

    A model whose per-request cache does not grow with tokens (state only: Mamba) gets the same answers at
    every length, so they are given at 1 token; otherwise the length is the longest single request whose KV
    fits the KV room (the pool's reach), never an assumed default."""
    if kv.need(1, 1 << 20) == kv.need(1, 1):
        return 1, "none needed (the per-request state does not grow with length)", True, (
            "the config names no maximum context: the cache is a fixed state per request, so the answers "
            "hold at any length; pass --max-model-len to plan one")
    tokens = 1
    for _ in range(3):  # the engine's budget may depend on the length: settle it
        budget = compute_budget(inputs, weights, tp=inputs.tp, pp=inputs.pp, tokens=tokens)
        avail = max(budget.kv_bytes_per_gpu, 0)
        longest = _largest(functools.partial(_fits_room, kv, avail), hi_start=4096)
        if not longest:
            return 1, "1 token: the config names no maximum context and no KV fits", False, (
                "no length given (the config names no maximum context, no --max-model-len) and not one token of "
                "KV fits the KV room: the answers are for a 1-token request; pass --max-model-len to plan a "
                "real length")
        if longest == tokens:
            break
        tokens = longest
    return tokens, f"longest request that fits the KV room ({tokens:,}): the config names no maximum context", \
        False, (f"no length given (the config names no maximum context, no --max-model-len): sized at the longest "
                f"single request whose KV fits, {tokens:,} tokens; pass --max-model-len to plan another length")


def _fits_room(kv: _Kv, room: int, tokens: int) -> bool:
    """One request of ``tokens`` tokens fits ``room`` KV bytes."""
    return kv.need(1, tokens) <= room


@dataclass(frozen=True, kw_only=True, slots=True)
class Pool:
    """The KV pool of one deployment and budget, by the engine's rule: what `capacity` reports and what
    ``fits`` asks (the same code for both)."""

    block_size: int
    num_blocks: int
    max_tokens: int
    max_concurrency: float
    requests: int
    """Requests of the planned length the pool holds at once (whole requests)."""
    notes: tuple[str, ...]
    fits: Callable[[int, int], bool]
    """``fits(batch, tokens)``: ``batch`` requests of ``tokens`` tokens fit the pool."""


def _pool(kv: _Kv, avail: int, tokens: int, per_request: int, rooms: Rooms = None) -> Pool:
    """The pool ``avail`` KV bytes per GPU make for requests of ``tokens`` tokens (``per_request`` bytes each);
    ``rooms``: each pipeline stage's own KV bytes (a block pool sizes each stage by its own)."""
    if kv.engine.block_pool:
        num_blocks, blocks_per_request, bs, pool_notes = kv.vllm_pool(avail, tokens, rooms)

        def fits(batch: int, t: int) -> bool:
            nb, per, _bs, _n = kv.vllm_pool(avail, t, rooms)
            return avail > 0 and batch * per <= nb

        return Pool(block_size=bs, num_blocks=num_blocks, max_tokens=num_blocks * bs,
                    max_concurrency=num_blocks / blocks_per_request if blocks_per_request else 0.0,
                    requests=int(num_blocks // blocks_per_request) if blocks_per_request else 0,
                    notes=tuple(pool_notes), fits=fits)
    bs = kv.block_size()
    max_tokens = kv.tokens_per_budget(avail)
    concurrency = avail / per_request if per_request else 0.0

    def fits_bytes(batch: int, t: int) -> bool:
        return avail > 0 and kv.need(batch, t) <= avail

    guess = int(concurrency)  # bytes grow about linearly with requests: the answer is usually avail // per_request
    if guess >= 1 and fits_bytes(guess, tokens) and not fits_bytes(guess + 1, tokens):
        requests = guess  # monotone: the largest that fits is the one whose successor does not
    else:
        requests = _largest(lambda b: fits_bytes(b, tokens), hi_start=max(1, guess + 1), cap=MAX_BATCH.maximum)
    return Pool(block_size=bs, num_blocks=max_tokens // bs, max_tokens=max_tokens, max_concurrency=concurrency,
                requests=requests, notes=(), fits=fits_bytes)


def _decode_floor(weights: WeightsEstimate, inputs: CapacityInputs, needed: int) -> tuple[int, float | None]:
    """(bytes one decode step reads on the busiest GPU, the floor in seconds): the weights the batch touches
    plus its KV, over the GPU's bandwidth, once per pipeline stage; None without a bandwidth."""
    decode_bytes = weights.read_bytes_per_step(batch=inputs.batch, tp=inputs.tp, pp=inputs.pp) + needed
    bandwidth = inputs.gpu.bandwidth_bytes_per_s if inputs.gpu is not None else 0
    if not bandwidth:
        return decode_bytes, None
    return decode_bytes, decode_bytes * inputs.pp / bandwidth


@dataclass(frozen=True, kw_only=True, slots=True)
class Screen:
    """`capacity`'s answer to one question, whether ``batch`` requests of ``max_model_len`` tokens fit, without
    its searches (longest context, minimum TP), notes and engine log: what a sweep over deployments asks of
    each candidate (`kvplan recommend`), by the same budget, pool and decode-floor code as
    :func:`plan_capacity`."""

    budget: Budget
    fits: bool
    max_concurrent_requests: int
    max_concurrency: float
    kv_bytes_needed: int
    decode_floor_seconds: float | None


def screen_capacity(geometry: ModelGeometry, weights: WeightsEstimate, inputs: CapacityInputs,
                    views: _Views | None = None) -> Screen:
    """:func:`plan_capacity`'s fit at ``inputs.max_model_len`` (required) for ``inputs.batch`` requests.
    ``views``: KV views kept by the caller across calls of one model and engine (the KV of a deployment does
    not depend on the GPU, so a sweep over GPUs prices it once). Raises what capacity raises."""
    _validate(inputs)
    if inputs.max_model_len is None:
        raise InputError("screen_capacity needs a length", "pass --max-model-len")
    engine = get_engine(inputs.engine)
    tokens = inputs.max_model_len
    weights, _note = serve_weights(weights, engine=engine, dtype=inputs.dtype)
    caching, _notes = engine.resolve_prefix_caching(inputs.enable_prefix_caching, inputs.engine_version, geometry.layers)
    inputs = replace(inputs, enable_prefix_caching=caching)
    dep = _deployment(inputs, attention_tp(inputs, inputs.tp))
    kv = _kv_view(views if views is not None else {}, geometry, dep, inputs.kv_dtype)
    budget = compute_budget(inputs, weights, tp=inputs.tp, pp=inputs.pp, tokens=tokens)
    staged = stage_budgets(inputs, weights, tp=inputs.tp, pp=inputs.pp, tokens=tokens,
                           num_layers=geometry.num_hidden_layers)
    rooms: Rooms = None
    if staged is not None:
        budget, rooms = _stage_budget(kv, staged[1], tokens)
    avail = max(budget.kv_bytes_per_gpu, 0)
    needed = kv.need(inputs.batch, tokens)
    pool = _pool(kv, avail, tokens, kv.need(1, tokens), rooms)
    _bytes, seconds = _decode_floor(weights, inputs, needed)
    return Screen(budget=budget, fits=pool.fits(inputs.batch, tokens), max_concurrent_requests=pool.requests,
                  max_concurrency=pool.max_concurrency, kv_bytes_needed=needed, decode_floor_seconds=seconds)


def _largest(ok: Callable[[int], bool], *, hi_start: int, cap: int | None = None) -> int:
    """Largest n >= 1 with ok(n) (0 if none): exponential search up from hi_start, then bisection.

    ``ok`` must be monotone (true up to some n, false after). With ``cap`` the answer is at most cap."""
    check = ok
    if not check(1):
        return 0
    lo, hi = 1, max(2, hi_start)
    while check(hi):
        if cap is not None and hi >= cap:
            return cap
        lo, hi = hi, hi * 2 if cap is None else min(hi * 2, cap)
        if cap is None and hi > 1 << 40:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _min_parallel(
    geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs, tokens: int, views: _Views
) -> tuple[int | None, int | None]:
    """Smallest TP (and GPU count, tp x pp) on which one request at max_model_len fits."""
    if get_engine(inputs.engine).splits_layers:
        for pp in range(1, geometry.num_hidden_layers + 1):
            if _fits_one(geometry, weights, inputs, tokens, views, tp=1, pp=pp):
                return 1, pp
            if pp >= 64:
                break
        return None, None
    for tp in TP_CANDIDATES:
        try:
            if _fits_one(geometry, weights, inputs, tokens, views, tp=tp, pp=inputs.pp):
                return tp, tp * inputs.pp
        except InputError:
            continue
    return None, None


def _fits_one(geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs, tokens: int,
              views: _Views, *, tp: int, pp: int) -> bool:
    trial = replace(inputs, tp=tp, pp=pp, batch=1)
    dep = Deployment(engine=get_engine(inputs.engine).name, tp=tp, pp=pp, block_size=inputs.block_size,
                     max_num_batched_tokens=inputs.max_num_batched_tokens, v_row_elems=inputs.v_row_elems,
                     enable_prefix_caching=bool(inputs.enable_prefix_caching), dtype=inputs.dtype)
    kv = _kv_view(views, geometry, dep, inputs.kv_dtype)
    chosen = compute_budget(trial, weights, tp=tp, pp=pp, tokens=tokens)
    rooms: Rooms = None
    staged = stage_budgets(trial, weights, tp=tp, pp=pp, tokens=tokens, num_layers=geometry.num_hidden_layers)
    if staged is not None:  # NOTE: each stage's own weights and room, as capacity sizes the pool
        chosen, rooms = _stage_budget(kv, staged[1], tokens)
    budget = chosen.kv_bytes_per_gpu
    if budget <= 0:
        return False
    if get_engine(dep.engine).block_pool:
        num_blocks, per_request, _bs, _n = kv.vllm_pool(budget, tokens, rooms)
        return per_request <= num_blocks
    return kv.need(1, tokens) <= budget


def _gpu_name(inputs: CapacityInputs) -> str:
    return inputs.gpu.name if inputs.gpu is not None else "the GPU"


def _suggest(kv: _Kv, inputs: CapacityInputs, tokens: int, max_context: int, requests: int, min_tp: int | None,
             budget: Budget, needed: int, avail: int, engine: str, min_gpus: int | None = None) -> list[str]:
    out = []
    # an engine that splits layers over GPUs (llama.cpp) needs more of them, not tensor parallelism
    splits = get_engine(engine).splits_layers
    more = f"--pp {min_gpus}" if splits else f"--tp {min_tp}"
    if budget.kv_bytes_per_gpu <= 0:
        out.append(
            f"the weights ({format_bytes(budget.weights_bytes_per_gpu or 0)} per GPU) and reserve leave no KV memory "
            f"on {_gpu_name(inputs)}: use more GPUs ({more})" if min_tp else
            f"the weights and reserve leave no KV memory on {_gpu_name(inputs)}: use a quantised checkpoint or more GPUs"
        )
        return out
    if max_context:
        out.append(f"--max-model-len {max_context} (the longest context {inputs.batch} sequence(s) fit)")
    if requests and requests < inputs.batch:
        out.append(f"--batch {requests} (the most requests of {tokens:,} tokens that fit)")
    smaller = get_engine(engine).dtype_suggestion(kv.sizer.kv_dtype)
    if smaller:
        out.append(smaller)
    if splits and min_gpus and min_gpus > inputs.pp:
        out.append(f"--pp {min_gpus} (the fewest GPUs, layers split, on which one {tokens:,}-token request fits)")
    elif not splits and min_tp and min_tp > inputs.tp:
        out.append(f"--tp {min_tp} (the smallest tensor-parallel size on which one {tokens:,}-token request fits)")
    return out


def kv_per_gpu_curve(cap: Capacity, seq_lens: Sequence[int], *, batch: int) -> list[int]:
    """KV bytes ``batch`` requests of each length need on the busiest GPU, by the plan's own engine rule
    (what `capacity --plot` draws against the KV budget)."""
    kv = _Kv(cap.geometry, cap.deployment, cap.inputs.kv_dtype)
    avail = max(cap.budget.kv_bytes_per_gpu, 0)
    rooms = stage_rooms(cap)
    if not (kv.engine.block_pool and avail):
        return [kv.need(batch, t) for t in seq_lens]
    out = []
    for t in seq_lens:
        # NOTE: a block pool's share: the blocks the requests take of the pool, as bytes of the budget, so the
        # curve crosses the budget where `fits` stops (the hybrid allocator's group padding included).
        num_blocks, per_request, _bs, _notes = kv.vllm_pool(avail, t, rooms)
        out.append(-(-avail * batch * per_request // num_blocks) if num_blocks else kv.need(batch, t))
    return out


def stage_rooms(cap: Capacity) -> Rooms:
    """The per-stage rooms a block pool sized ``cap`` by (None when every stage had the same budget)."""
    if cap.stages is None or len(cap.stages) < 2 or not get_engine(cap.deployment.engine).block_pool:
        return None
    return tuple(s.kv_budget_bytes for s in cap.stages)
