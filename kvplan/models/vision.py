"""Vision towers a multimodal config carries in ``vision_config``, and the projectors into the language
model, reported separately as ``weights.vision_*``.

Each tower type is data: :data:`TOWERS` maps a vision ``model_type`` to its :class:`TowerLayout` (the
keys that size it, with its transformers config class's defaults, and the tensors each block holds).
The outer ``model_type`` decides the vision config class where transformers fixes it
(:data:`VISION_TYPE_OF`), so a Hub config whose ``vision_config`` names no (or an old) ``model_type``
is still read with the right fields; a tower kvplan has no layout for is counted as a plain ViT and
said to be approximate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart
from kvplan.models.vision_more import (
    DEFAULT_VISION_TYPE,
    EXTRA_TOWERS,
    MORE_PROJECTORS,
    MORE_TOWERS,
    MORE_VISION_TYPE_OF,
    TOWER_COPIES,
)
from kvplan.models.vision_towers import (
    JANUS_VQ_DEFAULTS,
    davit_tower,
    gqa_matrices,
    janus_generation_weights,
    lfm3_vl_tower,
    molmo2_tower,
    pix2struct_tower,
    radio_tower,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TowerLayout:
    """One vision ``model_type``'s ViT: which config keys size it and what each block holds."""

    name: str
    """How notes name it (``Qwen2-VL ViT``)."""
    defaults: Mapping[str, Any]
    """Its transformers config class's defaults of the keys read here."""
    hidden: tuple[str, ...] = ("hidden_size",)
    inner: tuple[str, ...] = ("intermediate_size",)
    mlp_ratio: str | None = None
    """The MLP width is ``hidden * mlp_ratio`` (no intermediate_size key)."""
    layers: tuple[str, ...] = ("num_hidden_layers",)
    channels: tuple[str, ...] = ("num_channels",)
    norm: str = "layer"
    """``layer``: LayerNorm (weight + bias); ``rms``: RMSNorm (weight)."""
    qkv_bias: bool | str = True
    """q/k/v biases: always, never, or as the named config key says (with the config class's default)."""
    o_bias: bool | str = True
    kv_heads: bool = False
    """Grouped K/V: ``num_key_value_heads`` of ``hidden / num_heads`` each (EXAONE 4.5)."""
    qk_norm: bool = False
    """RMSNorm on q and k over one head's dims."""
    gated_mlp: bool = False
    mlp_bias: bool | str = True
    layer_scale: bool = False
    """Two per-channel scales per block (InternViT's lambda_1, lambda_2)."""
    patch_bias: bool = True
    temporal: bool = False
    """The patch convolution spans ``temporal_patch_size`` frames."""
    positions: str = "grid"
    """``grid``: one learned position per patch of ``image_size``; ``num_patches``: the key of that name;
    ``none``: rotary only."""
    cls_token: bool = False
    pre_norm: bool = False
    post_norm: bool = False
    head: str | None = None
    """The key of SigLIP's attention-pooling head switch (``vision_use_head``)."""
    count: Callable[[ConfigReader], tuple[WeightPart, int]] | None = None
    """A tower that is not a ViT of these parts counts itself (LFM3-VL's conv/attention hybrid)."""


_SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                    "image_size": 224, "patch_size": 16}
_QWEN25_DEFAULTS = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "in_channels": 3, "patch_size": 14,
                    "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584}

