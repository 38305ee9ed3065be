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
from typing import Protocol

from kvplan.errors import InputError
from kvplan.gguf.geometry import GgufMetaReader
from kvplan.gguf.reader import GgufHeader, TensorInfo
from kvplan.models.tensors import WeightPart, WeightsEstimate

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
        layer = weights.layer_of(tensor)
        if layer is not None and layer < weights.block_count:
            device_bytes[device_of(layer)] += tensor.nbytes
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


# ---- capacity: the file's weights as kvplan.models' WeightsEstimate ------------------------------

#: Tensor name -> weight role (kvplan.models' part names), first match wins.
_ROLES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), role) for p, role in (
    (r"^token_embd\.", "embed_tokens"),
    (r"^output\.", "lm_head"),
    (r"norm", "norms"),
    (r"_(gate|up|down|gate_up)_exps\b", "experts"),
    (r"_shexp\b", "shared_experts"),
    (r"ffn_gate_inp\b|exp_probs_b\b", "router"),
    (r"\.attn_", "attention"),
    (r"\.ffn_", "mlp"),
    (r"\.ssm_", "ssm"),
))
#: Roles llama.cpp keeps whole on one device (never split by rows); the rest are matrices.
_REPLICATED = frozenset({"norms", "router"})


def role_of(name: str) -> str:
    return next((role for pattern, role in _ROLES if pattern.search(name)), "other")


@dataclass(frozen=True, kw_only=True, slots=True)
class LlamaCppLayerSplit:
    """Weight bytes per device under llama.cpp's layer split, for any device count: what
    ``WeightsEstimate.device_split`` asks. Per-block bytes are summed once; ``device_bytes`` is O(blocks)."""

    block_bytes: tuple[int, ...]
    output_bytes: int
    """The output layer's tensors (output, output_norm; a copy of token_embd when tied)."""
    host_bytes: int
    tensor_split: tuple[float, ...] | None = None
    """``--tensor-split``, used when it has one ratio per device (else an even split)."""
    n_gpu_layers: int | None = None
    """llama.cpp ``-ngl``: the last N of the blocks + output layer on the GPUs, the rest in host memory
    (None: all of them)."""

    def gpu_start(self) -> tuple[int, int]:
        """(first layer on a GPU, layers on the GPUs): ``i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)`` and
        ``act_gpu_layers = min(n_gpu_layers, n_layer + 1)`` (``llama_model::load_tensors``)."""
        slots = len(self.block_bytes) + 1
        ngl = slots if self.n_gpu_layers is None else max(0, min(self.n_gpu_layers, slots))
        return slots - ngl, ngl

    def device_bytes(self, num_devices: int) -> tuple[int, ...]:
        ratios = self.tensor_split if self.tensor_split is not None and len(self.tensor_split) == num_devices else None
        shares = list(ratios) if ratios is not None else [1.0] * num_devices
        total = sum(shares)
        cumulative, running = [], 0.0
        for share in shares:
            running += share
            cumulative.append(running / total)
        start, on_gpu = self.gpu_start()

        def device_of(il: int) -> int:
            return next((d for d, edge in enumerate(cumulative) if edge > (il - start) / on_gpu), num_devices - 1)

        out = [0] * num_devices
        for il, nbytes in enumerate(self.block_bytes):
            if il >= start:
                out[device_of(il)] += nbytes
        if on_gpu:
            out[device_of(len(self.block_bytes))] += self.output_bytes
        return tuple(out)


def llama_cpp_split(weights: GgufWeights, tensor_split: Sequence[float] | None = None) -> LlamaCppLayerSplit:
    """Sum the tensor table by block once (as :func:`layer_split` places it)."""
    one = layer_split(weights, num_devices=1)
    blocks = [0] * weights.block_count
    for tensor in weights.tensors:
        il = weights.layer_of(tensor)
        if il is not None and il < weights.block_count:
            blocks[il] += tensor.nbytes
    return LlamaCppLayerSplit(block_bytes=tuple(blocks), output_bytes=one.device_bytes[0] - sum(blocks),
                              host_bytes=one.host_bytes, tensor_split=tuple(tensor_split) if tensor_split else None)


def file_type_name(metadata: dict[str, object]) -> str | None:
    """``general.file_type`` as llama.cpp names it (15 -> Q4_K_M), None when absent or unknown."""
    value = metadata.get("general.file_type")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    try:
        from gguf import LlamaFileType
    except ImportError:  # pragma: no cover - the reader needs gguf already
        return None
    try:
        return LlamaFileType(value).name.removeprefix("MOSTLY_")
    except ValueError:
        return None


