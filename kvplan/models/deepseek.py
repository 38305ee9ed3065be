"""DeepSeek: DeepSeek-MoE (V1), the multi-head latent attention of V2/V3/R1 and of Kimi K2, the MLA families whose
caches follow its rules (V3.2's DSA, Mistral Large 4, HY-V4, A.X-K2, dots3-note, LongCat-Flash; GLM-5 in glm.py) and
the DeepSeek-V3 layout under other names (Sarvam-MLA, Youtu-LLM, MiniCPM3). DeepSeek-V4 is its own family
(deepseek_v4.py); the per-layer MLA weight toolkit is in mla.py.

MLA caches one latent row per token per layer. The MoE layers hold fine-grained routed experts
plus shared experts, after ``first_k_dense_replace`` dense layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, first_k_dense_moe, note_mtp
from kvplan.models.llama import LlamaParser
from kvplan.models.mistral import pixtral_weights
from kvplan.models.mla import (
    add_indexer,
    add_mla_layer,
    finish_mla_moe,
    mla_decoder_weights,
    mla_dims,
    mlp_layer_kinds,
    per_layer_list,
)
from kvplan.models.tensors import Matrix, Tensors, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import (
    IndexerSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SlidingWindowSpec,
)


class DeepseekParser(DecoderParser):
    family = "deepseek_mla"
    model_types: ClassVar[tuple[str, ...]] = (
        "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "kimi_vl", "deepseek_vl_v2", "axk2", "hy_v4", "hy_v4_vl", "hy_v4_vl_text", "longcat_flash", "mistral_large4", "mistral_large4_text",
                   "dots3_note", "dots3_note_text", "axk1")
    #: Types whose transformers modeling keeps the indexer keys in float32 (dots3_note: its float32 rope
    #: promotes the key before cache.update_indexer; measured by tools/hf_zoo.py).
    HF_FLOAT32_INDEXER = ("dots3_note", "dots3_note_text")
    #: transformers' DSA configs (DeepseekV32Config, GlmMoeDsaConfig, AXK2Config, HYV4Config) name their MLA layers
    #: ``indexed_attention``: an MLA latent plus, unless ``indexer_types`` says ``shared``, an indexer key.
    INDEXED = "indexed_attention"
    defaults = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {"deepseek_v2": {"tie_word_embeddings": False}, "deepseek_v3": {"tie_word_embeddings": False},
                        "kimi_k2": {"tie_word_embeddings": False}, "deepseek_v32": {"tie_word_embeddings": False},
                        # MistralLarge4TextConfig: NoPE every no_rope_layer_interval-th layer
                        "mistral_large4_text": {"no_rope_layer_interval": 4, "first_k_dense_replace": 1,
                                                "tie_word_embeddings": False},
                        # AXK1Config / AXK2Config fold these legacy keys into mlp_layer_types
                        "axk1": {"first_k_dense_replace": 1, "moe_layer_freq": 1, "tie_word_embeddings": False},
                        "axk2": {"first_k_dense_replace": 1, "moe_layer_freq": 1, "tie_word_embeddings": False},
                        # Dots3NoteTextConfig: sliding MLA layers (swa_* keys, normalised into per_layer_config)
                        "dots3_note_text": {"sliding_window": 512, "swa_kv_lora_rank": 1024, "swa_head_dim": 256,
                                            "swa_qk_nope_head_dim": 192, "swa_num_attention_heads": 64,
                                            "swa_q_lora_rank": 1024, "swa_v_head_dim": 128,
                                            "first_k_dense_replace": 1, "moe_layer_freq": 1,
                                            "shared_experts_intermediate_size": 1536, "tie_word_embeddings": False},
                        # LongcatFlashConfig (transformers 5.24)
                        "longcat_flash": {"ffn_hidden_size": 12288, "expert_ffn_hidden_size": 2048,
                                          "n_routed_experts": 512, "zero_expert_num": 256, "moe_topk": 12,
                                          "router_bias": False, "tie_word_embeddings": False}}
    weight_types: ClassVar[tuple[str, ...]] = ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "mistral_large4_text",
                    "hy_v4", "hy_v4_vl_text", "axk1", "axk2", "dots3_note_text", "longcat_flash")

    def attention_dims(self, r: ConfigReader) -> dict[str, int]:
        if not r.has("kv_lora_rank"):
            r.note("kv_lora_rank is null: this checkpoint uses plain multi-head attention, not MLA")
            return super().attention_dims(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        rank = r.first_of("kv_lora_rank", ["kv_lora_rank"])
        rope = r.first_of("qk_rope_head_dim", ["qk_rope_head_dim"], kind="count")  # 0: a latent without rope (GLM-5-Next)
        # NOTE: recorded for `kvplan compare`: the MHA a latent replaces has K heads of
        # qk_nope_head_dim + qk_rope_head_dim and V heads of v_head_dim.
        r.optional("qk_nope_head_dim", ["qk_nope_head_dim"])
        r.optional("v_head_dim", ["v_head_dim"])
        r.note(
            f"MLA caches one latent per token per layer: kv_lora_rank + qk_rope_head_dim = {rank} + {rope} "
            f"= {rank + rope} values, no separate K and V (vLLM MLAAttentionSpec; transformers >= 5.15)"
        )
        return {"mla": 1, "kv_lora_rank": rank, "qk_rope_head_dim": rope, "num_attention_heads": heads}

    def kinds_from_layer_types(self, r: ConfigReader, types: Any, num_layers: int, *, key: str = "layer_types"
                               ) -> list[str]:
        if isinstance(types, list) and self.INDEXED in types:
            r.note(f"{self.INDEXED} layers are MLA layers with a sparse-attention indexer")
            types = ["full_attention" if t == self.INDEXED else t for t in types]
        return super().kinds_from_layer_types(r, types, num_layers, key=key)

    def num_layers(self, r: ConfigReader) -> int:
        if r.has("num_layers") and not r.has("num_hidden_layers"):
            # LongCat-Flash (LongcatFlashConfig.num_layers): each layer runs two MLA attentions, two cache layers
            layers = r.first_of("num_layers", ("num_layers",))
            r.note(f"num_layers = {layers} LongCat-Flash layers, each with two MLA attentions: {2 * layers} cache layers")
            return 2 * layers
        return super().num_layers(r)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        """DSA (DeepSeek-V3.2, GLM-5): one indexer key cache per MLA layer, appended after the decoder
        layers (as encoder-decoder models append cross layers); the MLA specs are marked so engines price
        an fp8 cache in the fp8_ds_mla layout. Layers whose ``indexer_types`` entry is ``shared`` reuse an
        earlier layer's indexer keys and cache none (HYV4Config)."""
        specs = self._sliding_latents(r, super().build_layers(r))
        indexed = [i for i, s in enumerate(specs) if isinstance(s, MLASpec)]
        specs = self._nope_and_shared_latents(r, specs)
        if not r.has("index_head_dim"):
            return specs
        index_dim = r.first_of("index_head_dim", ["index_head_dim"])
        heads = r.optional("index_n_heads", ["index_n_heads"])
        topk = r.optional("index_topk", ["index_topk"])
        mla = indexed
        kinds = self.indexer_kinds(r, len(specs))
        if kinds is not None:
            if len(kinds) != len(specs) or not set(kinds) <= {"full", "shared"}:
                raise ConfigError(f"{r.source_name}: {r.prefix}indexer_types must give full or shared per layer",
                                  "one entry per layer: full (own indexer keys) or shared (an earlier layer's)")
            shared = [i for i in mla if kinds[i] == "shared"]
            if shared:
                r.note(f"indexer_types: {len(shared)} layers share an earlier layer's indexer keys and cache none")
            mla = [i for i in mla if kinds[i] != "shared"]
        r.note(
            f"sparse attention (DSA): each of the {len(mla)} MLA layers also caches an indexer key of index_head_dim "
            f"{index_dim} (vLLM/SGLang/TensorRT-LLM: fp8 + a fp32 scale per 128 = {index_dim + 4 * -(-index_dim // 128)} "
            f"B; transformers: the model dtype), reported as its own 'indexer' layer group"
        )
        specs = [replace(s, fp8_ds_mla=True) if isinstance(s, MLASpec) else s for s in specs]
        indexer = IndexerSpec(kv_lora_rank=self.indexer_width(r, index_dim), qk_rope_head_dim=0, index_n_heads=heads,
                              index_topk=topk,
                              hf_float32=r.defaults_name in self.HF_FLOAT32_INDEXER)
        if mla == list(range(len(mla))):
            return [*specs, *(indexer for _ in mla)]
        # appended entry i belongs to decoder layer i: layers without indexer keys of their own hold a no-cache entry
        own = set(mla)
        none = [NoCacheSpec(reason="shares an earlier layer's indexer keys" if i in indexed else "no indexer")
                for i in range(len(specs))]
        return [*specs, *(indexer if i in own else none[i] for i in range(len(specs)))]

    def indexer_kinds(self, r: ConfigReader, num_layers: int) -> list[Any] | None:
        """``full`` or ``shared`` per layer (``indexer_types``), or None: every MLA layer has its own indexer keys."""
        if not r.has("indexer_types"):
            return None
        return r.first_of("indexer_types", ("indexer_types",), kind="list")

    def indexer_width(self, r: ConfigReader, index_dim: int) -> int:
        """Values an indexer key holds per token: ``index_head_dim``."""
        return index_dim

    def windowed(self, attn: Mapping[str, int], cls: type, **window: int) -> LayerSpec:
        if not attn.get("mla") or cls is not SlidingWindowSpec:
            return super().windowed(attn, cls, **window)
        # a sliding MLA layer (dots3_note): the latent as K, the rope key as V, as transformers caches them;
        # _sliding_latents gives each layer its own dims
        return SlidingWindowSpec(num_kv_heads=1, head_size=attn["kv_lora_rank"], head_size_v=attn["qk_rope_head_dim"],
                                 **window)

    def _sliding_latents(self, r: ConfigReader, specs: list[LayerSpec]) -> list[LayerSpec]:
        """Sliding MLA layers (Dots3NoteTextConfig): the dims of ``per_layer_config[i]`` over the global ones, or,
        without it, the ``swa_kv_lora_rank`` / ``swa_head_dim - swa_qk_nope_head_dim`` of the config class."""
        sliding = [i for i, s in enumerate(specs) if isinstance(s, SlidingWindowSpec)]
        if not sliding or not r.has("kv_lora_rank"):
            return specs
        per_layer = r.raw("per_layer_config")
        out = list(specs)
        for i in sliding:
            spec = specs[i]
            assert isinstance(spec, SlidingWindowSpec)
            if isinstance(per_layer, Mapping):
                own = per_layer.get(str(i), per_layer.get(i, {}))
                rank = own.get("kv_lora_rank", spec.head_size) if isinstance(own, Mapping) else spec.head_size
                rope = own.get("qk_rope_head_dim", spec.head_size_v) if isinstance(own, Mapping) else spec.head_size_v
            else:
                rank = r.first_of("swa_kv_lora_rank", ("swa_kv_lora_rank",))
                rope = r.optional("swa_qk_rope_head_dim", ("swa_qk_rope_head_dim",)) or (
                    r.first_of("swa_head_dim", ("swa_head_dim",)) - r.first_of("swa_qk_nope_head_dim",
                                                                              ("swa_qk_nope_head_dim",)))
            out[i] = replace(spec, head_size=r.check("kv_lora_rank", rank, "int"),
                                         head_size_v=r.check("qk_rope_head_dim", rope, "count"))
        first = out[sliding[0]]
        assert isinstance(first, SlidingWindowSpec)
        r.note(f"{len(sliding)} sliding MLA layers cache a latent of kv_lora_rank {first.head_size} + "
               f"qk_rope_head_dim {first.head_size_v} over a window (shown as K + V), no indexer")
        return out

    def _nope_and_shared_latents(self, r: ConfigReader, specs: list[LayerSpec]) -> list[LayerSpec]:
        """MistralLarge4TextConfig: ``no_rope_layers`` (0 = NoPE: the latent has no rope part; default every
        ``no_rope_layer_interval``-th layer when the model type defines it) and ``kv_source_layers`` (a layer
        pointing at an earlier one reuses its latent and caches none of its own)."""
        n = len(specs)
        flags = r.raw("no_rope_layers")
        interval = self.defaults_for(r.defaults_name).get("no_rope_layer_interval")
        if not isinstance(flags, list) and interval and any(isinstance(s, MLASpec) for s in specs):
            interval = r.first_of("no_rope_layer_interval", ("no_rope_layer_interval",))
            flags = [int((i + 1) % interval != 0) for i in range(n)]
        elif isinstance(flags, list):
            r.check("no_rope_layers", flags, "list")
        if isinstance(flags, list):
            if len(flags) < n:
                raise ConfigError(f"{r.source_name}: {r.prefix}no_rope_layers has {len(flags)} entries for {n} layers",
                                  "one 1 (RoPE) or 0 (NoPE) per layer")
            nope = [i for i in range(n) if not flags[i] and isinstance(specs[i], MLASpec)]
            if nope:
                r.note(f"{len(nope)} NoPE layers (no_rope_layers 0) cache the latent without its rope part")
                specs = [replace(s, qk_rope_head_dim=0) if i in nope and isinstance(s, MLASpec) else s
                         for i, s in enumerate(specs)]
        sources = r.raw("kv_source_layers")
        if isinstance(sources, list):
            if len(sources) != n or any(not isinstance(x, int) or x > i or sources[x] != x for i, x in enumerate(sources)):
                raise ConfigError(f"{r.source_name}: {r.prefix}kv_source_layers must name, per layer, itself or an "
                                  "earlier layer that owns its cache", "e.g. [0, 1, 1, 3] (layer 2 reuses layer 1)")
            reused = [i for i in range(n) if sources[i] != i]
            if reused:
                r.note(f"kv_source_layers: {len(reused)} layers reuse an earlier layer's latent and cache none")
                specs = [NoCacheSpec(reason=f"reuses layer {sources[i]}'s latent") if i in reused else s
                         for i, s in enumerate(specs)]
        return specs

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        # DeepSeek-V3's router carries an e_score_correction_bias
        return DecoderLayout(router_bias=model_type in ("deepseek_v3", "kimi_k2", "deepseek_v32"))

    def attention_weights(
        self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
    ) -> tuple[list[Matrix], int, int]:
        if not r.has("kv_lora_rank"):
            return super().attention_weights(r, model_type, hidden, layers, heads)
        return mla_weights(r, hidden, layers, heads)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return first_k_dense_moe(r, layers, top_k)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        if model_type == "mistral_large4_text":
            return count_mistral_large4(r)
        if model_type in ("hy_v4", "hy_v4_vl_text"):  # HY-V4-VL's text model: HY-V4's layout
            return count_hy_v4(r)
        if model_type in ("axk1", "axk2"):
            return count_axk(r, model_type)
        if model_type == "dots3_note_text":
            return count_dots3_note(r)
        if model_type == "longcat_flash":
            return count_longcat_flash(r)
        return super().count_weights(r, model_type)

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        vision = outer["vision_config"]
        if r.defaults_name == "dots3_note_text":
            raise ConfigError(f"{r.source_name}: kvplan cannot count dots3-note's vision tower (a ViT with per-layer "
                              "MoE) and audio encoder",
                              "its language model counts from the config's text_config alone; for the whole "
                              "checkpoint pass --weights-bytes SIZE")
        if isinstance(vision, Mapping) and vision.get("model_type") == "pixtral":
            return pixtral_weights(outer, r, text_hidden)
        moonvit = outer.get("model_type") == "kimi_k25" or (isinstance(vision, Mapping) and "vt_hidden_size" in vision)
        return moonvit_weights(outer, r, text_hidden) if moonvit else None


