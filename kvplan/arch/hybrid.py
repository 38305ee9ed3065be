"""Models whose layers keep a fixed recurrent state: Mamba, Mamba-2, Jamba, Nemotron-H, Qwen3-Next, MiniMax,
Falcon-H1, Granite 4.0 hybrid, Bamba and LFM2.

State shapes follow the engines (vLLM ``mamba_utils``): per sequence and layer,
Mamba-1: conv (d_conv - 1, d_inner), ssm (d_inner, d_state);
Mamba-2: conv (d_conv - 1, d_inner + 2 * n_groups * d_state), ssm (n_heads, head_dim, d_state);
short convolution (LFM2): conv (L_cache - 1, channels);
gated delta net: conv (d_conv - 1, 2 * H_k * d_k + H_v * d_v), ssm (H_v, d_k, d_v);
linear (lightning) attention: (heads, head_dim, head_dim).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.arch.base import FULL, NONE, STATE, ArchParser, ConfigReader, layer_indices
from kvplan.errors import ConfigError
from kvplan.specs import LayerSpec, StateSpec


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


class Mamba2Parser(ArchParser):
    family = "mamba2"
    model_types = ("mamba2",)
    defaults = {"state_size": 128, "conv_kernel": 4, "n_groups": 8, "head_dim": 64}

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


class JambaParser(ArchParser):
    """Jamba: attention iff i % attn_layer_period == attn_layer_offset; Mamba-1 elsewhere."""

    family = "jamba"
    model_types = ("jamba",)
    defaults = {
        "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
        "mamba_expand": 2, "max_position_embeddings": 262144,
    }

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        period = r.first_of("attn_layer_period", ["attn_layer_period"])
        offset = r.first_of("attn_layer_offset", ["attn_layer_offset"])
        r.note(f"attention layers are i % {period} == {offset}; the others keep a Mamba state")
        return [FULL if i % period == offset else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        expand = r.first_of("mamba_expand", ["mamba_expand"])
        hidden = r.first_of("hidden_size", self.HIDDEN)
        return mamba1_state(
            expand * hidden, r.first_of("mamba_d_conv", ["mamba_d_conv"]), r.first_of("mamba_d_state", ["mamba_d_state"])
        )


class NemotronHParser(ArchParser):
    """Nemotron-H: ``hybrid_override_pattern`` with M = Mamba-2, * = attention, - = MLP, E = MoE."""

    family = "nemotron_h"
    model_types = ("nemotron_h",)
    HEAD_DIM = ("head_dim", "attention_head_dim")
    _KINDS = {"M": STATE, "*": FULL, "-": NONE, "E": NONE}

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        pattern = r.first_of("hybrid_override_pattern", ["hybrid_override_pattern"], kind="str")
        if len(pattern) != num_layers:
            raise ConfigError(
                f"{r.source_name}: hybrid_override_pattern has {len(pattern)} symbols for {num_layers} layers",
                "make the pattern one symbol per layer",
            )
        unknown = sorted(set(pattern) - set(self._KINDS))
        if unknown:
            raise ConfigError(
                f"{r.source_name}: unknown symbol(s) {''.join(unknown)!r} in hybrid_override_pattern",
                "kvplan knows M (Mamba-2), * (attention), - (MLP) and E (MoE)",
            )
        return [self._KINDS[symbol] for symbol in pattern]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return mamba2_state(
            r.first_of("mamba_num_heads", ["mamba_num_heads"]),
            r.first_of("mamba_head_dim", ["mamba_head_dim"]),
            r.first_of("n_groups", ["n_groups"]),
            r.first_of("conv_kernel", ["conv_kernel"]),
            r.first_of("ssm_state_size", ["ssm_state_size", "state_size"]),
        )


class Qwen3NextParser(ArchParser):
    """Qwen3-Next: gated delta net layers, full attention every ``full_attention_interval``-th layer."""

    family = "qwen3_next"
    model_types = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
    defaults = {
        "head_dim": 256, "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        interval = r.first_of("full_attention_interval", ["full_attention_interval"])
        r.note(f"layer i is full attention when (i + 1) % {interval} == 0, else a gated delta net state")
        return [FULL if (i + 1) % interval == 0 else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        hk = r.first_of("linear_num_key_heads", ["linear_num_key_heads"])
        hv = r.first_of("linear_num_value_heads", ["linear_num_value_heads"])
        dk = r.first_of("linear_key_head_dim", ["linear_key_head_dim"])
        dv = r.first_of("linear_value_head_dim", ["linear_value_head_dim"])
        conv = r.first_of("linear_conv_kernel_dim", ["linear_conv_kernel_dim"])
        return StateSpec(
            mixer="gated_delta_net",
            shapes=(("conv", (conv - 1, 2 * hk * dk + hv * dv)), ("ssm", (hv, dk, dv))),
        )


class MiniMaxParser(ArchParser):
    """MiniMax-01 / M1: ``attn_type_list`` 1 = softmax attention, 0 = lightning (linear) attention."""

    family = "minimax"
    model_types = ("minimax", "minimax_m1", "minimax_text_01")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types"):
            return super().layer_kinds(r, num_layers)
        flags = r.first_of("attn_type_list", ["attn_type_list"], kind="list")
        if len(flags) != num_layers or any(flag not in (0, 1) for flag in flags):
            raise ConfigError(
                f"{r.source_name}: attn_type_list must hold {num_layers} entries of 0 or 1",
                "1 = softmax attention, 0 = lightning (linear) attention",
            )
        r.note("attn_type_list: 1 = softmax attention (KV cache), 0 = lightning attention (fixed state)")
        return [FULL if flag == 1 else STATE for flag in flags]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        heads = r.first_of("num_attention_heads", self.HEADS)
        head_dim = self.head_dim(r, heads)
        return StateSpec(mixer="linear_attention", shapes=(("kv_state", (heads, head_dim, head_dim)),))


# ---- Mamba-2 hybrids with ``mamba_*`` fields (Falcon-H1, Granite 4.0 hybrid, Bamba) ------------------
@dataclass(frozen=True, slots=True)
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


class FalconH1Parser(ArchParser):
    """Falcon-H1: a parallel hybrid, every decoder layer runs attention and a Mamba-2 mixer side by side.

    Each layer therefore holds a K/V cache and a Mamba state. The specs list the attention caches of
    layers 0..N-1, then their states, so entry ``i`` belongs to decoder layer ``i % N``.
    """

    family = "falcon_h1"
    model_types = ("falcon_h1",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 8192, "mamba_d_ssm": 1024, **MAMBA2_DEFAULTS,
    }
    MAMBA = Mamba2Keys(d_inner=("mamba_d_ssm",))

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        attention = self.full_spec(self.attention_dims(r))
        state = self.state_spec(r, 0)
        r.note(
            "falcon_h1 is a parallel hybrid: every decoder layer has an attention K/V cache and a Mamba-2 state"
        )
        return [attention] * num_layers + [state] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)


class GraniteMoeHybridParser(ArchParser):
    """IBM Granite 4.0 hybrid: ``layer_types`` of "mamba" (Mamba-2) and "attention"; all Mamba when absent."""

    family = "granitemoehybrid"
    model_types = ("granitemoehybrid",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
        **MAMBA2_DEFAULTS,
    }
    MAMBA = Mamba2Keys()
    _NAMES = frozenset({"mamba", "attention"})

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        for key in ("layer_types", "layers_block_type"):
            if r.has(key):
                types = r.check(key, r.raw(key), "list")
                unknown = [name for name in types if name not in self._NAMES]
                if unknown:
                    raise ConfigError(
                        f"{r.source_name}: unknown layer type {unknown[0]!r} in {r.prefix}{key}",
                        'granitemoehybrid layers are "mamba" or "attention"',
                    )
                return self.kinds_from_layer_types(r, types, num_layers, key=key)
        r.note("layer_types is not in the config: the granitemoehybrid default makes every layer a Mamba-2 layer")
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)


class BambaParser(ArchParser):
    """Bamba: attention at ``attn_layer_indices``, Mamba-2 everywhere else."""

    family = "bamba"
    model_types = ("bamba",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 262144, **MAMBA2_DEFAULTS,
    }
    MAMBA = Mamba2Keys()

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.has("attn_layer_indices"):
            r.note("attn_layer_indices is not in the config: the bamba default makes every layer a Mamba-2 layer")
            return [STATE] * num_layers
        attention = layer_indices(r, "attn_layer_indices", r.raw("attn_layer_indices"), num_layers)
        r.record("layer_types", f"attention at {sorted(attention)}", r.where("attn_layer_indices"))
        r.note(f"attention layers are attn_layer_indices {sorted(attention)}; the others keep a Mamba-2 state")
        return [FULL if i in attention else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)


class Lfm2Parser(ArchParser):
    """Liquid LFM2 (+MoE): ``layer_types`` of "conv" (gated short convolution) and "full_attention".

    A conv layer keeps the last ``conv_L_cache - 1`` inputs of its ``hidden_size``-wide convolution
    (vLLM ``short_conv_state_shape``). LFM2 configs may instead list ``full_attn_idxs``.
    """

    family = "lfm2"
    model_types = ("lfm2", "lfm2_moe")
    defaults = {
        "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3,
    }
    MOE_DEFAULTS: Mapping[str, Any] = {
        "hidden_size": 2048, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3,
    }

    def defaults_for(self, model_type: str) -> Mapping[str, Any]:
        return self.MOE_DEFAULTS if model_type == "lfm2_moe" else self.defaults

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types"):
            return super().layer_kinds(r, num_layers)
        if r.has("full_attn_idxs"):
            attention = layer_indices(r, "full_attn_idxs", r.raw("full_attn_idxs"), num_layers)
            r.record("layer_types", f"attention at {sorted(attention)}", r.where("full_attn_idxs"))
            r.note(f"attention layers are full_attn_idxs {sorted(attention)}; the others are short convolutions")
            return [FULL if i in attention else STATE for i in range(num_layers)]
        if r.defaults_name == "lfm2":
            r.note("neither layer_types nor full_attn_idxs is in the config: the lfm2 default makes every layer attention")
            return [FULL] * num_layers
        raise ConfigError(
            f"{r.source_name}: required field layer_types is missing (tried {r.prefix}layer_types, "
            f"{r.prefix}full_attn_idxs)",
            'add layer_types: one "conv" or "full_attention" per layer',
        )

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        channels = r.first_of("conv_channels", ["conv_dim", "hidden_size"])
        l_cache = r.first_of("conv_L_cache", ["conv_L_cache"])
        if l_cache < 2:
            raise ConfigError(f"{r.source_name}: conv_L_cache must be at least 2, got {l_cache}", "fix the config")
        return StateSpec(mixer="short_conv", shapes=(("conv", (l_cache - 1, channels)),))


class KimiLinearParser(ArchParser):
    """Kimi Linear: Kimi Delta Attention (KDA) layers and MLA full-attention layers.

    ``linear_attn_config.kda_layers`` lists the KDA layers **1-based** (KimiLinearConfig.is_kda_layer:
    ``layer_idx + 1 in kda_layers``); the others are full attention, MLA when ``kv_lora_rank`` is set.
    A KDA layer keeps short-convolution states for q, k and v, ``(conv - 1, num_heads * head_dim)`` each,
    and a ``(num_heads, head_dim, head_dim)`` recurrent state that vLLM keeps in float32
    (``kda_state_shape`` / ``kda_state_dtype``).
    """

    family = "kimi_linear"
    model_types = ("kimi_linear",)
    _KDA = "linear_attn_config.kda_layers"

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        kda = r.first_of("kda_layers", [self._KDA], kind="list")
        bad = [i for i in kda if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= num_layers]
        if bad:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}{self._KDA} holds {bad[0]!r}, not a 1-based layer number in 1..{num_layers}",
                "kda_layers numbers layers from 1 (KimiLinearConfig.is_kda_layer)",
            )
        r.record("layer_types", f"KDA at 1-based {sorted(set(kda))}", r.where(self._KDA))
        r.note(f"{self._KDA} is 1-based: layer i is KDA when i + 1 is listed; the others are full attention")
        return [STATE if i + 1 in kda else FULL for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        heads = r.first_of("kda_num_heads", ["linear_attn_config.num_heads"])
        head_dim = r.first_of("kda_head_dim", ["linear_attn_config.head_dim"])
        conv = r.first_of("kda_conv_kernel", ["linear_attn_config.short_conv_kernel_size"])
        if conv < 2:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}linear_attn_config.short_conv_kernel_size must be at least 2, got {conv}",
                "fix the config",
            )
        return StateSpec(
            mixer="kda",
            shapes=(("conv", (conv - 1, 3 * heads * head_dim)), ("ssm", (heads, head_dim, head_dim))),
            fp32_tensors=("ssm",),
        )
