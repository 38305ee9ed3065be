"""Llama (1-3.x), Llama 4 and Llama 3.2 Vision (mllama), and the types that keep Llama's per-layer layout with
no family module of their own (InternLM, Baichuan, StableLM, Yi, SmolLM3, Seed-OSS, Apertus, the 2025-2026
Llama-likes...). Families with a module of their own (cohere.py, glm.py, granite.py, olmo.py...) subclass
:class:`LlamaParser` there for their Llama-layout members.

Defaults are the architectures' own (their transformers config classes), used only for keys a
sparse config omits, and always noted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import (
    _MISSING,
    CHUNKED,
    FULL,
    ArchParser,
    ConfigReader,
    hidden_of,
    layer_indices,
    switch,
    tied,
    vocab_of,
)
from kvplan.models.decoder import NO_MOE, DecoderLayout, DecoderParser, MoeLayout, sparse_step_moe
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, gqa_attention
from kvplan.specs import LayerSpec


# NOTE: Llama and the types that keep its layout with no family module of their own: every layer caches K and
# V of GQA heads. Families whose members keep Llama's cache but have a module of their own (cohere.py, glm.py,
# granite.py, olmo.py, ...) subclass LlamaParser there, each with its types' rows of the tables below.
@dataclass(frozen=True, kw_only=True, slots=True)
class LayerExtras:
    """Tensors a Llama-like layer holds beyond what its :class:`DecoderLayout` says, per layer."""

    hidden_vectors: int = 0
    """Vectors of ``hidden_size``: BitNet's attention sub-norm, Doge's two residual scales."""
    inner_vectors: int = 0
    """Vectors of ``intermediate_size``: BitNet's MLP sub-norm."""
    head_dim_vectors: int = 0
    """Vectors of ``head_dim``: DiffLlama's four lambdas."""
    post_norms_switch: str = ""
    """A config switch that adds post-attention and post-MLP norms (HyperCLOVA X ``use_post_norm``)."""
    output_gate: bool = False
    """Beam, Muse Glimmer: a sigmoid gate on the attention output (hidden -> heads x head_dim)."""
    output_gate_bias: bool = True
    """The gate's bias, one per head (Beam; Muse Glimmer's gate has none)."""
    dynamic_mask: bool = False
    """Doge: the dynamic mask's ``A`` (one per KV head) and ``dt_proj`` (KV width -> KV heads)."""
    norm_weights: bool = True
    """False: parameter-free RMSNorms (nanochat)."""


#: The 2025-2026 members transformers ships with Llama's cache (and, with differences said below, its layers).
LLAMA_LIKES = ("apertus1p5_text", "bitnet", "cwm", "diffllama", "doge", "helium", "hyperclovax", "iquestcoder",
               "jais2", "mellum", "nanochat", "kolibri1", "flint", "beam")


