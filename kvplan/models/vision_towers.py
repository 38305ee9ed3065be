"""Vision towers that are not a ViT of the parts :class:`kvplan.models.vision.TowerLayout` describes, one
function each (LFM3-VL's conv/attention hybrid, NVIDIA RADIO, Molmo2's GQA ViT, Florence-2's DaViT,
Kosmos-2.5's Pix2Struct): each reads its own fields from ``vision_config`` (with its config class's defaults,
given in vision.py's table) and returns the tower and its width."""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart


def lfm3_vl_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """LFM3-VL's vision tower: a linear patch embedding over ``temporal_patch_size`` frames and an RMSNorm,
    then ``layer_types`` blocks, each an RMSNorm'd mixer and a gated MLP (no biases): ``conv`` = in_proj (3 h),
    a depthwise ``conv_kernel_size``² convolution, out_proj; ``full_attention`` = GQA with q/k RMSNorms."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = v.first_of("num_attention_heads", ("num_attention_heads",))
    kv = v.first_of("num_key_value_heads", ("num_key_value_heads",)) * (hidden // heads)
    kernel = v.first_of("conv_kernel_size", ("conv_kernel_size",))
    patch = v.first_of("patch_size", ("patch_size",))
    frames = v.first_of("temporal_patch_size", ("temporal_patch_size",))
    channels = v.first_of("num_channels", ("in_channels",))
    types = v.first_of("layer_types", ("layer_types",), required=False, kind="list")
    if types is None:
        types = ["conv" if i < 2 or i % 2 else "full_attention" for i in range(layers)]
        v.note("vision_config.layer_types is not in the config; the lfm3_vl_vision rule: conv for layers 0, 1 "
               "and odd layers, full attention for the other even layers")
    if len(types) != layers or any(t not in ("conv", "full_attention") for t in types):
        raise ConfigError(f"{v.source_name}: vision_config.layer_types must list {layers} of conv / full_attention",
                          "fix the config")
    n_attn = types.count("full_attention")
    n_conv = layers - n_attn
    return WeightPart(name="vision_tower", vision=True, matrices=(
        Matrix(in_features=channels * frames * patch * patch, out_features=hidden),
        Matrix(in_features=hidden, out_features=3 * hidden, count=n_conv),
        Matrix(in_features=hidden, out_features=hidden, count=n_conv + 2 * n_attn),  # conv out, q, o
        Matrix(in_features=hidden, out_features=kv, count=2 * n_attn),
        Matrix(in_features=hidden, out_features=inner, count=2 * layers),
        Matrix(in_features=inner, out_features=hidden, count=layers)),
        # embedding norm; depthwise kernels; q/k norms; two norms per block
        other_parameters=hidden + hidden * kernel * kernel * n_conv + 2 * (hidden // heads) * n_attn
        + 2 * hidden * layers), hidden


def radio_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """NVIDIA RADIO: a linear patch projection (and a video one over ``video_temporal_patch_size`` frames),
    a (max_img_size / patch)² position table, class and register tokens, ViT blocks with LayerNorms, two layer
    scales, an fc1/fc2 MLP of hidden x mlp_ratio (or, with ``use_swiglu_ffn``, a gated one of 2/3 that width
    rounded up to 8), all biased but q/k/v by ``qkv_bias``; and the ``summary_idxs`` buffer."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    inner = int(hidden * v.first_of("mlp_ratio", ("mlp_ratio",), kind="ratio"))
    swiglu = v.flag("use_swiglu_ffn", False)
    if swiglu:
        inner = (int(inner * 2 / 3) + 7) // 8 * 8
    patch = v.first_of("patch_size", ("patch_size",))
    channels = v.first_of("num_channels", ("num_channels",))
    side = v.first_of("max_img_size", ("max_img_size",)) // patch
    tokens = v.first_of("num_cls_tokens", ("num_cls_tokens",), kind="count") + v.first_of(
        "num_registers", ("num_registers",), kind="count")
    frames = v.first_of("video_temporal_patch_size", ("video_temporal_patch_size",), required=False)
    summary = v.first_of("summary_idxs", ("summary_idxs",), kind="list")
    ups = 2 if swiglu else 1
    matrices = [Matrix(in_features=channels * patch * patch, out_features=hidden),
                Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                Matrix(in_features=hidden, out_features=inner, count=ups * layers),
                Matrix(in_features=inner, out_features=hidden, count=layers)]
    if frames:
        matrices.append(Matrix(in_features=frames * channels * patch * patch, out_features=hidden))
    qkv = 3 * hidden if v.flag("qkv_bias", True) else 0
    # per block: two LayerNorms, two layer scales, q/k/v and o biases, MLP biases
    per_layer = 4 * hidden + 2 * hidden + qkv + hidden + ups * inner + hidden
    other = side * side * hidden + tokens * hidden + per_layer * layers + len(summary)
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), hidden