#: vision ``model_type`` -> its layout. Defaults: transformers 5.24's configuration_*.py of each type.
TOWERS: dict[str, TowerLayout] = {
    # Qwen2VisionTransformerPretrainedModel: fused qkv, LayerNorms, an fc1/fc2 MLP of embed_dim * mlp_ratio
    "qwen2_vl_vision": TowerLayout(
        name="Qwen2-VL ViT", hidden=("embed_dim",), inner=(), mlp_ratio="mlp_ratio", layers=("depth",),
        channels=("in_channels",), patch_bias=False, temporal=True, positions="none",
        defaults={"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "in_channels": 3,
                  "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}),
    # Qwen2_5_VisionTransformerPretrainedModel: RMSNorms and a gated MLP with biases
    "qwen2_5_vl_vision": TowerLayout(
        name="Qwen2.5-VL ViT", layers=("depth",), channels=("in_channels",), norm="rms", gated_mlp=True,
        patch_bias=False, temporal=True, positions="none", defaults=_QWEN25_DEFAULTS),
    # EXAONE 4.5: the Qwen2.5-VL tower with grouped K/V heads
    "exaone4_5_vision": TowerLayout(
        name="EXAONE 4.5 ViT", layers=("depth",), channels=("in_channels",), norm="rms", gated_mlp=True,
        kv_heads=True, patch_bias=False, temporal=True, positions="none",
        defaults={**_QWEN25_DEFAULTS, "num_heads": 16, "num_key_value_heads": 8}),
    # InternVisionModel: separate q/k/v (qkv bias off by attention_bias), layer scales, a class token
    "internvl_vision": TowerLayout(
        name="InternViT", qkv_bias="attention_bias", layer_scale=True, cls_token=True,
        defaults={"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_channels": 3,
                  "image_size": [448, 448], "patch_size": [14, 14], "attention_bias": False}),
    # SiglipVisionModel (Gemma 3, PaliGemma): a patch convolution, one position per patch, a post LayerNorm
    "siglip_vision_model": TowerLayout(
        name="SigLIP ViT", post_norm=True, head="vision_use_head", defaults={**_SIGLIP_DEFAULTS, "vision_use_head": True}),
    # SigLIP 2's NaFlex tower: a linear patch embedding, num_patches positions, the pooling head
    "siglip2_vision_model": TowerLayout(
        name="SigLIP 2 ViT", positions="num_patches", post_norm=True, head="vision_use_head",
        defaults={**_SIGLIP_DEFAULTS, "num_patches": 256, "vision_use_head": True}),
    # MiniCPM-V 4.6/4.7, MiniCPM-OCR: a SigLIP tower (image_size positions) with a window merger at
    # insert_layer_id (a SigLIP attention block and an MLP over the merged window)
    "minicpmv4_6_vision": TowerLayout(name="MiniCPM-V SigLIP ViT", post_norm=True, defaults=_SIGLIP_DEFAULTS),
    "minicpmv4_7_vision": TowerLayout(name="MiniCPM-V SigLIP ViT", post_norm=True, defaults=_SIGLIP_DEFAULTS),
    "minicpm_ocr_vision": TowerLayout(name="MiniCPM-OCR SigLIP ViT", post_norm=True, defaults=_SIGLIP_DEFAULTS),
    # VideoLLaMA 3: a SigLIP tower with rotary positions only
    "video_llama_3_vision": TowerLayout(
        name="VideoLLaMA 3 SigLIP ViT", positions="none", post_norm=True,
        defaults={k: v for k, v in _SIGLIP_DEFAULTS.items() if k != "image_size"}),
    # PaddleOCR-VL: a SigLIP tower (image_size 384 / patch 14 learned positions)
    "paddleocr_vl_vision": TowerLayout(
        name="PaddleOCR-VL SigLIP ViT", post_norm=True,
        defaults={"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_channels": 3,
                  "image_size": 384, "patch_size": 14, "spatial_merge_size": 2}),
    # GLM-OCR (Glm4v-style): RMSNorms, q/k norms, attention and MLP biases by attention_bias, a post RMSNorm
    "glm_ocr_vision": TowerLayout(
        name="GLM-OCR ViT", layers=("depth",), channels=("in_channels",), norm="rms", qkv_bias="attention_bias",
        o_bias="attention_bias", mlp_bias="attention_bias", qk_norm=True, gated_mlp=True, temporal=True,
        positions="none", post_norm=True,
        defaults={"depth": 24, "hidden_size": 1024, "intermediate_size": 4096, "num_heads": 16, "in_channels": 3,
                  "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 1536,
                  "attention_bias": True}),
    # Granite-Docling: a SigLIP tower; its connector (coarse and fine pixel-shuffle paths) is the projector
    "granite_docling_vision": TowerLayout(
        name="Granite-Docling SigLIP ViT", post_norm=True,
        defaults={**_SIGLIP_DEFAULTS, "image_size": 512, "out_hidden_size": 1024, "scale_factor": 4,
                  "deepstack_visual_indexes": [3, 7, 10], "use_fine_route": True}),
    # Idefics3VisionTransformer (Aria, Idefics3, SmolVLM): SigLIP's tower without the pooling head
    "idefics3_vision": TowerLayout(name="Idefics3 SigLIP ViT", post_norm=True,
                                   defaults={**_SIGLIP_DEFAULTS, "hidden_size": 1152, "image_size": 224, "patch_size": 32}),
    "radio": TowerLayout(
        name="RADIO ViT", count=radio_tower,
        defaults={"hidden_size": 1280, "num_hidden_layers": 32, "mlp_ratio": 4.0, "use_swiglu_ffn": False,
                  "qkv_bias": True, "num_channels": 3, "patch_size": 16, "max_img_size": 2048, "num_cls_tokens": 3,
                  "num_registers": 7, "summary_idxs": [0, 1]}),
    "molmo2_vision": TowerLayout(
        name="Molmo2 ViT", count=molmo2_tower,
        defaults={"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 25, "num_attention_heads": 16,
                  "num_key_value_heads": 16, "head_dim": 72, "image_size": [378, 378], "patch_size": 14,
                  "num_channels": 3, "attention_bias": True}),
    # MiniMax-M3-VL: a 3-D patch convolution without bias, a LayerNorm before the blocks, rotary positions
    "minimax_m3_vl_vision": TowerLayout(
        name="MiniMax-M3-VL ViT", patch_bias=False, temporal=True, positions="none", pre_norm=True,
        defaults={"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_channels": 3,
                  "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2}),
    # Cosmos3-Edge: a SigLIP 2 tower (linear patches, num_patches positions) without the pooling head
    "cosmos3_edge_vision": TowerLayout(
        name="Cosmos3-Edge SigLIP 2 ViT", positions="num_patches", post_norm=True,
        defaults={**_SIGLIP_DEFAULTS, "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                  "num_patches": 256, "spatial_merge_size": 2}),
    # ERNIE 4.5 VL: the Qwen2-VL block (fused qkv, LayerNorms, fc1/fc2 of intermediate_size), a linear patch
    # embedding without bias, a final LayerNorm
    "ernie4_5_vl_moe_vision": TowerLayout(
        name="ERNIE 4.5 VL ViT", layers=("depth",), channels=("in_channels",), patch_bias=False, positions="none",
        post_norm=True, defaults={"depth": 32, "hidden_size": 1280, "intermediate_size": 5120, "in_channels": 3,
                                  "patch_size": 14, "spatial_merge_size": 2, "temporal_merge_size": 2}),
    "florence_vision": TowerLayout(
        name="DaViT", count=davit_tower,
        defaults={"in_channels": 3, "depths": [1, 1, 9, 1], "patch_size": [7, 3, 3, 3],
                  "patch_prenorm": [False, True, True, True], "embed_dim": [128, 256, 512, 1024], "mlp_ratio": 4.0,
                  "qkv_bias": True, "projection_dim": 1024, "max_temporal_embeddings": 100,
                  "max_position_embeddings": 50}),
    "kosmos_2_5_vision_model": TowerLayout(
        name="Pix2Struct ViT", count=pix2struct_tower,
        defaults={"hidden_size": 1536, "patch_embed_hidden_size": 768, "intermediate_size": 3968, "head_dim": 64,
                  "num_hidden_layers": 18, "num_attention_heads": 24, "max_num_patches": 4096}),
    # Janus: a SigLIP tower whose MLP is hidden x mlp_ratio, q/k/v biases by attention_bias
    "janus_vision_model": TowerLayout(
        name="Janus SigLIP ViT", inner=(), mlp_ratio="mlp_ratio", qkv_bias="attention_bias", post_norm=True,
        defaults={"hidden_size": 1024, "num_hidden_layers": 24, "num_channels": 3, "image_size": 384,
                  "patch_size": 16, "mlp_ratio": 4.0, "attention_bias": True, "projection_dim": 2048, "depth": 2}),
    "lfm3_vl_vision": TowerLayout(
        name="LFM3-VL conv/attention ViT", count=lfm3_vl_tower,
        defaults={"hidden_size": 1024, "intermediate_size": 2560, "in_channels": 3, "patch_size": 16,
                  "spatial_merge_size": 2, "temporal_patch_size": 2, "num_hidden_layers": 14, "num_attention_heads": 16,
                  "num_key_value_heads": 8, "conv_kernel_size": 3}),
}
TOWERS["qianfan_ocr_vision"] = TOWERS["internvl_vision"]
TOWERS.update({vtype: TowerLayout(**layout) for vtype, layout in MORE_TOWERS.items()})

#: outer ``model_type`` -> the vision ``model_type`` its transformers config class builds (whatever the
#: Hub's ``vision_config`` calls itself); types whose vision_config is an AutoConfig are not listed.
VISION_TYPE_OF = {
    "qwen2_vl": "qwen2_vl_vision", "qwen2_5_vl": "qwen2_5_vl_vision", "exaone4_5": "exaone4_5_vision",
    "internvl": "internvl_vision", "qianfan_ocr": "qianfan_ocr_vision", "minicpmv4_6": "minicpmv4_6_vision",
    "minicpmv4_7": "minicpmv4_7_vision", "minicpm_ocr": "minicpm_ocr_vision", "gemma3": "siglip_vision_model",
    "video_llama_3": "video_llama_3_vision", "paddleocr_vl": "paddleocr_vl_vision", "glm_ocr": "glm_ocr_vision",
    "granite_docling": "granite_docling_vision", "lfm3_vl": "lfm3_vl_vision",
    "nemotron_h_omni": "radio", "molmo2": "molmo2_vision",
    "minimax_m3_vl": "minimax_m3_vl_vision", "cosmos3_edge": "cosmos3_edge_vision",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe_vision", "florence2": "florence_vision",
    "kosmos-2.5": "kosmos_2_5_vision_model", "janus": "janus_vision_model",
    **MORE_VISION_TYPE_OF,
}


def _pair(v: ConfigReader, key: str) -> tuple[int, int]:
    """``image_size`` / ``patch_size``: an integer side or a ``[height, width]`` pair."""
    value = v.first_of(key, (key,), kind="any")
    if isinstance(value, list) and len(value) == 2:
        return v.check(key, value[0], "int"), v.check(key, value[1], "int")
    side = v.check(key, value, "int")
    return side, side


def _switch(v: ConfigReader, layout: TowerLayout, value: bool | str) -> bool:
    return v.flag(value, bool(layout.defaults.get(value))) if isinstance(value, str) else value


def _norm(layout: TowerLayout, width: int) -> int:
    return width if layout.norm == "rms" else 2 * width


def tower_weights(v: ConfigReader, layout: TowerLayout) -> tuple[WeightPart, int]:
    """The tower of ``layout`` read from ``v``, and its width."""
    if layout.count is not None:
        return layout.count(v)
    hidden = v.first_of("hidden_size", layout.hidden)
    if layout.mlp_ratio:
        inner = int(hidden * v.first_of("mlp_ratio", (layout.mlp_ratio,), kind="ratio"))
    else:
        inner = v.first_of("intermediate_size", layout.inner)
    layers = v.first_of("num_hidden_layers", layout.layers)
    channels = v.first_of("num_channels", layout.channels)
    patch = _pair(v, "patch_size")
    frames = v.first_of("temporal_patch_size", ("temporal_patch_size",)) if layout.temporal else 1
    kv = hidden
    if layout.kv_heads:
        heads = v.first_of("num_attention_heads", ("num_heads", "num_attention_heads"))
        kv = v.first_of("num_key_value_heads", ("num_key_value_heads",)) * (hidden // heads)
    ups = 2 if layout.gated_mlp else 1
    matrices = [Matrix(in_features=channels * frames * patch[0] * patch[1], out_features=hidden),  # patch embedding
                Matrix(in_features=hidden, out_features=hidden, count=2 * layers),  # q, o
                Matrix(in_features=hidden, out_features=kv, count=2 * layers),  # k, v
                Matrix(in_features=hidden, out_features=inner, count=ups * layers),
                Matrix(in_features=inner, out_features=hidden, count=layers)]
    per_layer = 2 * _norm(layout, hidden) + (hidden + 2 * kv if _switch(v, layout, layout.qkv_bias) else 0)
    per_layer += hidden if _switch(v, layout, layout.o_bias) else 0
    per_layer += ups * inner + hidden if _switch(v, layout, layout.mlp_bias) else 0
    per_layer += 2 * hidden if layout.layer_scale else 0
    if layout.qk_norm:
        heads = v.first_of("num_attention_heads", ("num_heads", "num_attention_heads"))
        per_layer += 2 * (hidden // heads)
    other = per_layer * layers + (hidden if layout.patch_bias else 0) + (hidden if layout.cls_token else 0)
    if layout.positions == "grid":
        image = _pair(v, "image_size")
        other += ((image[0] // patch[0]) * (image[1] // patch[1]) + (1 if layout.cls_token else 0)) * hidden
    elif layout.positions == "num_patches":
        other += v.first_of("num_patches", ("num_patches",)) * hidden
    other += _norm(layout, hidden) * (int(layout.pre_norm) + int(layout.post_norm))
    if layout.head and v.flag(layout.head, bool(layout.defaults.get(layout.head))):
        # probe, nn.MultiheadAttention (in_proj + out_proj, biased), LayerNorm, fc1/fc2
        matrices += [Matrix(in_features=hidden, out_features=hidden, count=4),
                     Matrix(in_features=hidden, out_features=inner), Matrix(in_features=inner, out_features=hidden)]
        other += hidden + 4 * hidden + 2 * hidden + inner + hidden
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), hidden


# ---- projectors into the language model (and mergers inside the tower) -------------------------
def _linear(n_in: int, n_out: int, bias: bool = True) -> tuple[Matrix, int]:
    return Matrix(in_features=n_in, out_features=n_out), (n_out if bias else 0)


def _projector(*linears: tuple[Matrix, int], other: int = 0) -> WeightPart:
    return WeightPart(name="projector", vision=True, matrices=tuple(m for m, _ in linears),
                      other_parameters=other + sum(b for _, b in linears))


def qwen_merger(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int, layout: TowerLayout) -> WeightPart:
    """Qwen2-VL's PatchMerger: a norm over each patch, then Linear(h m², h m²), GELU, Linear(h m², out)."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    # Qwen2-VL projects to vision_config.hidden_size (its width is embed_dim); later towers to out_hidden_size
    out_key = "hidden_size" if layout.mlp_ratio else "out_hidden_size"
    out = v.first_of(out_key, (out_key,))
    merged = hidden * merge * merge
    return _projector(_linear(merged, merged), _linear(merged, out), other=_norm(layout, hidden))


def norm_mlp_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                       layout: TowerLayout) -> WeightPart:
    """InternVL: pixel shuffle by ``downsample_ratio``, LayerNorm, Linear -> text hidden, GELU, Linear."""
    o = ConfigReader(outer, source_name=v.source_name, defaults={"downsample_ratio": 0.5}, defaults_name="internvl")
    ratio = o.first_of("downsample_ratio", ("downsample_ratio",), kind="ratio")
    width = int(hidden * round(1 / ratio) ** 2)
    return _projector(_linear(width, text_hidden), _linear(text_hidden, text_hidden), other=2 * width)


def lfm2_vl_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """LFM2-VL: pixel unshuffle by ``downsample_factor``, an optional LayerNorm, two Linears."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="lfm2_vl", defaults={
        "downsample_factor": 2, "projector_hidden_size": 2560, "projector_bias": True,
        "projector_use_layernorm": True})
    factor = o.first_of("downsample_factor", ("downsample_factor",))
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    bias = o.flag("projector_bias", True)
    width = hidden * factor * factor
    norm = 2 * width if o.flag("projector_use_layernorm", True) else 0
    return _projector(_linear(width, inner, bias), _linear(inner, text_hidden, bias), other=norm)


def lfm3_vl_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """LFM3-VL: LayerNorm(vision hidden), then over m x m merged patches Linear(h m², projector_hidden_size),
    GELU, Linear(projector_hidden_size, text hidden), biased by ``projector_bias``."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="lfm3_vl",
                     defaults={"projector_hidden_size": 4096, "projector_bias": True})
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    bias = o.flag("projector_bias", True)
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    return _projector(_linear(hidden * merge * merge, inner, bias), _linear(inner, text_hidden, bias), other=2 * hidden)


def aria_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                   layout: TowerLayout) -> WeightPart:
    """Aria: learned queries (the largest ``projector_patch_to_query_dict`` value) cross-attending to the
    patches (q/k/v, an nn.MultiheadAttention, a biased Linear, two LayerNorms), a LayerNorm, and an MLP
    Linear(vision hidden, text hidden), Linear(text hidden, text hidden) without biases."""
    queries = outer.get("max_value_projector_patch_to_query_dict")
    if queries is None:
        table = outer.get("projector_patch_to_query_dict") or {1225: 128, 4900: 256}  # AriaConfig's default
        if not isinstance(table, Mapping) or not table:
            raise ConfigError(f"{v.source_name}: projector_patch_to_query_dict must be an object of query counts",
                              "fix the config")
        queries = max(table.values())
    queries = v.check("max_value_projector_patch_to_query_dict", queries, "int")
    attention = [_linear(hidden, hidden, False) for _ in range(3)] + [_linear(hidden, 3 * hidden),
                                                                       _linear(hidden, hidden), _linear(hidden, hidden)]
    return _projector(*attention, _linear(hidden, text_hidden, False), _linear(text_hidden, text_hidden, False),
                      other=queries * hidden + 3 * 2 * hidden)


def nemotron_omni_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                            layout: TowerLayout) -> WeightPart:
    """Nemotron-H Omni: pixel shuffle by ``downsample_ratio``, an RMSNorm, Linear(.., projector_hidden_size),
    Linear(.., text hidden), no biases; a final vision LayerNorm when the language model has MTP layers."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="nemotron_h_omni",
                     defaults={"downsample_ratio": 0.5, "projector_hidden_size": 4096, "vision_hidden_size": 1280})
    ratio = o.first_of("downsample_ratio", ("downsample_ratio",), kind="ratio")
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    width = o.first_of("vision_hidden_size", ("vision_hidden_size",))
    shuffled = width * int(1 / ratio) ** 2
    text = outer.get("text_config") or {}
    mtp = text.get("num_nextn_predict_layers") if isinstance(text, Mapping) else None
    final_norm = 2 * width if isinstance(mtp, int) and mtp > 0 else 0
    if isinstance(outer.get("audio_config"), Mapping):
        v.note("the audio tower of nemotron_h_omni is not counted")
    return _projector(_linear(shuffled, inner, False), _linear(inner, text_hidden, False),
                      other=shuffled + final_norm)


#: Molmo2AdapterConfig's defaults (transformers 5.24).
_MOLMO2_ADAPTER_DEFAULTS = {"vision_feature_layer": [24, 18], "hidden_size": 1152, "num_attention_heads": 16,
                            "num_key_value_heads": 16, "head_dim": 72, "attention_bias": True,
                            "intermediate_size": 18944, "text_hidden_size": 3584, "mlp_bias": False}


def molmo2_adapter(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                   layout: TowerLayout) -> WeightPart:
    """Molmo2's adapter (``adapter_config``): attention pooling over the features of ``vision_feature_layer``
    layers concatenated, then a gated MLP to ``text_hidden_size`` (its down projection unbiased)."""
    adapter = outer.get("adapter_config") or {}
    if not isinstance(adapter, Mapping):
        raise ConfigError(f"{v.source_name}: adapter_config must be an object", "fix the config")
    a = ConfigReader(adapter, source_name=v.source_name, prefix="adapter_config.", defaults=_MOLMO2_ADAPTER_DEFAULTS,
                     defaults_name="molmo2_adapter")
    width = a.first_of("hidden_size", ("hidden_size",))
    features = len(a.first_of("vision_feature_layer", ("vision_feature_layer", "vit_layers"), kind="list"))
    attention, bias = gqa_matrices(a, hidden * features, width, a.flag("attention_bias", True))
    inner = a.first_of("intermediate_size", ("intermediate_size",))
    out = a.first_of("text_hidden_size", ("text_hidden_size",))
    mlp_bias = 2 * inner if a.flag("mlp_bias", False) else 0
    for note in a.notes:
        v.note(note)
    return _projector(*((m, 0) for m in attention), _linear(width, inner, False), _linear(width, inner, False),
                      _linear(inner, out, False), other=bias + mlp_bias)


def minimax_m3_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                         layout: TowerLayout) -> WeightPart:
    """MiniMax-M3-VL: Linear(vision hidden, projector_hidden_size), Linear(.., text hidden), and the same pair
    from ``merged_hidden_size`` for merged patches, all biased."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="minimax_m3_vl",
                     defaults={"projector_hidden_size": 6144, "merged_hidden_size": 24576})
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    merged = o.first_of("merged_hidden_size", ("merged_hidden_size",))
    return _projector(_linear(hidden, inner), _linear(inner, text_hidden), _linear(merged, inner),
                      _linear(inner, text_hidden))


def cosmos3_edge_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                           layout: TowerLayout) -> WeightPart:
    """Cosmos3-Edge: LayerNorm(vision hidden), then over m x m merged patches Linear(h m², projector_hidden_size),
    Linear(projector_hidden_size, text hidden), biased."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="cosmos3_edge",
                     defaults={"projector_hidden_size": 11520})
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    return _projector(_linear(hidden * merge * merge, inner), _linear(inner, text_hidden), other=2 * hidden)


def ernie_resampler(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                    layout: TowerLayout) -> WeightPart:
    """ERNIE 4.5 VL's resampler: spatial (Linear(h m², h m²) twice and a LayerNorm) and temporal (the first
    Linear over ``temporal_merge_size`` frames) blocks, Linear(h m², text hidden), all biased, and an RMSNorm."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    frames = v.first_of("temporal_merge_size", ("temporal_merge_size",))
    wide = hidden * merge * merge
    return _projector(_linear(wide, wide), _linear(wide, wide), _linear(wide * frames, wide), _linear(wide, wide),
                      _linear(wide, text_hidden), other=2 * 2 * wide + text_hidden)


def florence2_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                        layout: TowerLayout) -> WeightPart:
    """Florence-2: learned row/column positions (``max_position_embeddings`` each, half the width), the fixed
    cosine temporal table (a saved buffer of ``max_temporal_embeddings`` rows), Linear(width,
    projection_dim) without bias and a LayerNorm."""
    out = v.first_of("projection_dim", ("projection_dim",))
    positions = v.first_of("max_position_embeddings", ("max_position_embeddings",))
    temporal = v.first_of("max_temporal_embeddings", ("max_temporal_embeddings",))
    return _projector(_linear(hidden, out, False), other=2 * out + positions * hidden + temporal * hidden)


def kosmos25_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                       layout: TowerLayout) -> WeightPart:
    """Kosmos-2.5: Linear(vision hidden, text embed_dim), ``latent_query_num`` learned queries and a biased
    q/k/v/o attention at the text width."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="kosmos-2.5", defaults={"latent_query_num": 2048})
    queries = o.first_of("latent_query_num", ("latent_query_num",))
    return _projector(_linear(hidden, text_hidden), *(_linear(text_hidden, text_hidden) for _ in range(4)),
                      other=queries * text_hidden)


def janus_aligner(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                  layout: TowerLayout) -> WeightPart:
    """Janus: the understanding aligner (Linear(vision hidden, projection_dim), then ``depth`` - 1 Linears, all
    biased) and, from ``vq_config``, the image-generation half (VQ-GAN, code embeddings, aligner, head)."""
    if v.flag("use_qk_norm", False):
        raise ConfigError(f"{v.source_name}: vision_config.use_qk_norm = true: kvplan counts Janus without q/k norms",
                          "pass --weights-bytes SIZE (the checkpoint's size)")
    proj = v.first_of("projection_dim", ("projection_dim",))
    depth = v.first_of("depth", ("depth",))
    vq_config = outer.get("vq_config") or {}
    if not isinstance(vq_config, Mapping):
        raise ConfigError(f"{v.source_name}: vq_config must be an object", "fix the config")
    vq = ConfigReader(vq_config, source_name=v.source_name, prefix="vq_config.", defaults=JANUS_VQ_DEFAULTS,
                      defaults_name="janus_vqgan")
    generation = janus_generation_weights(vq)
    for note in vq.notes:
        v.note(note)
    return _projector(_linear(hidden, proj), *(_linear(proj, proj) for _ in range(depth - 1)), other=generation)


def minicpmv_merger(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                    layout: TowerLayout) -> WeightPart:
    """MiniCPM-V 4.6: the ViT's window merger (a SigLIP self-attention with its LayerNorm, then LayerNorm,
    Linear(h k, i k), Linear(i k, h) over a ``window_kernel_size`` window of k patches, i the ViT's
    intermediate_size) and ``merger_times`` downsample MLPs (LayerNorm, Linear(4 h, 4 h), Linear(4 h, h); the
    last one to the text hidden size instead: transformers fixes their input at two 2x2 merges, 4 h)."""
    window = v.first_of("window_kernel_size", ("window_kernel_size",), kind="list")
    inner = v.first_of("intermediate_size", layout.inner)
    o = ConfigReader(outer, source_name=v.source_name, defaults_name=str(outer.get("model_type")),
                     defaults={"merger_times": 1})
    times = o.first_of("merger_times", ("merger_times",))
    k = window[0] * window[1]
    wide = 4 * hidden
    vit_merger = [_linear(hidden, hidden) for _ in range(4)] + [_linear(hidden * k, inner * k),
                                                                  _linear(inner * k, hidden)]
    mergers = [_linear(wide, wide), _linear(wide, hidden)] * (times - 1) + [_linear(wide, wide),
                                                                           _linear(wide, text_hidden)]
    return _projector(*vit_merger, *mergers, other=2 * hidden + 2 * hidden * k + 2 * wide * times)


def gemma3_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                     layout: TowerLayout) -> WeightPart:
    """Gemma 3: an RMSNorm over the pooled vision features and one vision hidden x text hidden matrix."""
    return _projector(_linear(hidden, text_hidden, bias=False), other=hidden)


def hyperclova_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                         layout: TowerLayout) -> WeightPart:
    """HyperCLOVA X vision v2: the Qwen2.5-VL tower's merger, then one biased Linear(out_hidden_size, text hidden)."""
    merger = qwen_merger(v, outer, hidden, text_hidden, layout)
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    return _projector(*((m, 0) for m in merger.matrices), _linear(out, text_hidden),
                      other=merger.other_parameters)


def two_linear_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                         layout: TowerLayout) -> WeightPart:
    """VideoLLaMA 3: Linear(vision hidden, text hidden), GELU, Linear(text hidden, text hidden), biased."""
    return _projector(_linear(hidden, text_hidden), _linear(text_hidden, text_hidden))


def paddleocr_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                        layout: TowerLayout) -> WeightPart:
    """PaddleOCR-VL: LayerNorm(vision hidden), Linear(h m², h m²), GELU, Linear(h m², text hidden), biased."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    merged = hidden * merge * merge
    return _projector(_linear(merged, merged), _linear(merged, text_hidden), other=2 * hidden)


def glm_ocr_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """GLM-OCR: a biased merge convolution (hidden -> out_hidden_size over m x m patches), then the merger:
    Linear(out, out), LayerNorm, and a gated MLP of width out_hidden_size x in_channels, no biases."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    context = out * v.first_of("num_channels", ("in_channels",))
    return _projector(_linear(hidden * merge * merge, out), _linear(out, out, False), _linear(out, context, False),
                      _linear(out, context, False), _linear(context, out, False), other=2 * out)


