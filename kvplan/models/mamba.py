"""Mamba (Mamba-1 and Falcon-Mamba) and Mamba-2, and the Mamba mixers the hybrids share.

State shapes follow the engines (vLLM ``mamba_utils``): per sequence and layer,
Mamba-1: conv (d_conv - 1, d_inner), ssm (d_inner, d_state);
Mamba-2: conv (d_conv - 1, d_inner + 2 * n_groups * d_state), ssm (n_heads, head_dim, d_state).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import _MISSING, STATE, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


def mamba1_state(d_inner: int, d_conv: int, d_state: int) -> StateSpec:
    return StateSpec(mixer="mamba", shapes=(("conv", (d_conv - 1, d_inner)), ("ssm", (d_inner, d_state))))


def mamba2_state(n_heads: int, head_dim: int, n_groups: int, d_conv: int, d_state: int) -> StateSpec:
    d_inner = n_heads * head_dim
    return StateSpec(
        mixer="mamba2",
        shapes=(("conv", (d_conv - 1, d_inner + 2 * n_groups * d_state)), ("ssm", (n_heads, head_dim, d_state))),
    )


class MambaParser(ArchParser):
    family = "mamba"
    model_types = ("mamba", "falcon_mamba")
    defaults = {"state_size": 16, "conv_kernel": 4, "expand": 2}
    defaults_by_type = {"mamba": {"tie_word_embeddings": True}, "falcon_mamba": {"tie_word_embeddings": False}}
    weight_types = ("mamba", "falcon_mamba")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        d_inner = r.optional("d_inner", ["intermediate_size"])
        if d_inner is None:
            expand = r.first_of("expand", ["expand"])
            hidden = r.first_of("hidden_size", self.HIDDEN)
            d_inner = expand * hidden
            r.record("d_inner", d_inner, f"derived: expand * hidden_size = {expand} * {hidden}")
        return mamba1_state(
            d_inner, r.first_of("conv_kernel", ["conv_kernel", "d_conv"]), r.first_of("state_size", ["state_size", "d_state"])
        )

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Mamba-1: in_proj, conv1d, x_proj, dt_proj, A_log, D and out_proj in every layer, one RMSNorm each."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layer"))
        inner = r.optional("intermediate_size", ("intermediate_size",)) or 2 * hidden
        state = r.first_of("state_size", ("state_size", "d_state"))
        conv = r.first_of("conv_kernel", ("conv_kernel", "d_conv"))
        rank = r.raw("time_step_rank")
        # NOTE: MambaConfig's time_step_rank "auto" (its default) is ceil(hidden_size / 16).
        if rank is not _MISSING and rank != "auto":
            rank = r.check("time_step_rank", rank, "int")
        dt_rank = rank if isinstance(rank, int) else math.ceil(hidden / 16)
        matrices = (Matrix(in_features=hidden, out_features=2 * inner, count=layers),
                    Matrix(in_features=inner, out_features=dt_rank + 2 * state, count=layers),
                    Matrix(in_features=dt_rank, out_features=inner, count=layers),
                    Matrix(in_features=inner, out_features=hidden, count=layers))
        vectors = (inner * conv + inner + inner + inner * state + inner) * layers  # conv w+b, dt bias, A_log, D
        parts = embeddings(r, hidden)
        parts += [WeightPart(name="mlp", matrices=matrices, other_parameters=vectors),
                  WeightPart(name="norms", other_parameters=(layers + 1) * hidden, tp_sharded=False)]
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": 2 * inner,
                                           "qkv_width": dt_rank + 2 * state, "vocab_size": vocab_of(r)})


class Mamba2Parser(ArchParser):
    family = "mamba2"
    model_types = ("mamba2",)
    #: Mamba2Config defaults.
    defaults = {"state_size": 128, "conv_kernel": 4, "n_groups": 8, "head_dim": 64, "num_heads": 128,
                "hidden_size": 4096, "num_hidden_layers": 64, "vocab_size": 32768, "expand": 2,
                "tie_word_embeddings": False, "use_bias": False, "use_conv_bias": True}
    weight_types = ("mamba2",)

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return mamba2_state(
            r.first_of("mamba_num_heads", ["num_heads"]),
            r.first_of("mamba_head_dim", ["head_dim"]),
            r.first_of("n_groups", ["n_groups"]),
            r.first_of("conv_kernel", ["conv_kernel"]),
            r.first_of("state_size", ["state_size"]),
        )

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Per layer an RMSNorm and the mixer: in_proj to gate, x, B, C and dt, a depthwise convolution over x, B
        and C, dt_bias, A_log and D per head, a gated RMSNorm, out_proj (transformers Mamba2Mixer)."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        inner = r.first_of("expand", ("expand",)) * hidden
        heads = r.first_of("mamba_num_heads", ("num_heads",))
        groups = r.first_of("n_groups", ("n_groups",))
        state = r.first_of("state_size", ("state_size",))
        conv = r.first_of("conv_kernel", ("conv_kernel",))
        bias = switch(r, "use_bias", False)
        conv_dim = inner + 2 * groups * state
        projection = inner + conv_dim + heads
        matrices = (Matrix(in_features=hidden, out_features=projection, count=layers),
                    Matrix(in_features=inner, out_features=hidden, count=layers))
        vectors = (conv_dim * conv + (conv_dim if switch(r, "use_conv_bias", True) else 0) + 3 * heads + inner
                   + ((projection + hidden) if bias else 0)) * layers
        parts = embeddings(r, hidden)
        parts += [WeightPart(name="mlp", matrices=matrices, other_parameters=vectors),
                  WeightPart(name="norms", other_parameters=(layers + 1) * hidden, tp_sharded=False)]
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": projection, "qkv_width": conv_dim,
                                            "vocab_size": vocab_of(r)})


# ---- Mamba-2 hybrids with ``mamba_*`` fields (Falcon-H1, Granite 4.0 hybrid, Bamba) ------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Mamba2Keys:
    """Where one family keeps its Mamba-2 fields (alias lists, first present wins)."""

    n_heads: tuple[str, ...] = ("mamba_n_heads",)
    head_dim: tuple[str, ...] = ("mamba_d_head",)
    n_groups: tuple[str, ...] = ("mamba_n_groups",)
    d_state: tuple[str, ...] = ("mamba_d_state",)
    d_conv: tuple[str, ...] = ("mamba_d_conv",)
    expand: tuple[str, ...] = ("mamba_expand",)
    d_inner: tuple[str, ...] = ()
    """An explicit inner width (Falcon-H1 ``mamba_d_ssm``); without one it is ``expand * hidden_size``."""


#: The ``mamba_*`` defaults that BambaConfig, GraniteMoeHybridConfig and FalconH1Config share.
MAMBA2_DEFAULTS: Mapping[str, Any] = {
    "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4,
    "mamba_expand": 2,
}


def read_mamba2_state(r: ConfigReader, keys: Mamba2Keys, hidden: Sequence[str]) -> StateSpec:
    """One Mamba-2 layer's state from ``keys``; ``mamba_d_head`` "auto" is ``d_inner // n_heads``.

    vLLM sizes the conv state with the inner width and the ssm state with ``n_heads * head_dim``;
    the transformers config classes require the two to agree, and so does kvplan.
    """
    d_inner = None
    if keys.d_inner:
        key = keys.d_inner[0]
        explicit_null = not any(r.has(k) for k in keys.d_inner) and key in r.config and r.config[key] is None
        if explicit_null:
            r.note(f"{r.prefix}{key} is null: the Mamba inner width is {keys.expand[0]} * hidden_size")
        else:
            d_inner = r.first_of("mamba_d_inner", keys.d_inner)
    if d_inner is None:
        expand = r.first_of("mamba_expand", keys.expand)
        width = r.first_of("hidden_size", hidden)
        d_inner = expand * width
        r.record("mamba_d_inner", d_inner, f"derived: {keys.expand[0]} * hidden_size = {expand} * {width}")
    n_heads = r.first_of("mamba_n_heads", keys.n_heads)
    head_dim = _mamba2_head_dim(r, keys.head_dim, d_inner, n_heads)
    if n_heads * head_dim != d_inner:
        raise ConfigError(
            f"{r.source_name}: Mamba heads {n_heads} x head dim {head_dim} = {n_heads * head_dim} does not match "
            f"the Mamba inner width {d_inner}",
            f"check {keys.n_heads[0]}, {keys.head_dim[0]} and the inner width (as the transformers config class does)",
        )
    return mamba2_state(
        n_heads,
        head_dim,
        r.first_of("mamba_n_groups", keys.n_groups),
        r.first_of("mamba_d_conv", keys.d_conv),
        r.first_of("mamba_d_state", keys.d_state),
    )


def _mamba2_head_dim(r: ConfigReader, aliases: Sequence[str], d_inner: int, n_heads: int) -> int:
    key = next((k for k in aliases if r.has(k)), None)
    if key is not None and r.raw(key) != "auto":
        value = r.check(key, r.raw(key), "int")
        r.record("mamba_head_dim", value, r.where(key))
        return value
    if d_inner % n_heads:
        raise ConfigError(
            f"{r.source_name}: the Mamba inner width {d_inner} is not divisible by {n_heads} Mamba heads",
            f"set {aliases[0]} or check {aliases[0].replace('d_head', 'n_heads')}",
        )
    value = d_inner // n_heads
    why = f"{r.prefix}{aliases[0]} is \"auto\"" if key is not None else (
        f"{r.prefix}{aliases[0]} is not in the config; the {r.defaults_name} default is \"auto\""
    )
    r.record("mamba_head_dim", value, f"derived: inner width // mamba heads = {d_inner} // {n_heads}")
    r.note(f"{why}: Mamba head dim = inner width // heads = {d_inner} // {n_heads} = {value}")
    return value


# ---- weights ---------------------------------------------------------------------------------
def mamba1_mixer(r: ConfigReader, hidden: int, count: int, *, d_inner: int, d_state: int, d_conv: int,
                 dt_rank: int, conv_bias: bool, proj_bias: bool, inner_norms: int = 0) -> WeightPart:
    """Mamba-1 mixers: in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj (+ Jamba's dt/B/C norms)."""
    matrices = (Matrix(in_features=hidden, out_features=2 * d_inner, count=count),
                Matrix(in_features=d_inner, out_features=dt_rank + 2 * d_state, count=count),
                Matrix(in_features=dt_rank, out_features=d_inner, count=count),
                Matrix(in_features=d_inner, out_features=hidden, count=count))
    vectors = d_inner * d_conv + (d_inner if conv_bias else 0) + d_inner + d_inner * d_state + d_inner
    vectors += (2 * d_inner + hidden) if proj_bias else 0
    vectors += inner_norms
    return WeightPart(name="mamba", matrices=matrices, other_parameters=vectors * count)


PARSERS: tuple[type[ArchParser], ...] = (MambaParser, Mamba2Parser)


def mamba2_mixer(hidden: int, count: int, *, d_inner: int, n_heads: int, n_groups: int, d_state: int, d_conv: int,
                 conv_bias: bool, proj_bias: bool, gated_norm: bool) -> WeightPart:
    """Mamba-2 mixers: in_proj to (z, x, B, C, dt), the depthwise conv1d over x/B/C, dt_bias, A_log, D,
    the gated RMSNorm (when the family has one) and out_proj (transformers' Mamba2Mixer and its copies)."""
    conv_dim = d_inner + 2 * n_groups * d_state
    in_out = d_inner + conv_dim + n_heads
    vectors = conv_dim * d_conv + (conv_dim if conv_bias else 0) + 3 * n_heads + (d_inner if gated_norm else 0)
    vectors += (in_out + hidden) if proj_bias else 0
    return WeightPart(name="mamba", matrices=(Matrix(in_features=hidden, out_features=in_out, count=count),
                                              Matrix(in_features=d_inner, out_features=hidden, count=count)),
                      other_parameters=vectors * count)


def hybrid_weights(r: ConfigReader, parser: ArchParser, keys: Mamba2Keys, *, n_mamba: int, n_attn: int,
                   gated_norm: bool, mlp_layers: int) -> tuple[list[WeightPart], int]:
    """The Mamba-2 mixers and GQA attention of a ``mamba_*``-keyed hybrid (Bamba, Granite 4.0, Falcon-H1),
    with a gated MLP of ``intermediate_size`` in ``mlp_layers`` layers; and the widest q/k/v or in_proj."""
    hidden = hidden_of(r)
    parts = embeddings(r, hidden)
    width = 0
    if n_attn:
        heads = r.first_of("num_attention_heads", parser.HEADS)
        kv_heads = parser.kv_heads(r, heads)
        head_dim = parser.head_dim(r, heads)
        q, kv = heads * head_dim, kv_heads * head_dim
        bias = (q + 2 * kv + hidden) * n_attn if r.raw("attention_bias") is True else 0
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q, count=n_attn),
            Matrix(in_features=hidden, out_features=kv, count=2 * n_attn),
            Matrix(in_features=q, out_features=hidden, count=n_attn)), other_parameters=bias))
        width = q + 2 * kv
    if n_mamba:
        state = read_mamba2_state(r, keys, parser.HIDDEN)
        (_, (d_conv_1, conv_dim)), (_, (n_heads, head_dim, d_state)) = state.shapes
        d_inner = n_heads * head_dim
        n_groups = (conv_dim - d_inner) // (2 * d_state)
        conv_bias = r.raw("mamba_conv_bias") is not False
        proj_bias = r.raw("mamba_proj_bias") is True
        mixer = mamba2_mixer(hidden, n_mamba, d_inner=d_inner, n_heads=n_heads, n_groups=n_groups, d_state=d_state,
                             d_conv=d_conv_1 + 1, conv_bias=conv_bias, proj_bias=proj_bias, gated_norm=gated_norm)
        parts.append(mixer)
        width = max(width, mixer.matrices[0].out_features)
    if mlp_layers:
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        bias = (2 * inner + hidden) * mlp_layers if r.raw("mlp_bias") is True else 0
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=inner, count=2 * mlp_layers),
            Matrix(in_features=inner, out_features=hidden, count=mlp_layers)), other_parameters=bias))
    return parts, width
