"""More vision towers and projectors, as data for :mod:`kvplan.models.vision` (which builds the
:class:`~kvplan.models.vision.TowerLayout` of each entry of :data:`MORE_TOWERS` and adds :data:`MORE_PROJECTORS`
to its table): the LLaVA family (CLIP or SigLIP towers, two-Linear projectors), and the towers, resamplers and
Q-Formers of the other image-text-to-text models. Defaults: transformers 5.24's configuration_*.py of each type."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart

if TYPE_CHECKING:
    from kvplan.models.vision import TowerLayout

Projector = Callable[[ConfigReader, Mapping[str, Any], int, int, "TowerLayout"], WeightPart]

#: CLIPVisionConfig's defaults.
CLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                 "image_size": 224, "patch_size": 32}

def sam_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """GOT-OCR 2's SAM-style ViT: a biased patch convolution, an (image / patch)² position grid (``use_abs_pos``),
    blocks of LayerNorms, a fused qkv (``qkv_bias``) and a biased projection, relative position tables
    (``use_rel_pos``: 2 s - 1 rows of head_dim for height and width, s the ``window_size``, or image / patch for
    the ``global_attn_indexes`` layers), a biased lin1/lin2 MLP of ``mlp_dim``; then the neck (a 1x1 and a 3x3
    convolution to ``output_channels``, no bias, each followed by a LayerNorm). Width: ``output_channels``."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    # SamVisionConfig leaves mlp_dim None: hidden x mlp_ratio
    inner = v.first_of("mlp_dim", ("mlp_dim",), required=False) or int(
        hidden * v.first_of("mlp_ratio", ("mlp_ratio",), kind="ratio"))
    heads = v.first_of("num_attention_heads", ("num_attention_heads",))
    channels = v.first_of("num_channels", ("num_channels",))
    patch = v.first_of("patch_size", ("patch_size",))
    grid = v.first_of("image_size", ("image_size",)) // patch
    window = v.first_of("window_size", ("window_size",))
    global_layers = {v.check("global_attn_indexes", i, "count") for i in v.first_of(
        "global_attn_indexes", ("global_attn_indexes",), kind="list")}
    out = v.first_of("output_channels", ("output_channels",))
    n_global = sum(1 for i in range(layers) if i in global_layers)
    other = hidden + (grid * grid * hidden if v.flag("use_abs_pos", True) else 0)
    other += layers * (2 * 2 * hidden + (3 * hidden if v.flag("qkv_bias", True) else 0) + hidden + inner + hidden)
    if v.flag("use_rel_pos", True):
        rows = n_global * (2 * grid - 1) + (layers - n_global) * (2 * window - 1)
        other += 2 * rows * (hidden // heads)
    other += 2 * 2 * out  # the neck's LayerNorms
    matrices = (Matrix(in_features=channels * patch * patch, out_features=hidden),
                Matrix(in_features=hidden, out_features=3 * hidden, count=layers),
                Matrix(in_features=hidden, out_features=hidden, count=layers),
                Matrix(in_features=hidden, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=hidden, count=layers),
                Matrix(in_features=hidden, out_features=out), Matrix(in_features=9 * out, out_features=out))
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=other), out


