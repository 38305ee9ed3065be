"""Weight bytes from a GGUF tensor table: exact per tensor (ggml block sizes), total, and per device.

A tensor of ``n`` values in a ggml type with blocks of ``B`` values stored in ``S`` bytes takes
``n / B * S`` bytes (Q4_K: 256 values in 144 bytes; Q8_0: 32 in 34; F16: 1 in 2).

Per device, llama.cpp's layer split (``-sm layer``, ``llama_model::load_tensors``): with every layer
offloaded (``-ngl`` all), the ``block_count`` repeating layers plus the output layer are cut by the
cumulative ``--tensor-split`` ratios; layer ``il`` goes to the first device whose cumulative share
exceeds ``il / (block_count + 1)``; the output layer (``il = block_count``) lands on the last device.
The input embedding (``token_embd``) always stays in host memory; when the file has no ``output``
tensor (tied embeddings), llama.cpp loads a copy of ``token_embd`` onto the output layer's device.
llama.cpp's own default split follows each device's free memory; for identical GPUs that is even,
the default here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.errors import InputError
from kvplan.gguf.reader import TensorInfo

_BLOCK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True, kw_only=True, slots=True)
class TypeTotal:
    type_name: str
    num_tensors: int
    parameters: int
    total_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GgufWeights:
    tensors: tuple[TensorInfo, ...]
    block_count: int

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def parameters(self) -> int:
        return sum(_count(t.shape) for t in self.tensors)

    def by_type(self) -> list[TypeTotal]:
        """Tensors grouped by ggml type, largest bytes first."""
        groups: dict[str, list[TensorInfo]] = {}
        for tensor in self.tensors:
            groups.setdefault(tensor.type_name, []).append(tensor)
        totals = [
            TypeTotal(type_name=name, num_tensors=len(ts), parameters=sum(_count(t.shape) for t in ts),
                      total_bytes=sum(t.nbytes for t in ts))
            for name, ts in groups.items()
        ]
        return sorted(totals, key=lambda t: (-t.total_bytes, t.type_name))

    def layer_of(self, tensor: TensorInfo) -> int | None:
        """The block index of ``blk.N.*`` tensors; None for the rest."""
        match = _BLOCK.match(tensor.name)
        return int(match.group(1)) if match else None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceSplit:
    device_bytes: tuple[int, ...]
    """Weight bytes each device holds, in device order."""
    host_bytes: int
    """Bytes llama.cpp keeps in host memory (the input embedding)."""
    layers_per_device: tuple[tuple[int, ...], ...]
    """Block indices on each device; the output layer is on ``output_device``."""
    output_device: int
    notes: tuple[str, ...] = ()


def layer_split(weights: GgufWeights, *, num_devices: int = 1, tensor_split: Sequence[float] | None = None) -> DeviceSplit:
    """Weight bytes per device under llama.cpp's layer split with every layer offloaded."""
    if num_devices < 1:
        raise InputError(f"the number of devices must be at least 1, got {num_devices}")
    ratios = list(tensor_split) if tensor_split is not None else [1.0] * num_devices
    if len(ratios) != num_devices:
        raise InputError(f"--tensor-split has {len(ratios)} ratios for {num_devices} devices", "give one ratio per device, e.g. -ts 3,1")
    if any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise InputError(f"--tensor-split {','.join(map(str, ratios))} must be non-negative with a positive sum", "e.g. -ts 1,1")
    cumulative: list[float] = []
    running = 0.0
    for ratio in ratios:
        running += ratio
        cumulative.append(running / sum(ratios))
    slots = weights.block_count + 1  # repeating layers + the output layer

    def device_of(il: int) -> int:
        # NOTE: std::upper_bound(splits, float(il) / act_gpu_layers) in llama_model::load_tensors.
        share = il / slots
        return next((d for d, edge in enumerate(cumulative) if edge > share), num_devices - 1)

    output_device = device_of(weights.block_count)
    device_bytes = [0] * num_devices
    layers: list[list[int]] = [[] for _ in range(num_devices)]
    for il in range(weights.block_count):
        layers[device_of(il)].append(il)
    host = 0
    names = {t.name for t in weights.tensors}
    notes: list[str] = ["token_embd stays in host memory (llama.cpp never offloads the input layer)"]
    for tensor in weights.tensors:
        il = weights.layer_of(tensor)
        if il is not None and il < weights.block_count:
            device_bytes[device_of(il)] += tensor.nbytes
        elif tensor.name.startswith("token_embd."):
            host += tensor.nbytes
            if tensor.name == "token_embd.weight" and "output.weight" not in names:
                device_bytes[output_device] += tensor.nbytes
                notes.append("no output.weight (tied embeddings): llama.cpp loads a copy of token_embd for the output layer")
        else:
            device_bytes[output_device] += tensor.nbytes
    return DeviceSplit(device_bytes=tuple(device_bytes), host_bytes=host,
                       layers_per_device=tuple(tuple(ls) for ls in layers), output_device=output_device, notes=tuple(notes))


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
