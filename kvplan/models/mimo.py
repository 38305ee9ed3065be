"""Xiaomi MiMo-V2-Flash: sliding-window and full-attention layers with their own head counts, attention
sinks, and fine-grained MoE after a dense first layer.

The cache is read by kvplan's generic rules (``layer_types`` / ``sliding_window``); this module counts
the weights (transformers MiMoV2FlashForCausalLM, and the Hub config's ``hybrid_layer_pattern``,
``moe_layer_freq`` and ``swa_*`` keys).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, note_mtp
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


class MimoV2FlashParser(DecoderParser):
    model_types = ()
    weight_types = ("mimo_v2_flash",)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        sliding = _per_layer(r, "hybrid_layer_pattern", "layer_types", "sliding_attention", layers)
        sparse = _per_layer(r, "moe_layer_freq", "mlp_layer_types", "sparse", layers)
        n_swa, n_moe = sum(sliding), sum(sparse)
        attention: list[Matrix] = []
        other = 0
        qkv_width = 0
        for count, prefix, sinks_key in ((layers - n_swa, "", "add_full_attention_sink_bias"),
                                         (n_swa, "swa_", "add_swa_attention_sink_bias")):
            if not count:
                continue
            heads = r.first_of(f"{prefix}num_attention_heads", (f"{prefix}num_attention_heads", "num_attention_heads"))
            kv_heads = r.first_of(f"{prefix}num_key_value_heads", (f"{prefix}num_key_value_heads",))
            head_dim = r.first_of(f"{prefix}head_dim", (f"{prefix}head_dim", "head_dim"))
            v_dim = r.first_of(f"{prefix}v_head_dim", (f"{prefix}v_head_dim", "v_head_dim"))
            attention += [Matrix(in_features=hidden, out_features=heads * head_dim, count=count),
                          Matrix(in_features=hidden, out_features=kv_heads * head_dim, count=count),
                          Matrix(in_features=hidden, out_features=kv_heads * v_dim, count=count),
                          Matrix(in_features=heads * v_dim, out_features=hidden, count=count)]
            if switch(r, sinks_key, False):
                other += heads * count  # one learned sink logit per head
            qkv_width = max(qkv_width, heads * head_dim + kv_heads * (head_dim + v_dim))
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        intermediate = r.first_of("intermediate_size", ("intermediate_size",))
        if layers - n_moe:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - n_moe)),
                Matrix(in_features=intermediate, out_features=hidden, count=layers - n_moe))))
        experts = top_k = None
        width = intermediate
        if n_moe:
            experts = r.first_of("num_experts", ("n_routed_experts", "num_experts"))
            top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            # noaux_tc routing keeps an e_score_correction_bias per expert
            parts += experts_parts(hidden, size, experts, n_moe, router_bias=r.raw("topk_method") == "noaux_tc")
            width = max(width, (top_k or 1) * size)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"MiMo-V2-Flash: {n_swa} sliding-window and {layers - n_swa} full-attention layers; {experts} experts "
               f"in {n_moe} of {layers} layers, all resident")
        note_mtp(r, self.MTP_KEY)
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": qkv_width,
                                                "vocab_size": vocab_of(r)})


def _per_layer(r: ConfigReader, flags_key: str, types_key: str, marked: str, layers: int) -> list[bool]:
    """One flag per layer, from the Hub's 0/1 list (``flags_key``) or transformers' names (``types_key``)."""
    for key, test in ((flags_key, lambda v: v == 1), (types_key, lambda v: v == marked)):
        value: Any = r.raw(key)
        if isinstance(value, list):
            if len(value) < layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}{key} has {len(value)} entries for {layers} layers",
                                  f"make {key} one entry per layer")
            return [bool(test(v)) for v in value[:layers]]
    tried = f"{r.prefix}{flags_key}, {r.prefix}{types_key}"
    raise ConfigError(f"{r.source_name}: required field {types_key} is missing (tried {tried})",
                      f"add {types_key}: one entry per layer")


PARSERS: tuple[type[ArchParser], ...] = (MimoV2FlashParser,)