def hy_v4_vl_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """HY-V4-VL's ViT: a biased patch convolution, a learned table of (max_image_size / patch)² + 1 positions
    (a class row and the patch grid, interpolated to the image), blocks of LayerNorms, biased q/k/v/o and a biased
    fc1/fc2 MLP; no final norm (the merger's RMSNorm follows)."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    patch = v.first_of("patch_size", ("patch_size",))
    channels = v.first_of("num_channels", ("num_channels",))
    side = v.first_of("max_image_size", ("max_image_size",)) // patch
    matrices = (Matrix(in_features=channels * patch * patch, out_features=hidden),
                Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                Matrix(in_features=hidden, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=hidden, count=layers))
    other = hidden + (side * side + 1) * hidden + layers * (2 * 2 * hidden + 4 * hidden + inner + hidden)
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=other), hidden


#: GotOcr2VisionConfig's defaults (PPChart2TableVisionConfig's are the same).
_SAM_DEFAULTS = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "num_channels": 3, "image_size": 1024, "patch_size": 16, "qkv_bias": True, "use_abs_pos": True,
                 "use_rel_pos": True, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "mlp_dim": 3072}

#: SamVisionConfig's defaults (DeepSeek-VL hybrid's high-resolution tower).
_SAM_VISION = {**{k: v for k, v in _SAM_DEFAULTS.items() if k != "mlp_dim"}, "mlp_ratio": 4.0}

#: UnlimitedOcrVisionEncoderConfig's defaults.
_UNLIMITED_ENCODER = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "image_size": 224,
                      "patch_size": 14}


def _sub_reader(v: ConfigReader, key: str, defaults: Mapping[str, Any], name: str) -> ConfigReader:
    config = v.config.get(key) or {}
    return ConfigReader(config if isinstance(config, Mapping) else {}, source_name=v.source_name,
                        prefix=f"{v.prefix}{key}.", defaults_name=name, defaults=defaults)


def unlimited_ocr_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Unlimited-OCR's two encoders: the SAM tower of ``sam_config`` (:func:`sam_tower`) with two stride-2 3x3
    convolutions to ``downsample_channels`` (no bias), and the CLIP-style encoder of ``encoder_config`` over the
    SAM features (a class embedding, (image / patch)² + 1 positions, a LayerNorm before its blocks, no patch
    convolution and no final norm). Width: the last downsample channels plus the encoder's hidden size."""
    sam = _sub_reader(v, "sam_config", {**_SAM_DEFAULTS, "downsample_channels": [512, 1024]},
                      "unlimited_ocr_sam_vision_model")
    enc = _sub_reader(v, "encoder_config", _UNLIMITED_ENCODER, "unlimited_ocr_vision_encoder")
    sam_part, out = sam_tower(sam)
    down = [sam.check("downsample_channels", c, "int") for c in sam.first_of(
        "downsample_channels", ("downsample_channels",), kind="list")]
    h = enc.first_of("hidden_size", ("hidden_size",))
    inner = enc.first_of("intermediate_size", ("intermediate_size",))
    layers = enc.first_of("num_hidden_layers", ("num_hidden_layers",))
    patches = (enc.first_of("image_size", ("image_size",)) // enc.first_of("patch_size", ("patch_size",))) ** 2
    matrices = [*sam_part.matrices]
    width = out
    for c in down:
        matrices.append(Matrix(in_features=9 * width, out_features=c))
        width = c
    matrices += [Matrix(in_features=h, out_features=h, count=4 * layers),
                 Matrix(in_features=h, out_features=inner, count=layers),
                 Matrix(in_features=inner, out_features=h, count=layers)]
    other = sam_part.other_parameters + h + (patches + 1) * h + 2 * h + layers * (4 * h + 2 * 2 * h + inner + h)
    for note in sam.notes + enc.notes:
        v.note(note)
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), width + h


#: Blip2VisionConfig's defaults (InstructBLIP's are the same; the patch convolution reads 3 channels).
_BLIP2_VISION = {"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39, "num_channels": 3,
                 "image_size": 224, "patch_size": 14}