class ReadModel(Protocol):
    """What :func:`weights_estimate` reads of a :class:`kvplan.gguf.model.GgufModel` (that module builds on
    this one, so it is named by its shape here)."""

    @property
    def model_id(self) -> str: ...

    @property
    def header(self) -> GgufHeader: ...

    def weights(self) -> GgufWeights: ...


def weights_estimate(model: ReadModel, *, engine: str, splits_layers: bool,
                     tensor_split: Sequence[float] | None = None) -> tuple[WeightsEstimate, list[str]]:
    """The file's weights as `kvplan capacity` counts them: exact bytes per tensor (ggml block sizes),
    grouped by role; for an engine that splits layers over devices (llama.cpp), per device by that
    split with token_embd in host memory."""
    weights = model.weights()
    meta = model.header.metadata
    r = GgufMetaReader(model.header, label=model.model_id)
    groups: dict[str, list[TensorInfo]] = {}
    for tensor in weights.tensors:
        groups.setdefault(role_of(tensor.name), []).append(tensor)
    parts = []
    for role, tensors in groups.items():
        types: dict[str, int] = {}
        for t in tensors:
            types[t.type_name] = types.get(t.type_name, 0) + 1
        storage = ", ".join(f"{name} x{n}" for name, n in sorted(types.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(WeightPart(name=role, other_parameters=sum(_count(t.shape) for t in tensors),
                                bytes=sum(t.nbytes for t in tensors), storage=f"gguf {storage}",
                                tp_sharded=role not in _REPLICATED))

    def meta_int(suffix: str) -> int | None:
        value = meta.get(r.key(suffix))
        if isinstance(value, list):  # per-layer arrays (head_count_kv, feed_forward_length): the largest
            value = max((v for v in value if isinstance(v, int)), default=None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    notes: list[str] = []
    hidden = meta_int("embedding_length")
    heads = meta_int("attention.head_count") or 0
    kv_heads = meta_int("attention.head_count_kv") or heads
    head_k = meta_int("attention.key_length") or (hidden // heads if hidden and heads else 0)
    head_v = meta_int("attention.value_length") or head_k
    experts, used = meta_int("expert_count"), meta_int("expert_used_count")
    ffn = meta_int("feed_forward_length") or 0
    expert_ffn = meta_int("expert_feed_forward_length")
    mlp = (used or 0) * expert_ffn + (meta_int("expert_shared_feed_forward_length") or 0) if experts and expert_ffn else ffn
    embd = next((t for t in weights.tensors if t.name == "token_embd.weight"), None)
    vocab = embd.shape[1] if embd is not None and len(embd.shape) > 1 else 0
    if not hidden or not vocab:
        notes.append(f"{model.model_id}: {r.key('embedding_length')} or token_embd.weight missing; the activation "
                     "estimate leaves them out (pass --reserve SIZE for llama.cpp's compute buffers)")
    file_type = file_type_name(meta)
    by_type = weights.by_type()
    dtype = file_type or (by_type[0].type_name if by_type else "unknown")
    types_text = ", ".join(f"{t.type_name} {t.total_bytes:,} B ({t.num_tensors} tensors)" for t in by_type)
    notes.append(f"weights from the GGUF tensor table{' (general.file_type ' + file_type + ')' if file_type else ''}: "
                 f"{weights.total_bytes:,} B = {types_text}")
    split = None
    if splits_layers:
        split = llama_cpp_split(weights, tensor_split)
        notes.append(f"llama.cpp layer split (-sm layer, -ngl all): token_embd stays in host memory "
                     f"({split.host_bytes:,} B, not counted per GPU); blocks and the output layer go to the GPUs")
        if "output.weight" not in {t.name for t in weights.tensors}:
            notes.append("no output.weight (tied embeddings): llama.cpp loads a copy of token_embd for the output layer")
    else:
        notes.append(f"weights counted as the GGUF stores them; {engine} splits them by its own rule (tp/pp), "
                     "token_embd included")
    estimate = WeightsEstimate(
        model_id=model.model_id, model_type=str(model.header.architecture), parts=tuple(parts), dtype=dtype,
        # NOTE: the activation estimate counts 16-bit values, as for a config.json (llama.cpp's rule in budget.py).
        dtype_bytes=2, quantisation=None, num_experts=experts, experts_per_token=used, source="gguf",
        hidden_size=hidden or 0, mlp_width=mlp, qkv_width=heads * head_k + kv_heads * (head_k + head_v),
        vocab_size=vocab, notes=tuple(notes), device_split=split,
    )
    return estimate, []
