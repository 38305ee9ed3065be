"""Gemma 1, 2, 3, 3n and 4: Gemma 2 alternates local and global layers, Gemma 3 runs five local to one
global, Gemma 3n adds KV sharing across its last layers, Gemma 4 gives its global layers their own head
dim and KV-head count (``global_head_dim``, ``num_global_key_value_heads``) and an optional MoE block."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.decoder import DecoderLayout, DecoderParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import FullAttentionSpec, LayerSpec, SharedKVSpec, SlidingWindowSpec

#: The reason every KV-sharing layer gives (Gemma 3n and Gemma 4).
SHARED_KV_REASON = "reuses the K/V cache of an earlier layer (num_kv_shared_layers)"


def kv_shared_count(r: ConfigReader) -> int:
    """``num_kv_shared_layers`` (0 when absent or 0: every layer keeps its own cache)."""
    return r.first_of("num_kv_shared_layers", ["num_kv_shared_layers"], required=False, kind="count") or 0


def share_trailing_layers(r: ConfigReader, specs: list[LayerSpec], shared: int, *, allow_all: bool = False) -> None:
    """Replace the last ``shared`` layers by :class:`SharedKVSpec`: they read the cache of the last earlier
    layer of their own type (transformers ``kv_sharing_modes`` "reuse"; vLLM ``kv_sharing_target_layer_name``)."""
    if not shared:
        return
    if shared > len(specs) or (shared == len(specs) and not allow_all):
        raise ConfigError(
            f"{r.source_name}: {r.prefix}num_kv_shared_layers = {shared} leaves no layer with its own cache "
            f"({len(specs)} layers)",
            "num_kv_shared_layers must be below num_hidden_layers",
        )
    first = len(specs) - shared
    if shared == len(specs):
        r.note(f"num_kv_shared_layers = {shared}: every layer reads the K/V of the target model and caches nothing")
    else:
        r.note(
            f"num_kv_shared_layers = {shared}: layers {first}-{len(specs) - 1} reuse the K/V of earlier layers "
            "and cache nothing of their own"
        )
    specs[first:] = [SharedKVSpec(reason=SHARED_KV_REASON)] * shared


#: SiglipVisionConfig's defaults (transformers 5.24) of the keys the Gemma wrappers' tower counts read.
_SIGLIP_VISION_DEFAULTS: dict[str, Any] = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                           "num_channels": 3, "image_size": 224, "patch_size": 16}


def siglip_tower(outer: Mapping[str, Any], r: ConfigReader, *, use_head: bool) -> WeightPart:
    """SiglipVisionTransformer: a patch Conv2d with bias, a position table of (image_size / patch_size)^2 rows,
    layers of q/k/v/o and fc1/fc2 with biases and two LayerNorms, a post_layernorm; and the attention-pooling
    head when ``vision_use_head`` (``use_head``: the wrapper's default): a probe, MultiheadAttention (in_proj
    3 d x d and out_proj, with biases), a LayerNorm and an MLP of the tower's width."""
    v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                     defaults={**_SIGLIP_VISION_DEFAULTS, "vision_use_head": use_head},
                     defaults_name=f"{outer.get('model_type')} vision_config")
    d = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    channels = v.first_of("num_channels", ("num_channels",))
    patch = v.first_of("patch_size", ("patch_size",))
    patches = (v.first_of("image_size", ("image_size",)) // patch) ** 2
    blocks = layers + (1 if switch(v, "vision_use_head", use_head) else 0)
    matrices = (Matrix(in_features=d, out_features=d, count=4 * blocks),
                Matrix(in_features=d, out_features=inner, count=blocks), Matrix(in_features=inner, out_features=d, count=blocks),
                Matrix(in_features=channels * patch * patch, out_features=d))
    vectors = (4 * d + 2 * 2 * d + inner + d) * layers + d + patches * d + 2 * d
    if blocks > layers:
        vectors += d + 4 * d + 2 * d + inner + d  # probe, attention biases, LayerNorm, MLP biases
    for note in v.notes:
        r.note(note)
    r.note(f"vision tower (SigLIP, {layers} layers{', attention-pooling head' if blocks > layers else ''}) "
           "reported separately as weights.vision_*")
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=vectors)