#: vision ``model_type`` -> the keyword arguments of its ``TowerLayout``.
MORE_TOWERS: dict[str, dict[str, Any]] = {
    # CLIPVisionModel: a class token, a patch convolution without bias, one position per patch and the class
    # token, LayerNorms before (pre_layrnorm) and after the blocks
    "clip_vision_model": {"name": "CLIP ViT", "patch_bias": False, "cls_token": True, "pre_norm": True,
                          "post_norm": True, "defaults": CLIP_DEFAULTS},
    # SmolVLM's SigLIP tower (Idefics3's, the config class of its own)
    "smolvlm_vision": {"name": "SmolVLM SigLIP ViT", "post_norm": True,
                       "defaults": {"hidden_size": 1152, "intermediate_size": 3072, "num_hidden_layers": 12,
                                    "num_channels": 3, "image_size": 224, "patch_size": 32}},
    # PixtralVisionModel (LightOnOCR): a patch convolution without bias, an RMSNorm before the blocks, RMSNorms,
    # bias-free attention and gated MLP, 2-D rotary positions only
    "pixtral": {"name": "Pixtral ViT", "norm": "rms", "qkv_bias": False, "o_bias": False, "gated_mlp": True,
                "mlp_bias": False, "patch_bias": False, "positions": "none", "pre_norm": True,
                "defaults": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                             "num_channels": 3, "image_size": 1024, "patch_size": 16}},
    # Blip2VisionModel (and InstructBLIP's): a class token, a biased patch convolution, (patches + 1) positions,
    # a fused qkv whose bias is q_bias, zeros and v_bias (3 h saved), a post LayerNorm
    **{t: {"name": "BLIP-2 ViT", "qkv_bias": "qkv_bias", "cls_token": True, "post_norm": True,
           "defaults": {**_BLIP2_VISION, "qkv_bias": True}}
       for t in ("blip_2_vision_model", "instructblip_vision_model", "instructblipvideo_vision_model")},
    # Idefics2VisionTransformer: SigLIP's tower without the pooling head
    "idefics2_vision": {"name": "Idefics2 SigLIP ViT", "post_norm": True,
                        "defaults": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                     "num_channels": 3, "image_size": 224, "patch_size": 32}},
    "got_ocr2_vision": {"name": "GOT-OCR 2 SAM ViT", "count": sam_tower, "defaults": _SAM_DEFAULTS},
    "pp_chart2table_vision": {"name": "PP-Chart2Table SAM ViT", "count": sam_tower, "defaults": _SAM_DEFAULTS},
    # Ovis2VisionModel's transformer: a biased patch convolution, a position grid, an RMSNorm on the embeddings,
    # RMSNorm blocks with q/k/v/o biases by qkv_bias and a gated MLP (biases by mlp_bias), a final RMSNorm
    "ovis2_vision": {"name": "Ovis2 ViT", "norm": "rms", "qkv_bias": "qkv_bias", "o_bias": "qkv_bias",
                     "gated_mlp": True, "mlp_bias": "mlp_bias", "pre_norm": True, "post_norm": True,
                     "defaults": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
                                  "num_channels": 3, "image_size": 224, "patch_size": 14, "qkv_bias": False,
                                  "mlp_bias": False, "vocab_size": 16384, "hidden_stride": 1,
                                  "num_visual_indicator_tokens": 5}},
    "hy_v4_vl_vision": {"name": "HY-V4-VL ViT", "count": hy_v4_vl_tower,
                        "defaults": {"hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 40,
                                     "num_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
                                     "out_hidden_size": 6144, "max_image_size": 2048}},
    "unlimited_ocr_vision": {"name": "Unlimited-OCR SAM + CLIP encoders", "count": unlimited_ocr_tower,
                             "defaults": {}},
}

#: outer ``model_type`` -> the vision ``model_type`` its config class always builds.
MORE_VISION_TYPE_OF = {"idefics3": "idefics3_vision", "smolvlm": "smolvlm_vision", "blip-2": "blip_2_vision_model",
                       "instructblip": "instructblip_vision_model",
                       "instructblipvideo": "instructblipvideo_vision_model", "idefics2": "idefics2_vision",
                       "got_ocr2": "got_ocr2_vision", "pp_chart2table": "pp_chart2table_vision",
                       "ovis2": "ovis2_vision", "hy_v4_vl": "hy_v4_vl_vision",
                       "unlimited_ocr": "unlimited_ocr_vision"}

#: outer ``model_type`` -> the vision ``model_type`` its config class builds when ``vision_config`` names none.
DEFAULT_VISION_TYPE = {
    "llava": "clip_vision_model", "llava_next": "clip_vision_model", "llava_next_video": "clip_vision_model",
    "video_llava": "clip_vision_model", "vipllava": "clip_vision_model", "llava_onevision": "siglip_vision_model",
    "lighton_ocr": "pixtral", "cohere2_vision": "siglip_vision_model",
    "deepseek_vl": "siglip_vision_model", "deepseek_vl_hybrid": "siglip_vision_model",
}

#: outer ``model_type`` -> how many copies of the tower it builds (Video-LLaVA: an image and a video tower).
TOWER_COPIES = {"video_llava": 2}


def _linear(n_in: int, n_out: int, bias: bool = True) -> tuple[Matrix, int]:
    return Matrix(in_features=n_in, out_features=n_out), (n_out if bias else 0)


def _projector(*linears: tuple[Matrix, int], other: int = 0) -> WeightPart:
    return WeightPart(name="projector", vision=True, matrices=tuple(m for m, _ in linears),
                      other_parameters=other + sum(b for _, b in linears))


_LLAVA_DEFAULTS: dict[str, dict[str, Any]] = {
    "llava": {"vision_feature_layer": -2, "multimodal_projector_bias": True},
    "llava_next": {"vision_feature_layer": -2, "multimodal_projector_bias": True},
    "llava_next_video": {"vision_feature_layer": -2, "multimodal_projector_bias": True},
    "llava_onevision": {"vision_feature_layer": -1, "multimodal_projector_bias": True},
    "video_llava": {"vision_feature_layer": -2, "multimodal_projector_bias": True},
    "vipllava": {"vision_feature_layer": [-2, -5, -8, -11, 6]},
}

