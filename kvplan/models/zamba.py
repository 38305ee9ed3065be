"""Zyphra Zamba and Zamba2: a Mamba backbone with a shared transformer block applied at some layers.

``layers_block_type`` names each layer ``mamba`` / ``linear_attention`` (a Mamba state only) or
``hybrid`` (the Mamba state plus the shared attention block's own K/V cache for that layer:
``num_key_value_heads`` x ``attention_head_dim``). Zamba's Mamba is Mamba-1 (``mamba_expand *
hidden_size`` channels, ``mamba_d_state``); Zamba2's is Mamba-2 (``n_mamba_heads`` x
``mamba_headdim``, ``mamba_ngroups``). The specs list every layer's Mamba state, then the attention
caches (a no-cache entry for a layer without one), so entry ``N + i`` belongs to layer ``i``.

Weights (transformers Zamba / Zamba2): a Mamba mixer and an RMSNorm in every layer; the shared transformer
block (attention over the ``2 * hidden_size`` concatenation of the hidden state and the embeddings, a gated
MLP, two RMSNorms) stored once (Zamba2: ``num_mem_blocks`` times, used in turn), and each hybrid layer's own
``hidden_size`` x ``hidden_size`` linear; Zamba2 adds a LoRA adapter per hybrid layer on the MLP's gate/up
projection and, with ``use_shared_attention_adapter``, on q, k and v.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.mamba import mamba1_state, mamba2_state
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
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
                  "attn_layer_period": 6, "attn_layer_offset": 4, "max_position_embeddings": 4096,
                  "vocab_size": 32000, "intermediate_size": 14848, "n_mamba_heads": 2, "tie_word_embeddings": True,
                  "mamba_conv_bias": True, "mamba_proj_bias": False},
        "zamba2": {"hidden_size": 2560, "num_hidden_layers": 54, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "attention_head_dim": 160, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2,
                   "mamba_ngroups": 1, "n_mamba_heads": 8, "mamba_headdim": 640, "max_position_embeddings": 4096,
                   "vocab_size": 32000, "tie_word_embeddings": True, "num_mem_blocks": 1, "adapter_rank": 128,
                   "use_shared_attention_adapter": False, "add_bias_linear": False},
    }
    weight_types = ("zamba", "zamba2")
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
        # ZambaConfig: two Mamba layers, a hybrid one, then the period/offset rule over the remaining layers
        r.note(f"layers_block_type is not in the config: layers 0, 1 are Mamba, layer 2 hybrid, then layer 3 + j is "
               f"hybrid when j % {period} == {offset} (the ZambaConfig default)")
        types = ["mamba", "mamba", _HYBRID] + [_HYBRID if j % period == offset else "mamba"
                                                for j in range(num_layers - 3)]
        return types[:num_layers]

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

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_hybrid = self.block_types(r, layers).count(_HYBRID)
        v2 = model_type == "zamba2"
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        expand = r.first_of("mamba_expand", ("mamba_expand",))
        d_conv = r.first_of("mamba_d_conv", ("mamba_d_conv",))
        d_state = r.first_of("mamba_d_state", ("mamba_d_state",))
        n_mamba_heads = r.first_of("n_mamba_heads", ("n_mamba_heads",))
        inner = expand * hidden
        if v2:  # Zamba2Config derives these whatever the file says
            attn_hidden, head_dim = 2 * hidden, 2 * hidden // heads
            r.note(f"zamba2: attention over 2 x hidden_size = {attn_hidden}, head dim 2 x hidden_size // "
                   f"num_attention_heads = {head_dim} (Zamba2Config derives both)")
            bias = switch(r, "add_bias_linear", False)
            groups = r.first_of("mamba_ngroups", ("mamba_ngroups",))
            conv_dim = inner + 2 * groups * d_state
            mamba = [Matrix(in_features=hidden, out_features=inner + conv_dim + n_mamba_heads, count=layers),
                     Matrix(in_features=inner, out_features=hidden, count=layers)]
            # conv kernel + bias; dt_bias, A_log, D per head; the gated norm; in/out biases
            mamba_other = (conv_dim * (d_conv + 1) + 3 * n_mamba_heads + inner
                           + ((inner + conv_dim + n_mamba_heads + hidden) if bias else 0)) * layers
            mlp_width = r.optional("intermediate_size", ("intermediate_size",)) or 4 * hidden
            if not r.has("intermediate_size"):
                r.note(f"intermediate_size is not in the config: 4 x hidden_size = {mlp_width} (Zamba2Config)")
        else:
            attn_hidden = r.optional("attention_hidden_size", ("attention_hidden_size",)) or 2 * hidden
            # ZambaConfig: attention_head_dim, else 2 x hidden_size // num_attention_heads
            head_dim = r.first_of("head_dim", self.HEAD_DIM, required=False, use_defaults=False) or 2 * hidden // heads
            bias = switch(r, "mamba_proj_bias", False)
            conv_bias = switch(r, "mamba_conv_bias", True)
            rank = r.raw("mamba_dt_rank")
            if not isinstance(rank, int) or isinstance(rank, bool):
                rank = -(-hidden // 16)
                r.note(f"mamba_dt_rank is auto: ceil(hidden_size / 16) = {rank}")
            mamba = [Matrix(in_features=hidden, out_features=2 * inner, count=layers),
                     Matrix(in_features=inner, out_features=rank + 2 * d_state, count=layers),  # x_proj (per head)
                     Matrix(in_features=rank, out_features=inner, count=layers),  # dt_proj (per head)
                     Matrix(in_features=inner, out_features=hidden, count=layers)]
            # conv kernel (+ bias), dt bias, A_log, D; in/out biases
            mamba_other = (inner * d_conv + (inner if conv_bias else 0) + inner + inner * d_state + inner
                           + ((2 * inner + hidden) if bias else 0)) * layers
            mlp_width = r.first_of("intermediate_size", ("intermediate_size",))
        mem = r.first_of("num_mem_blocks", ("num_mem_blocks",)) if v2 else 1
        block_ids = list(range(min(n_hybrid, mem)))  # the stored blocks; hybrid layer k uses block k % mem
        parts = embeddings(r, hidden)
        if "lm_head" in {p.name for p in parts} and n_hybrid:
            # NOTE: transformers ties the shared blocks through the same switch as the embeddings
            block_ids = [k % mem for k in range(n_hybrid)]
            r.note("tie_word_embeddings is false: transformers then ties nothing, so each hybrid layer holds its own "
                   "copy of the shared transformer block (counted so)")
        blocks = len(block_ids)
        # Zamba2: block b holds an adapter for every hybrid layer i with i % num_mem_blocks == b
        adapters = sum(1 for b in block_ids for i in range(n_hybrid) if i % mem == b)
        q, kv = heads * head_dim, kv_heads * head_dim
        attention = [Matrix(in_features=attn_hidden, out_features=q, count=blocks),
                     Matrix(in_features=attn_hidden, out_features=kv, count=2 * blocks),
                     Matrix(in_features=q, out_features=hidden, count=blocks),
                     Matrix(in_features=hidden, out_features=hidden, count=n_hybrid)]  # each hybrid layer's linear
        if v2 and switch(r, "use_shared_attention_adapter", False):
            adapter = r.first_of("adapter_rank", ("adapter_rank",))
            attention += [Matrix(in_features=attn_hidden, out_features=adapter, count=3 * adapters),
                          Matrix(in_features=adapter, out_features=attn_hidden, count=3 * adapters)]
        mlp = [Matrix(in_features=hidden, out_features=mlp_width, count=2 * blocks),
               Matrix(in_features=mlp_width, out_features=hidden, count=blocks)]
        mlp_other = 0
        if v2:
            adapter = r.first_of("adapter_rank", ("adapter_rank",))
            mlp += [Matrix(in_features=hidden, out_features=adapter, count=adapters),
                    Matrix(in_features=adapter, out_features=2 * mlp_width, count=adapters)]
            mlp_other = (2 * mlp_width + hidden) * blocks if bias else 0
        parts += [WeightPart(name="attention", matrices=(*mamba, *attention), other_parameters=mamba_other),
                  WeightPart(name="mlp", matrices=tuple(mlp), other_parameters=mlp_other),
                  # a norm per layer, the shared blocks' two, the final one
                  WeightPart(name="norms", other_parameters=hidden * (layers + 1) + (attn_hidden + hidden) * blocks,
                             tp_sharded=False)]
        r.note(f"{model_type}: {layers} Mamba layers; the shared transformer block stored {blocks} time(s), used by "
               f"{n_hybrid} hybrid layers")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": q + 2 * kv,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (ZambaParser,)