def count_mistral_large4(r: ConfigReader) -> WeightCount:
    """Mistral Large 4 (MistralLarge4TextConfig, transformers 5.24 modeling_mistral_large4.py): MLA without a q
    LoRA; NoPE layers (``no_rope_layers`` 0) drop the rope key from kv_a and widen the nope key in kv_b; layers
    reusing an earlier layer's latent (``kv_source_layers``) have no kv_a projection or norm; a DSA indexer (its
    queries from the hidden state through a LayerNorm) unless ``indexer_types`` says shared; a learned softmax
    scale and bias per head (attention and indexer); dense MLPs then MoE with shared experts (``mlp_layer_types``
    or ``first_k_dense_replace``); a learned RoPE ``alpha`` per rotary frequency."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    rank = r.first_of("kv_lora_rank", ("kv_lora_rank",))
    rope = r.first_of("qk_rope_head_dim", ("qk_rope_head_dim",))
    nope = r.first_of("qk_nope_head_dim", ("qk_nope_head_dim",))
    v_dim = r.first_of("v_head_dim", ("v_head_dim",))
    bias = r.flag("attention_bias", False)
    interval = r.first_of("no_rope_layer_interval", ("no_rope_layer_interval",)) if not r.has("no_rope_layers") else 0
    use_rope = per_layer_list(r, "no_rope_layers", layers, {0, 1},
                              [int((i + 1) % interval != 0) for i in range(layers)] if interval else None)
    sources = per_layer_list(r, "kv_source_layers", layers, set(range(layers)), list(range(layers)))
    indexer = per_layer_list(r, "indexer_types", layers, {"full", "shared"},
                             None if r.has("indexer_types") else _large4_indexer_default(r, layers))
    first_dense = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count") \
        if not r.has("mlp_layer_types") else 0
    mlp_types = per_layer_list(r, "mlp_layer_types", layers, {"dense", "sparse"},
                               ["dense"] * min(first_dense, layers) + ["sparse"] * max(layers - first_dense, 0))
    index_dim = r.first_of("index_head_dim", ("index_head_dim",))
    index_heads = r.first_of("index_n_heads", ("index_n_heads",))
    t = Tensors()
    for i in range(layers):
        own_rope = rope if use_rope[i] else 0
        t.add("attention", hidden, heads * (nope + rope))  # q_proj
        if sources[i] == i:
            t.add("attention", hidden, rank + own_rope)  # kv_a_proj_with_mqa
            t.vector("attention", rank + ((rank + own_rope) if bias else 0))  # kv_a_layernorm (+ kv_a bias)
        t.add("attention", rank, heads * (nope + rope - own_rope + v_dim))  # kv_b_proj
        t.add("attention", heads * v_dim, hidden)  # o_proj
        t.vector("attention", 2 * heads + (hidden if bias else 0))  # softmax scale + bias (+ o bias)
        if indexer[i] == "full":
            t.add("attention", hidden, index_heads * index_dim)  # wq_b
            t.add("attention", hidden, index_dim)  # wk
            t.add("attention", hidden, index_heads)  # weights_proj
            t.vector("attention", 2 * index_dim + 2 * hidden + 2 * index_heads)  # k_norm, q_input_norm, scaling
    n_moe = mlp_types.count("sparse")
    intermediate = r.first_of("intermediate_size", ("intermediate_size",))
    t.add("mlp", hidden, intermediate, 2 * (layers - n_moe))
    t.add("mlp", intermediate, hidden, layers - n_moe)
    parts = embeddings(r, hidden) + t.parts()
    top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
    experts = r.first_of("num_experts", ("n_routed_experts", "num_local_experts"))
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
    if n_moe:
        parts += experts_parts(hidden, size, experts, n_moe, shared_size=shared * size or None)
    # the rotary embedding's learned alpha, one per frequency of the rope slice (head_dim = qk_rope_head_dim)
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden + rope // 2, tp_sharded=False))
    reusing = sum(1 for i, source in enumerate(sources) if source != i)
    r.note(f"Mistral Large 4: {use_rope.count(0)} NoPE layers, {reusing} latent-reusing layers, {indexer.count('full')} layers with their own indexer; {n_moe} MoE layers of "
           f"{experts} experts, all resident")
    return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                    {"hidden_size": hidden, "mlp_width": max(intermediate, (top_k or 1) * size + shared * size),
                     "qkv_width": heads * (nope + rope) + rank + rope, "vocab_size": vocab_of(r)})


def count_hy_v4(r: ConfigReader) -> WeightCount:
    """HY-V4 (HYV4Config, transformers 5.24 modeling_hy_v4.py): DeepSeek-V3.2 MLA (q LoRA) with a per-head output
    gate and attention sinks, a DSA indexer in the layers ``indexer_types`` marks ``full`` (default: layer 0 and
    every 4th from 1), dense MLPs where ``mlp_layer_types`` says ``dense`` (default: the first layer) and MoE with
    shared experts and a router correction bias elsewhere; two hyper-connections of ``hc_mult`` streams per layer
    and a hyper head before the final norm."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    dims = mla_dims(r)
    bias = r.flag("attention_bias", False)
    if not r.has("indexer_types"):
        r.note("indexer_types is not in the config: HYV4Config's default, an own indexer in layer 0 and every "
               "4th layer from layer 1")
    indexer = per_layer_list(r, "indexer_types", layers, {"full", "shared"},
                             ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(layers)])
    if not r.has("mlp_layer_types"):
        r.note("mlp_layer_types is not in the config: HYV4Config's default, a dense first layer, MoE after it")
    mlp_types = per_layer_list(r, "mlp_layer_types", layers, {"dense", "sparse"},
                               ["dense"] * min(1, layers) + ["sparse"] * max(layers - 1, 0))
    t = Tensors()
    for kind in indexer:
        add_mla_layer(t, hidden, heads, dims, bias=bias)
        t.add("attention", hidden, heads * dims["v_head_dim"])  # gate_proj
        t.vector("attention", heads)  # sinks
        if kind == "full":
            add_indexer(t, r, hidden, dims["q_lora_rank"], layer_norm=True)
    streams = r.first_of("hc_mult", ("hc_mult",))
    # per layer two hyper-connections (fn, base, scale); the hyper head (fn, base, scale)
    t.add("hyper_connections", streams * hidden, 2 * streams, 2 * layers)
    t.add("hyper_connections", streams * hidden, streams)
    t.vector("hyper_connections", (2 * streams + 2) * 2 * layers + streams + 1)
    return finish_mla_moe(r, t, hidden, layers, heads, dims, mlp_types.count("sparse"), router_bias=True,
                          name="HY-V4")


