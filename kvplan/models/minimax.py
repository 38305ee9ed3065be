"""MiniMax: MiniMax-01 / M1 (lightning attention with a softmax layer every eighth, MoE), MiniMax-M2 (Llama's
cache, MoE in every layer) and MiniMax-M3's language model (a sparse-attention indexer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import DecoderLayout, MoeLayout, every_layer_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention
from kvplan.specs import IndexKeySpec, LayerSpec, NoCacheSpec, StateSpec


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
    """MiniMax-M2 (``minimax_m2``): Llama's cache; every layer a MoE of ``num_local_experts`` experts with a routing
    bias, q/k RMSNorms over all heads (``qk_norm_type`` per_layer)."""

    model_types = ("minimax_m2",)
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    weight_types = ("minimax_m2",)
    WINDOWLESS = frozenset({"minimax_m2"})
    MTP_KEY = "num_mtp_modules"

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        # e_score_correction_bias (use_routing_bias); q_norm and k_norm over all heads in every layer
        # (transformers MiniMaxM2Attention has them whatever use_qk_norm says)
        return DecoderLayout(router_bias=True, qk_norm_whole=True)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return every_layer_moe(r, layers, intermediate, top_k)


class MiniMaxM3TextParser(ArchParser):
    """MiniMax-M3's language model (``minimax_m3_vl_text``): GQA with per-head q/k RMSNorms, a Lightning
    Indexer (q of ``index_n_heads`` x ``index_head_dim``, one k, their norms) on ``minimax_m3_sparse`` layers,
    and per ``mlp_layer_types`` either experts with a router (+ correction bias) and a shared expert, or a dense
    MLP of ``dense_intermediate_size``; no biases."""

    family = "minimax"
    model_types = ("minimax_m3", "minimax_m3_vl_text")
    weight_types = ("minimax_m3", "minimax_m3_vl_text")
    #: MiniMaxM3VLTextConfig's defaults (transformers 5.24) of the keys weight counting reads.
    defaults_by_type = {"minimax_m3_vl_text": {
        "vocab_size": 200064, "hidden_size": 6144, "intermediate_size": 3072, "num_hidden_layers": 60,
        "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "tie_word_embeddings": False,
        "num_experts_per_tok": 4, "num_local_experts": 128, "dense_intermediate_size": 12288,
        "shared_intermediate_size": 3072, "index_n_heads": 4, "index_head_dim": 128}}

    #: MiniMaxM3VLTextConfig.__post_init__: the Hub's ``sparse_attention_config`` keys win over the flat ones.
    INDEX_DIM = ("sparse_attention_config.sparse_index_dim", "index_head_dim")
    INDEX_HEADS = ("sparse_attention_config.sparse_num_index_heads", "index_n_heads")

    def defaults_for(self, model_type: str) -> Mapping[str, Any]:
        # the Hub's minimax_m3 config is read with the transformers class's defaults (MiniMaxM3VLTextConfig)
        return super().defaults_for("minimax_m3_vl_text" if model_type == "minimax_m3" else model_type)

    def attention_types(self, r: ConfigReader, layers: int) -> list[str]:
        """``layer_types`` (``full_attention`` or ``minimax_m3_sparse``), else the Hub's
        ``sparse_attention_config.sparse_attention_freq`` flags, else every layer full attention."""
        sparse_cfg = r.raw("sparse_attention_config")
        legacy = sparse_cfg.get("sparse_attention_freq") if isinstance(sparse_cfg, Mapping) else None
        types = self._per_layer(r, "layer_types", legacy, "minimax_m3_sparse", "full_attention", layers)
        unknown = sorted({str(t) for t in types} - {"minimax_m3_sparse", "full_attention"})
        if unknown:
            raise ConfigError(f"{r.source_name}: unknown layer type {unknown[0]!r} in {r.prefix}layer_types",
                              "MiniMax-M3 layers are full_attention or minimax_m3_sparse")
        return types

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        # both kinds keep full-length K/V; a sparse layer's indexer keys are appended by build_layers
        return [FULL for _ in self.attention_types(r, num_layers)]

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        """Every layer caches GQA K/V for every token; each ``minimax_m3_sparse`` layer also caches its Lightning
        Indexer's key (one ``index_head_dim`` row per token, transformers ``MiniMaxM3VLSparseCacheLayer.idx_keys``),
        appended after the decoder layers as its own 'indexer' group (entry i belongs to decoder layer i)."""
        specs = super().build_layers(r)
        types = self.attention_types(r, len(specs))
        sparse = [i for i, t in enumerate(types) if t == "minimax_m3_sparse"]
        if not sparse:
            return specs
        index_dim = r.first_of("index_head_dim", self.INDEX_DIM)
        heads = r.optional("index_n_heads", self.INDEX_HEADS)
        r.note(f"MiniMax-M3 sparse attention: {len(sparse)} of {len(specs)} layers (minimax_m3_sparse) also cache an "
               f"indexer key of index_head_dim {index_dim} per token in the cache's element type (transformers: the "
               "model dtype), reported as the 'indexer' layer group")
        key = IndexKeySpec(head_size=index_dim, index_n_heads=heads)
        own = set(sparse)
        return [*specs, *(key if i in own else NoCacheSpec(reason="full attention: no indexer")
                          for i in range(len(specs)))]

    def _per_layer(self, r: ConfigReader, key: str, legacy: Any, yes: str, no: str, layers: int) -> list[str]:
        value = r.first_of(key, (key,), required=False, kind="list")
        if value is None and isinstance(legacy, list):
            value = [yes if flag else no for flag in legacy]
            r.note(f"{key} derived from the Hub's legacy per-layer flags")
        if value is None:
            value = [no if key == "layer_types" else yes] * layers
            r.note(f"{key} is not in the config; the minimax_m3_vl_text default: every layer {value[0]}")
        if len(value) != layers:
            raise ConfigError(f"{r.source_name}: {key} has {len(value)} entries for {layers} layers", "fix the config")
        return value

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = r.first_of("num_key_value_heads", ("num_key_value_heads",))
        head_dim = r.first_of("head_dim", ("head_dim",))
        sparse_cfg = r.raw("sparse_attention_config")
        attn = self._per_layer(r, "layer_types", sparse_cfg.get("sparse_attention_freq")
                               if isinstance(sparse_cfg, dict) else None, "minimax_m3_sparse", "full_attention", layers)
        mlp = self._per_layer(r, "mlp_layer_types", r.raw("moe_layer_freq"), "sparse", "dense", layers)
        n_index = attn.count("minimax_m3_sparse")
        n_moe, n_dense = mlp.count("sparse"), mlp.count("dense")
        index_heads = r.first_of("index_n_heads", ("index_n_heads",))
        index_dim = r.first_of("index_head_dim", ("index_head_dim",))
        parts = embeddings(r, hidden)
        attention = gqa_attention(hidden, heads, kv_heads, head_dim, layers)
        attention += [Matrix(in_features=hidden, out_features=index_heads * index_dim, count=n_index),
                      Matrix(in_features=hidden, out_features=index_dim, count=n_index)]
        parts.append(WeightPart(name="attention", matrices=tuple(attention),
                                other_parameters=2 * head_dim * layers + 2 * index_dim * n_index))
        experts = r.first_of("num_experts", ("num_local_experts",))
        size = r.first_of("intermediate_size", ("intermediate_size",))
        top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
        shared = r.first_of("shared_intermediate_size", ("shared_intermediate_size",), required=False, kind="count")
        if n_moe:
            parts += experts_parts(hidden, size, experts, n_moe, shared_size=shared or None, router_bias=True)
        dense = r.first_of("dense_intermediate_size", ("dense_intermediate_size",)) if n_dense else 0
        if n_dense:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=dense, count=2 * n_dense),
                Matrix(in_features=dense, out_features=hidden, count=n_dense))))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"MiniMax-M3: {n_moe} MoE layers ({experts} experts, all resident) and {n_dense} dense; "
               f"{n_index} layers with a sparse-attention indexer")
        shape = {"hidden_size": hidden, "mlp_width": max(top_k * size + (shared or 0), dense),
                 "qkv_width": (heads + 2 * kv_heads) * head_dim, "vocab_size": vocab_of(r)}
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None, shape)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (MiniMaxParser, MiniMaxM2Parser, MiniMaxM3TextParser)