def granite_docling_connector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                              layout: TowerLayout) -> WeightPart:
    """Granite-Docling's connector: LayerNorm in; a coarse path (pixel shuffle by ``scale_factor``) and, with
    ``use_fine_route``, a fine one (``scale_factor // 2``), each a projection to ``out_hidden_size`` and one
    merger (LayerNorm, two biased Linears) per ``deepstack_visual_indexes`` entry; LayerNorm, Linear, LayerNorm."""
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    factor = v.first_of("scale_factor", ("scale_factor",))
    deep = len(v.first_of("deepstack_visual_indexes", ("deepstack_visual_indexes",), kind="list"))
    factors = [factor, factor // 2] if v.flag("use_fine_route", True) else [factor]
    linears: list[tuple[Matrix, int]] = [_linear(out, out, False)]  # mlp_fc2
    other = 2 * hidden + 2 * 2 * out  # ln_in, ln_mid, ln_out
    for f in factors:
        merged = hidden * f * f
        linears += [_linear(merged, out, False)] + [_linear(merged, out), _linear(out, out)] * deep
        other += 2 * merged * deep
    return _projector(*linears, other=other)


#: outer ``model_type`` -> its projector (or the merger its tower ends in).
PROJECTORS: dict[str, Callable[[ConfigReader, Mapping[str, Any], int, int, TowerLayout], WeightPart]] = {
    "qwen2_vl": qwen_merger, "qwen2_5_vl": qwen_merger, "exaone4_5": qwen_merger,
    "internvl": norm_mlp_projector, "qianfan_ocr": norm_mlp_projector, "lfm2_vl": lfm2_vl_projector,
    "minicpmv4_6": minicpmv_merger, "minicpmv4_7": minicpmv_merger, "minicpm_ocr": minicpmv_merger,
    "gemma3": gemma3_projector, "hyperclovax_vision_v2": hyperclova_projector,
    "video_llama_3": two_linear_projector, "paddleocr_vl": paddleocr_projector, "glm_ocr": glm_ocr_projector,
    "granite_docling": granite_docling_connector, "lfm3_vl": lfm3_vl_projector,
    "aria": aria_projector, "nemotron_h_omni": nemotron_omni_projector,
    "molmo2": molmo2_adapter, "minimax_m3_vl": minimax_m3_projector,
    "cosmos3_edge": cosmos3_edge_projector, "ernie4_5_vl_moe": ernie_resampler,
    "florence2": florence2_projector, "kosmos-2.5": kosmos25_projector,
    "janus": janus_aligner,
    **MORE_PROJECTORS,
}


def vision_weights(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
    """The vision tower of ``outer["vision_config"]`` and its projector into the language model."""
    outer_type = str(outer.get("model_type", ""))
    vision = outer["vision_config"]
    vtype = VISION_TYPE_OF.get(outer_type) or str(vision.get("model_type") or DEFAULT_VISION_TYPE.get(outer_type, ""))
    layout = TOWERS.get(vtype)
    if layout is None or outer_type not in PROJECTORS:
        return plain_vit_weights(outer, text, text_hidden=text_hidden)
    v = ConfigReader(vision, source_name=text.source_name, prefix="vision_config.", defaults=layout.defaults,
                     defaults_name=vtype)
    tower, hidden = tower_weights(v, layout)
    copies = TOWER_COPIES.get(outer_type, 1)
    if copies > 1:
        tower = WeightPart(name=tower.name, vision=True, other_parameters=copies * tower.other_parameters,
                           matrices=tuple(Matrix(in_features=m.in_features, out_features=m.out_features,
                                                 count=copies * m.count) for m in tower.matrices))
    projector = PROJECTORS[outer_type](v, outer, hidden, text_hidden, layout)
    extra = [EXTRA_TOWERS[outer_type](v, outer)] if outer_type in EXTRA_TOWERS else []
    for note in v.notes:
        text.note(note)
    layers = next((p.value for p in v.provenance if p.field == "num_hidden_layers"), None)
    size = f", {layers} layers" if layers else ""
    text.note(f"vision tower ({layout.name}{size}) reported separately as weights.vision_*")
    return [tower, *extra, projector]


def plain_vit_weights(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
    """A ViT-style vision tower (CLIP, SigLIP and similar) and the projector into the language model."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.")
    hidden = v.first_of("hidden_size", ("hidden_size", "embed_dim", "width"))
    inner = v.first_of("intermediate_size", ("intermediate_size", "mlp_dim"))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers", "depth", "num_layers"))
    patch = v.first_of("patch_size", ("patch_size",))
    image = v.first_of("image_size", ("image_size",))
    channels = v.optional("num_channels", ("num_channels", "in_channels")) or 3
    vtype = str(outer["vision_config"].get("model_type", ""))
    clip = "clip" in vtype
    patches = (image // patch) ** 2 + (1 if clip else 0)
    # per layer: q/k/v/o biases, two LayerNorms (weight + bias), the two MLP biases
    other = (4 * hidden + 2 * 2 * hidden + inner + hidden) * layers
    # position embeddings, CLIP's class embedding or SigLIP's patch bias, and the tower's LayerNorms
    other += patches * hidden + hidden + 2 * 2 * hidden
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                  Matrix(in_features=hidden, out_features=inner, count=layers),
                  Matrix(in_features=inner, out_features=hidden, count=layers),
                  Matrix(in_features=channels * patch * patch, out_features=hidden)),
        other_parameters=other,
    )
    outer_type = str(outer.get("model_type", ""))
    if outer_type.startswith("llava") or outer_type == "vipllava":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),
                                         Matrix(in_features=text_hidden, out_features=text_hidden)),
                               other_parameters=2 * text_hidden)
    elif outer_type == "gemma3":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),), other_parameters=hidden)
    else:
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),))
        text.note(f"vision projector of {outer_type} approximated as one {hidden} x {text_hidden} matrix")
    if not (clip or "siglip" in vtype):
        text.note(f"vision tower {vtype or '(unnamed)'} counted as a plain ViT (approximate)")
    text.note(f"vision tower ({vtype or 'vit'}, {layers} layers) reported separately as weights.vision_*")
    return [tower, projector]