def count_axk(r: ConfigReader, model_type: str) -> WeightCount:
    """A.X-K1 / A.X-K2 (AXK1Config, AXK2Config; transformers 5.24): DeepSeek-V3 MLA and MoE, dense or MoE per
    ``mlp_layer_types`` (default: from ``first_k_dense_replace`` and ``moe_layer_freq``, 1 and 1). A.X-K1 adds a
    norm after each MoE block. A.X-K2 fuses q and an output gate into one projection from twice the q LoRA,
    has a DSA indexer in every layer, and gated RMSNorms (a ``gated_norm_rank`` low-rank gate) before attention
    and before each MoE block."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    dims = mla_dims(r)
    bias = r.flag("attention_bias", False)
    n_moe = mlp_layer_kinds(r, layers).count("sparse")
    t = Tensors()
    k2 = model_type == "axk2"
    q_width = heads * (dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"])
    for _ in range(layers):
        q_up = (2 * dims["q_lora_rank"], q_width + heads * dims["v_head_dim"]) if k2 else None
        add_mla_layer(t, hidden, heads, dims, bias=bias, q_up=q_up)
        if k2:
            add_indexer(t, r, hidden, dims["q_lora_rank"], layer_norm=True)
    extra = n_moe * hidden if not k2 else 0  # A.X-K1's post_mlp_layernorm
    if k2:  # the low-rank gates of the gated norms: every input norm, the MoE layers' post-attention norm
        rank = r.first_of("gated_norm_rank", ("gated_norm_rank",))
        t.add("norm_gates", hidden, rank, layers + n_moe)
        t.add("norm_gates", rank, hidden, layers + n_moe)
    return finish_mla_moe(r, t, hidden, layers, heads, dims, n_moe, router_bias=True,
                          name="A.X-K2" if k2 else "A.X-K1", extra_norms=extra)


def count_dots3_note(r: ConfigReader) -> WeightCount:
    """dots3-note's language model (Dots3NoteTextConfig, transformers 5.24 modeling_dots3_note.py): MLA with a q
    LoRA, a norm on the rope key and a per-head output gate in every layer; ``indexed_attention`` layers add a DSA
    indexer, ``sliding_attention`` layers take their own dims (``per_layer_config[i]`` over the global ones, or
    the ``swa_*`` keys with the config class's defaults); dense or MoE per ``mlp_layer_types`` (default from
    ``first_k_dense_replace``), shared experts of ``shared_experts_intermediate_size``."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    dims = mla_dims(r)
    bias = r.flag("attention_bias", False)
    per_layer = r.raw("per_layer_config")
    # legacy configs (no per_layer_config) call the DSA layers full_attention; use_dsa says which they are
    use_dsa = r.first_of("use_dsa", ("use_dsa",), kind="bool", required=False, use_defaults=False)
    if use_dsa is None and not isinstance(per_layer, Mapping):
        use_dsa = True
    full = "full_attention" if use_dsa is False else "indexed_attention"
    if not r.has("layer_types"):
        r.note("layer_types is not in the config: Dots3NoteTextConfig's default, attention with an indexer in layers "
               "0, 1 and every 4th from 1, sliding attention elsewhere")
    sliding = "sliding_attention" if r.raw("use_sliding_window") is not False else full
    types = per_layer_list(r, "layer_types", layers, {"indexed_attention", "full_attention", "sliding_attention"},
                           [full if i < 2 or i % 4 == 1 else sliding for i in range(layers)])
    if use_dsa is not None:
        types = [full if kind in ("indexed_attention", "full_attention") else kind for kind in types]
    own: dict[int, Any] = {}
    if isinstance(per_layer, Mapping):
        own = {int(k): v for k, v in per_layer.items() if str(k).isdigit() and isinstance(v, Mapping)}
    swa = None
    t = Tensors()
    for i, kind in enumerate(types):
        layer = {**dims, "num_attention_heads": heads}
        if isinstance(per_layer, Mapping):  # the layer's own values over the global ones
            layer.update({k: r.check(f"per_layer_config.{i}.{k}", v, "int") for k, v in own.get(i, {}).items()
                          if k in layer})
        elif kind == "sliding_attention":
            if swa is None:
                swa = _dots3_sliding_dims(r)
            layer.update(swa)
        add_mla_layer(t, hidden, layer["num_attention_heads"], layer, bias=bias)
        t.add("attention", hidden, layer["num_attention_heads"])  # g_proj
        t.vector("attention", layer["qk_rope_head_dim"])  # k_rope_only_layernorm
        if kind == "indexed_attention":
            add_indexer(t, r, hidden, layer["q_lora_rank"], layer_norm=True)
    n_moe = mlp_layer_kinds(r, layers).count("sparse")
    return finish_mla_moe(r, t, hidden, layers, heads, dims, n_moe, router_bias=True, name="dots3-note",
                          shared_key="shared_experts_intermediate_size")