class LlamaParser(DecoderParser):

    family = "llama"
    model_types: ClassVar[tuple[str, ...]] = (
        "llama", "internlm2", "internlm3", "baichuan", "stablelm", "yi", "aquila", "arcee", "smollm3", "seed_oss",
        "apertus", "arctic", "orion", "xverse", *LLAMA_LIKES, "aria_text", "cosmos3_edge_text", "muse_glimmer_text", "paddleocr_vl_text")
    #: LlamaConfig's defaults; of the other members, only what weight counting needs.
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "llama": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                  "max_position_embeddings": 2048, "intermediate_size": 11008, "vocab_size": 32000,
                  "tie_word_embeddings": False},
        "internlm2": {"tie_word_embeddings": False}, "baichuan": {"tie_word_embeddings": False},
        "stablelm": {"tie_word_embeddings": False, "qk_layernorm": False, "use_parallel_residual": False},
        # the 2025-2026 Llama-likes (their transformers 5.24 config classes): the keys their layout reads
        **{t: {"tie_word_embeddings": False} for t in ("apertus1p5_text", "bitnet", "cwm", "diffllama", "helium",
                                                      "iquestcoder", "jais2", "kolibri1", "flint", "beam")},
        "doge": {"tie_word_embeddings": False, "is_moe": False, "num_experts": 16384},
        "hyperclovax": {"tie_word_embeddings": False, "use_post_norm": True},
        "mellum": {"tie_word_embeddings": False, "num_local_experts": 64, "moe_intermediate_size": 896},
        "nanochat": {"tie_word_embeddings": False},
        "aria_text": {"tie_word_embeddings": False, "moe_num_experts": 8, "moe_topk": 2, "moe_num_shared_experts": 2},
        # Emu3TextConfig (Emu3's language model: Llama's layers, attention_bias and mlp_bias off)
        "emu3_text_model": {"vocab_size": 184622, "hidden_size": 4096, "intermediate_size": 14336,
                            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                            "tie_word_embeddings": False},
        # MuseGlimmerTextConfig (transformers 5.25)
        "muse_glimmer_text": {"vocab_size": 202048, "hidden_size": 6656, "intermediate_size": 19968,
                              "num_hidden_layers": 52, "num_attention_heads": 32, "num_key_value_heads": 2,
                              "head_dim": 128, "tie_word_embeddings": False},
    }
    weight_types: ClassVar[tuple[str, ...]] = (
        "llama", "internlm2", "internlm3", "baichuan", "stablelm", "yi", "arcee", "smollm3", "seed_oss", "apertus",
        *LLAMA_LIKES,
        # the language models of multimodal wrappers that keep a member's layout
        "paddleocr_vl_text", "aria_text", "cosmos3_edge_text", "muse_glimmer_text", "emu3_text_model")

    #: How the Llama-like members' layers differ from Llama's (their transformers modeling files).
    LAYOUTS: ClassVar[Mapping[str, DecoderLayout]] = {
        # non-gated MLPs: Arcee's ReLU^2, Apertus' xIELU with 4 learned scalars (alpha_p, alpha_n, beta, eps)
        "arcee": DecoderLayout(gated_mlp=False), "cosmos3_edge_text": DecoderLayout(gated_mlp=False),
        "apertus": DecoderLayout(gated_mlp=False, mlp_act_parameters=4, qk_norm=True),
        # StableLM: LayerNorms with bias (qk_layernorm and use_parallel_residual are read per config)
        "stablelm": DecoderLayout(norm_bias=True),
        # Apertus 1.5: Apertus' layer; Jais 2: ReLU^2 MLP with biases, LayerNorms with bias
        "apertus1p5_text": DecoderLayout(gated_mlp=False, mlp_act_parameters=4, qk_norm=True),
        "jais2": DecoderLayout(gated_mlp=False, norm_bias=True),
        "nanochat": DecoderLayout(gated_mlp=False),
        # per-head q/k RMSNorms; Kolibri and Beam add post-attention and post-MLP norms, a router correction
        # bias; Flint one attention-sink logit per head
        "doge": DecoderLayout(qk_norm=True), "mellum": DecoderLayout(qk_norm=True),
        "kolibri1": DecoderLayout(qk_norm=True, norms_per_layer=4, router_bias=True),
        "beam": DecoderLayout(qk_norm=True, norms_per_layer=4, router_bias=True),
        "flint": DecoderLayout(qk_norm=True, attention_sinks=True),
        # Muse Glimmer: pre- and post-norms around attention and MLP (its q/k norm and embedding norm have no weight)
        "muse_glimmer_text": DecoderLayout(norms_per_layer=4),
    }
    #: What the Llama-likes' layers hold beyond a :class:`DecoderLayout` (their transformers modeling files).
    EXTRAS: ClassVar[Mapping[str, LayerExtras]] = {
        "bitnet": LayerExtras(hidden_vectors=1, inner_vectors=1),  # attn_sub_norm, ffn_sub_norm
        "diffllama": LayerExtras(head_dim_vectors=4),  # lambda_q1, lambda_k1, lambda_q2, lambda_k2
        "doge": LayerExtras(hidden_vectors=2, dynamic_mask=True),  # input_residual, post_attention_residual
        "hyperclovax": LayerExtras(post_norms_switch="use_post_norm"),
        "beam": LayerExtras(output_gate=True),
        "muse_glimmer_text": LayerExtras(output_gate=True, output_gate_bias=False),
        "nanochat": LayerExtras(norm_weights=False),
    }

    #: Members whose transformers config class has no ``sliding_window`` (LlamaConfig and kin, transformers 5.24):
    #: their attention is full in every layer, so a stray ``sliding_window`` key in a config is not read.
    WINDOWLESS: ClassVar[frozenset[str]] = frozenset(
        "llama internlm3 stablelm arcee seed_oss apertus apertus1p5_text bitnet diffllama helium hyperclovax "
        "iquestcoder jais2 nanochat".split())

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.defaults_name in self.WINDOWLESS and r.has("sliding_window"):
            r.note(f"sliding_window is set but {r.defaults_name}'s attention has no window (its transformers config "
                   "class defines none): full attention in every layer")
            return [FULL] * num_layers
        return super().pattern_kinds(r, num_layers)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return self.LAYOUTS.get(model_type, DecoderLayout())

    def attention_weights(
        self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
    ) -> tuple[list[Matrix], int, int]:
        attention, other, width = super().attention_weights(r, model_type, hidden, layers, heads)
        if model_type == "stablelm" and switch(r, "qk_layernorm", False):
            # StableLmLayerNormPerHead: one LayerNorm (weight, no bias) of head_dim per q head and per KV head
            other += (heads + self.kv_heads(r, heads)) * self.head_dim(r, heads) * layers
        return attention, other, width

    def _decoder_count(self, r: ConfigReader, model_type: str) -> WeightCount:
        counted = super().count_weights(r, model_type)
        if model_type == "stablelm" and switch(r, "use_parallel_residual", False):
            # attention and MLP read the same input_layernorm: no post_attention_layernorm
            layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
            counted = replace(counted, parts=[replace(p, other_parameters=p.other_parameters - layers * 2 * hidden_of(r))
                                              if p.name == "norms" else p for p in counted.parts])
        return counted

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type == "flint":  # Qwen-MoE's placement: decoder_sparse_step, mlp_only_layers, a shared expert
            return sparse_step_moe(r, layers, top_k)
        if model_type == "kolibri1":  # every layer: routed experts and a shared expert
            return MoeLayout(layers=list(range(layers)), experts=r.first_of("num_experts", ("num_local_experts",)),
                             top_k=top_k, expert_size=r.first_of("moe_intermediate_size", ("moe_intermediate_size",)),
                             shared_size=r.first_of("shared_expert_intermediate_size",
                                                    ("shared_expert_intermediate_size",), required=False,
                                                    kind="count") or None)
        if model_type in ("mellum", "beam"):
            return typed_moe(r, layers, top_k, first_dense=3 if model_type == "beam" else 0)
        if model_type == "aria_text":  # every layer: moe_num_experts experts and moe_num_shared_experts fused
            experts = r.first_of("num_experts", ("moe_num_experts",))
            shared = r.first_of("moe_num_shared_experts", ("moe_num_shared_experts",), required=False, kind="count")
            return MoeLayout(layers=list(range(layers)), experts=experts, top_k=r.optional("moe_topk", ("moe_topk",)),
                             expert_size=intermediate, shared_size=shared * intermediate if shared else None)
        return NO_MOE

    def needs_dense_width(self, model_type: str) -> bool:
        return model_type != "kolibri1"  # Kolibri1Config has no intermediate_size: every layer is MoE

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Llama's layout (:class:`DecoderParser`) with the member's :class:`DecoderLayout`, plus its
        :class:`LayerExtras`."""
        counted = self._decoder_count(r, model_type)
        if model_type == "emu3_text_model" and isinstance(r.outer.get("vq_config"), Mapping):
            r.note("vq_config (Emu3's VQ-VAE image tokenizer) is not counted: the weights are the language model's, "
                   "as Emu3ForCausalLM holds them")
        extras = self.EXTRAS.get(model_type)
        if extras is None:
            return counted
        hidden = counted.hidden_size
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads, head_dim = self.kv_heads(r, heads), self.head_dim(r, heads)
        parts = list(counted.parts)
        norms = extras.hidden_vectors * hidden
        if extras.inner_vectors:
            norms += extras.inner_vectors * r.first_of("intermediate_size", ("intermediate_size",))
        if extras.post_norms_switch and r.flag(extras.post_norms_switch, True):
            norms += 2 * hidden
        attention: list[Matrix] = []
        attention_other = extras.head_dim_vectors * head_dim
        if extras.output_gate:  # sigmoid gate on the attention output: hidden -> heads x head_dim, a bias per head
            attention.append(Matrix(in_features=hidden, out_features=heads * head_dim, count=layers))
            attention_other += heads if extras.output_gate_bias else 0
        if extras.dynamic_mask:  # Doge: A per KV head, dt_proj from the V heads to one value per KV head
            attention.append(Matrix(in_features=kv_heads * head_dim, out_features=kv_heads, count=layers))
            attention_other += kv_heads + (kv_heads if r.raw("attention_bias") is True else 0)
            if r.flag("is_moe", False):
                parts.extend(doge_cdmoe(r, hidden, layers))
        parts = add_to_part(parts, "attention", attention, attention_other * layers)
        parts = add_to_part(parts, "norms", [], norms * layers)
        if not extras.norm_weights:
            r.note(f"{model_type}: its RMSNorms have no learned weight")
            parts = [p for p in parts if p.name != "norms"]
        return replace(counted, parts=parts)


def add_to_part(parts: list[WeightPart], name: str, matrices: list[Matrix], other: int) -> list[WeightPart]:
    """``parts`` with ``matrices`` and ``other`` parameters added to the part called ``name``."""
    if not matrices and not other:
        return parts
    return [replace(p, matrices=p.matrices + tuple(matrices), other_parameters=p.other_parameters + other)
            if p.name == name else p for p in parts]


def typed_moe(r: ConfigReader, layers: int, top_k: int | None, *, first_dense: int) -> MoeLayout:
    """Mellum, Beam: ``mlp_layer_types`` names each layer "dense" or "sparse" (experts of ``moe_intermediate_size``;
    absent: the config class's rule, the first ``first_dense`` layers dense)."""
    if r.has("mlp_layer_types"):
        types = r.check("mlp_layer_types", r.raw("mlp_layer_types"), "list")
        if len(types) != layers or any(t not in ("dense", "sparse") for t in types):
            raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must hold \"dense\" or \"sparse\" for "
                              f"each of the {layers} layers", "fix mlp_layer_types")
        moe = [i for i, t in enumerate(types) if t == "sparse"]
    else:
        moe = list(range(min(first_dense, layers), layers))
        r.note(f"mlp_layer_types is not in the config; the {r.defaults_name} default: the first "
               f"{min(first_dense, layers)} layers dense, the rest MoE")
    experts = r.first_of("num_experts", ("num_experts", "num_local_experts"))
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=size, shared_size=None)


