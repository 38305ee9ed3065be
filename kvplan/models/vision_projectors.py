"""Projectors into the language model (and the mergers towers end in), one function per design, keyed in
:data:`PROJECTORS` by the outer ``model_type``. Each takes the tower's reader, the outer config, the tower's and
the text model's widths and the tower's :class:`~kvplan.models.vision_towers.TowerLayout`. Defaults:
transformers 5.24's configuration_*.py of each type."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart
from kvplan.models.vision_towers import (
    JANUS_VQ_DEFAULTS,
    TowerLayout,
    gqa_matrices,
    high_res_reader,
    janus_generation_weights,
    norm_parameters,
)

#: A projector: (tower reader, outer config, tower width, text width, tower layout) -> its weights.
Projector = Callable[[ConfigReader, Mapping[str, Any], int, int, TowerLayout], WeightPart]


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
    return _projector(_linear(merged, merged), _linear(merged, out), other=norm_parameters(layout, hidden))


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


def glm4v_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                    layout: TowerLayout) -> WeightPart:
    """GLM-4V (Glm4vVisionModel's downsample and merger): a biased merge convolution (hidden -> out_hidden_size
    over m x m patches), then Linear(out, out), LayerNorm, and a gated MLP of ``intermediate_size``, no biases."""
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    context = v.first_of("intermediate_size", ("intermediate_size",))
    return _projector(_linear(hidden * merge * merge, out), _linear(out, out, False), _linear(out, context, False),
                      _linear(out, context, False), _linear(context, out, False), other=2 * out)


def muse_glimmer_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                           layout: TowerLayout) -> WeightPart:
    """Muse Glimmer: the vision adapter over pixel-shuffled patches (fc1: ``out_hidden_size`` ->
    ``projector_hidden_size``, fc2: -> ``projector_hidden_size``) and the vision projection to the text width, no
    biases (its perception norm has no weight)."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="muse_glimmer",
                     defaults={"out_hidden_size": 6144, "projector_hidden_size": 4096})
    out = o.first_of("out_hidden_size", ("out_hidden_size",))
    inner = o.first_of("projector_hidden_size", ("projector_hidden_size",))
    return _projector(_linear(out, inner, False), _linear(inner, inner, False), _linear(inner, text_hidden, False))


def no_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                 layout: TowerLayout) -> WeightPart:
    """An encoder-decoder whose decoder attends to the encoder output directly (Pix2Struct): no projector."""
    return _projector()


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


def pp_formulanet_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                            layout: TowerLayout) -> WeightPart:
    """PP-FormulaNet (inside its vision model): two stride-2 3x3 convolutions without bias (``post_conv_in_channels``
    -> ``post_conv_mid_channels`` -> ``post_conv_out_channels``), then biased linear_1 (out -> out) and linear_2
    (out -> ``decoder_hidden_size``)."""
    c_in = v.first_of("post_conv_in_channels", ("post_conv_in_channels",))
    mid = v.first_of("post_conv_mid_channels", ("post_conv_mid_channels",))
    out = v.first_of("post_conv_out_channels", ("post_conv_out_channels",))
    to = v.first_of("decoder_hidden_size", ("decoder_hidden_size",))
    return _projector(_linear(9 * c_in, mid, False), _linear(9 * mid, out, False), _linear(out, out), _linear(out, to))


def step3p7_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                      layout: TowerLayout) -> WeightPart:
    """Step-3.7: two biased stride-2 3x3 convolutions (hidden -> 2 hidden -> 4 hidden, Step3p7VisionModel's
    downsamplers), then Linear(4 hidden, text hidden), biased by ``projector_bias`` (false by default)."""
    o = ConfigReader(outer, source_name=v.source_name, defaults_name="step3p7", defaults={"projector_bias": False})
    return _projector(_linear(9 * hidden, 2 * hidden), _linear(9 * 2 * hidden, 4 * hidden),
                      _linear(4 * hidden, text_hidden, o.flag("projector_bias", False)))


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
    s = high_res_reader(v, outer)
    sam_hidden = s.first_of("hidden_size", ("hidden_size",))
    c = s.first_of("output_channels", ("output_channels",))
    half = text_hidden // 2
    return _projector(_linear(sam_hidden, c, False), _linear(9 * c, c, False), _linear(9 * c, 2 * c, False),
                      _linear(9 * 2 * c, 4 * c, False), _linear(hidden, half), _linear(4 * c, half),
                      _linear(text_hidden, text_hidden), other=2 * 2 * c + 1)


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