def _dots3_sliding_dims(r: ConfigReader) -> dict[str, int]:
    """The sliding layers' MLA dims without ``per_layer_config``: the ``swa_*`` keys, else Dots3NoteTextConfig's
    defaults; the rope part is ``swa_qk_rope_head_dim`` or ``swa_head_dim - swa_qk_nope_head_dim``."""
    dims = {k: r.first_of(f"swa_{k}", (f"swa_{k}",)) for k in ("num_attention_heads", "q_lora_rank",
                                                                  "kv_lora_rank", "qk_nope_head_dim", "v_head_dim")}
    rope = r.optional("swa_qk_rope_head_dim", ("swa_qk_rope_head_dim",))
    dims["qk_rope_head_dim"] = rope or r.first_of("swa_head_dim", ("swa_head_dim",)) - dims["qk_nope_head_dim"]
    return dims


def count_longcat_flash(r: ConfigReader) -> WeightCount:
    """LongCat-Flash (LongcatFlashConfig, transformers 5.25 modeling_longcat_flash.py): each of ``num_layers``
    layers holds two MLA attentions (q LoRA; q_b to ``qk_head_dim`` per head), two dense MLPs of
    ``ffn_hidden_size``, four norms and one shortcut MoE of ``n_routed_experts`` experts; the router also scores
    ``zero_expert_num`` identity experts, which hold no weights (LongcatFlashExperts sizes its tensors by
    ``n_routed_experts``; transformers 5.24 also kept the zero experts' unused gate/up projections)."""
    hidden = hidden_of(r)
    layers = r.first_of("num_layers", ("num_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    dims = mla_dims(r)
    qk_head = r.optional("qk_head_dim", ("qk_head_dim",)) or dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"]
    bias = r.flag("attention_bias", False)
    t = Tensors()
    for _ in range(2 * layers):
        add_mla_layer(t, hidden, heads, dims, bias=bias, q_up=(dims["q_lora_rank"], heads * qk_head))
    inner = r.first_of("intermediate_size", ("ffn_hidden_size", "intermediate_size"))
    t.add("mlp", hidden, inner, 4 * layers)
    t.add("mlp", inner, hidden, 2 * layers)
    experts = r.first_of("num_experts", ("n_routed_experts", "num_local_experts"))
    zero = r.first_of("zero_expert_num", ("zero_expert_num",), kind="count")
    size = r.first_of("moe_intermediate_size", ("expert_ffn_hidden_size", "moe_intermediate_size"))
    top_k = r.first_of("num_experts_per_tok", ("moe_topk", "num_experts_per_tok"))
    t.add("experts", hidden, size, 2 * experts * layers)  # gate_up
    t.add("experts", size, hidden, experts * layers)
    t.add("router", hidden, experts + zero, layers)
    t.vector("router", (experts + zero) * layers * (2 if r.flag("router_bias", False) else 1))  # correction (+bias)
    t.vector("norms", (4 * layers + 1) * hidden)
    r.note(f"LongCat-Flash: {layers} layers of two MLA attentions and two dense MLPs each plus a shortcut MoE of "
           f"{experts} experts (all resident) and {zero} zero-compute experts")
    note_mtp(r)
    return count_of(embeddings(r, hidden) + t.parts(), experts, top_k,
                    {"hidden_size": hidden, "mlp_width": inner + top_k * size,
                     "qkv_width": heads * qk_head + dims["kv_lora_rank"] + dims["qk_rope_head_dim"],
                     "vocab_size": vocab_of(r)})


def _large4_indexer_default(r: ConfigReader, layers: int) -> list[str]:
    """MistralLarge4TextConfig without ``indexer_types``: ``index_topk_pattern`` (F/S per layer), else every
    ``index_topk_freq``-th layer from ``index_skip_topk_offset`` has its own indexer (defaults 1 and 2: all)."""
    pattern = r.raw("index_topk_pattern")
    if isinstance(pattern, (str, list)):
        return [{"F": "full", "S": "shared"}.get(c, c) for c in pattern][:layers]
    freq = max(r.optional("index_topk_freq", ("index_topk_freq",)) or 1, 1)
    offset = r.first_of("index_skip_topk_offset", ("index_skip_topk_offset",), required=False, kind="count")
    offset = 2 if offset is None else offset
    r.note(f"indexer_types is not in the config: MistralLarge4TextConfig's schedule, an own indexer every "
           f"{freq} layer(s) from index_skip_topk_offset {offset} (index_topk_freq default 1, offset default 2)")
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]


#: Kimi_K25VisionConfig's defaults (transformers 5.24), and Kimi_K25Config's projection_hidden_size.
MOONVIT_DEFAULTS = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "patch_size": 14,
                    "pos_emb_height": 64, "pos_emb_width": 64, "merge_kernel_size": [2, 2]}


