"""Vision towers a multimodal config carries in ``vision_config``, read as data.

Each tower type is a :class:`TowerLayout` in :data:`TOWERS`, keyed by the vision ``model_type``: the keys that
size it, with its transformers config class's defaults (transformers 5.24's configuration_*.py), and the tensors
each block holds; towers that are not ViTs of those parts count themselves (``count``). The outer
``model_type`` decides the vision config class where transformers fixes it (:data:`VISION_TYPE_OF`), so a Hub
config whose ``vision_config`` names no (or an old) ``model_type`` is still read with the right fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart


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


def _pair(v: ConfigReader, key: str) -> tuple[int, int]:
    """``image_size`` / ``patch_size``: an integer side or a ``[height, width]`` pair."""
    value = v.first_of(key, (key,), kind="any")
    if isinstance(value, list) and len(value) == 2:
        return v.check(key, value[0], "int"), v.check(key, value[1], "int")
    side = v.check(key, value, "int")
    return side, side


def _switch(v: ConfigReader, layout: TowerLayout, value: bool | str) -> bool:
    return v.flag(value, bool(layout.defaults.get(value))) if isinstance(value, str) else value


def norm_parameters(layout: TowerLayout, width: int) -> int:
    """Parameters of one norm of ``width``: a LayerNorm's weight and bias, or an RMSNorm's weight."""
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
    per_layer = 2 * norm_parameters(layout, hidden) + (hidden + 2 * kv if _switch(v, layout, layout.qkv_bias) else 0)
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
    other += norm_parameters(layout, hidden) * (int(layout.pre_norm) + int(layout.post_norm))
    if layout.head and v.flag(layout.head, bool(layout.defaults.get(layout.head))):
        # probe, nn.MultiheadAttention (in_proj + out_proj, biased), LayerNorm, fc1/fc2
        matrices += [Matrix(in_features=hidden, out_features=hidden, count=4),
                     Matrix(in_features=hidden, out_features=inner), Matrix(in_features=inner, out_features=hidden)]
        other += hidden + 4 * hidden + 2 * hidden + inner + hidden
    return WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=other), hidden


# ---- towers that count themselves ----------------------------------------------------------------
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
    """The Pix2Struct tower (Pix2Struct; Kosmos-2.5's): a biased Linear(patch_embed_hidden_size, hidden), row and
    column tables of ``max_num_patches`` (Pix2Struct's ``seq_len``), T5-style blocks (q/k/v/o of heads x head_dim
    (``d_kv``), a gated MLP of ``intermediate_size`` (``d_ff``), two RMSNorms, no biases) and a final RMSNorm."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size", "d_ff"))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    inner_dim = v.first_of("num_attention_heads", ("num_attention_heads",)) * v.first_of("head_dim", ("head_dim", "d_kv"))
    patch = v.first_of("patch_embed_hidden_size", ("patch_embed_hidden_size",))
    patches = v.first_of("max_num_patches", ("max_num_patches", "seq_len"))
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


def high_res_reader(v: ConfigReader, outer: Mapping[str, Any]) -> ConfigReader:
    config = outer.get("high_res_vision_config") or {}
    return ConfigReader(config if isinstance(config, Mapping) else {}, source_name=v.source_name,
                        prefix="high_res_vision_config.", defaults_name="sam_vision_model", defaults=_SAM_VISION)


def high_res_tower(v: ConfigReader, outer: Mapping[str, Any]) -> WeightPart:
    """DeepSeek-VL hybrid's second, high-resolution tower: SamVisionModel from ``high_res_vision_config``."""
    s = high_res_reader(v, outer)
    tower, _ = sam_tower(s)
    for note in s.notes:
        v.note(note)
    return tower


# ---- the tables ------------------------------------------------------------------------------------
#: CLIPVisionConfig's defaults.
CLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                 "image_size": 224, "patch_size": 32}


_SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                    "image_size": 224, "patch_size": 16}
_QWEN25_DEFAULTS = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "in_channels": 3, "patch_size": 14,
                    "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584}


