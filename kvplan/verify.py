"""The real decode behind ``kvplan verify``: the only kvplan module that imports torch.

A decoder with the model's per-layer cache geometry (query and KV heads, K/V head dims, windows,
chunks, MLA latent, state tensors), random weights shared by layers of the same shape, a prefill
and a decode loop over one of the layouts of :mod:`kvplan.verify_predict`. After the decode the
cache tensors are measured (distinct storages) and, on CUDA, the caching allocator's counters.

Nothing here sizes a cache from the prediction except the paged pools (a paged engine sizes its
pool from a budget too); their check is the block tables' peak use.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kvplan.errors import InputError, KvplanError
from kvplan.verify_predict import LayerPlan, VerifyPlan, layers_that_fit
from kvplan.verify_report import RankMeasurement, VerifyMeasurement

TORCH_DTYPES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
    "uint8": torch.uint8,
}

#: Share of free memory the decode may plan to use (the rest is headroom for the runtime).
MEMORY_FRACTION = 0.9
#: Most bytes of attention scores one chunk of prefill queries may hold.
SCORE_BYTES = 64 * 1024 * 1024


class VerifyOOM(KvplanError):
    """The decode ran out of memory despite the pre-check."""


class PoolExhausted(RuntimeError):
    """The paged pool had no free block: the prediction was too small."""


# ---- cache layouts -------------------------------------------------------------------------------


def _fresh(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A contiguous copy of ``x`` in ``dtype`` with its own storage of exactly its size."""
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    out.copy_(x)
    return out