def moonvit_weights(outer: Mapping[str, Any], text: ConfigReader, text_hidden: int) -> list[WeightPart]:
    """Kimi K2.5's MoonViT: a patch convolution, a learned 2-D position table (the temporal one is fixed),
    ViT blocks with biases, a final LayerNorm, and the patch-merger projector into the language model.
    transformers' field names first, then the Hub remote code's (``vt_hidden_size``, ``init_pos_emb_height``)."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.",
                     defaults=MOONVIT_DEFAULTS, defaults_name="kimi_k25_vision")
    hidden = v.first_of("hidden_size", ("hidden_size", "vt_hidden_size"))
    inner = v.first_of("intermediate_size", ("intermediate_size", "vt_intermediate_size"))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers", "vt_num_hidden_layers"))
    patch = v.first_of("patch_size", ("patch_size",))
    grid = v.first_of("pos_emb_height", ("pos_emb_height", "init_pos_emb_height")) * v.first_of(
        "pos_emb_width", ("pos_emb_width", "init_pos_emb_width"))
    merge = v.first_of("merge_kernel_size", ("merge_kernel_size",), kind="list")
    o = ConfigReader(outer, source_name=text.source_name, defaults={"projection_hidden_size": 1152},
                     defaults_name="kimi_k25")
    norm = o.first_of("projection_hidden_size", ("projection_hidden_size",))  # the projector's LayerNorm width
    merged = hidden * merge[0] * merge[1]
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=3 * patch * patch, out_features=hidden),
                  Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                  Matrix(in_features=hidden, out_features=inner, count=layers),
                  Matrix(in_features=inner, out_features=hidden, count=layers)),
        # patch bias, positions, final LayerNorm; per block q/k/v/o and MLP biases and two LayerNorms
        other_parameters=hidden + grid * hidden + 2 * hidden + (4 * hidden + inner + hidden + 4 * hidden) * layers,
    )
    projector = WeightPart(name="projector", vision=True,
                           matrices=(Matrix(in_features=merged, out_features=merged),
                                     Matrix(in_features=merged, out_features=text_hidden)),
                           other_parameters=2 * norm + merged + text_hidden)
    for note in v.notes + o.notes:
        text.note(note)
    text.note(f"vision tower (MoonViT, {layers} layers) reported separately as weights.vision_*")
    return [tower, projector]


def mla_weights(r: ConfigReader, hidden: int, layers: int, heads: int) -> tuple[list[Matrix], int, int]:
    """MLA projections: q (full, or LoRA through q_lora_rank), the joint kv down-projection with the
    rope key, the kv up-projection to per-head nope keys and values, o; the two LoRA norms."""
    attention: list[Matrix] = []
    attn_other = 0
    rank = r.first_of("kv_lora_rank", ("kv_lora_rank",))
    rope = r.first_of("qk_rope_head_dim", ("qk_rope_head_dim",))
    nope = r.first_of("qk_nope_head_dim", ("qk_nope_head_dim",))
    v_dim = r.first_of("v_head_dim", ("v_head_dim",))
    q_rank = r.optional("q_lora_rank", ("q_lora_rank",))
    if q_rank:
        attention += [Matrix(in_features=hidden, out_features=q_rank, count=layers),
                      Matrix(in_features=q_rank, out_features=heads * (nope + rope), count=layers)]
        attn_other += q_rank * layers  # q_a_layernorm
    else:
        attention.append(Matrix(in_features=hidden, out_features=heads * (nope + rope), count=layers))
    attention += [
        Matrix(in_features=hidden, out_features=rank + rope, count=layers),  # kv_a_proj_with_mqa
        Matrix(in_features=rank, out_features=heads * (nope + v_dim), count=layers),  # kv_b_proj
        Matrix(in_features=heads * v_dim, out_features=hidden, count=layers),  # o_proj
    ]
    attn_other += rank * layers  # kv_a_layernorm
    qkv_width = heads * (nope + rope) + rank + rope + heads * (nope + v_dim)
    r.note(f"MLA projections counted: q {'LoRA rank ' + str(q_rank) if q_rank else 'full'}, kv_lora_rank {rank}")
    if r.has("index_head_dim") and q_rank:
        # the DeepSeek-Sparse-Attention indexer: wq_b from the q LoRA, wk and a LayerNorm on its key,
        # weights_proj scoring its heads (DeepSeek-V3.2, GLM-5)
        index_dim = r.first_of("index_head_dim", ("index_head_dim",))
        index_heads = r.first_of("index_n_heads", ("index_n_heads",))
        attention += [Matrix(in_features=q_rank, out_features=index_heads * index_dim, count=layers),
                      Matrix(in_features=hidden, out_features=index_dim, count=layers),
                      Matrix(in_features=hidden, out_features=index_heads, count=layers)]
        attn_other += 2 * index_dim * layers
        r.note(f"sparse-attention indexer counted: {index_heads} heads of {index_dim}")
    return attention, attn_other, qkv_width


class DeepseekMoeParser(LlamaParser):
    """DeepSeek-MoE (``deepseek``, V1): Llama's cache, fine-grained and shared experts after the first dense layers."""

    model_types = ("deepseek",)
    defaults_by_type = {"deepseek": {"tie_word_embeddings": False}}
    weight_types = ("deepseek",)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return first_k_dense_moe(r, layers, top_k)


