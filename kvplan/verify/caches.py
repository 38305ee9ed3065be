"""The cache layouts of the real decode (torch): grow-by-cat, ring buffer, paged pool, quantized, state.

Each class holds one layer's cache the way an engine lays it out (:mod:`kvplan.verify.predict`
names the layouts), so :mod:`kvplan.verify.decode` can measure the storages they really allocate.
"""

from __future__ import annotations

import torch

from kvplan.verify.predict import LayerPlan, VerifyPlan

TORCH_DTYPES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
    "uint8": torch.uint8,
}


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
        summary = torch.stack([s.float().mean(dim=tuple(range(1, s.dim()))) for s in self.states.values()]).sum(dim=0)
        return torch.ones_like(x) * (0.01 * summary).view(-1, 1, 1).to(x.dtype)

    def tensors(self) -> list[torch.Tensor]:
        return list(self.states.values())
