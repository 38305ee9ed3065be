"""DeepSeek: DeepSeek-MoE (V1), the multi-head latent attention of V2/V3/R1 and of Kimi K2, and V4.

MLA caches one latent row per token per layer. The MoE layers hold fine-grained routed experts
plus shared experts, after ``first_k_dense_replace`` dense layers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, first_k_dense_moe, note_mtp
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import (
    Matrix,
    WeightCount,
    WeightPart,
    count_of,
    embeddings,
    experts_parts,
    hidden_of,
    vocab_of,
)
from kvplan.specs import (
    CompressedSparseSpec,
    HeavilyCompressedSpec,
    IndexerSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SharedKVSlidingSpec,
    SlidingWindowSpec,
)


class DeepseekParser(DecoderParser):
    family = "deepseek_mla"
    model_types = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "kimi_vl", "deepseek_vl_v2",
                   "glm_moe_dsa", "axk2", "hy_v4", "longcat_flash", "mistral_large4", "mistral_large4_text",
                   "dots3_note", "dots3_note_text")
    #: Types whose transformers modeling keeps the indexer keys in float32 (dots3_note: its float32 rope
    #: promotes the key before cache.update_indexer; measured by tools/hf_zoo.py).
    HF_FLOAT32_INDEXER = ("dots3_note", "dots3_note_text")
    #: transformers' DSA configs (DeepseekV32Config, GlmMoeDsaConfig, AXK2Config, HYV4Config) name their MLA layers
    #: ``indexed_attention``: an MLA latent plus, unless ``indexer_types`` says ``shared``, an indexer key.
    INDEXED = "indexed_attention"
    defaults = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}
    defaults_by_type = {"deepseek_v2": {"tie_word_embeddings": False}, "deepseek_v3": {"tie_word_embeddings": False},
                        "kimi_k2": {"tie_word_embeddings": False}, "deepseek_v32": {"tie_word_embeddings": False},
                        # MistralLarge4TextConfig: NoPE every no_rope_layer_interval-th layer
                        "mistral_large4_text": {"no_rope_layer_interval": 4},
                        # Dots3NoteTextConfig: sliding MLA layers (swa_* keys, normalised into per_layer_config)
                        "dots3_note_text": {"sliding_window": 512, "swa_kv_lora_rank": 1024, "swa_head_dim": 256,
                                            "swa_qk_nope_head_dim": 192}}
    weight_types = ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32")

    def attention_dims(self, r: ConfigReader) -> dict[str, int]:
        if not r.has("kv_lora_rank"):
            r.note("kv_lora_rank is null: this checkpoint uses plain multi-head attention, not MLA")
            return super().attention_dims(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        rank = r.first_of("kv_lora_rank", ["kv_lora_rank"])
        rope = r.first_of("qk_rope_head_dim", ["qk_rope_head_dim"])
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
        if r.has("indexer_types"):
            kinds = r.first_of("indexer_types", ("indexer_types",), kind="list")
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
        specs = [dataclasses.replace(s, fp8_ds_mla=True) if isinstance(s, MLASpec) else s for s in specs]
        indexer = IndexerSpec(kv_lora_rank=index_dim, qk_rope_head_dim=0, index_n_heads=heads, index_topk=topk,
                              hf_float32=r.defaults_name in self.HF_FLOAT32_INDEXER)
        return [*specs, *(indexer for _ in mla)]

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
                own = per_layer.get(str(i), per_layer.get(i, {}))  # type: ignore[call-overload]
                rank = own.get("kv_lora_rank", spec.head_size) if isinstance(own, Mapping) else spec.head_size
                rope = own.get("qk_rope_head_dim", spec.head_size_v) if isinstance(own, Mapping) else spec.head_size_v
            else:
                rank = r.first_of("swa_kv_lora_rank", ("swa_kv_lora_rank",))
                rope = r.optional("swa_qk_rope_head_dim", ("swa_qk_rope_head_dim",)) or (
                    r.first_of("swa_head_dim", ("swa_head_dim",)) - r.first_of("swa_qk_nope_head_dim",
                                                                              ("swa_qk_nope_head_dim",)))
            out[i] = dataclasses.replace(spec, head_size=r.check("kv_lora_rank", rank, "int"),
                                         head_size_v=r.check("qk_rope_head_dim", rope, "count"))
        r.note(f"{len(sliding)} sliding MLA layers cache a latent of kv_lora_rank {out[sliding[0]].head_size} + "
               f"qk_rope_head_dim {out[sliding[0]].head_size_v} over a window (shown as K + V), no indexer")
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
                specs = [dataclasses.replace(s, qk_rope_head_dim=0) if i in nope else s for i, s in enumerate(specs)]
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

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        vision = outer["vision_config"]
        moonvit = outer.get("model_type") == "kimi_k25" or (isinstance(vision, Mapping) and "vt_hidden_size" in vision)
        return moonvit_weights(outer, r, text_hidden) if moonvit else None


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
    """DeepSeek-MoE (``deepseek``, V1): Llama's cache, fine-grained and shared experts after the first dense layers.

    The cache is read by the Llama rules (llama.py lists the type); this class counts its weights.
    """

    model_types = ()
    defaults_by_type = {"deepseek": {"tie_word_embeddings": False}}
    weight_types = ("deepseek",)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return first_k_dense_moe(r, layers, top_k)


class DeepseekV4Parser(DecoderParser):
    """DeepSeek-V4 (``deepseek_v4``): one shared K/V head with a q LoRA and a grouped low-rank output,
    attention sinks; per layer a sliding window only (ratio 0), a compressed-sparse compressor with its
    lightning indexer (ratio 4) or a heavily compressed one (ratio 128); hyper-connections of ``hc_mult``
    streams around attention and MoE; MoE in every layer (hash-routed in the first ``num_hash_layers``).

    Cache: every layer keeps a ``sliding_window`` of one K=V row of ``head_dim``; a compressed layer also keeps
    one entry per ``compress_rates[type]`` tokens (and, CSA, an ``index_head_dim`` indexer key per entry).
    Layer types from ``layer_types``, else the Hub's per-layer ``compress_ratios`` (entries past the layers are
    the MTP layers'), else DeepseekV4Config's default schedule (transformers 5.24 configuration_deepseek_v4.py).
    """

    family = "deepseek_v4"
    model_types = ("deepseek_v4",)
    weight_types = ("deepseek_v4",)
    #: DeepseekV4Config defaults (transformers 5.24) of the keys the cache and weight count read.
    defaults = {"head_dim": 512, "sliding_window": 128, "index_head_dim": 128, "index_n_heads": 64,
                "num_hidden_layers": 43, "max_position_embeddings": 1048576, "tie_word_embeddings": False}
    CSA, HCA, SWA = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"
    DEFAULT_RATES = {CSA: 4, HCA: 128}

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        layers = self.num_layers(r)
        types = self._layer_types(r, layers)
        rates = self._rates(r)
        head = r.first_of("head_dim", ("head_dim",))
        window = r.first_of("sliding_window", ("sliding_window",))
        index = r.first_of("index_head_dim", ("index_head_dim",)) if self.CSA in types else 0
        specs: dict[str, LayerSpec] = {
            self.SWA: SharedKVSlidingSpec(head_size=head, sliding_window=window, compress_ratio=0),
            self.CSA: CompressedSparseSpec(head_size=head, sliding_window=window, compress_ratio=rates[self.CSA],
                                           index_head_size=index, overlap=True),
            self.HCA: HeavilyCompressedSpec(head_size=head, sliding_window=window, compress_ratio=rates[self.HCA]),
        }
        counts = {t: types.count(t) for t in (self.SWA, self.CSA, self.HCA)}
        r.note(f"DeepSeek-V4 attention: one K=V row of head_dim {head} per token in a {window}-token window in every "
               f"layer; {counts[self.CSA]} compressed-sparse layers add one entry per {rates[self.CSA]} tokens with an "
               f"indexer key of {index}, {counts[self.HCA]} heavily compressed layers one entry per {rates[self.HCA]} "
               f"tokens, {counts[self.SWA]} layers the window only")
        return [specs[t] for t in types]

    def _rates(self, r: ConfigReader) -> dict[str, int]:
        rates = dict(self.DEFAULT_RATES)
        given = r.raw("compress_rates")
        if isinstance(given, Mapping):
            rates.update({k: r.check(f"compress_rates.{k}", v, "int") for k, v in given.items() if k in rates})
        else:
            r.note(f"compress_rates is not in the config; using the deepseek_v4 architecture default {rates}")
        for key, name in (("compress_rate_csa", self.CSA), ("compress_rate_hca", self.HCA)):
            if r.has(key):  # legacy top-level overrides, folded in as DeepseekV4Config.__post_init__ does
                rates[name] = r.first_of(key, (key,))
        return rates

    def _layer_types(self, r: ConfigReader, layers: int) -> list[str]:
        """Each layer's attention type: ``layer_types``, else the Hub's ``compress_ratios`` (0 sliding, the CSA
        rate, the HCA rate; entries past the layers are the MTP layers'), else the config class's default."""
        allowed = (self.SWA, self.CSA, self.HCA)
        if r.has("layer_types"):
            types = r.first_of("layer_types", ("layer_types",), kind="list")
            if len(types) < layers or not set(types[:layers]) <= set(allowed):
                raise ConfigError(f"{r.source_name}: {r.prefix}layer_types does not give one DeepSeek-V4 attention "
                                  f"type per layer", f"use {', '.join(allowed)}")
            return list(types[:layers])
        if r.has("compress_ratios"):
            ratios = r.first_of("compress_ratios", ("compress_ratios",), kind="list")
            by_ratio = {0: self.SWA, **{rate: name for name, rate in self._rates(r).items()}}
            if len(ratios) < layers or not set(ratios[:layers]) <= set(by_ratio):
                raise ConfigError(f"{r.source_name}: {r.prefix}compress_ratios does not give one ratio per layer "
                                  f"from {sorted(by_ratio)}", "use 0 (sliding only) or a rate of compress_rates")
            if len(ratios) > layers:
                r.note(f"compress_ratios has {len(ratios)} entries for {layers} layers: the last "
                       f"{len(ratios) - layers} are the multi-token-prediction layers', not cached at inference")
            return [by_ratio[x] for x in ratios[:layers]]
        r.note("neither layer_types nor compress_ratios is in the config: DeepseekV4Config's default schedule "
               "(2 heavily compressed layers, then compressed-sparse and heavily compressed alternating)")
        return [self.HCA] * min(layers, 2) + [self.CSA if i % 2 else self.HCA for i in range(max(layers - 2, 0))]

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        head_dim = r.first_of("head_dim", ("head_dim",))
        q_rank = r.first_of("q_lora_rank", ("q_lora_rank",))
        o_rank = r.first_of("o_lora_rank", ("o_lora_rank",))
        o_groups = r.first_of("o_groups", ("o_groups",))
        types = self._layer_types(r, layers)
        rates = self._rates(r)
        n_csa, n_hca = types.count(self.CSA), types.count(self.HCA)
        m_csa, m_hca = rates[self.CSA], rates[self.HCA]
        index_dim = r.first_of("index_head_dim", ("index_head_dim",))
        index_heads = r.first_of("index_n_heads", ("index_n_heads",))
        q = heads * head_dim
        attention = [Matrix(in_features=hidden, out_features=q_rank, count=layers),
                     Matrix(in_features=q_rank, out_features=q, count=layers),
                     Matrix(in_features=hidden, out_features=head_dim, count=layers),  # the shared K/V head
                     Matrix(in_features=q // o_groups, out_features=o_rank, count=o_groups * layers),  # o_a, grouped
                     Matrix(in_features=o_groups * o_rank, out_features=hidden, count=layers),  # o_b
                     # compressors: kv and gate projections (CSA at twice the width), the CSA indexer's own
                     Matrix(in_features=hidden, out_features=2 * head_dim, count=2 * n_csa),
                     Matrix(in_features=hidden, out_features=head_dim, count=2 * n_hca),
                     Matrix(in_features=hidden, out_features=2 * index_dim, count=2 * n_csa),
                     Matrix(in_features=q_rank, out_features=index_heads * index_dim, count=n_csa),
                     Matrix(in_features=hidden, out_features=index_heads, count=n_csa)]
        # q_a/kv norms, sinks; compressor position biases and norms
        other = (q_rank + head_dim + heads) * layers + n_csa * (m_csa * 2 * head_dim + head_dim) \
            + n_hca * (m_hca * head_dim + head_dim) + n_csa * (m_csa * 2 * index_dim + index_dim)
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        streams = r.first_of("hc_mult", ("hc_mult",))
        mix = (2 + streams) * streams
        parts.append(WeightPart(name="hyper_connections", matrices=(
            Matrix(in_features=streams * hidden, out_features=mix, count=2 * layers),
            Matrix(in_features=streams * hidden, out_features=streams)),
            other_parameters=(mix + 3) * 2 * layers + streams + 1, tp_sharded=False))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        experts = r.first_of("num_experts", ("n_routed_experts",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
        hashed = min(layers, r.first_of("num_hash_layers", ("num_hash_layers",), kind="count"))
        parts += experts_parts(hidden, size, experts, layers, shared_size=shared * size or None)
        # the top-k routers' correction bias; the hash routers' token -> experts table
        parts.append(WeightPart(name="router_tables", other_parameters=experts * (layers - hashed)
                                + vocab_of(r) * (top_k or 0) * hashed, tp_sharded=False))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"DeepSeek-V4: {n_csa} compressed-sparse, {n_hca} heavily compressed and "
               f"{layers - n_csa - n_hca} sliding-only attention layers; {experts} experts per layer, all resident")
        note_mtp(r, self.MTP_KEY)
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": (top_k or 1) * size + shared * size,
                                                "qkv_width": q + head_dim, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (DeepseekParser, DeepseekMoeParser, DeepseekV4Parser)
