"""Models whose layers keep a fixed recurrent state: Mamba, Mamba-2, Jamba, Nemotron-H, Qwen3-Next, MiniMax.

State shapes follow the engines (vLLM ``mamba_utils``): per sequence and layer,
Mamba-1: conv (d_conv - 1, d_inner), ssm (d_inner, d_state);
Mamba-2: conv (d_conv - 1, d_inner + 2 * n_groups * d_state), ssm (n_heads, head_dim, d_state);
gated delta net: conv (d_conv - 1, 2 * H_k * d_k + H_v * d_v), ssm (H_v, d_k, d_v);
linear (lightning) attention: (heads, head_dim, head_dim).
"""

from __future__ import annotations

from kvplan.arch.base import FULL, NONE, STATE, ArchParser, ConfigReader
from kvplan.errors import ConfigError
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
