"""JetMoE (``jetmoe``): mixture-of-attention-heads and mixture-of-experts in every layer.

The cache is the generic rule's: every layer caches K and V of ``num_key_value_heads`` heads of ``kv_channels``
(one shared ``kv_proj``); the routed attention experts hold only q and o. Weights (transformers JetMoe): per
layer the K/V projection, ``num_local_experts`` attention experts (q from ``hidden_size`` to
``num_key_value_heads * kv_channels`` and o back) with a router and an output bias, ``num_local_experts`` gated MLP
experts of ``intermediate_size`` with a router and an output bias, two RMSNorms; the embedding is tied by default.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class JetMoeParser(ArchParser):
    """Generic K/V cache (``num_key_value_heads`` x ``kv_channels``); MoA attention and MoE MLP weights."""

    family = "jetmoe"
    model_types = ("jetmoe",)
    #: JetMoeConfig defaults of the keys weight counting reads.
    defaults = {"vocab_size": 32000, "intermediate_size": 5632, "num_local_experts": 8, "num_experts_per_tok": 2,
                "tie_word_embeddings": True}
    weight_types = ("jetmoe",)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        kv_heads = r.first_of("num_kv_heads", ("num_key_value_heads",))
        kv_channels = r.first_of("head_dim", ("kv_channels",))
        experts = r.first_of("num_experts", ("num_local_experts",))
        top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        kv = kv_heads * kv_channels
        parts = embeddings(r, hidden)
        parts += [
            WeightPart(name="attention", matrices=(Matrix(in_features=hidden, out_features=2 * kv, count=layers),),
                       other_parameters=hidden * layers),  # kv_proj; the attention experts' output bias
            WeightPart(name="experts", matrices=(
                Matrix(in_features=hidden, out_features=kv, count=experts * layers),  # attention experts: q
                Matrix(in_features=kv, out_features=hidden, count=experts * layers),  # and o
                Matrix(in_features=hidden, out_features=inner, count=2 * experts * layers),
                Matrix(in_features=inner, out_features=hidden, count=experts * layers)),
                other_parameters=hidden * layers),  # the MLP's output bias
            WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=2 * layers),),
                       tp_sharded=False),
            WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False),
        ]
        r.note(f"JetMoE: {experts} attention experts and {experts} MLP experts in each of {layers} layers, all "
               f"resident; {top_k} routed per token")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": top_k * inner,
                                                "qkv_width": top_k * kv + 2 * kv, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (JetMoeParser,)