#: LLaVA types that hold ``image_newline`` (one text-width vector between rows of image tiles).
_NEWLINE = {"llava_next", "llava_next_video", "llava_onevision"}


def llava_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                    layout: TowerLayout) -> WeightPart:
    """LLaVA's projector: Linear(vision hidden x the ``vision_feature_layer`` count, text hidden), GELU,
    Linear(text hidden, text hidden), biased by ``multimodal_projector_bias``; VipLLaVA: always biased, with a
    LayerNorm over its input; LLaVA-NeXT and OneVision: the ``image_newline`` vector."""
    outer_type = str(outer.get("model_type"))
    o = ConfigReader(outer, source_name=v.source_name, defaults_name=outer_type, defaults=_LLAVA_DEFAULTS[outer_type])
    layers = o.first_of("vision_feature_layer", ("vision_feature_layer",), kind="any")
    width = hidden * (len(layers) if isinstance(layers, list) else 1)
    vip = outer_type == "vipllava"
    bias = True if vip else o.flag("multimodal_projector_bias", True)
    other = (2 * width if vip else 0) + (text_hidden if outer_type in _NEWLINE else 0)
    return _projector(_linear(width, text_hidden, bias), _linear(text_hidden, text_hidden, bias), other=other)


def pixel_shuffle_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                            layout: TowerLayout) -> WeightPart:
    """Idefics3 / SmolVLM's connector: pixel shuffle by ``scale_factor``, then Linear(h s², text hidden), no bias."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name=str(outer.get("model_type")),
                     defaults={"scale_factor": 2})
    scale = o.first_of("scale_factor", ("scale_factor",))
    return _projector(_linear(hidden * scale * scale, text_hidden, False))


def lighton_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """LightOnOCR: an RMSNorm, the learned merge of ``spatial_merge_size``² patches (Linear(h m², h)), then
    Linear(h, text hidden) and Linear(text hidden, text hidden), all without bias."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="lighton_ocr", defaults={"spatial_merge_size": 2})
    merge = o.first_of("spatial_merge_size", ("spatial_merge_size",))
    return _projector(_linear(hidden * merge * merge, hidden, False), _linear(hidden, text_hidden, False),
                      _linear(text_hidden, text_hidden, False), other=hidden)


#: Blip2QFormerConfig's defaults (InstructBLIP's are the same, without ``use_qformer_text_input``).
_QFORMER = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072,
            "max_position_embeddings": 512, "cross_attention_frequency": 2, "encoder_hidden_size": 1408,
            "use_qformer_text_input": False}


def qformer_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """BLIP-2 / InstructBLIP: ``num_query_tokens`` learned queries, the Q-Former of ``qformer_config`` (BERT
    layers: self-attention with its output LayerNorm, cross-attention over ``encoder_hidden_size`` features every
    ``cross_attention_frequency``-th layer, the query MLP and, InstructBLIP or ``use_qformer_text_input``, the
    text MLP, all biased; InstructBLIP's word and position embeddings) and Linear(Q-Former hidden, text hidden)."""
    outer_type = str(outer.get("model_type"))
    q_config = outer.get("qformer_config") or {}
    q = ConfigReader(q_config if isinstance(q_config, Mapping) else {}, source_name=v.source_name,
                     prefix="qformer_config.", defaults_name=f"{outer_type} qformer", defaults=_QFORMER)
    o = ConfigReader(outer, source_name=v.source_name, defaults_name=outer_type, defaults={"num_query_tokens": 32})
    h = q.first_of("hidden_size", ("hidden_size",))
    inner = q.first_of("intermediate_size", ("intermediate_size",))
    layers = q.first_of("num_hidden_layers", ("num_hidden_layers",))
    frequency = q.first_of("cross_attention_frequency", ("cross_attention_frequency",))
    encoder = q.first_of("encoder_hidden_size", ("encoder_hidden_size",))
    instruct = outer_type.startswith("instructblip")
    text_mlp = instruct or q.flag("use_qformer_text_input", False)
    cross = sum(1 for i in range(layers) if i % frequency == 0)
    mlps = 2 if text_mlp else 1
    linears = [_linear(h, h) for _ in range(4 * layers)]  # self-attention q/k/v and output dense
    linears += [_linear(h, h) for _ in range(2 * cross)] + [_linear(encoder, h) for _ in range(2 * cross)]
    linears += [_linear(h, inner) for _ in range(mlps * layers)] + [_linear(inner, h) for _ in range(mlps * layers)]
    # LayerNorms after self-attention, cross-attention and each MLP; the embedding LayerNorm; the queries
    other = 2 * h * (layers + cross + mlps * layers) + 2 * h + o.first_of("num_query_tokens", ("num_query_tokens",)) * h
    if instruct:
        other += (q.first_of("vocab_size", ("vocab_size",)) + q.first_of(
            "max_position_embeddings", ("max_position_embeddings",))) * h
    for note in q.notes:
        v.note(note)
    return _projector(*linears, _linear(h, text_hidden), other=other)


