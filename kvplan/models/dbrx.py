"""Databricks DBRX: MPT-style config keys (``d_model``, ``n_heads``), KV groups in ``attn_config.kv_n_heads``; a
``dbrx_text`` config is read by the Llama rules."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, embeddings, vocab_of
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts


class DbrxParser(ArchParser):
    """DBRX: ``d_model`` / ``n_heads`` / ``n_layers`` / ``max_seq_len``; KV heads in ``attn_config.kv_n_heads``."""

    family = "dbrx"
    model_types = ("dbrx",)
    #: DbrxConfig defaults (DbrxAttentionConfig: kv_n_heads = 1).
    defaults = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048, "attn_config.kv_n_heads": 1,
                # DbrxFFNConfig defaults, read by the weight count
                "ffn_config.ffn_hidden_size": 3584, "ffn_config.moe_num_experts": 4, "ffn_config.moe_top_k": 1,
                "tie_word_embeddings": False}
    weight_types = ("dbrx",)
    MAX_CONTEXT = ("max_seq_len", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        return r.first_of("num_kv_heads", ["attn_config.kv_n_heads", *self.KV_HEADS])

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """DBRX (modeling_dbrx.py): a fused Wqkv and out_proj without biases, bias-free LayerNorms, and in every
        layer ``ffn_config.moe_num_experts`` GLU experts of ``ffn_config.ffn_hidden_size`` with a router."""
        hidden = r.first_of("hidden_size", ("d_model", "hidden_size"))
        layers = r.first_of("num_hidden_layers", ("n_layers", "num_hidden_layers"))
        heads = r.first_of("num_attention_heads", ("n_heads", "num_attention_heads"))
        kv = self.kv_heads(r, heads) * (hidden // heads)
        experts = r.first_of("num_experts", ("ffn_config.moe_num_experts",))
        size = r.first_of("moe_intermediate_size", ("ffn_config.ffn_hidden_size",))
        top_k = r.first_of("num_experts_per_tok", ("ffn_config.moe_top_k",))
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=hidden + 2 * kv, count=layers),
            Matrix(in_features=hidden, out_features=hidden, count=layers))))
        parts += experts_parts(hidden, size, experts, layers)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"DBRX: {experts} experts of {size} in every layer, all resident; {top_k} routed per token")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": top_k * size,
                                                "qkv_width": hidden + 2 * kv, "vocab_size": vocab_of(r)})


class DbrxTextParser(LlamaParser):
    """``dbrx_text``: read by the Llama rules (Llama's key names and GQA cache)."""

    model_types = ("dbrx_text",)
    weight_types = ()


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"dbrx_text": "remote code: not counted"}

PARSERS: tuple[type[ArchParser], ...] = (DbrxParser, DbrxTextParser)