def doge_cdmoe(r: ConfigReader, hidden: int, layers: int) -> list[WeightPart]:
    """Doge's ``is_moe`` MLP (DogeCDMoE): the dense MLP stays as the shared expert; a router to
    2 x floor(sqrt(num_experts)) product keys, and one up and one down embedding row per expert."""
    experts = r.first_of("num_experts", ("num_experts",))
    keys = math.isqrt(experts)
    r.note(f"is_moe: {experts} single-neuron experts (up/down embeddings of hidden_size) per layer, "
           f"a router over 2 x {keys} product keys")
    return [WeightPart(name="experts", matrices=(Matrix(in_features=hidden, out_features=experts, count=2 * layers),)),
            WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=2 * keys, count=layers),),
                       tp_sharded=False)]


class Llama4Parser(DecoderParser):
    """Llama 4: RoPE layers use chunked local attention (chunk ``attention_chunk_size``), NoPE layers are global."""

    family = "llama4"
    model_types = ("llama4_text", "llama4")
    defaults = {
        "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 4096 * 32, "no_rope_layer_interval": 4,
    }
    defaults_by_type = {"llama4_text": {"tie_word_embeddings": False}}
    weight_types = ("llama4_text",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm_weights=False)  # use_qk_norm: Llama4TextL2Norm, no learned weight

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.has("attention_chunk_size"):
            r.note("attention_chunk_size is not set: every layer is full attention")
            return [FULL] * num_layers
        if r.has("no_rope_layers"):
            flags = r.check("no_rope_layers", r.raw("no_rope_layers"), "list")
            if not all(type(flag) is int and flag in (0, 1) for flag in flags):
                raise ConfigError(f"{r.source_name}: {r.prefix}no_rope_layers must hold 0 or 1 per layer, got "
                                  f"{next(f for f in flags if type(f) is not int or f not in (0, 1))!r}"[:300],
                                  "make no_rope_layers one 0/1 entry per layer")
            if len(flags) != num_layers:
                raise ConfigError(
                    f"{r.source_name}: no_rope_layers has {len(flags)} entries for {num_layers} layers",
                    "make no_rope_layers one 0/1 entry per layer",
                )
            r.record("layer_types", "no_rope_layers", r.where("no_rope_layers"))
            r.note("layers with no_rope_layers[i] = 1 (RoPE) use chunked attention; NoPE layers are global")
        else:
            interval = r.first_of("no_rope_layer_interval", ["no_rope_layer_interval"])
            flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
            r.note(f"layer i is global (NoPE) when (i + 1) % {interval} == 0, else chunked local attention")
        return [CHUNKED if flag else FULL for flag in flags]

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        """MoE every ``interleave_moe_layer_step`` layers (or at ``moe_layers``), one shared expert of the same size."""
        experts = r.first_of("num_experts", ("num_local_experts",))
        step = r.optional("interleave_moe_layer_step", ("interleave_moe_layer_step",)) or 1
        moe_list = r.raw("moe_layers")
        moe = (sorted(layer_indices(r, "moe_layers", moe_list, layers)) if moe_list is not _MISSING
               else [i for i in range(layers) if (i + 1) % step == 0])
        return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=intermediate, shared_size=intermediate)

    def dense_mlp_size(self, r: ConfigReader, model_type: str, intermediate: int) -> int:
        return r.first_of("intermediate_size_mlp", ("intermediate_size_mlp",))


