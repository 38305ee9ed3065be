"""MiniCPM 5 MoE (``minicpm5_moe``, transformers 5.25 MiniCPM5MoeConfig): Llama's GQA cache with an explicit
``head_dim``; gated attention (one ``q_gate_proj`` of twice the query width), DeepSeek-V3's MoE (routed experts
of ``moe_intermediate_size``, ``n_shared_experts`` shared ones, a router correction bias) after the dense layers
``mlp_layer_types`` names (default: the first one)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, mlp_types_moe
from kvplan.models.tensors import Matrix


class MiniCpm5MoeParser(DecoderParser):
    """MiniCPM 5 MoE: q and its output gate in one projection (2 x heads x head_dim), DeepSeek-V3 MoE."""

    family = "minicpm5_moe"
    model_types = ("minicpm5_moe",)
    weight_types = ("minicpm5_moe",)
    #: MiniCPM5MoeConfig defaults (transformers 5.25); ``first_k_dense_replace`` is its constructor's default.
    defaults = {
        "vocab_size": 130560, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 28,
        "num_attention_heads": 32, "num_key_value_heads": 2, "max_position_embeddings": 524288,
        "tie_word_embeddings": False, "moe_intermediate_size": 512, "num_experts_per_tok": 16,
        "n_shared_experts": 1, "n_routed_experts": 160, "head_dim": 128, "first_k_dense_replace": 1,
    }

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(router_bias=True)

    def attention_weights(self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
                          ) -> tuple[list[Matrix], int, int]:
        attention, other, width = super().attention_weights(r, model_type, hidden, layers, heads)
        q = heads * self.head_dim(r, heads)
        other += q * layers if r.raw("attention_bias") is True else 0  # the gate half's bias
        return [Matrix(in_features=hidden, out_features=q, count=layers), *attention], other, width + q

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
        return mlp_types_moe(r, layers, experts=r.first_of("num_experts", ("n_routed_experts", "num_local_experts")),
                             top_k=top_k, expert_size=size, shared_size=shared * size or None)


PARSERS: tuple[type[ArchParser], ...] = (MiniCpm5MoeParser,)