def gqa_matrices(v: ConfigReader, n_in: int, hidden: int, bias: bool, count: int = 1) -> tuple[list[Matrix], int]:
    """q/k/v/o of ``num_attention_heads`` x ``head_dim`` (k/v: ``num_key_value_heads``) from ``n_in`` features."""
    heads = v.first_of("num_attention_heads", ("num_attention_heads",))
    kv = v.first_of("num_key_value_heads", ("num_key_value_heads",)) * v.first_of("head_dim", ("head_dim",))
    q = heads * v.first_of("head_dim", ("head_dim",))
    matrices = [Matrix(in_features=n_in, out_features=q, count=count),
                Matrix(in_features=n_in, out_features=kv, count=2 * count),
                Matrix(in_features=q, out_features=hidden, count=count)]
    return matrices, ((q + 2 * kv + hidden) * count if bias else 0)


def molmo2_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Molmo2's ViT: a biased linear patch embedding, ``num_position_embeddings`` learned positions (default
    (image / patch)² per side), blocks of LayerNorms, GQA (biases by ``attention_bias``), a biased fc1/fc2 MLP.
    The Hub's own keys (``image_patch_size``, ``image_num_pos``, ``image_default_input_size``) are read too."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    patch = v.first_of("patch_size", ("patch_size", "image_patch_size"))
    channels = v.first_of("num_channels", ("num_channels",))
    positions = v.first_of("num_position_embeddings", ("num_position_embeddings", "image_num_pos"), required=False)
    if positions is None:
        image = v.first_of("image_size", ("image_size", "image_default_input_size"), kind="list")
        positions = (image[0] // patch) * (image[1] // patch)
    attention, bias = gqa_matrices(v, hidden, hidden, v.flag("attention_bias", True), layers)
    matrices = [Matrix(in_features=channels * patch * patch, out_features=hidden), *attention,
                Matrix(in_features=hidden, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=hidden, count=layers)]
    other = hidden + positions * hidden + bias + (4 * hidden + inner + hidden) * layers
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), hidden


def _stage_list(v: ConfigReader, key: str, stages: int, kind: str = "int") -> list[Any]:
    values = v.first_of(key, (key,), kind="list")
    if len(values) != stages:
        raise ConfigError(f"{v.source_name}: vision_config.{key} has {len(values)} entries for {stages} stages",
                          "fix the config")
    return [v.check(key, x, kind) for x in values]


def davit_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Florence-2's DaViT: per stage a biased patch convolution (``patch_size`` kernel from the previous width)
    with a LayerNorm on its input (``patch_prenorm``) or output, then ``depths`` pairs of a spatial (window) and
    a channel block, each a 3x3 depthwise convolution, LayerNorm, fused qkv (``qkv_bias``) and projection,
    another depthwise convolution, LayerNorm and an fc1/fc2 MLP of ``mlp_ratio``. Width: the last stage's."""
    dims = v.first_of("embed_dim", ("embed_dim",), kind="list")
    stages = len(dims)
    dims = _stage_list(v, "embed_dim", stages)
    depths = _stage_list(v, "depths", stages)
    kernels = _stage_list(v, "patch_size", stages)
    prenorm = _stage_list(v, "patch_prenorm", stages, kind="bool")
    ratio = v.first_of("mlp_ratio", ("mlp_ratio",), kind="ratio")
    qkv_bias = v.flag("qkv_bias", True)
    width = v.first_of("num_channels", ("in_channels",))
    matrices: list[Matrix] = []
    other = 0
    for dim, depth, kernel, pre in zip(dims, depths, kernels, prenorm, strict=True):
        matrices.append(Matrix(in_features=width * kernel * kernel, out_features=dim))
        other += dim + 2 * (width if pre else dim)
        inner = int(dim * ratio)
        blocks = 2 * depth  # a spatial and a channel block per depth
        matrices += [Matrix(in_features=dim, out_features=3 * dim, count=blocks),
                     Matrix(in_features=dim, out_features=dim, count=blocks),
                     Matrix(in_features=dim, out_features=inner, count=blocks),
                     Matrix(in_features=inner, out_features=dim, count=blocks)]
        # two depthwise 3x3 convolutions, two LayerNorms, the qkv/proj/MLP biases
        other += blocks * (2 * (9 * dim + dim) + 2 * 2 * dim + (3 * dim if qkv_bias else 0) + dim + inner + dim)
        width = dim
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), width


