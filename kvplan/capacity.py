"""Capacity: what fits on a GPU. Pure: a geometry, weights, a GPU and a deployment in; answers out.

The KV budget per GPU follows each engine's own rule (FACTS b.1, b.3, b.5, b.6):

======== ===============================================================================
ideal    memory - weights - reserve (reserve 0 unless --reserve)
vllm     memory * gpu_memory_utilization (0.9) - weights - activation peak - non-torch memory
sglang   memory * mem_fraction_static - weights (the rest of memory is SGLang's own reserve)
trtllm   (memory - weights - activation peak) * free_gpu_memory_fraction (0.9)
llama.cpp memory - weights - compute buffers (activations of one n_ubatch of 512 tokens)
hf-*     memory - weights - activations of one max_model_len prefill
======== ===============================================================================

``--kv-budget`` replaces all of it with the bytes an engine logs ("Available KV cache memory").

The activation peak is an explicit estimate, not a measurement (``--reserve`` overrides it)::

    tokens * (3 * mlp_width + qkv_width + 2 * hidden) / tp * act_bytes      # MLP gate/up/act, q/k/v, residual
  + logit_rows * vocab / tp * 4                                             # fp32 logits of the sampler warm-up
  + 256 MiB non-torch memory (cuBLAS workspaces, NCCL, CUDA graphs)         # vLLM only

with ``tokens`` = vLLM's ``--max-num-batched-tokens`` (the profile run) and ``logit_rows`` = 256
(vLLM's ``max_num_seqs``). Checked against vllm#10517 (Llama-3.1-8B on an RTX 3090, V0 profile
over 20,000 and 29,000 tokens): it lands within 0.1 GiB of the logged non-KV memory.

Blocks follow vLLM's pool: uniform models ``num_blocks = budget // (page * layers)``; hybrid
models (sliding + full, attention + Mamba) group layers as ``get_kv_cache_groups`` does and
``num_blocks = budget // (page * group_size)``; concurrency divides by the blocks one request
needs summed over groups, so windowed layers count their real need, not a full context.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.adjust import Deployment, stage_of_layer
from kvplan.calc import Estimate, estimate
from kvplan.engines import (
    LLAMA_CPP_PAD,
    LLAMA_CPP_UBATCH,
    SGLANG_SWA_RATIO,
    VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
    get_engine,
)
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.gpus import GpuSpec
from kvplan.units import MiB, format_bytes
from kvplan.weights import DTYPE_BYTES, WeightsEstimate, serve_weights, served_dtype

#: vLLM ``--gpu-memory-utilization`` default.
VLLM_GPU_MEMORY_UTILIZATION = 0.9
#: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` default.
TRTLLM_FREE_FRACTION = 0.9
#: Non-torch memory vLLM subtracts (cuBLAS workspaces, NCCL buffers, CUDA graph pool): kvplan's estimate.
VLLM_NON_TORCH_BYTES = 256 * MiB
#: vLLM's sampler warm-up computes logits for ``max_num_seqs`` (default 256) rows in float32.
VLLM_LOGIT_ROWS = 256
#: TP sizes tried for ``min_tp``.
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


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


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityInputs:
    gpu: GpuSpec
    engine: str = "vllm"
    tp: int = 1
    pp: int = 1
    num_gpus: int | None = None
    kv_dtype: str = "auto"
    dtype: str = "auto"
    """Weight dtype, as vLLM's ``--dtype`` (``auto`` = the engine's rule: 16 bits for float32 checkpoints)."""
    max_model_len: int | None = None
    """Tokens per request (vLLM ``--max-model-len``); None = the model's maximum context."""
    batch: int = 1
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_num_batched_tokens: int | None = None
    reserve_bytes: int | None = None
    """Replaces the activation/overhead estimate."""
    kv_budget_bytes: int | None = None
    """KV bytes per GPU, as an engine logs them: skips the budget rule."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    memory_bytes: int
    usable_bytes: int
    """The part of memory the engine lets itself use (memory x fraction)."""
    weights_bytes_per_gpu: int | None
    activation_bytes: int
    non_torch_bytes: int
    reserve_bytes: int
    """activation + non-torch, or --reserve."""
    kv_bytes_per_gpu: int
    formula: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Capacity:
    geometry: ModelGeometry
    inputs: CapacityInputs
    deployment: Deployment
    kv_dtype_name: str
    kv_dtype_source: str
    max_model_len: int
    max_model_len_source: str
    weights: WeightsEstimate | None
    budget: Budget
    fits: bool
    block_size: int
    num_blocks: int
    max_tokens: int
    max_concurrency: float
    max_concurrent_requests: int
    max_context_len: int
    max_context_limit: str
    """``memory`` or ``model maximum`` (the search stopped at the model's context)."""
    min_tp: int | None
    min_num_gpus: int | None
    kv_bytes_per_request: int
    """KV bytes one request at max_model_len needs on the busiest GPU (engine rounding)."""
    kv_bytes_needed: int
    """``batch`` requests at max_model_len."""
    decode_bytes_per_step: int | None
    decode_floor_seconds: float | None
    decode_tokens_per_s: float | None
    suggestions: tuple[str, ...]
    checkpoint_dtype: str | None = None
    """The checkpoint's own dtype when the engine holds the weights in another (``weights.dtype``)."""
    notes: tuple[str, ...] = field(default=())


# ---- KV views per engine --------------------------------------------------------------------
class _Kv:
    """The KV function of one deployment on the busiest GPU."""

    def __init__(self, geometry: ModelGeometry, dep: Deployment, kv_dtype: str) -> None:
        self.geometry, self.dep, self.kv_dtype = geometry, dep, kv_dtype
        self.engine = get_engine(dep.engine)
        self._cache: dict[tuple[int, int], Estimate] = {}

    def est(self, batch: int, tokens: int) -> Estimate:
        key = (batch, tokens)
        if key not in self._cache:
            self._cache[key] = estimate(self.geometry, batch=batch, seq_len=tokens, kv_dtype=self.kv_dtype,
                                        deployment=self.dep)
        return self._cache[key]

    def need(self, batch: int, tokens: int) -> int:
        return self.est(batch, tokens).kv_cache_bytes_per_gpu

    # stages ---------------------------------------------------------------------------------
    def _stages(self, est: Estimate) -> list[list[tuple[object, int]]]:
        """Per PP stage: (group, layers of the group on that stage)."""
        num_layers = self.geometry.num_hidden_layers
        stage_of = stage_of_layer(num_layers, self.dep.pp)
        stages: list[dict[int, int]] = [{} for _ in range(self.dep.pp)]
        for gi, group in enumerate(est.groups):
            for index in group.layer_indices:
                layer = index % num_layers if len(self.geometry.layers) > num_layers else index
                stages[stage_of[layer]][gi] = stages[stage_of[layer]].get(gi, 0) + 1
        return [[(est.groups[gi], n) for gi, n in s.items()] for s in stages]

    @staticmethod
    def _per_token(group: object, tp: int) -> int:
        return group.bytes_per_token // tp  # type: ignore[attr-defined]

    # vLLM pool -----------------------------------------------------------------------------------
    def block_size(self) -> int:
        one = self.est(1, 1)
        sizes = []
        for g in one.groups:
            kind = g.spec.kind
            # cross-attention holds the encoder length from the first token: it does not show the block size
            if kind in ("full_attention", "mla", "chunked_local"):
                sizes.append(g.tokens_held)
            elif kind == "sliding_window":
                sizes.append(g.tokens_held // 2 if self.engine.name == "vllm" else g.tokens_held)
        if not sizes:
            return 1
        if self.engine.name in ("llama.cpp",):
            return LLAMA_CPP_PAD
        if self.engine.name in ("ideal", "hf-dynamic", "hf-static") and self.dep.block_size is None:
            return 1
        return max(sizes)

    def vllm_pool(self, budget: int, tokens: int) -> tuple[int, float, int, list[str]]:
        """(num_blocks, blocks one request needs, block size, notes), min over PP stages."""
        one = self.est(1, tokens)
        base = self.est(1, 1)
        bs = self.block_size()
        best: tuple[int, float, int] | None = None
        notes: list[str] = []
        for stage, stage_base in zip(self._stages(one), self._stages(base)):
            pages: list[int] = []
            types: list[tuple[int, int]] = []  # (layers, blocks per request)
            for (group, count), (group1, _c) in zip(stage, stage_base):
                if group.spec.kind == "no_cache" or not (group.layer_bytes_per_rank or group.tokens_held):
                    continue
                if group.spec.kind == "state":
                    page = group1.layer_bytes_per_rank or 0
                    blocks = 1
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
                num_blocks = budget // per_block
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
                num_blocks = budget // (pages[0] * group_size)
                per_request = sum(-(-c // group_size) * b for c, b in types)
            if best is None or num_blocks / per_request < best[0] / best[1]:
                best = (num_blocks, per_request, sum(c for c, _b in types))
        if best is None:
            return 0, 1, bs, notes
        return best[0], best[1], bs, notes

    def tokens_per_budget(self, budget: int) -> int:
        """Tokens the pool holds counting every token-caching layer (the engine's token line)."""
        one = self.est(1, 1)
        ratio = (self.dep.swa_full_tokens_ratio or SGLANG_SWA_RATIO) if self.engine.name == "sglang" else 1.0
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
    elif geometry.max_context_tokens is not None:
        tokens = geometry.max_context_tokens
        tokens_source = f"model maximum context ({geometry.max_context_source} = {tokens:,})"
    else:
        raise InputError(f"{geometry.model_id}: the config names no maximum context", "pass --max-model-len, e.g. 32k")
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
    if weights is not None:
        weights, serve_note = serve_weights(weights, engine=engine.name, dtype=inputs.dtype)
        if serve_note:
            notes.append(serve_note)
    geometry = _served_geometry(geometry, engine.name, inputs.dtype)
    dep = _deployment(inputs, tp)
    kv = _Kv(geometry, dep, inputs.kv_dtype)
    est_one = kv.est(1, tokens)
    notes.extend(n for n in est_one.notes if n not in geometry.notes)
    notes.extend(geometry.notes)

    budget = compute_budget(inputs, weights, tp=tp, pp=pp, tokens=tokens)
    avail = max(budget.kv_bytes_per_gpu, 0)
    per_request = kv.need(1, tokens)
    needed = kv.need(inputs.batch, tokens)

    if engine.name == "vllm":
        num_blocks, blocks_per_request, bs, pool_notes = kv.vllm_pool(avail, tokens)
        notes.extend(pool_notes)
        max_tokens = num_blocks * bs
        concurrency = num_blocks / blocks_per_request if blocks_per_request else 0.0
        requests = int(num_blocks // blocks_per_request) if blocks_per_request else 0

        def fits(batch: int, t: int) -> bool:
            nb, per, _bs, _n = kv.vllm_pool(avail, t)
            return avail > 0 and batch * per <= nb
    else:
        bs = kv.block_size()
        max_tokens = kv.tokens_per_budget(avail)
        num_blocks = max_tokens // bs
        concurrency = avail / per_request if per_request else 0.0

        def fits(batch: int, t: int) -> bool:
            return avail > 0 and kv.need(batch, t) <= avail

        requests = _largest(lambda b: fits(b, tokens), hi_start=max(1, int(concurrency) + 1))
    is_fit = fits(inputs.batch, tokens)

    limit = max(tokens, geometry.max_context_tokens or 0)
    max_context = _largest(lambda t: fits(inputs.batch, t), hi_start=limit, cap=limit)
    context_limit = "model maximum" if max_context >= limit else "memory"
    if context_limit == "model maximum" and max_context:
        notes.append(f"{inputs.batch} sequence(s) fit the whole searched context ({limit:,} tokens)")

    min_tp, min_gpus = _min_parallel(geometry, weights, inputs, tokens)

    decode_bytes = seconds = tok_s = None
    if weights is not None:
        decode_bytes = weights.read_bytes_per_step(batch=inputs.batch, tp=tp, pp=pp) + needed
        if inputs.gpu.bandwidth_bytes_per_s:
            seconds = decode_bytes * pp / inputs.gpu.bandwidth_bytes_per_s
            tok_s = inputs.batch / seconds if seconds else None
        else:
            notes.append("no GPU bandwidth (pass --gpu-bandwidth): the decode floor is not computed")
    else:
        notes.append("weights unknown: the decode floor is not computed")

    suggestions = () if is_fit else tuple(
        _suggest(kv, inputs, tokens, max_context, requests, min_tp, budget, needed, avail, engine.name)
    )
    return Capacity(
        geometry=geometry, inputs=inputs, deployment=dep, kv_dtype_name=est_one.kv_dtype.name,
        kv_dtype_source=est_one.kv_dtype_source, max_model_len=tokens, max_model_len_source=tokens_source,
        weights=weights, checkpoint_dtype=checkpoint_dtype, budget=budget, fits=is_fit, block_size=bs, num_blocks=num_blocks, max_tokens=max_tokens,
        max_concurrency=concurrency, max_concurrent_requests=requests, max_context_len=max_context,
        max_context_limit=context_limit, min_tp=min_tp, min_num_gpus=min_gpus, kv_bytes_per_request=per_request,
        kv_bytes_needed=needed, decode_bytes_per_step=decode_bytes, decode_floor_seconds=seconds,
        decode_tokens_per_s=tok_s, suggestions=suggestions, notes=tuple(dict.fromkeys(notes)),
    )


def _served_geometry(geometry: ModelGeometry, engine: str, dtype: str) -> ModelGeometry:
    """The geometry with the dtype the engine serves the model in, which ``--kv-dtype auto`` follows
    (vLLM's ``kv_cache_dtype auto`` = the model dtype: bfloat16 for a float32 checkpoint)."""
    import dataclasses

    config = (geometry.config_dtype or "").lower().removeprefix("torch.")
    explicit = dtype.strip().lower() != "auto"
    if not config and not explicit:
        return geometry
    name, why = served_dtype(config or "float16", engine=engine, dtype=dtype)
    if name == config or (not explicit and DTYPE_BYTES.get(config) == DTYPE_BYTES[name]):
        return geometry
    return dataclasses.replace(geometry, config_dtype=name, config_dtype_source=f"served dtype ({why})")


def _deployment(inputs: CapacityInputs, tp: int) -> Deployment:
    return Deployment(engine=get_engine(inputs.engine).name, tp=tp, pp=inputs.pp, block_size=inputs.block_size,
                      max_num_batched_tokens=inputs.max_num_batched_tokens)


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
    from kvplan.limits import MAX_BATCH, MAX_NUM_GPUS, MAX_PP, MAX_TP, check_limit

    check_limit(inputs.num_gpus, MAX_NUM_GPUS, "--num-gpus")
    check_limit(inputs.tp, MAX_TP, "--tp")
    check_limit(inputs.pp, MAX_PP, "--pp")
    check_limit(inputs.batch, MAX_BATCH, "--batch")
    if inputs.gpu.memory_bytes <= 0:
        raise InputError("the GPU has no memory", "pass --gpu-mem, e.g. --gpu-mem 80GiB")


def activation_bytes(weights: WeightsEstimate, *, tokens: int, logit_rows: int, tp: int) -> int:
    """The documented activation-peak estimate for ``tokens`` tokens in one forward pass (see module doc)."""
    width = 3 * weights.mlp_width + weights.qkv_width + 2 * weights.hidden_size
    act = tokens * width * weights.dtype_bytes // tp
    logits = logit_rows * weights.vocab_size * 4 // tp
    return act + logits


def compute_budget(
    inputs: CapacityInputs, weights: WeightsEstimate | None, *, tp: int, pp: int, tokens: int
) -> Budget:
    """KV bytes per GPU under the engine's budget rule (or ``--kv-budget``)."""
    memory = inputs.gpu.memory_bytes
    engine = get_engine(inputs.engine).name
    weights_gpu = weights.bytes_per_gpu(tp=tp, pp=pp) if weights is not None else None
    if inputs.kv_budget_bytes is not None:
        return Budget(memory_bytes=memory, usable_bytes=inputs.kv_budget_bytes, weights_bytes_per_gpu=weights_gpu,
                      activation_bytes=0, non_torch_bytes=0, reserve_bytes=0, kv_bytes_per_gpu=inputs.kv_budget_bytes,
                      formula="--kv-budget: KV bytes per GPU as given (what the engine logs as available KV memory)")
    if weights_gpu is None:
        raise InputError(
            "the weights' size is unknown, so the KV budget cannot be derived",
            "pass --weights-bytes SIZE, or --kv-budget SIZE (the engine's 'Available KV cache memory')",
        )
    act = non_torch = 0
    if inputs.reserve_bytes is None and weights is not None:
        if engine == "vllm":
            mnbt = inputs.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
            act = activation_bytes(weights, tokens=mnbt, logit_rows=VLLM_LOGIT_ROWS, tp=tp)
            non_torch = VLLM_NON_TORCH_BYTES
        elif engine == "trtllm":
            mnbt = inputs.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
            act = activation_bytes(weights, tokens=mnbt, logit_rows=inputs.batch, tp=tp)
        elif engine == "llama.cpp":
            act = activation_bytes(weights, tokens=LLAMA_CPP_UBATCH, logit_rows=LLAMA_CPP_UBATCH, tp=1)
        elif engine in ("hf-dynamic", "hf-static"):
            act = activation_bytes(weights, tokens=tokens, logit_rows=1, tp=tp)
    reserve = inputs.reserve_bytes if inputs.reserve_bytes is not None else act + non_torch
    if engine == "vllm":
        util = inputs.gpu_memory_utilization or VLLM_GPU_MEMORY_UTILIZATION
        usable = int(memory * util)
        kv = usable - weights_gpu - reserve
        formula = f"memory x gpu_memory_utilization {util:g} - weights - activation peak - non-torch memory"
    elif engine == "sglang":
        fraction = inputs.mem_fraction_static or sglang_mem_fraction_static(tp)
        usable = int(memory * fraction)
        kv = usable - weights_gpu - (inputs.reserve_bytes or 0)
        formula = f"memory x mem_fraction_static {fraction:g} - weights"
    elif engine == "trtllm":
        fraction = inputs.free_gpu_memory_fraction or TRTLLM_FREE_FRACTION
        usable = memory
        free = memory - weights_gpu - reserve
        kv = int(free * fraction) if free > 0 else free
        formula = f"(memory - weights - activation peak) x free_gpu_memory_fraction {fraction:g}"
    else:
        usable = memory
        kv = memory - weights_gpu - reserve
        formula = "memory - weights - " + ("reserve" if engine == "ideal" else "activation peak")
    return Budget(memory_bytes=memory, usable_bytes=usable, weights_bytes_per_gpu=weights_gpu, activation_bytes=act,
                  non_torch_bytes=non_torch, reserve_bytes=reserve, kv_bytes_per_gpu=kv, formula=formula)


def _largest(ok: object, *, hi_start: int, cap: int | None = None) -> int:
    """Largest n >= 1 with ok(n) (0 if none): exponential search up from hi_start, then bisection.

    ``ok`` must be monotone (true up to some n, false after). With ``cap`` the answer is at most cap."""
    check = ok  # type: ignore[assignment]
    if not check(1):  # type: ignore[operator]
        return 0
    lo, hi = 1, max(2, hi_start)
    while check(hi):  # type: ignore[operator]
        if cap is not None and hi >= cap:
            return cap
        lo, hi = hi, hi * 2 if cap is None else min(hi * 2, cap)
        if cap is None and hi > 1 << 40:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid):  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
    return lo


def _min_parallel(
    geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs, tokens: int
) -> tuple[int | None, int | None]:
    """Smallest TP (and GPU count, tp x pp) on which one request at max_model_len fits."""
    if get_engine(inputs.engine).name == "llama.cpp":
        for pp in range(1, geometry.num_hidden_layers + 1):
            if _fits_one(geometry, weights, inputs, tokens, tp=1, pp=pp):
                return 1, pp
            if pp >= 64:
                break
        return None, None
    for tp in TP_CANDIDATES:
        try:
            if _fits_one(geometry, weights, inputs, tokens, tp=tp, pp=inputs.pp):
                return tp, tp * inputs.pp
        except InputError:
            continue
    return None, None


def _fits_one(geometry: ModelGeometry, weights: WeightsEstimate | None, inputs: CapacityInputs, tokens: int,
              *, tp: int, pp: int) -> bool:
    trial = CapacityInputs(**{**{f: getattr(inputs, f) for f in inputs.__dataclass_fields__}, "tp": tp, "pp": pp,
                              "batch": 1})
    budget = compute_budget(trial, weights, tp=tp, pp=pp, tokens=tokens).kv_bytes_per_gpu
    if budget <= 0:
        return False
    dep = Deployment(engine=get_engine(inputs.engine).name, tp=tp, pp=pp, block_size=inputs.block_size,
                     max_num_batched_tokens=inputs.max_num_batched_tokens)
    kv = _Kv(geometry, dep, inputs.kv_dtype)
    if dep.engine == "vllm":
        num_blocks, per_request, _bs, _n = kv.vllm_pool(budget, tokens)
        return per_request <= num_blocks
    return kv.need(1, tokens) <= budget


def _suggest(kv: _Kv, inputs: CapacityInputs, tokens: int, max_context: int, requests: int, min_tp: int | None,
             budget: Budget, needed: int, avail: int, engine: str) -> list[str]:
    out = []
    if budget.kv_bytes_per_gpu <= 0:
        out.append(
            f"the weights ({format_bytes(budget.weights_bytes_per_gpu or 0)} per GPU) and reserve leave no KV memory "
            f"on {inputs.gpu.name}: use more GPUs (--tp {min_tp})" if min_tp else
            f"the weights and reserve leave no KV memory on {inputs.gpu.name}: use a quantised checkpoint or more GPUs"
        )
        return out
    if max_context:
        out.append(f"--max-model-len {max_context} (the longest context {inputs.batch} sequence(s) fit)")
    if requests and requests < inputs.batch:
        out.append(f"--batch {requests} (the most requests of {tokens:,} tokens that fit)")
    if kv.est(1, 1).kv_dtype.bits_per_element > 8 and engine != "llama.cpp":
        out.append("--kv-dtype fp8 (halves the KV cache of a 16-bit model)")
    elif engine == "llama.cpp" and kv.est(1, 1).kv_dtype.name in ("fp16", "bf16", "fp32"):
        out.append("--kv-dtype q8_0 (about half the KV cache of f16)")
    if min_tp and min_tp > inputs.tp:
        out.append(f"--tp {min_tp} (the smallest tensor-parallel size on which one {tokens:,}-token request fits)")
    return out


# ---- report ------------------------------------------------------------------------------------
def capacity_report(cap: Capacity, source: object) -> dict[str, object]:
    """The ``kvplan capacity`` report: keys always present, sizes in integer bytes."""
    from kvplan import __version__
    from kvplan.report import SCHEMA_VERSION, model_dict

    g, i, b, w = cap.geometry, cap.inputs, cap.budget, cap.weights
    counted = w is not None and w.counted
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "capacity",
        "model": model_dict(g, source=getattr(source, "kind", None), location=getattr(source, "location", None),
                            revision=getattr(source, "revision", None)),
        "inputs": {
            "gpu": i.gpu.name, "gpu_memory_bytes": i.gpu.memory_bytes, "gpu_memory_source": i.gpu.memory_source or None,
            "gpu_bandwidth_bytes_per_s": i.gpu.bandwidth_bytes_per_s or None,
            "num_gpus": i.num_gpus, "tp": i.tp, "pp": i.pp, "engine": cap.deployment.engine,
            "kv_dtype": cap.kv_dtype_name, "kv_dtype_source": cap.kv_dtype_source, "dtype": i.dtype,
            "max_model_len": cap.max_model_len, "max_model_len_source": cap.max_model_len_source,
            "batch": i.batch, "block_size": i.block_size, "gpu_memory_utilization": i.gpu_memory_utilization,
            "mem_fraction_static": i.mem_fraction_static, "free_gpu_memory_fraction": i.free_gpu_memory_fraction,
            "max_num_batched_tokens": i.max_num_batched_tokens, "reserve_bytes": i.reserve_bytes,
            "kv_budget_bytes": i.kv_budget_bytes,
        },
        "weights": {
            "source": w.source if w else None,
            "parameters": w.parameters if counted else None,
            "language_parameters": w.language_parameters if counted else None,
            "vision_parameters": w.vision_parameters if counted else None,
            "active_parameters": w.active_parameters if counted else None,
            "bytes": w.bytes if w else None,
            "vision_bytes": w.vision_bytes if counted else None,
            "bytes_per_gpu": b.weights_bytes_per_gpu,
            "dtype": w.dtype if counted else None,
            "checkpoint_dtype": cap.checkpoint_dtype,
            "quantization": w.quantisation.describe() if w and w.quantisation else None,
            "num_experts": w.num_experts if w else None,
            "experts_per_token": w.experts_per_token if w else None,
            "parts": [
                {"name": p.name, "parameters": p.parameters, "bytes": p.bytes, "storage": p.storage}
                for p in (w.parts if counted else ())
            ],
        },
        "budget": {
            "formula": b.formula, "gpu_memory_bytes": b.memory_bytes, "usable_bytes": b.usable_bytes,
            "weights_bytes_per_gpu": b.weights_bytes_per_gpu, "activation_bytes": b.activation_bytes,
            "non_torch_bytes": b.non_torch_bytes, "reserve_bytes": b.reserve_bytes,
            "kv_bytes_per_gpu": b.kv_bytes_per_gpu,
        },
        "capacity": {
            "fits": cap.fits,
            "block_size": cap.block_size,
            "num_blocks": cap.num_blocks,
            "max_tokens": cap.max_tokens,
            "max_concurrency": round(cap.max_concurrency, 4),
            "max_concurrent_requests": cap.max_concurrent_requests,
            "max_context_len": cap.max_context_len,
            "max_context_limit": cap.max_context_limit,
            "min_tp": cap.min_tp,
            "min_num_gpus": cap.min_num_gpus,
            "kv_bytes_per_request": cap.kv_bytes_per_request,
            "kv_bytes_needed": cap.kv_bytes_needed,
            "kv_bytes_available": b.kv_bytes_per_gpu,
            "decode_bytes_per_step": cap.decode_bytes_per_step,
            "decode_floor_seconds": cap.decode_floor_seconds,
            "decode_tokens_per_s": cap.decode_tokens_per_s,
        },
        "suggestions": list(cap.suggestions),
        "notes": list(cap.notes) + ([n for n in w.notes if n not in cap.notes] if w else []),
    }