class LayerCache:
    """Holds one attention layer's K/V: ``prefill`` stores the prompt, ``step`` appends one token and
    returns what the new token attends to: keys [R, h, n, dk], values [R, h, n, dv] in the compute dtype
    and the absolute position of each of the n slots (-1 for empty ones)."""

    def __init__(self, layer: LayerPlan, plan: VerifyPlan, device: torch.device, compute: torch.dtype) -> None:
        self.layer, self.plan, self.device, self.compute = layer, plan, device, compute
        self.rows = plan.rows
        self.dtype = TORCH_DTYPES[plan.kv_dtype.name]
        self.window = layer.window

    def prefill(self, k: torch.Tensor, v: torch.Tensor) -> None:
        raise NotImplementedError

    def step(self, k: torch.Tensor, v: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def after_step(self, t: int) -> None:
        """Drop what the next token no longer needs."""

    def tensors(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def peak_blocks(self) -> int | None:
        return None

    def keep_from(self, t: int) -> int:
        """First position token ``t + 1`` still needs."""
        return 0 if self.window is None else max(0, t + 2 - self.window)


class DynamicLayer(LayerCache):
    """Grow by torch.cat, like Hugging Face DynamicCache. A windowed layer keeps its last W - 1 tokens
    as a view of the concatenation (DynamicSlidingWindowLayer), so the W-token storage stays alive;
    with beams, the reorder after every step (index_select, as generate's beam search does) copies
    the kept tokens into compact tensors."""

    def _keep(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Keep ``k``/``v`` (positions self.start ..) cropped to the last W - 1 tokens, then reorder beams."""
        if self.window is not None and k.shape[2] > self.window - 1:
            drop = k.shape[2] - (self.window - 1)
            k, v = k[:, :, drop:], v[:, :, drop:]
            self.start += drop
        if self.plan.beams > 1:
            beams = torch.arange(self.rows, device=self.device).view(self.plan.batch, self.plan.beams)
            order = beams.roll(1, dims=1).flatten()  # a real reorder within each sequence's beams
            k, v = k.index_select(0, order), v.index_select(0, order)
        self.k, self.v = k, v

    def prefill(self, k: torch.Tensor, v: torch.Tensor) -> None:
        self.start = 0
        self._keep(_fresh(k, self.dtype), _fresh(v, self.dtype))

    def step(self, k, v, t):
        full_k = torch.cat([self.k, k.to(self.dtype)], dim=2)
        full_v = torch.cat([self.v, v.to(self.dtype)], dim=2)
        pos = torch.arange(self.start, self.start + full_k.shape[2], device=self.device)
        self._keep(full_k, full_v)
        return full_k.to(self.compute), full_v.to(self.compute), pos

    def tensors(self):
        return [self.k, self.v]


class RingLayer(LayerCache):
    """Preallocated slots (static and sliding layouts): position p lives in slot p % slots."""

    def __init__(self, layer, plan, device, compute) -> None:
        super().__init__(layer, plan, device, compute)
        slots = layer.cache_tokens
        shape = (self.rows, layer.num_kv_heads, slots)
        self.k = torch.zeros((*shape, layer.head_size), dtype=self.dtype, device=device)
        self.v = torch.zeros((*shape, layer.head_size_v), dtype=self.dtype, device=device)
        self.slot_pos = torch.full((slots,), -1, dtype=torch.long, device=device)
        self.slots = slots

    def _write(self, k: torch.Tensor, v: torch.Tensor, first: int) -> None:
        positions = torch.arange(first, first + k.shape[2], device=self.device)
        slots = positions % self.slots
        self.k[:, :, slots] = k.to(self.dtype)
        self.v[:, :, slots] = v.to(self.dtype)
        self.slot_pos[slots] = positions

    def prefill(self, k, v):
        prompt = k.shape[2]
        start = max(0, prompt - self.slots)
        self._write(k[:, :, start:], v[:, :, start:], start)

    def step(self, k, v, t):
        self._write(k, v, t)
        return self.k.to(self.compute), self.v.to(self.compute), self.slot_pos

    def tensors(self):
        return [self.k, self.v]


class PagedLayer(LayerCache):
    """A K pool and a V pool of blocks; per-sequence block tables map logical blocks to physical ones."""

    def __init__(self, layer, plan, device, compute) -> None:
        super().__init__(layer, plan, device, compute)
        bs = plan.block_size
        num_blocks = self.rows * layer.blocks_per_seq
        self.bs = bs
        self.k = torch.zeros((num_blocks, bs, layer.num_kv_heads, layer.head_size), dtype=self.dtype, device=device)
        self.v = torch.zeros((num_blocks, bs, layer.num_kv_heads, layer.head_size_v), dtype=self.dtype, device=device)
        self.free = list(range(num_blocks - 1, -1, -1))
        self.tables: list[dict[int, int]] = [{} for _ in range(self.rows)]
        self.written_from = 0
        self.peak = 0

    def _block(self, row: int, logical: int) -> int:
        table = self.tables[row]
        if logical not in table:
            if not self.free:
                raise PoolExhausted(
                    f"layer {self.layer.index}: the paged pool of {self.k.shape[0]} blocks is exhausted"
                )
            table[logical] = self.free.pop()
        return table[logical]

    def _write(self, k: torch.Tensor, v: torch.Tensor, first: int) -> None:
        count = k.shape[2]
        positions = list(range(first, first + count))
        phys = torch.tensor(
            [[self._block(row, p // self.bs) for p in positions] for row in range(self.rows)],
            dtype=torch.long, device=self.device,
        )
        offsets = torch.tensor([p % self.bs for p in positions], dtype=torch.long, device=self.device)
        self.k[phys, offsets] = k.permute(0, 2, 1, 3).to(self.dtype)
        self.v[phys, offsets] = v.permute(0, 2, 1, 3).to(self.dtype)
        self.peak = max(self.peak, len(self.tables[0]))

    def _gather(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logical = sorted(self.tables[0])
        table = torch.tensor([[self.tables[row][j] for j in logical] for row in range(self.rows)],
                             dtype=torch.long, device=self.device)

        def read(pool: torch.Tensor) -> torch.Tensor:
            blocks = pool[table]  # [R, n_blocks, bs, h, d]
            rows, nb, bs, heads, dim = blocks.shape
            return blocks.reshape(rows, nb * bs, heads, dim).permute(0, 2, 1, 3).to(self.compute)

        pos = torch.tensor([j * self.bs + i for j in logical for i in range(self.bs)], device=self.device)
        pos = torch.where(pos >= self.written_from, pos, torch.full_like(pos, -1))
        return read(self.k), read(self.v), pos

    def prefill(self, k, v):
        start = self.keep_from(k.shape[2] - 1)
        self.written_from = start
        self._write(k[:, :, start:], v[:, :, start:], start)

    def step(self, k, v, t):
        self._write(k, v, t)
        keys, values, pos = self._gather()
        pos = torch.where(pos <= t, pos, torch.full_like(pos, -1))
        return keys, values, pos

    def after_step(self, t: int) -> None:
        if self.window is None:
            return
        keep = self.keep_from(t)
        for table in self.tables:
            for logical in [j for j in table if (j + 1) * self.bs - 1 < keep]:
                self.free.append(table.pop(logical))

    def tensors(self):
        return [self.k, self.v]

    def peak_blocks(self) -> int | None:
        return self.peak


class QuantizedLayer(LayerCache):
    """Group-quantized codes (uint8, int4 packed two per byte) with a scale and a zero point per group,
    plus a full-precision residual of the most recent tokens, re-quantized when it fills up."""

    def __init__(self, layer, plan, device, compute) -> None:
        super().__init__(layer, plan, device, compute)
        self.bits = plan.quant_bits or 8
        self.group = plan.quant_group_size
        self.levels = (1 << self.bits) - 1
        self.store: dict[str, list[torch.Tensor]] = {}
        self.residual: dict[str, torch.Tensor | None] = {"k": None, "v": None}

    def _quantize(self, x: torch.Tensor) -> list[torch.Tensor]:
        rows, heads, tokens, dim = x.shape
        groups = x.float().reshape(rows, heads, tokens, dim // self.group, self.group)
        low = groups.amin(dim=-1)
        scale = ((groups.amax(dim=-1) - low) / self.levels).clamp(min=1e-8)
        codes = ((groups - low.unsqueeze(-1)) / scale.unsqueeze(-1)).round().clamp(0, self.levels)
        codes = codes.reshape(rows, heads, tokens, dim).to(torch.uint8)
        if self.bits == 4:
            codes = codes[..., 0::2] | (codes[..., 1::2] << 4)
        return [codes, scale.to(self.dtype), low.to(self.dtype)]

    def _dequantize(self, name: str) -> torch.Tensor:
        codes, scale, low = self.store[name]
        if self.bits == 4:
            codes = torch.stack([codes & 0x0F, codes >> 4], dim=-1).flatten(-2)
        rows, heads, tokens, dim = codes.shape
        groups = codes.to(self.compute).reshape(rows, heads, tokens, dim // self.group, self.group)
        values = groups * scale.to(self.compute).unsqueeze(-1) + low.to(self.compute).unsqueeze(-1)
        return values.reshape(rows, heads, tokens, dim)

    def _append_quantized(self, name: str, x: torch.Tensor) -> None:
        parts = self._quantize(x)
        if name in self.store:
            parts = [torch.cat([old, new], dim=2) for old, new in zip(self.store[name], parts)]
        self.store[name] = parts

    def prefill(self, k, v):
        self._append_quantized("k", k)
        self._append_quantized("v", v)
        self.tokens = k.shape[2]

    def step(self, k, v, t):
        out = []
        for name, x in (("k", k), ("v", v)):
            res = self.residual[name]
            res = _fresh(x, self.dtype) if res is None else torch.cat([res, x.to(self.dtype)], dim=2)
            self.residual[name] = res
            out.append(torch.cat([self._dequantize(name), res.to(self.compute)], dim=2))
        self.tokens += 1
        pos = torch.arange(self.tokens, device=self.device)
        return out[0], out[1], pos

    def after_step(self, t: int) -> None:
        for name in ("k", "v"):
            res = self.residual[name]
            if res is not None and res.shape[2] >= self.plan.residual_tokens:
                self._append_quantized(name, res)
                self.residual[name] = None

    def tensors(self):
        found = [t for parts in self.store.values() for t in parts]
        return found + [r for r in self.residual.values() if r is not None]


LAYOUT_CLASSES: dict[str, type[LayerCache]] = {
    "dynamic": DynamicLayer, "static": RingLayer, "sliding": RingLayer, "paged": PagedLayer,
    "quantized": QuantizedLayer,
}


class StateLayer:
    """A recurrent layer's state tensors with their real shapes and dtype, updated by a cheap stand-in
    recurrence (a shift of the conv window and a decayed accumulate), not a Mamba scan."""

    def __init__(self, layer: LayerPlan, plan: VerifyPlan, device: torch.device) -> None:
        self.states = {name: torch.zeros((plan.rows, *shape), dtype=TORCH_DTYPES[dtype], device=device)
                       for name, shape, dtype in layer.state_shapes}

    def update(self, x: torch.Tensor) -> torch.Tensor:
        drive = torch.tanh(x.float().mean(dim=(1, 2)))  # [R]
        for name, state in self.states.items():
            extra = (1,) * (state.dim() - 1)
            if name == "conv":
                state.copy_(torch.roll(state, shifts=-1, dims=1))
                state[:, -1] = drive.view(-1, *extra[1:]).to(state.dtype)
            else:
                state.mul_(0.9).add_((0.1 * drive).view(-1, *extra).to(state.dtype))
        summary = sum(s.float().mean(dim=tuple(range(1, s.dim()))) for s in self.states.values())
        return torch.ones_like(x) * (0.01 * summary).view(-1, 1, 1).to(x.dtype)

    def tensors(self) -> list[torch.Tensor]:
        return list(self.states.values())


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
    itemsize = torch.empty((), dtype=compute_dtype(plan, device)).element_size()

    def need(p: VerifyPlan) -> int:
        return per_device * (p.predicted_bytes + working_bytes(p, itemsize))

    needed = need(plan)
    if needed <= budget:
        return
    fit = layers_that_fit(lambda n: need(replan(n)), plan.num_layers_total, budget)
    hint = (
        f"try --layers {fit} (the prediction then covers the same {fit} layers), or a smaller --batch"
        if fit else "no layer count fits: lower --batch, --prompt-len or --gen-len"
    )
    raise InputError(
        f"the decode needs about {needed:,} bytes ({plan.predicted_bytes:,} of cache per rank), more than {where}",
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
    """A rich progress bar on stderr over the prefill and the decode steps (a no-op when disabled)."""

    def __init__(self, enabled: bool, plan: VerifyPlan) -> None:
        self.enabled, self.plan = enabled, plan

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True,
        )
        self.bar.__enter__()
        task = self.bar.add_task(f"decode ({self.plan.layout})", total=1 + self.plan.gen_tokens)
        return lambda: self.bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(None, None, None)


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
    from kvplan.verify_predict import bandwidth_for

    device = resolve_device(gpu, plan.tp)
    check_memory(plan, device, max_memory=max_memory, replan=replan or (lambda n: plan))
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
        RankMeasurement(**{k: tuple(v) if isinstance(v, list) else v for k, v in r["measurement"].items()})
        for r in results
    )
    return ranks, results[0]["weight_bytes"]


def _rank_main(rank: int, plan: VerifyPlan, gpu: bool, seed: int, progress: bool, port: int, outdir: str) -> None:
    """One rank of ``--tp``: join the process group on 127.0.0.1, decode its head shard, write its numbers."""
    import dataclasses

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
        out.write_text(json.dumps({"measurement": dataclasses.asdict(measurement), "weight_bytes": weight_bytes}))
    except KvplanError as exc:
        out.write_text(json.dumps({"error": f"rank {rank}: {exc.message}", "hint": exc.hint,
                                   "oom": isinstance(exc, VerifyOOM)}))
    finally:
        dist.destroy_process_group()