#: Blip2VisionConfig's defaults (InstructBLIP's are the same; the patch convolution reads 3 channels).
_BLIP2_VISION = {"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39, "num_channels": 3,
                 "image_size": 224, "patch_size": 14}

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
    # Qwen2.5-Omni's thinker: the Qwen2.5-VL tower (Qwen2_5OmniVisionEncoderConfig has its defaults)
    "qwen2_5_omni_vision_encoder": TowerLayout(
        name="Qwen2.5-Omni ViT", layers=("depth",), channels=("in_channels",), norm="rms", gated_mlp=True,
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
    # GLM-4V / GLM-4.5V / GLM-4.6V (Glm4vVisionModel): RMSNorms, q/k/v biases by attention_bias, no o or MLP biases,
    # a gated MLP of out_hidden_size, learned positions for (image_size / patch_size)^2 patches, an RMSNorm after
    # the patch convolution and one after the blocks (the merge convolution and merger are the projector)
    **{t: TowerLayout(
        name="GLM-4V ViT", layers=("depth",), channels=("in_channels",), inner=("out_hidden_size",), norm="rms",
        qkv_bias="attention_bias", o_bias=False, mlp_bias=False, gated_mlp=True, temporal=True, pre_norm=True,
        post_norm=True,
        defaults={"depth": 24, "hidden_size": 1536, "attention_bias": False, "num_heads": 12, "in_channels": 3,
                  "image_size": 336, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                  "out_hidden_size": 4096, "intermediate_size": 13696})
       for t in ("glm4v_vision", "glm4v_moe_vision")},
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
    # Step-3.7 (Step3p7VisionModel, vision_config model_type step3p5_vision): a patch convolution without bias,
    # learned positions for (image_size / patch_size)^2 patches, a LayerNorm before the blocks, biased q/k/v/o and
    # fc1/fc2 of hidden x mlp_ratio (Step3p7VisionConfig sets intermediate_size so), two per-channel layer scales per
    # block (lambda_1, lambda_2); the downsamplers are the projector's
    "step3p5_vision": TowerLayout(
        name="Step-3.7 ViT", patch_bias=False, layer_scale=True, pre_norm=True, inner=(), mlp_ratio="mlp_ratio",
        defaults={"hidden_size": 1536, "mlp_ratio": 8960 / 1536, "num_hidden_layers": 47, "num_channels": 3,
                  "image_size": 728, "patch_size": 14}),
    "pix2struct_vision_model": TowerLayout(
        name="Pix2Struct ViT", count=pix2struct_tower,
        defaults={"hidden_size": 768, "patch_embed_hidden_size": 768, "d_ff": 2048, "d_kv": 64,
                  "num_hidden_layers": 12, "num_attention_heads": 12, "seq_len": 4096}),
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
    # CLIPVisionModel: a class token, a patch convolution without bias, one position per patch and the class
    # token, LayerNorms before (pre_layrnorm) and after the blocks
    "clip_vision_model": TowerLayout(name="CLIP ViT", patch_bias=False, cls_token=True, pre_norm=True, post_norm=True,
                                     defaults=CLIP_DEFAULTS),
    # SmolVLM's SigLIP tower (Idefics3's, the config class of its own)
    "smolvlm_vision": TowerLayout(name="SmolVLM SigLIP ViT", post_norm=True,
                                  defaults={"hidden_size": 1152, "intermediate_size": 3072, "num_hidden_layers": 12,
                                            "num_channels": 3, "image_size": 224, "patch_size": 32}),
    # PixtralVisionModel (LightOnOCR): a patch convolution without bias, an RMSNorm before the blocks, RMSNorms,
    # bias-free attention and gated MLP, 2-D rotary positions only
    "pixtral": TowerLayout(name="Pixtral ViT", norm="rms", qkv_bias=False, o_bias=False, gated_mlp=True, mlp_bias=False,
                           patch_bias=False, positions="none", pre_norm=True,
                           defaults={"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                                     "num_channels": 3, "image_size": 1024, "patch_size": 16}),
    # Blip2VisionModel (and InstructBLIP's): a class token, a biased patch convolution, (patches + 1) positions,
    # a fused qkv whose bias is q_bias, zeros and v_bias (3 h saved), a post LayerNorm
    **{t: TowerLayout(name="BLIP-2 ViT", qkv_bias="qkv_bias", cls_token=True, post_norm=True,
                      defaults={**_BLIP2_VISION, "qkv_bias": True})
       for t in ("blip_2_vision_model", "instructblip_vision_model", "instructblipvideo_vision_model")},
    # BlipVisionModel (BLIP's captioning model): a class token, a biased patch convolution, (patches + 1)
    # positions, a fused biased qkv, a post LayerNorm
    "blip_vision_model": TowerLayout(name="BLIP ViT", cls_token=True, post_norm=True,
                                     defaults={"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                               "num_channels": 3, "image_size": 384, "patch_size": 16}),
    # Ovis2.5 (Ovis2_5VisionModel): a SigLIP-style ViT (biased patch convolution, (image_size / patch_size)^2
    # learned positions, biased q/k/v/o and fc1/fc2, LayerNorms) with a post LayerNorm
    "ovis2_5_vision": TowerLayout(name="Ovis2.5 SigLIP ViT", post_norm=True,
                                  defaults={"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                                            "num_channels": 3, "image_size": 512, "patch_size": 16,
                                            "spatial_merge_size": 2, "vocab_size": 65536,
                                            "num_visual_indicator_tokens": 4}),
    # Idefics2VisionTransformer: SigLIP's tower without the pooling head
    "idefics2_vision": TowerLayout(name="Idefics2 SigLIP ViT", post_norm=True,
                                   defaults={"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                             "num_channels": 3, "image_size": 224, "patch_size": 32}),
    "got_ocr2_vision": TowerLayout(name="GOT-OCR 2 SAM ViT", count=sam_tower, defaults=_SAM_DEFAULTS),
    "pp_chart2table_vision": TowerLayout(name="PP-Chart2Table SAM ViT", count=sam_tower, defaults=_SAM_DEFAULTS),
    "pp_formulanet_vision": TowerLayout(name="PP-FormulaNet SAM ViT", count=sam_tower,
                                        defaults={**_SAM_DEFAULTS, "image_size": 512, "post_conv_in_channels": 256,
                                                  "post_conv_mid_channels": 512, "post_conv_out_channels": 1024,
                                                  "decoder_hidden_size": 512}),
    # Ovis2VisionModel's transformer: a biased patch convolution, a position grid, an RMSNorm on the embeddings,
    # RMSNorm blocks with q/k/v/o biases by qkv_bias and a gated MLP (biases by mlp_bias), a final RMSNorm
    "ovis2_vision": TowerLayout(name="Ovis2 ViT", norm="rms", qkv_bias="qkv_bias", o_bias="qkv_bias", gated_mlp=True,
                                mlp_bias="mlp_bias", pre_norm=True, post_norm=True,
                                defaults={"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
                                          "num_channels": 3, "image_size": 224, "patch_size": 14, "qkv_bias": False,
                                          "mlp_bias": False, "vocab_size": 16384, "hidden_stride": 1,
                                          "num_visual_indicator_tokens": 5}),
    "hy_v4_vl_vision": TowerLayout(name="HY-V4-VL ViT", count=hy_v4_vl_tower,
                                   defaults={"hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 40,
                                             "num_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
                                             "out_hidden_size": 6144, "max_image_size": 2048}),
    "unlimited_ocr_vision": TowerLayout(name="Unlimited-OCR SAM + CLIP encoders", count=unlimited_ocr_tower,
                                        defaults={}),
}
TOWERS["qianfan_ocr_vision"] = TOWERS["internvl_vision"]


def rice_vit_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """LLaVA-OneVision-1.5's RiceViT (transformers 5.25 LlavaOnevision15VisionModel): Qwen2.5-VL's attention and
    a biased fc1/fc2 MLP with LayerNorms, a class token whose rotary angle (``hidden / heads / 2``) is learned, a
    LayerNorm before the blocks, no learned position table (so no ``image_size``)."""
    part, hidden = tower_weights(v, replace(TOWERS["llava_onevision1_5_vision"], count=None))
    heads = v.first_of("num_attention_heads", ("num_heads", "num_attention_heads"))
    return replace(part, other_parameters=part.other_parameters + hidden // heads // 2), hidden


def llama4_vision_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Llama 4's vision model (transformers Llama4VisionModel): an unfolded patch Linear (no bias), a class
    embedding and one learned position per patch plus the class token, LayerNorms before and after the blocks,
    ViT blocks with biased q/k/v/o and fc1/fc2, and the pixel-shuffle adapter's two Linears (``intermediate_size``
    -> ``projector_input_dim``, ``projector_output_dim`` squared; no biases)."""
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    channels = v.first_of("num_channels", ("num_channels",))
    image, patch = _pair(v, "image_size"), _pair(v, "patch_size")
    adapter_in = v.first_of("projector_input_dim", ("projector_input_dim",))
    adapter_out = v.first_of("projector_output_dim", ("projector_output_dim",))
    positions = (image[0] // patch[0]) * (image[1] // patch[1]) + 1
    matrices = (Matrix(in_features=channels * patch[0] * patch[1], out_features=hidden),
                Matrix(in_features=hidden, out_features=hidden, count=4 * layers),  # q, k, v, o
                Matrix(in_features=hidden, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=hidden, count=layers),
                Matrix(in_features=inner, out_features=adapter_in),  # vision_adapter.mlp.fc1
                Matrix(in_features=adapter_out, out_features=adapter_out))  # vision_adapter.mlp.fc2
    per_layer = 4 * hidden + inner + hidden + 2 * 2 * hidden  # q/k/v/o and fc1/fc2 biases, two LayerNorms
    other = hidden + positions * hidden + 2 * 2 * hidden + per_layer * layers
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=other), hidden


TOWERS["llama4_vision_model"] = TowerLayout(
    name="Llama 4 ViT", count=llama4_vision_tower,
    defaults={"hidden_size": 768, "intermediate_size": 5632, "num_hidden_layers": 34, "num_channels": 3,
              "image_size": 448, "patch_size": 14, "projector_input_dim": 4096, "projector_output_dim": 4096,
              "vision_output_dim": 7680})


TOWERS["llava_onevision1_5_vision"] = TowerLayout(
    name="RiceViT", layers=("depth",), channels=("in_channels",), patch_bias=False, positions="none",
    cls_token=True, pre_norm=True, count=rice_vit_tower,
    defaults={"depth": 24, "hidden_size": 1024, "intermediate_size": 4096, "num_heads": 16, "in_channels": 3,
              "patch_size": 14, "spatial_merge_size": 2, "out_hidden_size": 4096})

def muse_glimmer_tower(v: ConfigReader) -> tuple[WeightPart, int]:
    """Muse Glimmer's ViT (transformers 5.25 MuseGlimmerVisionModel): a linear patch embedding without bias over
    ``patch_temporal`` frames of 3 x ``patch_size``² pixels, a learned table of ``pos_emb_height`` x
    ``pos_emb_width`` positions, LayerNorms before and after the blocks; per block two LayerNorms, q/k/v and the
    output projection with biases, a biased fc1/fc2 MLP."""
    h = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    patch = v.first_of("patch_size", ("patch_size",))
    frames = v.first_of("patch_temporal", ("patch_temporal",))
    positions = v.first_of("pos_emb_height", ("pos_emb_height",)) * v.first_of("pos_emb_width", ("pos_emb_width",))
    matrices = (Matrix(in_features=frames * 3 * patch * patch, out_features=h),
                Matrix(in_features=h, out_features=h, count=4 * layers),
                Matrix(in_features=h, out_features=inner, count=layers), Matrix(in_features=inner, out_features=h, count=layers))
    other = (4 * h + 2 * 2 * h + inner + h) * layers + positions * h + 2 * 2 * h
    return WeightPart(name="vision_tower", vision=True, matrices=matrices, other_parameters=other), h


TOWERS["muse_glimmer_vision"] = TowerLayout(
    name="Muse Glimmer ViT", count=muse_glimmer_tower,
    defaults={"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 50, "num_attention_heads": 16,
              "patch_size": 14, "patch_temporal": 2, "pos_emb_height": 32, "pos_emb_width": 32, "merge_size": 2})

#: outer ``model_type`` -> the vision ``model_type`` its transformers config class builds (whatever the
#: Hub's ``vision_config`` calls itself); types whose vision_config is an AutoConfig are not listed.
VISION_TYPE_OF = {
    "qwen2_vl": "qwen2_vl_vision", "qwen2_5_vl": "qwen2_5_vl_vision", "exaone4_5": "exaone4_5_vision",
    "llava_onevision1_5": "llava_onevision1_5_vision", "llama4": "llama4_vision_model",
    "internvl": "internvl_vision", "qianfan_ocr": "qianfan_ocr_vision", "minicpmv4_6": "minicpmv4_6_vision",
    "minicpmv4_7": "minicpmv4_7_vision", "minicpm_ocr": "minicpm_ocr_vision", "gemma3": "siglip_vision_model",
    "video_llama_3": "video_llama_3_vision", "paddleocr_vl": "paddleocr_vl_vision", "glm_ocr": "glm_ocr_vision",
    "glm4v": "glm4v_vision", "glm4v_moe": "glm4v_moe_vision", "muse_glimmer": "muse_glimmer_vision",
    "granite_docling": "granite_docling_vision", "lfm3_vl": "lfm3_vl_vision",
    "nemotron_h_omni": "radio", "molmo2": "molmo2_vision",
    "minimax_m3_vl": "minimax_m3_vl_vision", "cosmos3_edge": "cosmos3_edge_vision",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe_vision", "florence2": "florence_vision",
    "kosmos-2.5": "kosmos_2_5_vision_model", "janus": "janus_vision_model", "pix2struct": "pix2struct_vision_model", "blip": "blip_vision_model",
    "step3p7": "step3p5_vision", "qwen2_5_omni_thinker": "qwen2_5_omni_vision_encoder",
    "idefics3": "idefics3_vision", "smolvlm": "smolvlm_vision", "blip-2": "blip_2_vision_model", "instructblip": "instructblip_vision_model", "instructblipvideo": "instructblipvideo_vision_model", "idefics2": "idefics2_vision", "got_ocr2": "got_ocr2_vision", "pp_chart2table": "pp_chart2table_vision", "pp_formulanet": "pp_formulanet_vision", "ovis2": "ovis2_vision", "ovis2_5": "ovis2_5_vision", "hy_v4_vl": "hy_v4_vl_vision", "unlimited_ocr": "unlimited_ocr_vision",
}

#: outer ``model_type`` -> the vision ``model_type`` its config class builds when ``vision_config`` names none.
DEFAULT_VISION_TYPE = {
    "llava": "clip_vision_model", "llava_next": "clip_vision_model", "llava_next_video": "clip_vision_model",
    "video_llava": "clip_vision_model", "vipllava": "clip_vision_model", "llava_onevision": "siglip_vision_model",
    "lighton_ocr": "pixtral", "cohere2_vision": "siglip_vision_model",
    "deepseek_vl": "siglip_vision_model", "deepseek_vl_hybrid": "siglip_vision_model",
    "glm46v": "glm4v_vision", "glmga": "glm4v_vision",
}


#: outer ``model_type`` -> how many copies of the tower it builds (Video-LLaVA: an image and a video tower).
TOWER_COPIES = {"video_llava": 2}


#: outer ``model_type`` -> a second tower it builds beside ``vision_config``'s.
EXTRA_TOWERS: dict[str, Callable[[ConfigReader, Mapping[str, Any]], WeightPart]] = {
    "deepseek_vl_hybrid": high_res_tower}