def paligemma_vision(outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
    """PaliGemma (1 and 2, over Gemma or Gemma 2): the SigLIP tower (its head only when ``vision_use_head``, which
    PaliGemmaConfig defaults to false) and PaliGemmaMultiModalProjector, one linear with bias from the tower's
    width to ``projection_dim``. None for any other wrapper: the generic tower count."""
    if outer.get("model_type") != "paligemma":
        return None
    o = ConfigReader(outer, source_name=r.source_name, outer=outer, defaults={"projection_dim": 2048},
                     defaults_name="paligemma")
    hidden = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                          defaults=_SIGLIP_VISION_DEFAULTS).first_of("hidden_size", ("hidden_size",))
    projection = o.first_of("projection_dim", ("projection_dim", "vision_config.projection_dim"))
    for note in o.notes:
        r.note(note)
    projector = WeightPart(name="projector", vision=True, matrices=(Matrix(in_features=hidden, out_features=projection),),
                           other_parameters=projection)
    return [siglip_tower(outer, r, use_head=False), projector]


class GemmaParser(DecoderParser):
    family = "gemma"
    model_types = ("gemma",)
    defaults = {
        "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
        "head_dim": 256, "max_position_embeddings": 8192,
    }
    defaults_by_type = {"gemma": {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 24576}}
    weight_types = ("gemma",)

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        return paligemma_vision(outer, r, text_hidden)


