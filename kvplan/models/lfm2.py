"""Liquid LFM2 (+MoE): gated short-convolution layers and full-attention layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, layer_indices
from kvplan.specs import StateSpec


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


PARSERS: tuple[type[ArchParser], ...] = (Lfm2Parser,)
