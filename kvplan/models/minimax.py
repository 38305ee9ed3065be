"""MiniMax: MiniMax-01 / M1 (lightning attention with a softmax layer every eighth, MoE) and MiniMax-M2."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, MoeLayout, every_layer_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import (
    Matrix,
    WeightCount,
    WeightPart,
    count_of,
    embeddings,
    experts_parts,
    gqa_attention,
    hidden_of,
    vocab_of,
)
from kvplan.specs import StateSpec


class MiniMaxParser(ArchParser):
    """MiniMax-01 / M1: ``attn_type_list`` 1 = softmax attention, 0 = lightning (linear) attention."""

    family = "minimax"
    model_types = ("minimax", "minimax_m1", "minimax_text_01")
    #: MiniMaxConfig defaults of the keys weight counting reads.
    defaults = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
                "block_size": 256}
    defaults_by_type = {"minimax": {"tie_word_embeddings": False}, "minimax_m1": {"tie_word_embeddings": False},
                        "minimax_text_01": {"tie_word_embeddings": False}}
    weight_types = ("minimax", "minimax_m1", "minimax_text_01")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types"):
            return super().layer_kinds(r, num_layers)
        if not r.has("attn_type_list"):
            r.note("neither layer_types nor attn_type_list is in the config: the MiniMaxConfig default alternates, "
                   "softmax attention at even layers, lightning attention at odd ones")
            return [FULL if i % 2 == 0 else STATE for i in range(num_layers)]
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

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """MiniMax-01/M1: lightning attention (qkv, output gate, out_proj, norm) where attn_type_list is 0,
        softmax GQA attention where it is 1 (or by ``layer_types``); MoE MLP in every layer. transformers keeps
        each lightning layer's decay tables (``slope_rate``, query/key decays over ``block_size``, the diagonal
        block decay) as checkpoint buffers: counted too."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        n_lin = self.layer_kinds(r, layers).count(STATE)
        n_soft = layers - n_lin
        inner = heads * head_dim
        attention = gqa_attention(hidden, heads, kv_heads, head_dim, n_soft)
        attention += [Matrix(in_features=hidden, out_features=3 * inner, count=n_lin),  # qkv_proj
                      Matrix(in_features=hidden, out_features=inner, count=n_lin),  # output_gate
                      Matrix(in_features=inner, out_features=hidden, count=n_lin)]  # out_proj
        parts = embeddings(r, hidden)
        block = r.first_of("block_size", ("block_size",)) if n_lin else 0
        decays = heads * (1 + 2 * block + block * block)  # slope_rate, query/key decay, diagonal decay
        if n_lin:
            r.note(f"lightning layers' decay tables counted as transformers holds them: {decays:,} values per layer "
                   f"(block_size {block})")
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=(inner + decays) * n_lin))
        experts = r.first_of("num_experts", ("num_local_experts", "num_experts"))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        size = r.first_of("intermediate_size", ("intermediate_size",))
        shared = r.first_of("shared_intermediate_size", ("shared_intermediate_size",), required=False, kind="count")
        shared = shared or None
        parts += experts_parts(hidden, size, experts, layers, shared_size=shared)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"MiniMax: {n_lin} lightning-attention and {n_soft} softmax-attention layers; {experts} experts per layer, "
               "all resident")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": (top_k or 1) * size + (shared or 0),
                                                "qkv_width": 4 * inner, "vocab_size": vocab_of(r)})


class MiniMaxM2Parser(LlamaParser):
    """MiniMax-M2 (``minimax_m2``): Llama's cache (the Llama rules read it); every layer a MoE of
    ``num_local_experts`` experts with a routing bias, q/k RMSNorms over all heads (``qk_norm_type`` per_layer)."""

    model_types = ()
    defaults_by_type = {}
    weight_types = ("minimax_m2",)
    MTP_KEY = "num_mtp_modules"

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        # e_score_correction_bias (use_routing_bias); q_norm and k_norm over all heads in every layer
        # (transformers MiniMaxM2Attention has them whatever use_qk_norm says)
        return DecoderLayout(router_bias=True, qk_norm_whole=True)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return every_layer_moe(r, layers, intermediate, top_k)


PARSERS: tuple[type[ArchParser], ...] = (MiniMaxParser, MiniMaxM2Parser)