class Gemma2Parser(DecoderParser):
    """Gemma 2: even layers (0, 2, ...) slide, odd layers are global."""

    family = "gemma2"
    model_types = ("gemma2", "vaultgemma", "t5_gemma_module")
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096,
    }
    #: VaultGemmaConfig's and T5GemmaModuleConfig's defaults are Gemma2Config's.
    defaults_by_type = {t: {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 9216}
                        for t in ("gemma2", "vaultgemma", "t5_gemma_module")}
    weight_types = ("gemma2", "vaultgemma", "t5_gemma_module")

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        if model_type == "vaultgemma":  # VaultGemma: Gemma 2's layer without the post-attention/-MLP norms
            return DecoderLayout()
        return DecoderLayout(norms_per_layer=4)  # pre- and post-norms around attention and MLP

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        return paligemma_vision(outer, r, text_hidden)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Gemma 2's layers; T5Gemma's encoder and decoder (``t5_gemma_module``, each with its own embedding) are
        Gemma 2 stacks, the encoder without an lm_head, the decoder's layers with a cross-attention block (k/v
        from ``cross_attention_hidden_size``) and its pre/post norms."""
        counted = super().count_weights(r, model_type)
        if model_type != "t5_gemma_module":
            return counted
        parts = list(counted.parts)
        if r.raw("is_decoder") is not True:
            return replace(counted, parts=[p for p in parts if p.name != "lm_head"])
        hidden = counted.hidden_size
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv = self.kv_heads(r, heads) * self.head_dim(r, heads)
        q = heads * self.head_dim(r, heads)
        source = r.optional("cross_attention_hidden_size", ("cross_attention_hidden_size",)) or hidden
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q, count=layers), Matrix(in_features=source, out_features=kv,
                                                                              count=2 * layers),
            Matrix(in_features=q, out_features=hidden, count=layers))))
        parts.append(WeightPart(name="norms", other_parameters=2 * hidden * layers, tp_sharded=False))
        r.note("T5Gemma decoder: cross-attention (q/k/v/o and two norms) in every layer")
        return replace(counted, parts=parts)

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("gemma2 alternates attention: layer i slides when (i + 1) % 2 != 0 (even layers)")
        return [SLIDING if (i + 1) % 2 else FULL for i in range(num_layers)]


class Gemma3Parser(DecoderParser):
    """Gemma 3: ``sliding_window_pattern`` (default 6) -> 5 local layers then 1 global."""

    family = "gemma3"
    model_types: ClassVar[tuple[str, ...]] = ("gemma3_text", "gemma3")
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
        "sliding_window_pattern": 6,
    }
    defaults_by_type = {"gemma3_text": {"tie_word_embeddings": True, "vocab_size": 262208, "intermediate_size": 9216,
                                        "head_dim": 256}}
    weight_types: ClassVar[tuple[str, ...]] = ("gemma3_text",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, norms_per_layer=4)

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """Gemma 3's SigLIP tower (and ShieldGemma 2's, the same model): the ViT, SigLIP's attention-pooling
        head when ``vision_use_head`` (SiglipVisionConfig's default true), and Gemma3MultiModalProjector
        (a RMSNorm over the tower's width and one hidden x text_hidden matrix). None for another wrapper (a
        family that reads its text model with Gemma 3's rules, Command-R7B's Cohere2Vision): the generic count."""
        if outer.get("model_type") not in ("gemma3", "shieldgemma2"):
            return None
        hidden = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                              defaults=_SIGLIP_VISION_DEFAULTS).first_of("hidden_size", ("hidden_size",))
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),), other_parameters=hidden)
        return [siglip_tower(outer, r, use_head=True), projector]

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        pattern = r.first_of("sliding_window_pattern", ["sliding_window_pattern", "_sliding_window_pattern"])
        r.note(f"layer i is global when (i + 1) % {pattern} == 0, else sliding ({pattern - 1} local : 1 global)")
        return [SLIDING if (i + 1) % pattern else FULL for i in range(num_layers)]


class Gemma3nParser(ArchParser):
    """Gemma 3n: 4 local layers then 1 global; the last ``num_kv_shared_layers`` layers reuse earlier K/V.

    Gemma3nTextConfig builds ``layer_types`` as layer i global when (i + 1) % 5 == 0. Layers from
    ``num_hidden_layers - num_kv_shared_layers`` on read the cache of the last earlier layer of the
    same type and store none of their own (vLLM ``kv_sharing_target_layer_name``; transformers
    DynamicCache drops them: ``layer_types[:-num_kv_shared_layers]``).
    """

    family = "gemma3n"
    model_types = ("gemma3n_text", "gemma3n")
    #: Gemma3nTextConfig defaults.
    defaults = {
        "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 256, "max_position_embeddings": 32768, "sliding_window": 512, "num_kv_shared_layers": 15,
        "vocab_size": 262400, "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256,
        "intermediate_size": 16384, "altup_num_inputs": 4, "laurel_rank": 64, "tie_word_embeddings": True,
    }
    weight_types = ("gemma3n_text",)

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("no layer_types: gemma3n makes layer i global when (i + 1) % 5 == 0, else sliding (4 local : 1 global)")
        return [SLIDING if (i + 1) % 5 else FULL for i in range(num_layers)]

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        specs = super().build_layers(r)
        share_trailing_layers(r, specs, kv_shared_count(r))
        return specs

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Gemma 3n's text model (transformers Gemma3nTextModel): per-layer input embeddings and their
        projections, AltUp (``altup_num_inputs`` streams) and LAuReL blocks, q/k norms, five RMSNorms per
        layer; the KV-sharing layers hold no k/v projections."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        raw = r.raw("num_kv_shared_layers")
        shared = 0 if raw == 0 else r.first_of("num_kv_shared_layers", ["num_kv_shared_layers"])
        own_kv = layers - shared
        per_layer = r.first_of("hidden_size_per_layer_input", ("hidden_size_per_layer_input",))
        per_layer_vocab = r.first_of("vocab_size_per_layer_input", ("vocab_size_per_layer_input",))
        streams = r.first_of("altup_num_inputs", ("altup_num_inputs",))
        rank = r.first_of("laurel_rank", ("laurel_rank",))
        sizes = r.raw("intermediate_size")
        if isinstance(sizes, list):
            if len(sizes) != layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}intermediate_size has {len(sizes)} entries for "
                                  f"{layers} layers", "make intermediate_size one width per layer, or one number")
            sizes = [r.check("intermediate_size", size, "int") for size in sizes]
        else:
            sizes = [r.first_of("intermediate_size", ("intermediate_size",))] * layers
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="per_layer_embeddings", matrices=(
            Matrix(in_features=per_layer_vocab, out_features=layers * per_layer),  # embed_tokens_per_layer
            Matrix(in_features=hidden, out_features=layers * per_layer),  # per_layer_model_projection
            Matrix(in_features=hidden, out_features=per_layer, count=layers),  # per_layer_input_gate
            Matrix(in_features=per_layer, out_features=hidden, count=layers)),  # per_layer_projection
            other_parameters=per_layer))
        q, kv = heads * head_dim, kv_heads * head_dim
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q, count=layers),
            Matrix(in_features=hidden, out_features=kv, count=2 * own_kv),
            Matrix(in_features=q, out_features=hidden, count=layers)),
            other_parameters=head_dim * (layers + own_kv)))  # q_norm everywhere, k_norm with own K/V
        parts.append(WeightPart(name="mlp", matrices=tuple(
            m for size in sizes for m in (Matrix(in_features=hidden, out_features=size, count=2),
                                          Matrix(in_features=size, out_features=hidden)))))
        # AltUp: stream projections in and out; per layer the router, its norm, the prediction and correction
        # coefficients and the output scale. LAuReL: a rank-``laurel_rank`` residual and its norm.
        parts.append(WeightPart(name="altup_laurel", matrices=(
            Matrix(in_features=hidden, out_features=hidden, count=2 * (streams - 1)),
            Matrix(in_features=hidden, out_features=streams, count=layers),
            Matrix(in_features=hidden, out_features=rank, count=layers),
            Matrix(in_features=rank, out_features=hidden, count=layers)),
            other_parameters=(streams ** 3 + streams ** 2 + 2 * hidden) * layers + hidden * layers))
        parts.append(WeightPart(name="norms", other_parameters=(5 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"Gemma 3n: {own_kv} layers with their own K/V projections, {shared} sharing them")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": max(sizes),
                                            "qkv_width": q + 2 * kv, "vocab_size": vocab_of(r)})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        r.note("the vision (timm MobileNetV5) and audio towers of gemma3n are not counted: the config names them "
               "by architecture only")
        return []


#: Gemma4TextConfig defaults (transformers 5.24); Gemma4UnifiedTextConfig differs in the keys below.
_GEMMA4_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
    "sliding_window": 512, "global_head_dim": 512, "num_kv_shared_layers": 0, "attention_k_eq_v": False,
    "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256, "tie_word_embeddings": True,
    "enable_moe_block": False, "use_double_wide_mlp": False,
}
_GEMMA4_UNIFIED_DEFAULTS: dict[str, Any] = {
    "max_position_embeddings": 262144, "sliding_window": 1024, "hidden_size_per_layer_input": 0,
    "use_bidirectional_attention": "vision",
}


class Gemma4Parser(DecoderParser):
    """Gemma 4: global layers cache ``global_head_dim`` (+ ``num_global_key_value_heads``), shared-KV layers nothing.

    Sliding layers use ``head_dim`` and ``num_key_value_heads``; full layers ``global_head_dim``
    and, with ``attention_k_eq_v``, ``num_global_key_value_heads`` (Gemma4TextConfig builds this as
    ``per_layer_config``, the form transformers writes back). The last ``num_kv_shared_layers`` layers
    read an earlier layer's K/V; ``gemma4_assistant`` (a drafter) reads all of its K/V from the target model.
    """

    family = "gemma4"
    model_types = ("gemma4_text", "gemma4", "gemma4_unified_text", "gemma4_unified", "gemma4_assistant")
    defaults = _GEMMA4_TEXT_DEFAULTS
    defaults_by_type = {"gemma4_unified_text": _GEMMA4_UNIFIED_DEFAULTS, "gemma4_unified": _GEMMA4_UNIFIED_DEFAULTS}
    weight_types = model_types
    #: Gemma4TextConfig: with no layer_types, layer i is global when (i + 1) % 6 == 0.
    PATTERN = 6

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = r.raw("layer_types")
        if isinstance(types, list):
            kinds = self.kinds_from_layer_types(r, types, num_layers)
            bad = sorted({t for t, k in zip(types, kinds, strict=True) if k not in (FULL, SLIDING)})
            if bad:
                raise ConfigError(f"{r.source_name}: {r.prefix}layer_types holds {bad[0]!r}; Gemma 4 layers are "
                                  "sliding_attention or full_attention", "fix layer_types")
        else:
            r.note(f"no layer_types: gemma4 makes layer i global when (i + 1) % {self.PATTERN} == 0, else sliding")
            kinds = [SLIDING if (i + 1) % self.PATTERN else FULL for i in range(num_layers)]
        if kinds and kinds[-1] != FULL:
            r.note("Gemma4TextConfig forces the last layer to full_attention")
            kinds[-1] = FULL
        return kinds

    def per_layer_dims(self, r: ConfigReader, kinds: list[str]) -> list[dict[str, int]]:
        """K/V heads and head dim of every layer (and a window override, if any)."""
        head_dim = r.first_of("head_dim", ["head_dim"])
        kv_heads = r.first_of("num_kv_heads", ["num_key_value_heads"])
        dims = [{"num_kv_heads": kv_heads, "head_size": head_dim} for _ in kinds]
        explicit = r.raw("per_layer_config")
        if isinstance(explicit, Mapping):
            # transformers' serialised form: {"5": {"head_dim": 512, "num_key_value_heads": 2}, ...}
            names = {"head_dim": "head_size", "num_key_value_heads": "num_kv_heads", "sliding_window": "sliding_window"}
            for key, overrides in explicit.items():
                index = int(key) if isinstance(key, str) and key.isdigit() else -1
                if not 0 <= index < len(kinds) or not isinstance(overrides, Mapping):
                    raise ConfigError(f"{r.source_name}: {r.prefix}per_layer_config has entry {key!r}, not a layer "
                                      f"index below {len(kinds)} with a dict of overrides", "fix per_layer_config")
                for name, value in overrides.items():
                    if name in names:
                        dims[index][names[name]] = r.check(f"per_layer_config.{key}.{name}", value, "int")
            r.record("per_layer_config", f"{len(explicit)} layers", r.where("per_layer_config"))
            r.note(f"per_layer_config overrides the head dim / KV heads of layers {', '.join(sorted(explicit, key=int))}")
            return dims
        global_dim = r.first_of("global_head_dim", ["global_head_dim"])
        k_eq_v = r.flag("attention_k_eq_v", False)
        global_kv = r.optional("num_global_kv_heads", ["num_global_key_value_heads"])
        if global_kv is not None and not k_eq_v:
            r.note("num_global_key_value_heads applies only with attention_k_eq_v (Gemma4TextConfig); full layers "
                   f"keep num_key_value_heads = {kv_heads}")
        for index, kind in enumerate(kinds):
            if kind == FULL:
                dims[index] = {"num_kv_heads": global_kv if (k_eq_v and global_kv) else kv_heads,
                               "head_size": global_dim}
        if k_eq_v:
            r.note("attention_k_eq_v: full layers reuse the K projection as V, but K is roped and normed and V only "
                   "normed, so the cache still holds K and V (transformers Gemma4TextAttention caches both)")
        return dims

    def window(self, r: ConfigReader) -> int:
        window = r.first_of("sliding_window", ["sliding_window"])
        if r.raw("use_bidirectional_attention") == "all":
            r.note(f"use_bidirectional_attention = all: the window is sliding_window // 2 + 1 = {window // 2 + 1}")
            window = window // 2 + 1
        return window

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        kinds = self.layer_kinds(r, num_layers)
        heads = r.first_of("num_attention_heads", ["num_attention_heads"])
        window = self.window(r) if SLIDING in kinds else None
        specs: list[LayerSpec] = []
        for kind, dims in zip(kinds, self.per_layer_dims(r, kinds), strict=True):
            kv = dims["num_kv_heads"]
            if kv > heads or heads % kv:
                raise ConfigError(f"{r.source_name}: {heads} attention heads are not a multiple of {kv} KV heads",
                                  "check num_key_value_heads / num_global_key_value_heads")
            if kind == SLIDING:
                specs.append(SlidingWindowSpec(num_kv_heads=kv, head_size=dims["head_size"],
                                               head_size_v=dims["head_size"],
                                               sliding_window=dims.get("sliding_window", window or 0)))
            else:
                specs.append(FullAttentionSpec(num_kv_heads=kv, head_size=dims["head_size"],
                                               head_size_v=dims["head_size"]))
        shared = kv_shared_count(r)
        assistant = r.outer.get("model_type") == "gemma4_assistant"
        if assistant:
            # Gemma4AssistantConfig sets num_kv_shared_layers = num_hidden_layers: it reads the target's K/V.
            r.note("gemma4_assistant drafts from the target model's shared K/V: it caches nothing of its own")
            shared = num_layers
        elif shared and shared < num_layers:
            own = set(kinds[: num_layers - shared])
            if own != set(kinds):
                raise ConfigError(f"{r.source_name}: the layers that keep a cache have no "
                                  f"{', '.join(sorted(set(kinds) - own))} layer for the shared layers to read",
                                  "lower num_kv_shared_layers")
        share_trailing_layers(r, specs, shared, allow_all=assistant)
        return specs

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Gemma 4's text model (transformers Gemma4TextModel): per layer q/k/v/o with the layer's own head dim
        and KV heads (no v_proj on full layers with ``attention_k_eq_v``, no k/v at all on KV-sharing layers),
        q/k norms, a gated MLP (twice as wide on sharing layers with ``use_double_wide_mlp``), four norms;
        with ``enable_moe_block`` also a router and ``num_experts`` experts beside the dense MLP, and three more
        norms; with ``hidden_size_per_layer_input`` the per-layer embeddings (PLE) and their projections."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        kinds = self.layer_kinds(r, layers)
        dims = self.per_layer_dims(r, kinds)
        heads = r.first_of("num_attention_heads", ["num_attention_heads"])
        shared = layers if r.outer.get("model_type") == "gemma4_assistant" else kv_shared_count(r)
        k_eq_v = r.flag("attention_k_eq_v", False)
        bias = r.raw("attention_bias") is True
        intermediate = r.first_of("intermediate_size", ["intermediate_size"])
        double = r.flag("use_double_wide_mlp", False)
        attention: list[Matrix] = []
        attn_other = 0
        mlp: list[Matrix] = []
        qkv_width = 0
        for index, (kind, d) in enumerate(zip(kinds, dims, strict=True)):
            own_kv = index < layers - shared
            q, kv = heads * d["head_size"], d["num_kv_heads"] * d["head_size"]
            n_kv = (1 if (k_eq_v and kind == FULL) else 2) if own_kv else 0
            attention += [Matrix(in_features=hidden, out_features=q), Matrix(in_features=q, out_features=hidden)]
            attention += [Matrix(in_features=hidden, out_features=kv, count=n_kv)] if n_kv else []
            attn_other += d["head_size"] * (2 if own_kv else 1)  # q_norm, and k_norm with own K/V
            attn_other += (2 * q + n_kv * kv) if bias else 0  # q/o and k/v biases (o_proj's is hidden wide)
            qkv_width = max(qkv_width, q + n_kv * kv)
            width = intermediate * (2 if double and not own_kv else 1)
            mlp += [Matrix(in_features=hidden, out_features=width, count=2), Matrix(in_features=width, out_features=hidden)]
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=attn_other))
        parts.append(WeightPart(name="mlp", matrices=tuple(mlp)))
        norms = (4 * layers + 1) * hidden + layers  # four RMSNorms per layer, the final norm, layer_scalar
        experts = top_k = None
        mlp_width = intermediate * (2 if double and shared else 1)
        if r.flag("enable_moe_block", False):
            experts = r.first_of("num_experts", ["num_experts"])
            top_k = r.optional("num_experts_per_tok", ["top_k_experts"])
            size = r.first_of("moe_intermediate_size", ["moe_intermediate_size", "expert_intermediate_size"])
            parts.append(WeightPart(name="experts", matrices=(
                Matrix(in_features=hidden, out_features=size, count=2 * experts * layers),
                Matrix(in_features=size, out_features=hidden, count=experts * layers))))
            # Gemma4TextRouter: proj, a scale per hidden unit and one per expert
            parts.append(WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts,
                                                                    count=layers),),
                                    other_parameters=(hidden + experts) * layers, tp_sharded=False))
            norms += 3 * layers * hidden
            mlp_width += (top_k or 1) * size
            r.note(f"Gemma 4 MoE: {experts} experts of {size} beside the dense MLP in all {layers} layers, all resident")
        per_layer = r.first_of("hidden_size_per_layer_input", ["hidden_size_per_layer_input"], required=False,
                               kind="count")
        if per_layer:
            per_layer_vocab = r.first_of("vocab_size_per_layer_input", ["vocab_size_per_layer_input"])
            parts.append(WeightPart(name="per_layer_embeddings", matrices=(
                Matrix(in_features=per_layer_vocab, out_features=layers * per_layer),  # embed_tokens_per_layer
                Matrix(in_features=hidden, out_features=layers * per_layer),  # per_layer_model_projection
                Matrix(in_features=hidden, out_features=per_layer, count=layers),  # per_layer_input_gate
                Matrix(in_features=per_layer, out_features=hidden, count=layers)),  # per_layer_projection
                other_parameters=per_layer + hidden * layers))  # per_layer_projection_norm, post_per_layer_input_norm
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": mlp_width,
                                                "qkv_width": qkv_width, "vocab_size": vocab_of(r)})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """Gemma4VisionModel: a patch projection, a two-axis position table, ``num_hidden_layers`` layers of
        q/k/v/o (own head dim and KV heads), q/k norms, a gated MLP and four norms; then the projection
        into the text model (Gemma4MultimodalEmbedder). The audio tower is noted, not counted."""
        if isinstance(outer.get("audio_config"), Mapping):
            r.note("the audio tower of gemma4 is not counted")
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=_GEMMA4_VISION_DEFAULTS, defaults_name="gemma4_vision")
        hidden = v.first_of("hidden_size", ["hidden_size"])
        inner = v.first_of("intermediate_size", ["intermediate_size"])
        layers = v.first_of("num_hidden_layers", ["num_hidden_layers"])
        heads = v.first_of("num_attention_heads", ["num_attention_heads"])
        kv_heads = v.first_of("num_kv_heads", ["num_key_value_heads"])
        head_dim = v.first_of("head_dim", ["head_dim"])
        patch = v.first_of("patch_size", ["patch_size"])
        positions = v.first_of("position_embedding_size", ["position_embedding_size"])
        r.notes += [n for n in v.notes if n not in r.notes]
        q, kv = heads * head_dim, kv_heads * head_dim
        return [WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=3 * patch * patch, out_features=hidden),
            Matrix(in_features=hidden, out_features=q, count=layers),
            Matrix(in_features=hidden, out_features=kv, count=2 * layers),
            Matrix(in_features=q, out_features=hidden, count=layers),
            Matrix(in_features=hidden, out_features=inner, count=2 * layers),
            Matrix(in_features=inner, out_features=hidden, count=layers),
            Matrix(in_features=hidden, out_features=text_hidden)),  # embed_vision.embedding_projection
            # the standardize std_bias/std_scale buffers; the clipped linears' four bounds each (7 per layer)
            other_parameters=2 * positions * hidden + layers * (2 * head_dim + 4 * hidden)
            + (2 * hidden if v.flag("standardize", False) else 0)
            + (4 * 7 * layers if v.flag("use_clipped_linears", False) else 0))]


#: Gemma4VisionConfig defaults (transformers 5.24).
_GEMMA4_VISION_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 12,
    "num_key_value_heads": 12, "head_dim": 64, "patch_size": 16, "position_embedding_size": 10240,
    "standardize": False, "use_clipped_linears": False,
}


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"gemma3": "a wrapper: its weights are counted under its text_config's gemma3_text",
                       "gemma3n": "a wrapper: its weights are counted under its text_config's gemma3n_text"}

PARSERS: tuple[type[ArchParser], ...] = (GemmaParser, Gemma2Parser, Gemma3Parser, Gemma3nParser, Gemma4Parser)