#: Idefics2PerceiverConfig's defaults (its hidden_size is set to the text model's).
_PERCEIVER = {"resampler_n_latents": 64, "resampler_depth": 3, "resampler_n_heads": 16, "resampler_head_dim": 96,
              "num_key_value_heads": 4}


def idefics2_connector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                       layout: TowerLayout) -> WeightPart:
    """Idefics2's connector: a gated MLP from the vision width through the text model's intermediate_size
    (default: MistralConfig's 14336) to the text width, then the perceiver resampler of ``perceiver_config`` at
    the text width: ``resampler_n_latents`` latents, ``resampler_depth`` layers of three RMSNorms, GQA
    (``resampler_n_heads`` x ``resampler_head_dim``, ``num_key_value_heads``) and a gated MLP of 4 x width, a
    final RMSNorm; no biases."""
    text_config = outer.get("text_config") or {}
    t = ConfigReader(text_config if isinstance(text_config, Mapping) else {}, source_name=v.source_name,
                     prefix="text_config.", defaults_name="mistral", defaults={"intermediate_size": 14336})
    p_config = outer.get("perceiver_config") or {}
    p = ConfigReader(p_config if isinstance(p_config, Mapping) else {}, source_name=v.source_name,
                     prefix="perceiver_config.", defaults_name="idefics2_perceiver", defaults=_PERCEIVER)
    inner = t.first_of("intermediate_size", ("intermediate_size",))
    latents = p.first_of("resampler_n_latents", ("resampler_n_latents",))
    depth = p.first_of("resampler_depth", ("resampler_depth",))
    head_dim = p.first_of("resampler_head_dim", ("resampler_head_dim",))
    q = p.first_of("resampler_n_heads", ("resampler_n_heads",)) * head_dim
    kv = p.first_of("num_key_value_heads", ("num_key_value_heads",)) * head_dim
    w = text_hidden
    linears = [_linear(hidden, inner, False), _linear(hidden, inner, False), _linear(inner, w, False)]
    for _ in range(depth):
        linears += [_linear(w, q, False), _linear(w, kv, False), _linear(w, kv, False), _linear(q, w, False),
                    _linear(w, 4 * w, False), _linear(w, 4 * w, False), _linear(4 * w, w, False)]
    for note in t.notes + p.notes:
        v.note(note)
    return _projector(*linears, other=latents * w + 3 * w * depth + w)


def got_ocr2_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                       layout: TowerLayout) -> WeightPart:
    """GOT-OCR 2: two stride-2 3x3 convolutions without bias (``output_channels`` -> 2 x -> text hidden), then a
    biased Linear(text hidden, text hidden); ``hidden`` is the tower's ``output_channels``."""
    return _projector(_linear(9 * hidden, 2 * hidden, False), _linear(9 * 2 * hidden, text_hidden, False),
                      _linear(text_hidden, text_hidden))


