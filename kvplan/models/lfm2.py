"""Liquid LFM2 (+MoE): gated short-convolution layers and full-attention layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import _MISSING, FULL, STATE, ArchParser, ConfigReader, layer_indices
from kvplan.models.tensors import (
    Matrix,
    WeightCount,
    WeightPart,
    count_of,
    embeddings,
    experts_parts,
    hidden_of,
    switch,
    vocab_of,
)
from kvplan.specs import StateSpec


class Lfm2Parser(ArchParser):
    """Liquid LFM2 (+MoE): ``layer_types`` of "conv" (gated short convolution) and "full_attention".

    A conv layer keeps the last ``conv_L_cache - 1`` inputs of its ``hidden_size``-wide convolution
    (vLLM ``short_conv_state_shape``). LFM2 configs may instead list ``full_attn_idxs``.
    """

    family = "lfm2"
    model_types = ("lfm2", "lfm2_moe", "lfm3")
    #: Lfm2Config defaults; Lfm2MoeConfig's differ where ``defaults_by_type`` says.
    defaults = {
        "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3,
        "vocab_size": 65536, "intermediate_size": 12288, "tie_word_embeddings": True, "conv_bias": False,
        "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True,
    }
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "lfm2_moe": {"hidden_size": 2048, "intermediate_size": 7168, "moe_intermediate_size": 1792,
                     "num_dense_layers": 2, "num_experts": 32, "num_experts_per_tok": 4, "use_expert_bias": True,
                     "block_auto_adjust_ff_dim": False},
        # Lfm3Config: conv, full and sliding layers by layer_types (weights not counted yet)
        "lfm3": {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 4,
                 "head_dim": 128, "conv_L_cache": 7, "sliding_window": 256, "max_position_embeddings": 128000},
    }
    weight_types = ("lfm2", "lfm2_moe")

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

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Conv layers: in_proj to B, C and x, a depthwise conv of ``conv_L_cache`` taps, out_proj. Attention
        layers: GQA with per-head q/k LayerNorms. Every layer a SwiGLU MLP (LFM2-MoE: experts after
        ``num_dense_layers``), an operator and an FFN RMSNorm; the final norm is ``embedding_norm``."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_attn = self.layer_kinds(r, layers).count(FULL)
        n_conv = layers - n_attn
        parts = embeddings(r, hidden)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        q, kv = heads * head_dim, kv_heads * head_dim
        taps = r.first_of("conv_L_cache", ("conv_L_cache",))
        bias = switch(r, "conv_bias", False)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q, count=n_attn),
            Matrix(in_features=hidden, out_features=kv, count=2 * n_attn),
            Matrix(in_features=q, out_features=hidden, count=n_attn),
            Matrix(in_features=hidden, out_features=3 * hidden, count=n_conv),  # conv in_proj
            Matrix(in_features=hidden, out_features=hidden, count=n_conv)),  # conv out_proj
            other_parameters=2 * head_dim * n_attn + (hidden * taps + (5 * hidden if bias else 0)) * n_conv))
        dense_layers, experts, top_k, width = layers, None, None, 0
        if model_type == "lfm2_moe":
            dense_layers = r.first_of("num_dense_layers", ("num_dense_layers",), kind="count")
            experts = r.first_of("num_experts", ("num_experts",))
            top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            parts += experts_parts(hidden, size, experts, layers - dense_layers,
                                   router_bias=switch(r, "use_expert_bias", True))
            width = (top_k or 1) * size
        if dense_layers:
            inner = self.ff_dim(r)
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=inner, count=2 * dense_layers),
                Matrix(in_features=inner, out_features=hidden, count=dense_layers))))
            width = max(width, inner)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"LFM2: {n_conv} short-convolution and {n_attn} attention layers")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": q + 2 * kv,
                                                "vocab_size": vocab_of(r)})

    def ff_dim(self, r: ConfigReader) -> int:
        """The SwiGLU width: ``intermediate_size``, or with ``block_auto_adjust_ff_dim`` two thirds of it, times
        ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of`` (transformers Lfm2MLP)."""
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        if not switch(r, "block_auto_adjust_ff_dim", False):
            return inner
        value = int(2 * inner / 3)
        multiplier = r.raw("block_ffn_dim_multiplier")
        if multiplier is not _MISSING:
            multiplier = r.check("block_ffn_dim_multiplier", multiplier, "ratio")
            value = int(multiplier * value)
        multiple = r.first_of("block_multiple_of", ("block_multiple_of",))
        value = multiple * -(-value // multiple)
        r.note(f"block_auto_adjust_ff_dim: MLP width = 2/3 x intermediate_size {inner}, rounded to {multiple} = {value}")
        return value


PARSERS: tuple[type[ArchParser], ...] = (Lfm2Parser,)
