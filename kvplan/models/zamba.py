"""Zyphra Zamba and Zamba2: a Mamba backbone with a shared transformer block applied at some layers.

``layers_block_type`` names each layer ``mamba`` / ``linear_attention`` (a Mamba state only) or
``hybrid`` (the Mamba state plus the shared attention block's own K/V cache for that layer:
``num_key_value_heads`` x ``attention_head_dim``). Zamba's Mamba is Mamba-1 (``mamba_expand *
hidden_size`` channels, ``mamba_d_state``); Zamba2's is Mamba-2 (``n_mamba_heads`` x
``mamba_headdim``, ``mamba_ngroups``). The specs list every layer's Mamba state, then the attention
caches (a no-cache entry for a layer without one), so entry ``N + i`` belongs to layer ``i``.
Weights are not counted for these families yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.mamba import mamba1_state, mamba2_state
from kvplan.specs import FullAttentionSpec, LayerSpec, NoCacheSpec, StateSpec

_MAMBA, _HYBRID = ("mamba", "linear_attention"), "hybrid"


class ZambaParser(ArchParser):
    """Mamba(-2) state in every layer; hybrid layers add the shared attention block's own K/V."""

    family = "zamba"
    model_types = ("zamba", "zamba2")
    #: ZambaConfig / Zamba2Config defaults (their default ``layers_block_type``: Zamba hybrid every
    #: ``attn_layer_period`` layers from ``attn_layer_offset``; Zamba2 at ``hybrid_layer_ids``).
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "zamba": {"hidden_size": 3712, "num_hidden_layers": 76, "num_attention_heads": 16, "num_key_value_heads": 16,
                  "attention_head_dim": 464, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
                  "attn_layer_period": 6, "attn_layer_offset": 4, "max_position_embeddings": 4096},
        "zamba2": {"hidden_size": 2560, "num_hidden_layers": 54, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "attention_head_dim": 160, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2,
                   "mamba_ngroups": 1, "n_mamba_heads": 8, "mamba_headdim": 640, "max_position_embeddings": 4096},
    }
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ("attention_head_dim",)

    def block_types(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = r.raw("layers_block_type")
        if r.has("layers_block_type"):
            r.check("layers_block_type", types, "list")
            if len(types) != num_layers or any(t not in (*_MAMBA, _HYBRID) for t in types):
                raise ConfigError(
                    f"{r.source_name}: {r.prefix}layers_block_type must hold {num_layers} entries of mamba, "
                    "linear_attention or hybrid", "one entry per layer")
            return [_HYBRID if t == _HYBRID else "mamba" for t in types]
        if r.defaults_name == "zamba2":
            ids = r.first_of("hybrid_layer_ids", ("hybrid_layer_ids",), kind="list")
            r.note(f"layers_block_type is not in the config: hybrid layers are hybrid_layer_ids {ids}")
            return [_HYBRID if i in ids else "mamba" for i in range(num_layers)]
        period = r.first_of("attn_layer_period", ("attn_layer_period",))
        offset = r.first_of("attn_layer_offset", ("attn_layer_offset",))
        r.note(f"layers_block_type is not in the config: layer i is hybrid when i % {period} == {offset}")
        return [_HYBRID if i % period == offset else "mamba" for i in range(num_layers)]

    def mamba_state(self, r: ConfigReader) -> StateSpec:
        hidden = r.first_of("hidden_size", ("hidden_size",))
        expand = r.first_of("mamba_expand", ("mamba_expand",))
        d_conv = r.first_of("mamba_d_conv", ("mamba_d_conv",))
        d_state = r.first_of("mamba_d_state", ("mamba_d_state",))
        if r.defaults_name == "zamba2":
            heads = r.first_of("n_mamba_heads", ("n_mamba_heads",))
            head_dim = r.optional("mamba_headdim", ("mamba_headdim",)) or expand * hidden // heads
            return mamba2_state(heads, head_dim, r.first_of("mamba_ngroups", ("mamba_ngroups",)), d_conv, d_state)
        return mamba1_state(expand * hidden, d_conv, d_state)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        types = self.block_types(r, num_layers)
        state = self.mamba_state(r)
        attention = FullAttentionSpec(**self.attention_dims(r)) if _HYBRID in types else None
        r.note(f"{r.defaults_name}: every layer keeps a Mamba state; the {types.count(_HYBRID)} hybrid layers also "
               "cache the shared attention block's K/V of their own")
        none = NoCacheSpec(reason="a Mamba-only layer: no attention cache")
        return [state] * num_layers + [attention if t == _HYBRID and attention else none for t in types]


PARSERS: tuple[type[ArchParser], ...] = (ZambaParser,)
