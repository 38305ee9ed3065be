"""Weight tensors, generically: the matrices and vectors a family's layout is made of, the estimate
they add up to, and the building blocks every family counts with (GQA attention, experts).
Family-free: what a given architecture holds is said in its own module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.units import cdiv

#: Roles whose matrices a weight-quantisation method converts (unless listed as not converted).
QUANTISED_ROLES = frozenset({"attention", "mlp", "experts", "shared_experts"})

@dataclass(frozen=True, kw_only=True, slots=True)
class Matrix:
    """``count`` linear weight matrices of ``in_features`` x ``out_features``."""

    in_features: int
    out_features: int
    count: int = 1

    @property
    def parameters(self) -> int:
        return self.in_features * self.out_features * self.count


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightPart:
    """A group of tensors that share a role (and so a storage format)."""

    name: str
    """``embed_tokens``, ``lm_head``, ``attention``, ``mlp``, ``experts``, ``shared_experts``,
    ``router``, ``norms``, ``position_embeddings``, ``vision_tower``, ``projector``."""
    matrices: tuple[Matrix, ...] = ()
    other_parameters: int = 0
    """Biases, norm weights, conv kernels and other vectors (stored in the checkpoint dtype)."""
    tp_sharded: bool = True
    """Split across tensor-parallel ranks (norms and routers are replicated)."""
    vision: bool = False
    bytes: int = 0
    """Filled in by the storage layout."""
    storage: str = ""

    @property
    def parameters(self) -> int:
        return sum(m.parameters for m in self.matrices) + self.other_parameters


@dataclass(frozen=True, kw_only=True, slots=True)
class Quantisation:
    """How a checkpoint stores its quantised matrices."""

    method: str
    """``fp8``, ``awq``, ``gptq``, ``mxfp4``, ``bitsandbytes``, ``compressed-tensors``..."""
    bits: int
    group_size: int | None = None
    """Values per scale along the input dimension (None: one scale per output row or tensor)."""
    block: tuple[int, int] | None = None
    """fp8 block scales: (out, in) block shape."""
    scale_bytes: int = 2
    zero_bits: int = 0
    """Bits of zero point per group (AWQ/GPTQ store them packed at the weight's bit width)."""
    g_idx: bool = False
    """GPTQ stores an int32 group index per input feature."""
    roles: frozenset[str] = QUANTISED_ROLES
    not_converted: tuple[str, ...] = ()
    by_role: tuple[tuple[str, Quantisation], ...] = ()
    """A mixed-precision checkpoint (ModelOpt ``MIXED_PRECISION``): each role's own format; roles not named
    stay in the checkpoint dtype."""

    def for_role(self, role: str) -> Quantisation | None:
        """The format of ``role``'s matrices (None: not quantised)."""
        if self.by_role:
            return dict(self.by_role).get(role)
        return self if role in self.roles else None

    def describe(self) -> str:
        if self.by_role:
            return f"{self.method}: " + ", ".join(f"{role} {q.describe()}" for role, q in self.by_role)
        text = f"{self.method} {self.bits}-bit"
        if self.block:
            text += f", {self.block[0]}x{self.block[1]} block scales"
        elif self.group_size:
            text += f", group size {self.group_size}"
        return text

    def matrix_bytes(self, m: Matrix) -> int:
        values = m.in_features * m.out_features
        data = cdiv(values * self.bits, 8)
        if self.block is not None:
            scales = cdiv(m.out_features, self.block[0]) * cdiv(m.in_features, self.block[1]) * self.scale_bytes
        elif self.group_size:
            groups = cdiv(m.in_features, self.group_size) * m.out_features
            scales = groups * self.scale_bytes + cdiv(groups * self.zero_bits, 8)
        else:
            scales = m.out_features * self.scale_bytes
        extra = m.in_features * 4 if self.g_idx else 0
        return (data + scales + extra) * m.count


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightsEstimate:
    """A model's weight bytes, part by part, as read from its config."""

    model_id: str
    model_type: str
    parts: tuple[WeightPart, ...]
    dtype: str
    """The plain dtype of unquantised tensors (``bfloat16``...)."""
    dtype_bytes: int
    quantisation: Quantisation | None
    num_experts: int | None
    experts_per_token: int | None
    source: str
    """``config`` (counted), ``safetensors`` (Hub metadata) or ``--weights-bytes``."""
    hidden_size: int
    """Shape figures for the activation estimate (0 when the weights were not counted)."""
    mlp_width: int
    """Per-token MLP width: intermediate size, or experts per token x expert size (+ shared)."""
    qkv_width: int
    vocab_size: int
    bytes_override: int | None = None
    """Exact total bytes (safetensors metadata or --weights-bytes) that replace the counted bytes."""
    notes: tuple[str, ...] = ()
    device_split: Any = None
    """The engine's own split of exact bytes over devices (a GGUF under llama.cpp's layer split): an object
    with ``device_bytes(num_devices) -> tuple[int, ...]``; None: the tp/pp rule of ``bytes_per_gpu``."""

    # ---- counts --------------------------------------------------------------------------------
    @property
    def counted(self) -> bool:
        """Whether parameters were counted from the config (False: only bytes are known)."""
        return any(p.parameters for p in self.parts)

    @property
    def parameters(self) -> int:
        return sum(p.parameters for p in self.parts)

    @property
    def vision_parameters(self) -> int:
        return sum(p.parameters for p in self.parts if p.vision)

    @property
    def language_parameters(self) -> int:
        return self.parameters - self.vision_parameters

    @property
    def expert_parameters(self) -> int:
        return sum(p.parameters for p in self.parts if p.name == "experts")

    @property
    def active_parameters(self) -> int:
        """Parameters one token reads: everything but the experts it is not routed to."""
        if not self.num_experts or not self.experts_per_token:
            return self.parameters
        unused = self.expert_parameters * (self.num_experts - self.experts_per_token) // self.num_experts
        return self.parameters - unused

    # ---- bytes ---------------------------------------------------------------------------------
    @property
    def counted_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    @property
    def bytes(self) -> int:
        return self.bytes_override if self.bytes_override is not None else self.counted_bytes

    @property
    def vision_bytes(self) -> int:
        return self._scaled(sum(p.bytes for p in self.parts if p.vision))

    @property
    def attention_bytes(self) -> int:
        """Bytes of the attention projections (the parts a DP-attention rank keeps whole over its own tp)."""
        return self._scaled(sum(p.bytes for p in self.parts if p.name == "attention" and p.tp_sharded))

    @property
    def expert_bytes(self) -> int:
        return self._scaled(sum(p.bytes for p in self.parts if p.name == "experts"))

    def _scaled(self, counted: int) -> int:
        """A part's share of the exact total when bytes come from outside the count."""
        if self.bytes_override is None or not self.counted_bytes:
            return counted
        return counted * self.bytes_override // self.counted_bytes

    def bytes_per_gpu(self, *, tp: int = 1, pp: int = 1) -> int:
        """Bytes on the busiest GPU: TP splits matrices and embeddings, replicates norms and routers;
        PP splits the whole model into ``pp`` equal stages (a planning approximation)."""
        if self.device_split is not None:
            return max(self.device_split.device_bytes(tp * pp))
        sharded = self._scaled(sum(p.bytes for p in self.parts if p.tp_sharded))
        replicated = self.bytes - sharded
        return cdiv(sharded, tp * pp) + cdiv(replicated, pp)

    def stage_bytes_per_gpu(self, *, tp: int, layers: Sequence[int], encoder_every_stage: bool = True,
                            ) -> tuple[int, ...] | None:
        """Weight bytes on one GPU of each pipeline stage holding ``layers[s]`` decoder layers, as vLLM and SGLang
        build a stage (``PPMissingLayer`` for what a stage does not hold): ``embed_tokens`` (and learned position
        embeddings) on the first stage; ``lm_head`` on the last, which for a tied model is its own copy of
        ``embed_tokens`` (``get_pp_group().is_first_rank or (tie_word_embeddings and is_last_rank)``); the layers'
        tensors in proportion to the layers a stage holds; a multimodal encoder on every stage
        (``encoder_every_stage``, vLLM) or on the first. None when the parts are not counted or the engine splits the
        bytes itself (a GGUF under llama.cpp)."""
        if self.device_split is not None or not self.counted or len(layers) < 2:
            return None
        total_layers = sum(layers)
        last = len(layers) - 1
        names = {p.name for p in self.parts}
        out = [0] * len(layers)
        for part in self.parts:
            size = self._scaled(part.bytes)
            size = cdiv(size, tp) if part.tp_sharded else size
            if part.name in ("embed_tokens", "position_embeddings"):
                out[0] += size
                if part.name == "embed_tokens" and "lm_head" not in names:  # tied: the last stage's lm_head
                    out[last] += size
            elif part.name == "lm_head":
                out[last] += size
            elif part.vision:
                for stage in range(len(layers) if encoder_every_stage else 1):
                    out[stage] += size
            else:
                for stage, count in enumerate(layers):
                    out[stage] += size * count // total_layers
        return tuple(out)

    def read_bytes_per_step(self, *, batch: int, tp: int = 1, pp: int = 1) -> int:
        """Weight bytes one decode step reads on one GPU: all but the experts no token is routed to.

        A batch of B tokens touches at most min(E, B * k) of E experts per MoE layer (distinct
        routing assumed, the most a step can read)."""
        resident = self.bytes_per_gpu(tp=tp, pp=pp)
        if not self.num_experts or not self.experts_per_token:
            return resident
        touched = min(self.num_experts, batch * self.experts_per_token)
        experts_gpu = cdiv(self.expert_bytes, tp * pp)
        return resident - experts_gpu + experts_gpu * touched // self.num_experts


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightCount:
    """What a family's counter returns: the tensors, the expert routing, and the shape figures
    the activation estimate reads."""

    parts: list[WeightPart]
    num_experts: int | None
    experts_per_token: int | None
    hidden_size: int
    mlp_width: int
    qkv_width: int
    vocab_size: int


def count_of(parts: list[WeightPart], experts: int | None, top_k: int | None, shape: dict[str, int]) -> WeightCount:
    return WeightCount(parts=parts, num_experts=experts, experts_per_token=top_k, **shape)


class Tensors:
    """Per-layer tensors of a layout that varies layer by layer, gathered into WeightParts by role."""

    def __init__(self) -> None:
        self.matrices: dict[str, dict[tuple[int, int], int]] = {}
        self.other: dict[str, int] = {}

    def add(self, role: str, in_features: int, out_features: int, count: int = 1) -> None:
        if count and in_features and out_features:
            shapes = self.matrices.setdefault(role, {})
            shapes[(in_features, out_features)] = shapes.get((in_features, out_features), 0) + count

    def vector(self, role: str, parameters: int) -> None:
        self.other[role] = self.other.get(role, 0) + parameters

    def parts(self) -> list[WeightPart]:
        roles = list(dict.fromkeys([*self.matrices, *self.other]))
        return [WeightPart(name=role, matrices=tuple(Matrix(in_features=i, out_features=o, count=c)
                                                     for (i, o), c in self.matrices.get(role, {}).items()),
                           other_parameters=self.other.get(role, 0), tp_sharded=role not in ("norms", "router"))
                for role in roles]


# ---- building blocks -----------------------------------------------------------------------
def gqa_attention(hidden: int, heads: int, kv_heads: int, head_dim: int, layers: int, *,
                  q_factor: int = 1) -> list[Matrix]:
    """q (x q_factor for gated attention), k, v and o projections of ``layers`` attention layers."""
    q, kv = heads * head_dim, kv_heads * head_dim
    return [Matrix(in_features=hidden, out_features=q * q_factor, count=layers),
            Matrix(in_features=hidden, out_features=kv, count=2 * layers),
            Matrix(in_features=q, out_features=hidden, count=layers)]


def experts_parts(hidden: int, expert_size: int, experts: int, n_moe: int, *, gated: bool = True,
                  shared_size: int | None = None, shared_gate: bool = False, router_bias: bool = False) -> list[WeightPart]:
    """Every expert resident (gated: gate/up/down; else up/down), optional shared expert, the router."""
    per_expert = 2 if gated else 1
    parts = [WeightPart(name="experts", matrices=(
        Matrix(in_features=hidden, out_features=expert_size, count=per_expert * experts * n_moe),
        Matrix(in_features=expert_size, out_features=hidden, count=experts * n_moe)))]
    if shared_size:
        parts.append(WeightPart(name="shared_experts", matrices=(
            Matrix(in_features=hidden, out_features=shared_size, count=per_expert * n_moe),
            Matrix(in_features=shared_size, out_features=hidden, count=n_moe)),
            other_parameters=hidden * n_moe if shared_gate else 0))
    parts.append(WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=n_moe),),
                            other_parameters=experts * n_moe if router_bias else 0, tp_sharded=False))
    return parts