class MllamaParser(ArchParser):
    """Llama 3.2 Vision: self-attention layers plus cross-attention layers over the image tokens.

    One image is ``max_num_tiles`` tiles of ``(image_size // patch_size)^2`` patches plus a class
    token each (transformers ``MllamaVisionModel.num_patches``; vLLM's largest encoder input for one
    image): 4 x (40^2 + 1) = 6404 tokens for the released models.
    """

    family = "mllama"
    model_types = ("mllama_text_model", "mllama")
    #: MllamaTextConfig defaults.
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 131072, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "vocab_size": 128256, "intermediate_size": 14336, "tie_word_embeddings": False,
    }
    weight_types = ("mllama_text_model",)
    #: MllamaVisionConfig defaults.
    VISION_DEFAULTS: Mapping[str, Any] = {"image_size": 448, "patch_size": 14, "max_num_tiles": 4}
    #: MllamaVisionConfig defaults of the keys weight counting reads.
    VISION_WEIGHT_DEFAULTS: Mapping[str, Any] = {
        "hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8, "intermediate_size": 5120,
        "vision_output_dim": 7680, "num_channels": 3, **VISION_DEFAULTS,
    }

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        cross = self.cross_layers(r, num_layers)
        dims = self.attention_dims(r)
        self_attn, cross_attn = self.full_spec(dims), self.cross_spec(dims)
        r.note(
            f"layers {sorted(cross)} cross-attend to the image tokens (K/V fixed by the image, per image); "
            "the others are self-attention"
        )
        return [cross_attn if i in cross else self_attn for i in range(num_layers)]

    def cross_layers(self, r: ConfigReader, num_layers: int) -> frozenset[int]:
        key = "cross_attention_layers"
        if r.has(key):
            value = r.raw(key)
            source = r.where(key)
        else:
            value = self.defaults[key]
            source = f"default of {r.defaults_name}: {key}"
            r.note(f"{r.prefix}{key} is not in the config; using the {r.defaults_name} architecture default {value}")
        indices = layer_indices(r, key, value, num_layers)
        r.record("cross_attention_layers", sorted(indices), source)
        return indices

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Self-attention and cross-attention layers (the latter with q/k norms and two tanh gates), a SwiGLU
        MLP and two RMSNorms in each; the embedding has 8 extra rows for the image tokens."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_cross = len(self.cross_layers(r, layers))
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        vocab = vocab_of(r)
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=hidden, out_features=vocab + 8),))]
        if not tied(r):
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=hidden, out_features=vocab),)))
        parts.append(WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, layers)),
                                other_parameters=(2 * head_dim + 2) * n_cross))
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                                                      Matrix(in_features=inner, out_features=hidden, count=layers))))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner,
                                            "qkv_width": (heads + 2 * kv_heads) * head_dim, "vocab_size": vocab})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """MllamaVisionModel: a patch convolution, a class embedding, gated position and per-tile embeddings,
        ``num_hidden_layers`` local and ``num_global_layers`` gated global ViT layers, and the projector of the
        concatenated intermediate features (``vision_output_dim``) into the text model."""
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=self.VISION_WEIGHT_DEFAULTS, defaults_name="mllama_vision_model")
        hidden = v.first_of("hidden_size", ("hidden_size",))
        local = v.first_of("num_hidden_layers", ("num_hidden_layers",))
        global_ = v.first_of("num_global_layers", ("num_global_layers",))
        inner = v.first_of("intermediate_size", ("intermediate_size",))
        channels = v.first_of("num_channels", ("num_channels",))
        patch = v.first_of("patch_size", ("patch_size",))
        tiles = v.first_of("max_num_tiles", ("max_num_tiles",))
        patches = (v.first_of("image_size", ("image_size",)) // patch) ** 2 + 1
        ratios = v.raw("supported_aspect_ratios")
        # aspect-ratio ids: every (w, h) tiling with w * h <= max_num_tiles, plus the padding id 0
        n_ratios = (len(ratios) if isinstance(ratios, list)
                    else sum(1 for w in range(1, tiles + 1) for h in range(1, tiles + 1) if w * h <= tiles)) + 1
        layers = local + global_
        tower = WeightPart(
            name="vision_tower", vision=True,
            matrices=(Matrix(in_features=channels * patch * patch, out_features=hidden),
                      Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                      Matrix(in_features=hidden, out_features=inner, count=layers),
                      Matrix(in_features=inner, out_features=hidden, count=layers)),
            # class embedding, positions + gate, per-tile positions, pre/post tile embeddings + gates, two
            # LayerNorms around the stack; per layer MLP biases and two LayerNorms; two gates per global layer
            other_parameters=hidden + patches * hidden + 1 + n_ratios * tiles * patches * hidden
            + 2 * (n_ratios * tiles * hidden + 1) + 4 * hidden + (inner + hidden + 4 * hidden) * layers + 2 * global_,
        )
        out = v.first_of("vision_output_dim", ("vision_output_dim",))
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=out, out_features=text_hidden),), other_parameters=text_hidden)
        r.note(f"vision tower (Mllama ViT, {local} + {global_} global layers) reported separately as weights.vision_*")
        return [tower, projector]

    def encoder_len(self, r: ConfigReader) -> int | None:
        vision = r.outer.get("vision_config")
        if vision is not None and not isinstance(vision, Mapping):
            raise ConfigError(f"{r.source_name}: vision_config must be an object", "fix the config")
        vision = vision or {}
        values: dict[str, int] = {}
        for key, default in self.VISION_DEFAULTS.items():
            raw = vision.get(key)
            if raw is None:
                values[key] = default
                r.note(f"vision_config.{key} is not in the config; using the mllama_vision_model default {default}")
                continue
            if isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
                raise ConfigError(
                    f"{r.source_name}: vision_config.{key} must be a positive integer, got {raw!r}",
                    f"fix the config or pass --set vision_config.{key}=VALUE",
                )
            values[key] = raw
        tiles, size, patch = values["max_num_tiles"], values["image_size"], values["patch_size"]
        per_tile = (size // patch) ** 2 + 1
        value = tiles * per_tile
        r.record(
            "encoder_len", value,
            "derived: vision_config.max_num_tiles * ((image_size // patch_size)^2 + 1 class token)",
        )
        r.note(
            f"cross-attention holds one image: {tiles} tiles x {per_tile} tokens ({size} // {patch} = {size // patch}; "
            f"{size // patch}^2 patches + 1 class token) = {value}; pass --encoder-len {value} x N for N images"
        )
        return value


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"emu3_text_model": "a wrapper's language model, GQA in every layer: the generic rules read its cache"}
#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {
    **{t: "remote code: not counted" for t in ("aquila", "arctic", "orion", "xverse")},
    "llama4": "a wrapper: its weights are counted under its text_config's llama4_text",
    "mllama": "a wrapper: its weights are counted under its text_config's mllama_text_model",
}

PARSERS: tuple[type[ArchParser], ...] = (LlamaParser, Llama4Parser, MllamaParser)