class MlaDecoderParser(DecoderParser):
    """The DeepSeek-V3 layout under other names (Sarvam-MLA, Youtu-LLM, MiniCPM3): MLA in every layer, dense MLPs
    and MoE layers with shared experts (:func:`~kvplan.models.mla.mla_decoder_weights`), or dense only."""

    family = "mla_decoder"
    model_types = ("minicpm3", "sarvam_mla", "youtu")
    weight_types = ("sarvam_mla", "youtu", "minicpm3")
    #: The config classes' defaults (transformers 5.24) of the keys the count reads.
    defaults_by_type = {
        "sarvam_mla": {"first_k_dense_replace": 1, "tie_word_embeddings": False},
        "youtu": {"tie_word_embeddings": True},
        "minicpm3": {"tie_word_embeddings": True},
    }

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        return mla_decoder_weights(r, model_type, router_bias=model_type == "sarvam_mla",
                                   v_head_dim_from_hidden="MiniCPM3Config" if model_type == "minicpm3" else "")


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}
#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {
    t: "a wrapper: its weights are counted under its text_config's model_type"
    for t in ("kimi_k25", "kimi_vl", "deepseek_vl_v2", "hy_v4_vl", "mistral_large4", "dots3_note")
}

PARSERS: tuple[type[ArchParser], ...] = (DeepseekParser, DeepseekMoeParser, MlaDecoderParser)
