"""Zhipu GLM: ChatGLM2/3 and GLM-4 (remote code, ``chatglm``), GLM and GLM-4 (``glm``, ``glm4``: Llama's cache),
GLM-4.5 MoE, GLM-4.7-Flash (``glm4_moe_lite``: MLA), GLM-5 (MLA with a sparse indexer) and GLM-5-Next (Kimi Delta
Attention layers between the indexed MLA layers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import STATE, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.decoder import DecoderLayout, MoeLayout, first_k_dense_moe
from kvplan.models.deepseek import DeepseekParser
from kvplan.models.kimi import kda_weights
from kvplan.models.llama import LlamaParser
from kvplan.models.mla import add_indexer, add_mla_layer, finish_mla_moe, mla_decoder_weights, mla_dims, mlp_layer_kinds
from kvplan.models.tensors import Matrix, Tensors, WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


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


class GlmParser(LlamaParser):
    """GLM and GLM-4 (``glm``, ``glm4``), and the language models of GLM-OCR (``glm_ocr_text``) and GLM-4V /
    GLM-4.6V (``glm4v_text``): Llama's cache and layers with q/k/v biases but none on o_proj; GLM-4 adds norms
    after attention and after the MLP. Glm4vTextAttention biases q/k/v whatever the config says (it has no
    ``attention_bias``)."""

    model_types = ("glm", "glm4", "glm_ocr_text")
    weight_types = ("glm", "glm4", "glm_ocr_text", "glm4v_text")
    #: Glm4vTextConfig's defaults (transformers 5.25) of the keys the count reads (its wrapper's
    #: tie_word_embeddings, false, governs the lm_head).
    defaults_by_type = {"glm4v_text": {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696,
                                       "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2,
                                       "tie_word_embeddings": False}}
    LAYOUTS = {"glm": DecoderLayout(o_bias=False), "glm4": DecoderLayout(o_bias=False, norms_per_layer=4),
               "glm_ocr_text": DecoderLayout(o_bias=False, norms_per_layer=4),
               "glm4v_text": DecoderLayout(qkv_bias=True, o_bias=False, norms_per_layer=4)}
    WINDOWLESS = frozenset({"glm", "glm4"})


class Glm4MoeParser(LlamaParser):
    """GLM-4.5 / 4.6: Llama's cache; without head_dim, hidden_size // num_attention_heads floored.

    GLM-4.5 / 4.6 (``glm4_moe``): DeepSeek-V3-style MoE (routed and shared experts,
    a router correction bias) after the first dense layers. The cache follows the Llama rules, with
    transformers' head dim when the config has none: ``hidden_size // num_attention_heads``, floored
    (Glm4MoeConfig has no ``head_dim`` default; its 4096 / 96 gives 42)."""

    model_types: ClassVar[tuple[str, ...]] = ("glm4_moe", "sarvam_moe", "solar_open")
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {"glm4_moe": {"tie_word_embeddings": False},
                        # SolarOpenConfig (a Glm4MoeConfig): its defaults of the keys the count reads
                        "solar_open": {"tie_word_embeddings": False, "n_shared_experts": 1},
                        # SarvamMoEConfig (a Glm4MoeConfig, built as Glm4MoeForCausalLM)
                        "sarvam_moe": {"tie_word_embeddings": False, "use_qk_norm": True, "first_k_dense_replace": 1},
                        # Glm4vMoeTextConfig (GLM-4.5V's language model): GLM-4.5's layers
                        "glm4v_moe_text": {"tie_word_embeddings": False, "first_k_dense_replace": 1, "n_shared_experts": 1,
                                           "n_routed_experts": 128, "num_experts_per_tok": 8,
                                           "moe_intermediate_size": 1408}}
    #: ``solar_open`` (Upstage Solar Open): GLM-4.5's MoE in every layer (first_k_dense_replace is not read),
    #: Llama attention without an o_proj bias; its cache is read by the generic rules.
    weight_types: ClassVar[tuple[str, ...]] = ("glm4_moe", "solar_open", "sarvam_moe", "glm4v_moe_text")

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
            return replace(moe, layers=list(range(layers)))
        return first_k_dense_moe(r, layers, top_k)


class Glm4MoeLiteParser(LlamaParser):
    """GLM-4.7-Flash (``glm4_moe_lite``): the cache read by the Llama rules (its MLA latent from ``kv_lora_rank``);
    the DeepSeek-V3 layout's weights (MLA, dense then MoE layers with shared experts and a router correction
    bias)."""

    model_types = ("glm4_moe_lite",)
    weight_types = ("glm4_moe_lite",)
    #: Glm4MoeLiteConfig's defaults (transformers 5.24) of the keys the count reads.
    defaults_by_type = {"glm4_moe_lite": {"tie_word_embeddings": False}}
    WINDOWLESS = frozenset({"glm4_moe_lite"})

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        return mla_decoder_weights(r, model_type, router_bias=True, dense_first="Glm4MoeLiteConfig")


class GlmMoeDsaParser(DeepseekParser):
    """GLM-5 (``glm_moe_dsa``): DeepSeek-V3.2's layout -- MLA with a q LoRA, the sparse-attention indexer,
    routed and shared experts after ``first_k_dense_replace`` dense layers; its cache follows the MLA rules."""

    model_types = ("glm_moe_dsa",)
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    weight_types = ("glm_moe_dsa",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(router_bias=True)


class Glm5NextParser(DeepseekParser):
    """GLM-5-Next: Kimi Delta Attention state layers between MLA layers with a pooled sparse-attention indexer.

    Glm5NextTextConfig: ``linear_attention`` layers (a short convolution over q, k and v and a float32
    ``(heads, head_dim, head_dim)`` recurrent state) and ``indexed_attention`` layers (MLA with the sparse-attention
    indexer); without ``layer_types`` every fourth layer (i % 4 == 3) is indexed. The indexer caches, per token, its key, the pool-gate scores (``index_head_dim``
    wide, when ``index_kpool`` pools keys) and a validity flag: transformers packs them into one tensor."""

    family = "glm5_next"
    model_types = ("glm5_next", "glm5_next_text")
    #: Glm5NextTextConfig defaults of the keys the cache reads.
    defaults_by_type = {t: {"num_hidden_layers": 45, "num_attention_heads": 64, "kv_lora_rank": 512,
                            "qk_rope_head_dim": 0, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048,
                            "index_kpool": 16, "linear_head_dim": 128, "linear_num_heads": 64,
                            "linear_conv_kernel_dim": 4, "max_position_embeddings": 1048576,
                            "q_lora_rank": 1536, "qk_nope_head_dim": 256, "v_head_dim": 256, "hidden_size": 4096,
                            "vocab_size": 154880, "intermediate_size": 12288, "moe_intermediate_size": 2048,
                            "n_routed_experts": 288, "n_shared_experts": 1, "num_experts_per_tok": 8,
                            "first_k_dense_replace": 3, "moe_layer_freq": 1, "hc_mult": 4,
                            "tie_word_embeddings": False}
                        for t in ("glm5_next", "glm5_next_text")}
    weight_types = ("glm5_next_text",)
    LINEAR_HEADS = ("linear_num_heads", "linear_attn_config.num_heads")
    LINEAR_HEAD_DIM = ("linear_head_dim", "linear_attn_config.head_dim")
    LINEAR_CONV = ("linear_conv_kernel_dim", "linear_attn_config.short_conv_kernel_size")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types"):
            types = r.first_of("layer_types", ("layer_types",), kind="list")
            # Glm5NextTextConfig reads full_attention as indexed_attention
            types = [self.INDEXED if t == "full_attention" else t for t in types]
            return self.kinds_from_layer_types(r, types, num_layers)
        r.note("layer_types is not in the config; using the glm5_next default: layer i is indexed attention when "
               "i % 4 == 3, Kimi Delta Attention otherwise")
        kinds = ["linear_attention" if i % 4 != 3 else self.INDEXED for i in range(num_layers)]
        return self.kinds_from_layer_types(r, kinds, num_layers)

    def indexer_kinds(self, r: ConfigReader, num_layers: int) -> list[Any] | None:
        if r.has("indexer_types"):
            return super().indexer_kinds(r, num_layers)
        pattern = r.raw("index_topk_pattern")
        if isinstance(pattern, str):
            kinds = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
            r.note(f"indexer_types from index_topk_pattern {pattern!r} (F = own indexer keys, S = shared)")
            return kinds
        freq = r.raw("index_topk_freq")
        if isinstance(freq, int) and not isinstance(freq, bool) and freq > 1:
            offset = r.raw("index_skip_topk_offset")
            offset = offset if isinstance(offset, int) and not isinstance(offset, bool) else 2
            r.note(f"indexer_types from index_topk_freq {freq} and index_skip_topk_offset {offset}")
            return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(num_layers)]
        return None

    def indexer_width(self, r: ConfigReader, index_dim: int) -> int:
        pool = r.first_of("index_kpool", ("index_kpool",), kind="count")
        if not pool:
            return index_dim
        width = 2 * index_dim + 1
        r.note(f"index_kpool {pool}: transformers packs each token's indexer key ({index_dim}), pool-gate scores "
               f"({index_dim}) and a validity flag (1) into one {width}-wide entry")
        return width

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Glm5NextTextModel (transformers 5.24): KDA layers as Kimi Linear's (q/k/v, their convolution, the
        forget gate f_a/f_b with A_log and dt_bias, the beta projection, the output gate g_a/g_b and norm, o_proj);
        indexed layers an MLA attention (q LoRA) with the DSA indexer, which also learns its key-pool positions
        and gate (``index_kpool``); dense or MoE MLPs by ``mlp_layer_types`` (default: the first 3 dense); two
        hyper-connections per layer (``hc_mult`` streams: a (hc^2 + 2 hc) x (hc x hidden) mix, its base and 3
        scales)."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        kinds = self.layer_kinds(r, layers)
        heads = r.first_of("num_attention_heads", self.HEADS)
        dims = mla_dims(r)
        k_heads, k_dim = r.first_of("linear_num_heads", self.LINEAR_HEADS), r.first_of("linear_head_dim",
                                                                                      self.LINEAR_HEAD_DIM)
        conv = r.first_of("linear_conv_kernel_dim", self.LINEAR_CONV)
        pool = r.first_of("index_kpool", ("index_kpool",), kind="count")
        index_dim = r.first_of("index_head_dim", ("index_head_dim",))
        t = Tensors()
        for kind in kinds:
            if kind == STATE:
                matrices, vectors = kda_weights(hidden, k_heads, k_dim, conv, 1)
                for m in matrices:
                    t.add("attention", m.in_features, m.out_features, m.count)
                t.vector("attention", vectors)
            else:
                add_mla_layer(t, hidden, heads, dims)
                add_indexer(t, r, hidden, dims["q_lora_rank"], layer_norm=True)
                if pool:  # the key pool's learned positions and its gate over the hidden state
                    t.add("attention", hidden, index_dim)
                    t.vector("attention", pool * index_dim)
        streams = r.first_of("hc_mult", ("hc_mult",))
        mix = streams * streams + 2 * streams
        t.add("hyper_connections", streams * hidden, mix, 2 * layers)
        t.vector("hyper_connections", (mix + 3) * 2 * layers)
        n_moe = mlp_layer_kinds(r, layers).count("sparse")
        r.note(f"GLM-5-Next: {kinds.count(STATE)} KDA and {layers - kinds.count(STATE)} indexed MLA layers")
        return finish_mla_moe(r, t, hidden, layers, heads, dims, n_moe, router_bias=True, name="GLM-5-Next")

    #: Glm5NextVisionConfig defaults (transformers 5.24) of the keys the tower count reads.
    VISION_DEFAULTS: Mapping[str, Any] = {"depth": 24, "hidden_size": 1024, "num_heads": 16, "in_channels": 3,
                                          "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2,
                                          "out_hidden_size": 1536, "intermediate_size": 4096,
                                          "projection_intermediate_size": 10240, "attention_bias": True}

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """Glm5NextVisionModel: a 3-D patch convolution (with bias), ``depth`` blocks (two RMSNorms, fused qkv and
        proj, per-head q/k RMSNorms, a gated MLP; biases by ``attention_bias``), a post RMSNorm, the merge
        convolution to ``out_hidden_size`` (with bias) and the merger (a Linear, a LayerNorm and a gated MLP of
        ``projection_intermediate_size``, no biases)."""
        vision = outer.get("vision_config")
        if not isinstance(vision, Mapping):
            return None
        v = ConfigReader(vision, source_name=r.source_name, prefix="vision_config.", defaults=self.VISION_DEFAULTS,
                         defaults_name="glm5_next_vision")
        h, depth = v.first_of("hidden_size", ("hidden_size",)), v.first_of("depth", ("depth",))
        heads, inner = v.first_of("num_heads", ("num_heads",)), v.first_of("intermediate_size", ("intermediate_size",))
        patch, temporal = v.first_of("patch_size", ("patch_size",)), v.first_of("temporal_patch_size",
                                                                                ("temporal_patch_size",))
        channels, merge = v.first_of("in_channels", ("in_channels",)), v.first_of("spatial_merge_size",
                                                                                 ("spatial_merge_size",))
        out = v.first_of("out_hidden_size", ("out_hidden_size",))
        context = v.first_of("projection_intermediate_size", ("projection_intermediate_size",))
        bias = v.flag("attention_bias", True)
        per_block = 2 * h + 2 * (h // heads) + ((3 * h + h + 2 * inner + h) if bias else 0)  # norms, q/k norms, biases
        tower = WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=channels * temporal * patch * patch, out_features=h),
            Matrix(in_features=h, out_features=3 * h, count=depth), Matrix(in_features=h, out_features=h, count=depth),
            Matrix(in_features=h, out_features=inner, count=2 * depth),
            Matrix(in_features=inner, out_features=h, count=depth)),
            other_parameters=h + per_block * depth + h)  # patch bias, blocks, post norm
        projector = WeightPart(name="projector", vision=True, matrices=(
            Matrix(in_features=h * merge * merge, out_features=out), Matrix(in_features=out, out_features=out),
            Matrix(in_features=out, out_features=context, count=2), Matrix(in_features=context, out_features=out)),
            other_parameters=out + 2 * out)  # merge-conv bias, LayerNorm
        r.note(f"vision tower (GLM-5-Next ViT, {depth} blocks) reported separately as weights.vision_*")
        return [tower, projector]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        heads = r.first_of("linear_num_heads", self.LINEAR_HEADS)
        head_dim = r.first_of("linear_head_dim", self.LINEAR_HEAD_DIM)
        conv = r.first_of("linear_conv_kernel_dim", self.LINEAR_CONV)
        if conv < 2:
            raise ConfigError(f"{r.source_name}: {r.prefix}linear_conv_kernel_dim must be at least 2, got {conv}",
                              "fix the config")
        return StateSpec(mixer="kda", shapes=(("conv", (conv - 1, 3 * heads * head_dim)),
                                              ("ssm", (heads, head_dim, head_dim))), fp32_tensors=("ssm",))


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {t: "GQA in every layer: the generic rules read its cache"
                  for t in ("glm4v_text", "glm4v_moe_text")}
#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"glm5_next": "a wrapper: its weights are counted under its text_config's glm5_next_text"}

PARSERS: tuple[type[ArchParser], ...] = (ChatGlmParser, GlmParser, Glm4MoeParser, Glm4MoeLiteParser, GlmMoeDsaParser,
                                         Glm5NextParser)
