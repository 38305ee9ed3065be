"""Zhipu GLM: ChatGLM2/3 and GLM-4 (remote code, ``chatglm``), GLM-4.5 MoE and GLM-5 (MLA with a sparse indexer)."""

from __future__ import annotations

import dataclasses

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, MoeLayout, first_k_dense_moe
from kvplan.models.deepseek import DeepseekParser
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, embeddings, hidden_of, switch, vocab_of


class ChatGlmParser(ArchParser):
    """ChatGLM2/3 and GLM-4 (remote code): ``multi_query_group_num`` KV heads when ``multi_query_attention``."""

    family = "chatglm"
    model_types = ("chatglm",)
    defaults = {
        "num_layers": 28, "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 128,
        "seq_length": 2048, "multi_query_attention": False, "multi_query_group_num": 1,
    }
    #: ChatGLMConfig defaults of the keys weight counting reads.
    defaults_by_type = {"chatglm": {"tie_word_embeddings": False, "add_qkv_bias": False, "add_bias_linear": False,
                                    "post_layer_norm": True, "multi_query_attention": False}}
    weight_types = ("chatglm",)
    MAX_CONTEXT = ("seq_length", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.flag("multi_query_attention", False):
            return r.first_of("num_kv_heads", ["multi_query_group_num"])
        r.record("num_kv_heads", heads, "derived: multi_query_attention is false, so num_kv_heads = num_attention_heads")
        return heads

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        value = r.optional("head_dim", ["kv_channels", "head_dim"])
        return value if value is not None else super().head_dim(r, heads)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """ChatGLM2/3 and GLM-4 (remote code): fused query_key_value with multi-query groups, SwiGLU MLP."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_layers", "num_hidden_layers"))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        head_dim = r.optional("kv_channels", ("kv_channels",)) or hidden // heads
        groups = heads
        if switch(r, "multi_query_attention", False):
            groups = r.first_of("multi_query_group_num", ("multi_query_group_num",))
        q, kv = heads * head_dim, groups * head_dim
        ffn = r.first_of("intermediate_size", ("ffn_hidden_size",))
        linear_bias = switch(r, "add_bias_linear", False)
        qkv_bias = switch(r, "add_qkv_bias", False) or linear_bias
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q + 2 * kv, count=layers),
            Matrix(in_features=q, out_features=hidden, count=layers)),
            other_parameters=((q + 2 * kv) if qkv_bias else 0) * layers + (hidden * layers if linear_bias else 0)))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=2 * ffn, count=layers),
            Matrix(in_features=ffn, out_features=hidden, count=layers)),
            other_parameters=(2 * ffn + hidden) * layers if linear_bias else 0))
        final = 1 if switch(r, "post_layer_norm", True) else 0
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + final) * hidden, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": ffn, "qkv_width": q + 2 * kv,
                                           "vocab_size": vocab_of(r)})


class Glm4MoeParser(LlamaParser):
    """GLM-4.5 / 4.6: Llama's cache; without head_dim, hidden_size // num_attention_heads floored.

    GLM-4.5 / 4.6 (``glm4_moe``): DeepSeek-V3-style MoE (routed and shared experts,
    a router correction bias) after the first dense layers. The cache follows the Llama rules, with
    transformers' head dim when the config has none: ``hidden_size // num_attention_heads``, floored
    (Glm4MoeConfig has no ``head_dim`` default; its 4096 / 96 gives 42)."""

    model_types = ("glm4_moe",)
    defaults_by_type = {"glm4_moe": {"tie_word_embeddings": False},
                        # SolarOpenConfig (a Glm4MoeConfig): its defaults of the keys the count reads
                        "solar_open": {"tie_word_embeddings": False, "n_shared_experts": 1},
                        # SarvamMoEConfig (a Glm4MoeConfig, built as Glm4MoeForCausalLM)
                        "sarvam_moe": {"tie_word_embeddings": False, "use_qk_norm": True, "first_k_dense_replace": 1}}
    #: ``solar_open`` (Upstage Solar Open): GLM-4.5's MoE in every layer (first_k_dense_replace is not read),
    #: Llama attention without an o_proj bias; its cache is read by the generic rules.
    weight_types = ("glm4_moe", "solar_open", "sarvam_moe")

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        if r.optional("head_dim", self.HEAD_DIM) is not None:
            return super().head_dim(r, heads)
        hidden = r.first_of("hidden_size", self.HIDDEN)
        if hidden % heads == 0:
            return super().head_dim(r, heads)
        value = hidden // heads
        r.record("head_dim", value, f"derived: hidden_size // num_attention_heads = {hidden} // {heads} (floored)")
        r.note(f"head_dim is not in the config and hidden_size {hidden} is not a multiple of {heads} heads: "
               f"modeling_glm4_moe floors it, head_dim = {value}")
        return value

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        # attention_bias biases q/k/v only: o_proj has none (modeling_glm4_moe; Solar Open's Llama attention the same)
        return DecoderLayout(router_bias=True, o_bias=False)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type == "solar_open":
            moe = first_k_dense_moe(r, layers, top_k)
            return dataclasses.replace(moe, layers=list(range(layers)))
        return first_k_dense_moe(r, layers, top_k)


class GlmMoeDsaParser(DeepseekParser):
    """GLM-5 (``glm_moe_dsa``): DeepSeek-V3.2's layout -- MLA with a q LoRA, the sparse-attention indexer,
    routed and shared experts after ``first_k_dense_replace`` dense layers. The cache is read by the MLA rules."""

    model_types = ()
    defaults_by_type = {}
    weight_types = ("glm_moe_dsa",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(router_bias=True)


PARSERS: tuple[type[ArchParser], ...] = (ChatGlmParser, Glm4MoeParser, GlmMoeDsaParser)