def pix2struct_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Kosmos-2.5's Pix2Struct-style tower: a biased Linear(patch_embed_hidden_size, hidden), row and column
    tables of ``max_num_patches``, T5-style blocks (q/k/v/o of heads x head_dim, a gated MLP, two RMSNorms, no
    biases) and a final RMSNorm."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    inner_dim = v.first_of("num_attention_heads", ("num_attention_heads",)) * v.first_of("head_dim", ("head_dim",))
    patch = v.first_of("patch_embed_hidden_size", ("patch_embed_hidden_size",))
    patches = v.first_of("max_num_patches", ("max_num_patches",))
    matrices = (Matrix(in_features=patch, out_features=hidden),
                Matrix(in_features=hidden, out_features=inner_dim, count=3 * layers),
                Matrix(in_features=inner_dim, out_features=hidden, count=layers),
                Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                Matrix(in_features=inner, out_features=hidden, count=layers))
    other = hidden + 2 * patches * hidden + 2 * hidden * layers + hidden
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=other), hidden


#: JanusVQVAEConfig's defaults (transformers 5.24).
JANUS_VQ_DEFAULTS: dict[str, Any] = {
    "embed_dim": 8, "num_embeddings": 16384, "double_latent": False, "latent_channels": 256, "in_channels": 3,
    "out_channels": 3, "base_channels": 128, "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2,
    "projection_dim": 2048, "num_hidden_layers": 2, "image_token_embed_dim": 2048}


def _res_block(c_in: int, c_out: int) -> int:
    """GroupNorm, 3x3 conv, GroupNorm, 3x3 conv (all biased), and a 1x1 shortcut when the width changes."""
    return 2 * c_in + 9 * c_in * c_out + c_out + 2 * c_out + 9 * c_out * c_out + c_out + (
        c_in * c_out + c_out if c_in != c_out else 0)


def _attn_block(c: int) -> int:
    """GroupNorm and 1x1 q, k, v and output convolutions, biased."""
    return 2 * c + 4 * (c * c + c)


def janus_generation_weights(v: ConfigReader) -> int:
    """Janus' image generation half, from ``vq_config``: the VQ-GAN (encoder and decoder of
    ``channel_multiplier`` levels of ``num_res_blocks`` ResNet blocks, attention at the deepest level and in the
    middle, the codebook and the quant convolutions), the code embeddings, their aligner MLP and the head that
    predicts codes. Convolutions are counted as parameters (no matrix layout)."""
    base = v.first_of("base_channels", ("base_channels",))
    mult = [v.check("channel_multiplier", m, "int") for m in v.first_of("channel_multiplier", ("channel_multiplier",),
                                                                        kind="list")]
    blocks = v.first_of("num_res_blocks", ("num_res_blocks",))
    latent = v.first_of("latent_channels", ("latent_channels",))
    embed = v.first_of("embed_dim", ("embed_dim",))
    codes = v.first_of("num_embeddings", ("num_embeddings",))
    c_in, c_out_img = v.first_of("in_channels", ("in_channels",)), v.first_of("out_channels", ("out_channels",))
    levels = len(mult)
    total = 9 * c_in * base + base  # encoder conv_in
    width = base
    for level, m in enumerate(mult):
        out = base * m
        for _ in range(blocks):
            total += _res_block(width, out) + (_attn_block(out) if level == levels - 1 else 0)
            width = out
        if level != levels - 1:
            total += 9 * width * width + width  # downsample
    total += 2 * _res_block(width, width) + _attn_block(width)  # mid
    z = 2 * latent if v.flag("double_latent", False) else latent
    total += 2 * width + 9 * width * z + z  # norm_out, conv_out
    total += latent * embed + embed + embed * latent + latent + codes * embed  # quant convs, codebook
    width = base * mult[-1]
    total += 9 * latent * width + width + 2 * _res_block(width, width) + _attn_block(width)  # decoder in, mid
    for level in reversed(range(levels)):
        out = base * mult[level]
        for _ in range(blocks + 1):
            total += _res_block(width, out) + (_attn_block(out) if level == levels - 1 else 0)
            width = out
        if level != 0:
            total += 9 * width * width + width  # upsample
    total += 2 * width + 9 * width * c_out_img + c_out_img  # norm_out, conv_out
    proj = v.first_of("projection_dim", ("projection_dim",))
    hidden_layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    token = v.first_of("image_token_embed_dim", ("image_token_embed_dim",))
    total += codes * embed  # generation_embeddings
    total += embed * proj + proj + (hidden_layers - 1) * (proj * proj + proj)  # generation_aligner
    total += token * proj + proj + proj * codes + codes  # generation_head
    return total
