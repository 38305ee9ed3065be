"""What to run a model on: the search behind `kvplan recommend`. Pure: a geometry, its weights per engine, GPUs
and a target (C requests of N tokens held at once) in; a :class:`Recommendation` out.

Every candidate (GPU type x layout x engine x KV dtype) is priced by capacity's own code
(:func:`kvplan.fit.screen_capacity`: the engine's budget rule, its KV pool and the decode floor), and the best
of each GPU type, engine and KV dtype is then sized in full by :func:`kvplan.fit.plan_capacity`, the answer
`kvplan capacity` gives for that layout. Layouts follow the engines' advice: tensor parallelism within a node,
pipeline stages across nodes (vLLM docs, "Distributed inference and serving": tp = GPUs per node, pp = nodes);
SGLang's DP attention for MLA models (one latent per request instead of one per TP rank); llama.cpp splits
layers over the GPUs of one machine. A layout the engine refuses (heads that do not divide, too many ranks) is
rejected with the engine's reason.

Ranking: cost per hour (GPUs x price per GPU-hour) when prices are given, else GPU count; then fewer nodes; then
headroom (requests held beyond C).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvplan.capacity_types import Capacity, CapacityInputs
from kvplan.dtypes import lookup_dtype
from kvplan.engines import get_engine
from kvplan.errors import InputError, KvplanError
from kvplan.fit import KvViews, plan_capacity, screen_capacity
from kvplan.geometry import ModelGeometry
from kvplan.gpus import GpuSpec, lookup
from kvplan.models import WeightsEstimate
from kvplan.specs import MLASpec
from kvplan.units import cdiv, format_bytes

#: Vendors each engine runs on (vLLM and SGLang: CUDA and ROCm builds; TensorRT-LLM: CUDA only; llama.cpp: CUDA,
#: ROCm (HIP) and Metal).
ENGINE_VENDORS: dict[str, tuple[str, ...]] = {
    "vllm": ("nvidia", "amd"),
    "sglang": ("nvidia", "amd"),
    "trtllm": ("nvidia",),
    "llama.cpp": ("nvidia", "amd", "apple"),
}
VENDOR_TITLES = {"nvidia": "NVIDIA", "amd": "AMD", "apple": "Apple"}
DEFAULT_MAX_GPUS = 64
DEFAULT_GPUS_PER_NODE = 8
DEFAULT_TOP = 10


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """What the deployment must hold and the room the search may use."""

    max_model_len: int
    """Tokens per request (vLLM ``--max-model-len``)."""
    concurrency: int
    """Requests of ``max_model_len`` tokens held at once."""
    max_gpus: int = DEFAULT_MAX_GPUS
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    max_nodes: int | None = None
    """None: as many nodes as ``max_gpus`` fills."""
    max_itl_ms: float | None = None
    """Drop candidates whose decode floor is above this (ms per output token)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """One way to lay a model out: GPU type, engine, KV dtype and parallelism."""

    gpu: GpuSpec
    engine: str
    kv_dtype: str
    """As passed to capacity (``auto``: the model's dtype)."""
    tp: int
    pp: int
    nodes: int
    dp: int = 1
    """SGLang DP attention ranks (``--dp``, within the ``tp`` GPUs); 1 without DP attention."""

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    def capacity_inputs(self, target: Target) -> CapacityInputs:
        """What `kvplan capacity` is asked for this layout (per DP rank: ``cdiv(C, dp)`` requests)."""
        return CapacityInputs(gpu=self.gpu, engine=self.engine, tp=self.tp, pp=self.pp, kv_dtype=self.kv_dtype,
                              max_model_len=target.max_model_len, batch=cdiv(target.concurrency, self.dp),
                              dp=self.dp, enable_dp_attention=self.dp > 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rejection:
    """A layout the search left out, and why."""

    layout: Layout
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommended:
    """The best layout of one GPU type, engine and KV dtype, with `kvplan capacity`'s full answer for it."""

    layout: Layout
    capacity: Capacity
    requests: int
    """Requests of ``max_model_len`` tokens the whole deployment holds (``dp`` x capacity's per-rank figure)."""
    cost_per_hour: float | None
    smaller_fails: str | None
    """Why the next smaller layout of this GPU type fails (None: nothing smaller was tried)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    """`kvplan recommend`'s answer: the best layouts found and those rejected."""

    target: Target
    deployments: tuple[Recommended, ...]
    """Best first (all of them; the report keeps ``top``)."""
    rejected: tuple[Rejection, ...]
    candidates: int
    """Candidates priced (layouts the engine accepted or refused)."""
    notes: tuple[str, ...] = ()


def parse_prices(data: object, *, label: str) -> dict[str, float]:
    """``--prices`` as read from YAML: a mapping of catalog GPU names to a price per GPU-hour (> 0), keyed by the
    catalog's name."""
    if not isinstance(data, dict) or not data:
        raise InputError(f"{label}: expected a mapping of GPU name to price per GPU-hour, e.g. 'H100: 2.49'",
                         "write one 'GPU: price' line per GPU (kvplan gpus lists the names)")
    prices: dict[str, float] = {}
    for name, price in data.items():
        try:
            gpu = lookup(str(name))
        except InputError as exc:
            raise InputError(f"{label}: {exc.message}", exc.hint) from None
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not math.isfinite(price) or price <= 0:
            raise InputError(f"{label}: the price of {name} must be a positive number per GPU-hour, got {price!r}",
                             f"e.g. '{name}: 2.49'")
        prices[gpu.name] = float(price)
    return prices


def default_kv_dtypes(engine: str) -> tuple[str, ...]:
    """The model's own dtype, and fp8 where the engine accepts it."""
    allowed = get_engine(engine).allowed_dtypes
    return ("auto", "fp8") if allowed is None or lookup_dtype("fp8").name in allowed else ("auto",)


def layouts(gpu: GpuSpec, engine: str, kv_dtype: str, geometry: ModelGeometry, target: Target) -> list[Layout]:
    """Every layout of ``gpu`` the search tries, fewest GPUs first: tp in powers of two within a node
    (pp = 1), and pp = nodes (tp within each node) across nodes; llama.cpp: 1 to all GPUs of one machine,
    layers split; SGLang with MLA: each tp > 1 also with DP attention (dp = tp)."""
    per_node = 1 if gpu.vendor == "apple" else target.gpus_per_node
    max_nodes = target.max_nodes if target.max_nodes is not None else max(1, target.max_gpus // per_node)
    out: list[Layout] = []
    profile = get_engine(engine)
    if profile.splits_layers:
        for n in range(1, min(per_node, target.max_gpus) + 1):
            out.append(Layout(gpu=gpu, engine=profile.name, kv_dtype=kv_dtype, tp=1, pp=n, nodes=1))
        return out
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= per_node and t <= target.max_gpus]
    mla = any(isinstance(s, MLASpec) for s in geometry.layers)
    for nodes in range(1, max_nodes + 1):
        for tp in tps if nodes == 1 else [per_node]:  # across nodes: full nodes, one pipeline stage each
            if tp * nodes > target.max_gpus:
                continue
            out.append(Layout(gpu=gpu, engine=profile.name, kv_dtype=kv_dtype, tp=tp, pp=nodes, nodes=nodes))
            if mla and profile.dp_within_tp and tp > 1:
                out.append(Layout(gpu=gpu, engine=profile.name, kv_dtype=kv_dtype, tp=tp, pp=nodes, nodes=nodes, dp=tp))
    out.sort(key=lambda lay: (lay.num_gpus, lay.nodes, lay.dp))
    return out


def _reason(layout: Layout, target: Target, fits: bool, requests: int, kv_bytes: int, weights_bytes: int | None,
            floor_s: float | None) -> str | None:
    """Why ``layout`` does not serve the target (None: it does)."""
    held = requests * layout.dp
    if kv_bytes <= 0:
        return (f"weights {format_bytes(weights_bytes or 0)} per GPU (and the engine's reserve) leave no KV room on "
                f"{layout.gpu.name}")
    if not fits:
        return (f"KV room ({format_bytes(kv_bytes)} per GPU) for only {held} of {target.concurrency} requests of "
                f"{target.max_model_len} tokens")
    if target.max_itl_ms is not None and floor_s is not None and floor_s * 1000 > target.max_itl_ms:
        return f"decode floor {floor_s * 1000:.2f} ms per token is above --max-itl {target.max_itl_ms:g} ms"
    return None


def recommend(
    geometry: ModelGeometry,
    weights: Mapping[str, WeightsEstimate],
    *,
    gpus: Sequence[GpuSpec],
    engines: Sequence[str],
    kv_dtypes: Mapping[str, Sequence[str]],
    target: Target,
    prices: Mapping[str, float] | None = None,
) -> Recommendation:
    """The cheapest deployments of ``geometry`` holding ``target``: for each GPU type, engine and KV dtype, the
    smallest layout capacity confirms (most headroom among equals), ranked. ``weights``: per engine, as
    capacity counts them; ``kv_dtypes``: per engine, the candidates."""
    if target.concurrency < 1 or target.max_model_len < 1:
        raise InputError("--concurrency and --max-model-len must be at least 1", "e.g. --concurrency 16 --max-model-len 8192")
    for name, value in (("--max-gpus", target.max_gpus), ("--gpus-per-node", target.gpus_per_node),
                        ("--nodes", target.max_nodes)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1, got {value}", f"e.g. {name} 8")
    best: list[Recommended] = []
    rejected: list[Rejection] = []
    notes: list[str] = []
    unrun: dict[tuple[str, str], list[str]] = {}  # (engine, vendor) -> GPU types the engine does not run on
    candidates = 0
    for engine in engines:
        views: KvViews = {}  # KV views of this engine: a deployment's KV does not depend on the GPU
        profile = get_engine(engine)
        for gpu in gpus:
            if gpu.vendor and gpu.vendor not in ENGINE_VENDORS.get(profile.name, (gpu.vendor,)):
                one = Layout(gpu=gpu, engine=profile.name, kv_dtype="auto", tp=1, pp=1, nodes=1)
                rejected.append(Rejection(layout=one, reason=f"{profile.title} does not run on {gpu.vendor} GPUs"))
                unrun.setdefault((profile.name, gpu.vendor), []).append(gpu.name)
                continue
            largest: Rejection | None = None  # the largest layout tried, when no KV dtype fits this GPU
            fitted = False
            for kv_dtype in kv_dtypes[engine]:
                found, tried, priced = _search(geometry, weights[engine], gpu, profile.name, kv_dtype, target, views)
                candidates += priced
                if found is None:
                    rejected.extend(tried)
                    largest = max(tried, key=lambda r: (r.layout.num_gpus, r.layout.nodes), default=largest)
                    continue
                fitted = True
                layout, requests = found
                smaller = [r for r in tried if r.layout.num_gpus < layout.num_gpus]
                rejected.extend(smaller)
                cap = plan_capacity(geometry, weights[engine], layout.capacity_inputs(target))
                price = None if prices is None else prices.get(gpu.name)
                best.append(Recommended(
                    layout=layout, capacity=cap, requests=requests,
                    cost_per_hour=None if price is None else round(price * layout.num_gpus, 4),
                    smaller_fails=_why_smaller(smaller)))
            if not fitted and largest is None:
                notes.append(f"{gpu.name} ({profile.name}): no layout to try within --max-gpus {target.max_gpus}")
            if not fitted and largest is not None:
                lay = largest.layout
                notes.append(f"{gpu.name} ({profile.name}): no layout up to {lay.num_gpus} GPUs holds the target; "
                             f"{lay.num_gpus}x (tp {lay.tp}, pp {lay.pp}, KV {lay.kv_dtype}): {largest.reason}")
    for (engine, vendor), names in unrun.items():
        runs = [e for e, vendors in ENGINE_VENDORS.items() if vendor in vendors]
        notes.append(f"{get_engine(engine).title} does not run on {VENDOR_TITLES.get(vendor, vendor)} GPUs: "
                     f"{', '.join(names)} left out"
                     + (f" (--engine {' or '.join(runs)} runs them)" if runs else ""))
    if prices is not None:
        unpriced = sorted({r.layout.gpu.name for r in best if r.cost_per_hour is None})
        if unpriced:
            notes.append(f"no price for {', '.join(unpriced)} in --prices: ranked after the priced GPUs")
    best.sort(key=lambda r: (r.cost_per_hour is None, r.cost_per_hour or 0.0, r.layout.num_gpus, r.layout.nodes,
                             -(r.requests - target.concurrency), r.layout.gpu.name, r.layout.engine,
                             r.layout.kv_dtype))
    return Recommendation(target=target, deployments=tuple(best), rejected=tuple(rejected), candidates=candidates,
                          notes=tuple(notes))


def _search(geometry: ModelGeometry, weights: WeightsEstimate, gpu: GpuSpec, engine: str, kv_dtype: str,
            target: Target, views: KvViews) -> tuple[tuple[Layout, int] | None, list[Rejection], int]:
    """The smallest layout of ``gpu`` that holds the target (most headroom among those of its GPU and node
    count) and the requests it holds; every layout priced, and every one that failed before it with why (larger
    layouts of the same GPU are priced too, and cost more)."""
    tried: list[Rejection] = []
    found: tuple[Layout, int] | None = None
    candidates = layouts(gpu, engine, kv_dtype, geometry, target)
    for layout in candidates:
        try:
            screen = screen_capacity(geometry, weights, layout.capacity_inputs(target), views)
        except KvplanError as exc:
            tried.append(Rejection(layout=layout, reason=exc.message))
            continue
        reason = _reason(layout, target, screen.fits, screen.max_concurrent_requests, screen.budget.kv_bytes_per_gpu,
                         screen.budget.weights_bytes_per_gpu, screen.decode_floor_seconds)
        if reason is not None:
            if found is None:
                tried.append(Rejection(layout=layout, reason=reason))
            continue
        requests = screen.max_concurrent_requests * layout.dp
        if found is None or ((layout.num_gpus, layout.nodes) == (found[0].num_gpus, found[0].nodes)
                             and requests > found[1]):
            found = (layout, requests)  # the first to fit is the smallest; among equals, the most headroom
    return found, tried, len(candidates)


def _why_smaller(smaller: Sequence[Rejection]) -> str | None:
    """The reason of the largest smaller layout that fails (the one a user would try next)."""
    if not smaller:
        return None
    top = max(r.layout.num_gpus for r in smaller)
    last = [r for r in smaller if r.layout.num_gpus == top][-1]
    lay = last.layout
    return f"{lay.num_gpus}x {lay.gpu.name} (tp {lay.tp}, pp {lay.pp}): {last.reason}"

