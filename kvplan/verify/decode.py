"""The real decode behind ``kvplan verify`` (torch is imported here and in the modules beside it only).

A decoder with the model's per-layer cache geometry (query and KV heads, K/V head dims, windows,
chunks, MLA latent, state tensors), random weights shared by layers of the same shape, a prefill
and a decode loop over one of the layouts of :mod:`kvplan.verify.predict` (held by the classes of
:mod:`kvplan.verify.caches`). After the decode the cache tensors are measured (distinct storages)
and, on CUDA, the caching allocator's counters.

Nothing here sizes a cache from the prediction except the paged pools (a paged engine sizes its
pool from a budget too); their check is the block tables' peak use.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kvplan.errors import InputError, KvplanError
from kvplan.verify.caches import LAYOUT_CLASSES, TORCH_DTYPES, LayerCache, PoolExhausted, StateLayer
from kvplan.verify.predict import LayerPlan, VerifyPlan, bandwidth_for, layers_that_fit
from kvplan.verify.report import RankMeasurement, VerifyMeasurement

#: Share of free memory the decode may plan to use (the rest is headroom for the runtime).
MEMORY_FRACTION = 0.9
#: NOTE: each --tp rank on the CPU is its own process: torch imported and a gloo group joined peak at
#: 221 MiB of resident memory (measured, torch 2.13 CPU); counted per rank before any rank starts.
RANK_PROCESS_BYTES = 224 * 1024**2
#: CPU ranks per core: more only time-slice the same cores (and each still costs RANK_PROCESS_BYTES).
RANKS_PER_CORE = 2


def cpu_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_cpu_ranks(tp: int, budget: int, where: str) -> None:
    """--tp N on the CPU starts N processes: cap N by cores and by the memory their processes take."""
    cores = cpu_cores()
    most = RANKS_PER_CORE * cores
    if tp > most:
        raise InputError(f"--tp {tp} on the CPU starts {tp} rank processes, more than {RANKS_PER_CORE} per core on "
                         f"{cores} cores ({most})", f"use --tp {most} or less, or --gpu")
    if tp * RANK_PROCESS_BYTES > budget:
        fit = budget // RANK_PROCESS_BYTES
        raise InputError(f"--tp {tp} on the CPU starts {tp} rank processes of about {RANK_PROCESS_BYTES:,} bytes "
                         f"each ({tp * RANK_PROCESS_BYTES:,}), more than {where}",
                         f"use --tp {fit} or less" if fit >= 1 else "raise --max-memory, or free memory")
#: Most bytes of attention scores one chunk of prefill queries may hold.
SCORE_BYTES = 64 * 1024 * 1024


class VerifyOOM(KvplanError):
    """The decode ran out of memory despite the pre-check."""


# ---- the decoder ---------------------------------------------------------------------------------


def _mask(pos: torch.Tensor, qpos: torch.Tensor, layer: LayerPlan) -> torch.Tensor:
    """[s, n] True where query position qpos[i] may attend the slot holding position pos[j]."""
    key = pos.view(1, -1)
    query = qpos.view(-1, 1)
    allowed = (key >= 0) & (key <= query)
    if layer.chunk is not None:
        allowed &= key >= (query // layer.chunk) * layer.chunk
    elif layer.window is not None:
        allowed &= key > query - layer.window
    return allowed


class Decoder:
    """Per layer: RMS norm, Q/K/V projections, the layout's cache, attention, output projection."""

    def __init__(self, plan: VerifyPlan, device: torch.device, compute: torch.dtype, group: Any = None) -> None:
        self.plan, self.device, self.compute, self.group = plan, device, compute, group
        # NOTE: caches first, so a preallocated cache takes fresh allocator segments before the weights.
        self.caches: list[LayerCache | StateLayer | None] = []
        for layer in plan.layers:
            if layer.kind == "no_cache":
                self.caches.append(None)
            elif layer.kind == "state":
                self.caches.append(StateLayer(layer, plan, device))
            else:
                self.caches.append(LAYOUT_CLASSES[plan.layout](layer, plan, device, compute))
        self.hidden = hidden_size(plan)
        self.weights: dict[tuple[int, ...], dict[str, torch.Tensor]] = {}
        for layer in plan.layers:
            if layer.kind in ("no_cache", "state"):
                continue
            key = weight_key(layer)
            if key not in self.weights:
                self.weights[key] = {
                    name: torch.randn(shape, device=device, dtype=compute) / shape[0] ** 0.5
                    for name, shape in weight_shapes(layer, self.hidden).items()
                }

    @property
    def weight_bytes(self) -> int:
        return sum(w.numel() * w.element_size() for ws in self.weights.values() for w in ws.values())

    def forward(self, x: torch.Tensor, first: int) -> torch.Tensor:
        """Run ``x`` [R, s, hidden] at positions first .. first + s - 1 through every layer."""
        s = x.shape[1]
        qpos = torch.arange(first, first + s, device=self.device)
        for layer, cache in zip(self.plan.layers, self.caches):
            if cache is None:
                continue
            if isinstance(cache, StateLayer):
                delta = cache.update(x)
            else:
                delta = self._attend(layer, cache, F.rms_norm(x, (x.shape[-1],)), qpos, prefill=s > 1 or first == 0)
            if self.group is not None:
                torch.distributed.all_reduce(delta, group=self.group)
            x = x + delta
        return x

    def _attend(self, layer: LayerPlan, cache: LayerCache, h: torch.Tensor, qpos: torch.Tensor, *, prefill: bool) -> torch.Tensor:
        w = self.weights[weight_key(layer)]
        rows, s, _ = h.shape
        hq, heads, dk, dv = layer.num_query_heads, layer.num_kv_heads, layer.head_size, layer.head_size_v
        mla = layer.kind == "mla"
        q = (h @ w["q"]).view(rows, s, hq, -1).transpose(1, 2)
        k = (h @ w["k"]).view(rows, s, heads, dk).transpose(1, 2)
        v = (h @ w["v"]).view(rows, s, heads, dv).transpose(1, 2)
        if prefill:
            cache.prefill(k, v)
            keys, values, pos = k, v, qpos
        else:
            keys, values, pos = cache.step(k, v, int(qpos[0]))
        # NOTE: queries in chunks, so a long prefill never holds more than ~SCORE_BYTES of scores.
        chunk = max(1, SCORE_BYTES // (rows * hq * keys.shape[2] * 4))
        outs = []
        for begin in range(0, s, chunk):
            qc = q[:, :, begin:begin + chunk]
            mask = _mask(pos, qpos[begin:begin + chunk], layer)
            if mla:
                # NOTE: absorbed MLA: scores over [latent; rope], output in latent space.
                scores = (qc[..., :dk] @ keys.transpose(-1, -2) + qc[..., dk:] @ values.transpose(-1, -2)) / (dk + dv) ** 0.5
                probs = torch.softmax(scores.float().masked_fill(~mask, float("-inf")), dim=-1).to(self.compute)
                outs.append(probs @ keys)
            else:
                outs.append(F.scaled_dot_product_attention(qc, keys, values, attn_mask=mask, enable_gqa=hq != heads))
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
        if not prefill:
            cache.after_step(int(qpos[0]))
        return out.transpose(1, 2).reshape(rows, s, -1) @ w["o"]


#: Widest residual stream the decode uses: weights never touch the cache, so a narrow stream keeps
#: weight memory and compute small without changing a cached byte.
MAX_HIDDEN = 1024


def hidden_size(plan: VerifyPlan) -> int:
    """Width of the residual stream: query heads times the V width (K width for MLA), at most MAX_HIDDEN."""
    widths = [
        layer.num_query_heads * plan.tp * (layer.head_size if layer.kind == "mla" else layer.head_size_v)
        for layer in plan.layers if layer.kind not in ("state", "no_cache")
    ]
    return min(max(widths, default=256), MAX_HIDDEN)


def weight_key(layer: LayerPlan) -> tuple[int, ...]:
    return (int(layer.kind == "mla"), layer.num_query_heads, layer.num_kv_heads, layer.head_size, layer.head_size_v)


def weight_shapes(layer: LayerPlan, hidden: int) -> dict[str, tuple[int, int]]:
    hq, heads, dk, dv = layer.num_query_heads, layer.num_kv_heads, layer.head_size, layer.head_size_v
    if layer.kind == "mla":
        return {"q": (hidden, hq * (dk + dv)), "k": (hidden, dk), "v": (hidden, dv), "o": (hq * dk, hidden)}
    return {"q": (hidden, hq * dk), "k": (hidden, heads * dk), "v": (hidden, heads * dv), "o": (hq * dv, hidden)}


def compute_dtype(plan: VerifyPlan, device: torch.device) -> torch.dtype:
    if device.type == "cpu":
        return torch.float32
    name = plan.kv_dtype.name
    return TORCH_DTYPES[name] if name in ("fp32", "fp16", "bf16") else torch.bfloat16


def working_bytes(plan: VerifyPlan, compute_itemsize: int) -> int:
    """A generous bound on the decode's memory besides the cache: weights, one layer's K/V copies in
    the compute dtype, prefill scores and activations."""
    hidden = hidden_size(plan)
    weights = 0
    seen = set()
    widest = 0
    for layer in plan.layers:
        if layer.kind in ("state", "no_cache"):
            continue
        key = weight_key(layer)
        if key not in seen:
            seen.add(key)
            weights += sum(a * b for a, b in weight_shapes(layer, hidden).values()) * compute_itemsize
        widest = max(widest, layer.num_query_heads)
    rows, seq = plan.rows, max(plan.seq_tokens, plan.max_cache_tokens)
    layer_kv = max((layer.nbytes for layer in plan.layers), default=0)
    kv_copies = 4 * layer_kv * max(1, compute_itemsize // max(1, plan.kv_dtype.block_bytes))
    scores = 2 * min(SCORE_BYTES + rows * widest * seq * 4, rows * widest * plan.prompt_tokens * seq * 4)
    activations = 8 * rows * plan.prompt_tokens * hidden * 4
    return weights + kv_copies + scores + activations


# ---- measurement ---------------------------------------------------------------------------------


def storage_bytes(tensors: list[torch.Tensor], seen: set[int]) -> int:
    """Bytes of the distinct, non-empty storages behind ``tensors`` not yet in ``seen``."""
    total = 0
    for tensor in tensors:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if storage.nbytes() == 0 or ptr in seen:
            continue
        seen.add(ptr)
        total += storage.nbytes()
    return total


def available_bytes(device: torch.device) -> int:
    """Free memory: torch.cuda.mem_get_info on a GPU, MemAvailable of /proc/meminfo on the CPU."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(plan: VerifyPlan, device: torch.device, *, max_memory: int | None,
                 replan: Callable[[int], VerifyPlan]) -> None:
    """Refuse, with a --layers that fits, rather than run into an out-of-memory error."""
    free = available_bytes(device)
    budget = int(free * MEMORY_FRACTION)
    where = f"{MEMORY_FRACTION:.0%} of the {free:,} bytes free on {device.type}"
    if max_memory is not None and max_memory < budget:
        budget, where = max_memory, f"--max-memory {max_memory:,}"
    per_device = plan.tp if device.type == "cpu" else 1
    # NOTE: --tp 1 decodes in this process; more ranks are spawned processes, each with its own torch.
    processes = plan.tp * RANK_PROCESS_BYTES if device.type == "cpu" and plan.tp > 1 else 0
    if processes:
        check_cpu_ranks(plan.tp, budget, where)
    itemsize = torch.empty((), dtype=compute_dtype(plan, device)).element_size()

    def need(p: VerifyPlan) -> int:
        return processes + per_device * (p.predicted_bytes + working_bytes(p, itemsize))

    needed = need(plan)
    if needed <= budget:
        return
    fit = layers_that_fit(lambda n: need(replan(n)), plan.num_layers_total, budget)
    hint = (
        f"try --layers {fit} (the prediction then covers the same {fit} layers), or a smaller --batch"
        if fit else "no layer count fits: lower --batch, --prompt-len or --gen-len"
    )
    raise InputError(
        f"the decode needs about {needed:,} bytes ({plan.predicted_bytes:,} of cache per rank"
        + (f", {processes:,} for {plan.tp} rank processes" if processes else "") + f"), more than {where}",
        hint,
    )


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def decode_rank(plan: VerifyPlan, device: torch.device, *, rank: int = 0, group: Any = None, seed: int = 0,
                progress: bool = False) -> tuple[RankMeasurement, int]:
    """Prefill and decode on one rank; (measurement, weight bytes)."""
    cuda = device.type == "cuda"
    compute = compute_dtype(plan, device)
    torch.manual_seed(seed)
    if cuda:
        torch.cuda.set_device(device)
        # NOTE: warm up cuBLAS/SDPA so their workspaces exist before the baseline.
        warm = torch.randn(64, 64, device=device, dtype=compute)
        _ = warm @ warm
        del warm, _
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base_alloc, base_reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    decoder = None
    x = None
    try:
        decoder = Decoder(plan, device, compute, group)
        weight_bytes = decoder.weight_bytes
        x = torch.randn(plan.rows, plan.prompt_tokens, decoder.hidden, device=device, dtype=compute)
        times: list[float] = []
        with _progress(progress, plan) as advance, torch.no_grad():
            x = decoder.forward(x, 0)[:, -1:].contiguous()
            advance()
            for t in range(plan.prompt_tokens, plan.seq_tokens):
                if cuda:
                    torch.cuda.synchronize(device)
                begin = time.perf_counter()
                x = decoder.forward(x, t)
                if cuda:
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - begin)
                advance()
        caches = decoder.caches
        decoder.weights.clear()
        del x  # only the cache stays alive for the allocator readings
    except PoolExhausted as exc:
        decoder = None
        raise KvplanError(f"{exc}: the decode needed more blocks than predicted", "this is a kvplan bug") from None
    except (RuntimeError, MemoryError) as exc:
        if not (isinstance(exc, MemoryError) or _is_oom(exc)):
            raise
        decoder = None
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
        raise VerifyOOM(
            f"ran out of memory on {device} during the decode ({plan.predicted_bytes:,} bytes of cache predicted)",
            f"try --layers {max(1, plan.num_layers // 2)} or a smaller --batch; the memory was freed",
        ) from None
    seen: set[int] = set()
    layer_bytes = tuple(storage_bytes(cache.tensors(), seen) if cache is not None else 0 for cache in caches)
    peak_blocks = tuple(cache.peak_blocks() if isinstance(cache, LayerCache) else None for cache in caches)
    allocated = allocated_peak = reserved = reserved_peak = None
    if cuda:
        gc.collect()
        torch.cuda.synchronize(device)
        allocated = torch.cuda.memory_allocated(device) - base_alloc
        allocated_peak = torch.cuda.max_memory_allocated(device) - base_alloc
        reserved_peak = torch.cuda.max_memory_reserved(device) - base_reserved
        torch.cuda.empty_cache()
        reserved = torch.cuda.memory_reserved(device) - base_reserved
    steady = times[1:] if len(times) > 2 else times
    measurement = RankMeasurement(
        rank=rank, measured_bytes=sum(layer_bytes), layer_bytes=layer_bytes, peak_blocks=peak_blocks,
        allocated_bytes=allocated, allocated_peak_bytes=allocated_peak, reserved_bytes=reserved,
        reserved_peak_bytes=reserved_peak, step_seconds=statistics.median(steady) if steady else None,
    )
    del caches, decoder
    return measurement, weight_bytes


class _progress:
    """A rich progress bar on stderr: the prefill phase, then the decode steps with a rate and an ETA
    (a no-op when disabled)."""

    def __init__(self, enabled: bool, plan: VerifyPlan) -> None:
        self.enabled, self.plan = enabled, plan

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        if not sys.stderr.isatty():
            self.enabled = False  # plain lines: no bar to close
            return _progress_lines(self.plan)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(stderr=True), transient=True,
        )
        self.bar.__enter__()
        prefill = f"prefill {self.plan.prompt_tokens:,} tokens ({self.plan.layout})"
        task = self.bar.add_task(prefill, total=1 + self.plan.gen_tokens, rate="")
        decode = f"decode ({self.plan.layout})"

        def advance() -> None:
            self.bar.advance(task)
            speed = self.bar.tasks[0].speed
            self.bar.update(task, description=decode, rate=f"{speed:.1f} steps/s" if speed else "")

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(None, None, None)


#: Seconds between progress lines when stderr is not a terminal (a pipe or a CI log, where no bar is drawn).
PROGRESS_EVERY_S = 5.0


def _progress_lines(plan: VerifyPlan, every_s: float | None = None,
                    clock: Callable[[], float] = time.monotonic) -> Callable[[], None]:
    """Progress for a pipe: a plain line on stderr every ``every_s`` seconds (default :data:`PROGRESS_EVERY_S`):
    the step, the rate and the time left."""
    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    total, begin = 1 + plan.gen_tokens, clock()
    state = {"done": 0, "said": begin}

    def advance() -> None:
        state["done"] += 1
        now = clock()
        if now - state["said"] < every_s or state["done"] >= total:
            return
        state["said"] = now
        rate = state["done"] / (now - begin)
        left = (total - state["done"]) / rate if rate else 0.0
        print(f"verify: step {state['done']:,}/{total:,} ({plan.layout}, {rate:.2f} steps/s, about {left:.0f} s left)",
              file=sys.stderr, flush=True)

    return advance


# ---- entry points --------------------------------------------------------------------------------


def resolve_device(gpu: bool, tp: int) -> torch.device:
    if not gpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise InputError(
            "--gpu asks for CUDA, but torch sees no CUDA device"
            + ("" if torch.version.cuda else f" (this torch {torch.__version__} is a CPU build)"),
            "drop --gpu to verify on the CPU, or install a CUDA build of torch",
        )
    if torch.cuda.device_count() < tp:
        raise InputError(f"--tp {tp} needs {tp} GPUs, torch sees {torch.cuda.device_count()}",
                         f"use --tp {torch.cuda.device_count()} or drop --gpu to run the ranks on the CPU")
    return torch.device("cuda", 0)


def run_verify(plan: VerifyPlan, *, gpu: bool = False, seed: int = 0, progress: bool = False,
               max_memory: int | None = None, bandwidth: int | None = None,
               replan: Callable[[int], VerifyPlan] | None = None) -> VerifyMeasurement:
    """Run the decode (on ``plan.tp`` ranks) and measure it."""
    device = resolve_device(gpu, plan.tp)
    check_memory(plan, device, max_memory=max_memory, replan=replan or (lambda n: plan))
    ranks: tuple[RankMeasurement, ...]
    if plan.tp == 1:
        rank, weight_bytes = decode_rank(plan, device, seed=seed, progress=progress)
        ranks = (rank,)
        backend = None
    else:
        ranks, weight_bytes = _run_ranks(plan, gpu=gpu, seed=seed, progress=progress)
        backend = "nccl" if gpu else "gloo"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return VerifyMeasurement(
        device=device.type, device_name=name, backend=backend, torch_version=str(torch.__version__),
        weight_bytes=weight_bytes, ranks=ranks,
        bandwidth_bytes_per_s=(bandwidth or bandwidth_for(name)) if device.type == "cuda" else None,
        notes=(
            (f"the residual stream is {hidden_size(plan)} values wide (at most {MAX_HIDDEN}); "
             "state layers run a stand-in recurrence on their real state tensors, not a Mamba scan"),
        ),
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_ranks(plan: VerifyPlan, *, gpu: bool, seed: int, progress: bool) -> tuple[tuple[RankMeasurement, ...], int]:
    import torch.multiprocessing as mp

    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="kvplan-verify-") as tmp:
        mp.start_processes(_rank_main, args=(plan, gpu, seed, progress, port, tmp), nprocs=plan.tp, join=True,
                           start_method="spawn")
        results = [json.loads(Path(tmp, f"rank{rank}.json").read_text()) for rank in range(plan.tp)]
    for result in results:
        if "error" in result:
            raise (VerifyOOM if result.get("oom") else KvplanError)(result["error"], result.get("hint"))
    ranks = tuple(
        RankMeasurement(**{k: tuple(v) if isinstance(v, list) else v for k, v in r["measurement"].items()})  # type: ignore[arg-type]
        for r in results
    )
    return ranks, results[0]["weight_bytes"]


def _rank_main(rank: int, plan: VerifyPlan, gpu: bool, seed: int, progress: bool, port: int, outdir: str) -> None:
    """One rank of ``--tp``: join the process group on 127.0.0.1, decode its head shard, write its numbers."""
    import torch.distributed as dist

    backend = "nccl" if gpu else "gloo"
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    if not gpu:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // plan.tp))
    out = Path(outdir, f"rank{rank}.json")
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=plan.tp)
    try:
        measurement, weight_bytes = decode_rank(plan, device, rank=rank, group=dist.group.WORLD, seed=seed,
                                                progress=progress and rank == 0)
        out.write_text(json.dumps({"measurement": asdict(measurement), "weight_bytes": weight_bytes}))
    except KvplanError as exc:
        out.write_text(json.dumps({"error": f"rank {rank}: {exc.message}", "hint": exc.hint,
                                   "oom": isinstance(exc, VerifyOOM)}))
    finally:
        dist.destroy_process_group()