def ovis2_5_visual_tokens(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                          layout: TowerLayout) -> WeightPart:
    """Ovis2.5's visual tokenizer (Linear(h m², visual vocab - indicator tokens) without bias over
    ``spatial_merge_size``² patches, a LayerNorm over its output) and the visual embedding table
    (``vision_config.vocab_size`` rows of the language model's width, no bias)."""
    vocab = v.first_of("vocab_size", ("vocab_size",))
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    words = vocab - v.first_of("num_visual_indicator_tokens", ("num_visual_indicator_tokens",), kind="count")
    return _projector(_linear(hidden * merge * merge, words, False), _linear(vocab, text_hidden, False),
                      other=2 * words)


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


def llama4_projector(v: ConfigReader, outer: Mapping[str, Any], hidden: int, text_hidden: int,
                     layout: TowerLayout) -> WeightPart:
    """Llama 4: one Linear from ``vision_output_dim`` to the text width, no bias (Llama4MultiModalProjector)."""
    return _projector(_linear(v.first_of("vision_output_dim", ("vision_output_dim",)), text_hidden, bias=False))


#: outer ``model_type`` -> its projector (or the merger its tower ends in).
PROJECTORS: dict[str, Projector] = {
    "qwen2_vl": qwen_merger, "qwen2_5_vl": qwen_merger, "qwen2_5_omni_thinker": qwen_merger, "exaone4_5": qwen_merger, "llava_onevision1_5": qwen_merger,
    "llama4": llama4_projector,
    "internvl": norm_mlp_projector, "qianfan_ocr": norm_mlp_projector, "lfm2_vl": lfm2_vl_projector,
    "minicpmv4_6": minicpmv_merger, "minicpmv4_7": minicpmv_merger, "minicpm_ocr": minicpmv_merger,
    "gemma3": gemma3_projector, "hyperclovax_vision_v2": hyperclova_projector,
    "video_llama_3": two_linear_projector, "paddleocr_vl": paddleocr_projector, "glm_ocr": glm_ocr_projector,
    **dict.fromkeys(("glm4v", "glm46v", "glmga", "glm4v_moe"), glm4v_projector),
    "muse_glimmer": muse_glimmer_projector, "pix2struct": no_projector, "blip": no_projector,
    "granite_docling": granite_docling_connector, "lfm3_vl": lfm3_vl_projector,
    "aria": aria_projector, "nemotron_h_omni": nemotron_omni_projector,
    "molmo2": molmo2_adapter, "minimax_m3_vl": minimax_m3_projector,
    "cosmos3_edge": cosmos3_edge_projector, "ernie4_5_vl_moe": ernie_resampler,
    "florence2": florence2_projector, "kosmos-2.5": kosmos25_projector,
    "janus": janus_aligner,
    "unlimited_ocr": concat_projector,
    "hy_v4_vl": hy_v4_vl_merger,
    "ovis2": ovis2_visual_tokens, "ovis2_5": ovis2_5_visual_tokens,
    "deepseek_vl": deepseek_vl_aligner, "deepseek_vl_hybrid": deepseek_vl_hybrid_aligner,
    "got_ocr2": got_ocr2_projector, "pp_chart2table": got_ocr2_projector,
    "pp_formulanet": pp_formulanet_projector, "step3p7": step3p7_projector, "cohere2_vision": cohere2_vision_projector,
    "idefics2": idefics2_connector,
    "blip-2": qformer_projector, "instructblip": qformer_projector, "instructblipvideo": qformer_projector,
    **{t: llava_projector for t in _LLAVA_DEFAULTS},
    "idefics3": pixel_shuffle_projector, "smolvlm": pixel_shuffle_projector, "lighton_ocr": lighton_projector,
}