def cohere2_vision_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                             layout: TowerLayout) -> WeightPart:
    """Command A Vision: pixel unshuffle by ``downsample_factor``, Linear(h f², alignment_intermediate_size),
    SwiGLU (halving the width), Linear(alignment_intermediate_size / 2, text hidden), biased."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="cohere2_vision",
                     defaults={"downsample_factor": 2, "alignment_intermediate_size": 36864})
    factor = o.first_of("downsample_factor", ("downsample_factor",))
    inner = o.first_of("alignment_intermediate_size", ("alignment_intermediate_size",))
    for note in o.notes:
        v.note(note)
    return _projector(_linear(hidden * factor * factor, inner), _linear(inner // 2, text_hidden))


def deepseek_vl_aligner(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                        layout: TowerLayout) -> WeightPart:
    """DeepSeek-VL: Linear(vision hidden, text hidden), GELU, Linear(text hidden, text hidden), biased."""
    return _projector(_linear(hidden, text_hidden), _linear(text_hidden, text_hidden))


def deepseek_vl_hybrid_aligner(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                               layout: TowerLayout) -> WeightPart:
    """DeepSeek-VL hybrid: after the SAM tower of ``high_res_vision_config`` (:func:`high_res_tower`) another neck
    (1x1 and 3x3 convolutions to ``output_channels`` c, no bias, two LayerNorms), two stride-2 3x3 convolutions
    (c -> 2 c -> 4 c, no bias) and the mixing scalar; the aligner: Linear(vision hidden, text / 2),
    Linear(4 c, text / 2), GELU, Linear(text, text), biased."""
    s = _high_res_reader(v, outer)
    sam_hidden = s.first_of("hidden_size", ("hidden_size",))
    c = s.first_of("output_channels", ("output_channels",))
    half = text_hidden // 2
    return _projector(_linear(sam_hidden, c, False), _linear(9 * c, c, False), _linear(9 * c, 2 * c, False),
                      _linear(9 * 2 * c, 4 * c, False), _linear(hidden, half), _linear(4 * c, half),
                      _linear(text_hidden, text_hidden), other=2 * 2 * c + 1)


def _high_res_reader(v: ConfigReader, outer: Mapping[str, Any]) -> ConfigReader:
    config = outer.get("high_res_vision_config") or {}
    return ConfigReader(config if isinstance(config, Mapping) else {}, source_name=v.source_name,
                        prefix="high_res_vision_config.", defaults_name="sam_vision_model", defaults=_SAM_VISION)


def high_res_tower(v: ConfigReader, outer: Mapping[str, Any]) -> WeightPart:
    """DeepSeek-VL hybrid's second, high-resolution tower: SamVisionModel from ``high_res_vision_config``."""
    s = _high_res_reader(v, outer)
    tower, _ = sam_tower(s)
    for note in s.notes:
        v.note(note)
    return tower


#: outer ``model_type`` -> a second tower it builds beside ``vision_config``'s.
EXTRA_TOWERS: dict[str, Callable[[ConfigReader, Mapping[str, Any]], WeightPart]] = {
    "deepseek_vl_hybrid": high_res_tower}


def ovis2_visual_tokens(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                        layout: TowerLayout) -> WeightPart:
    """Ovis2: the tower's head (Linear(h s², visual vocab - indicator tokens) without bias over ``hidden_stride``²
    patches and a LayerNorm) and the visual embedding table (``vision_config.vocab_size`` rows of the outer
    config's ``hidden_size``)."""
    vocab = v.first_of("vocab_size", ("vocab_size",))
    stride = v.first_of("hidden_stride", ("hidden_stride",))
    words = vocab - v.first_of("num_visual_indicator_tokens", ("num_visual_indicator_tokens",), kind="count")
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="ovis2", defaults={"hidden_size": 1536})
    width = o.first_of("hidden_size", ("hidden_size",))
    for note in o.notes:
        v.note(note)
    return _projector(_linear(hidden * stride * stride, words, False), other=2 * words + vocab * width)


def hy_v4_vl_merger(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                    layout: TowerLayout) -> WeightPart:
    """HY-V4-VL's patch merger: an RMSNorm, a biased m x m stride-m convolution (h -> h m²), a biased 1x1
    convolution to ``out_hidden_size`` and the ``image_newline`` vector of that width."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    wide = hidden * merge * merge
    return _projector(_linear(wide, wide), _linear(wide, out), other=hidden + out)


def concat_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                     layout: TowerLayout) -> WeightPart:
    """Unlimited-OCR: one biased Linear(the tower's concatenated features, text hidden), and the
    ``image_newline`` and ``view_separator`` vectors of the text width."""
    return _projector(_linear(hidden, text_hidden), other=2 * text_hidden)


#: outer ``model_type`` -> its projector.
MORE_PROJECTORS: dict[str, Projector] = {
    "unlimited_ocr": concat_projector,
    "hy_v4_vl": hy_v4_vl_merger,
    "ovis2": ovis2_visual_tokens,
    "deepseek_vl": deepseek_vl_aligner, "deepseek_vl_hybrid": deepseek_vl_hybrid_aligner,
    "got_ocr2": got_ocr2_projector, "pp_chart2table": got_ocr2_projector, "cohere2_vision": cohere2_vision_projector,
    "idefics2": idefics2_connector,
    "blip-2": qformer_projector, "instructblip": qformer_projector, "instructblipvideo": qformer_projector,
    **{t: llava_projector for t in _LLAVA_DEFAULTS},
    "idefics3": pixel_shuffle_projector, "smolvlm": pixel_shuffle_projector, "lighton_ocr": lighton_projector,
}
