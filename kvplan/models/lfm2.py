"""Liquid LFM2 (+MoE): gated short-convolution layers and full-attention layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import (
    _MISSING,
    FULL,
    STATE,
    ArchParser,
    ConfigReader,
    embeddings,
    hidden_of,
    layer_indices,
    switch,
    vocab_of,
)
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import StateSpec


class Lfm2Parser(ArchParser):
    """Liquid LFM2 (+MoE): ``layer_types`` of "conv" (gated short convolution) and "full_attention".

    A conv layer keeps the last ``conv_L_cache - 1`` inputs of its ``hidden_size``-wide convolution
    (vLLM ``short_conv_state_shape``). LFM2 configs may instead list ``full_attn_idxs``.
    """

    family = "lfm2"
    model_types = ("lfm2", "lfm2_moe", "lfm3")
    #: Lfm2Config defaults; Lfm2MoeConfig's differ where ``defaults_by_type`` says.
    defaults = {
        "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3,
        "vocab_size": 65536, "intermediate_size": 12288, "tie_word_embeddings": True, "conv_bias": False,
        "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True,
    }
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "lfm2_moe": {"hidden_size": 2048, "intermediate_size": 7168, "moe_intermediate_size": 1792,
                     "num_dense_layers": 2, "num_experts": 32, "num_experts_per_tok": 4, "use_expert_bias": True,
                     "block_auto_adjust_ff_dim": False},
        # Lfm3Config: conv, full and sliding layers by layer_types; sandwich norms and a per-head attention gate
        "lfm3": {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 4,
                 "head_dim": 128, "conv_L_cache": 7, "sliding_window": 256, "max_position_embeddings": 128000,
                 "vocab_size": 128000, "intermediate_size": 7680, "use_sandwich_norm": True,
                 "use_attention_gate": True},
    }
    weight_types = ("lfm2", "lfm2_moe", "lfm3")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types"):
            return super().layer_kinds(r, num_layers)
        if r.has("full_attn_idxs"):
            attention = layer_indices(r, "full_attn_idxs", r.raw("full_attn_idxs"), num_layers)
            r.record("layer_types", f"attention at {sorted(attention)}", r.where("full_attn_idxs"))
            r.note(f"attention layers are full_attn_idxs {sorted(attention)}; the others are short convolutions")
            return [FULL if i in attention else STATE for i in range(num_layers)]
        if r.defaults_name == "lfm2":
            r.note("neither layer_types nor full_attn_idxs is in the config: the lfm2 default makes every layer attention")
            return [FULL] * num_layers
        raise ConfigError(
            f"{r.source_name}: required field layer_types is missing (tried {r.prefix}layer_types, "
            f"{r.prefix}full_attn_idxs)",
            'add layer_types: one "conv" or "full_attention" per layer',
        )

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        channels = r.first_of("conv_channels", ["conv_dim", "hidden_size"])
        l_cache = r.first_of("conv_L_cache", ["conv_L_cache"])
        if l_cache < 2:
            raise ConfigError(f"{r.source_name}: conv_L_cache must be at least 2, got {l_cache}", "fix the config")
        return StateSpec(mixer="short_conv", shapes=(("conv", (l_cache - 1, channels)),))

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Conv layers: in_proj to B, C and x, a depthwise conv of ``conv_L_cache`` taps, out_proj. Attention
        layers: GQA with per-head q/k LayerNorms. Every layer a SwiGLU MLP (LFM2-MoE: experts after
        ``num_dense_layers``), an operator and an FFN RMSNorm; the final norm is ``embedding_norm``. LFM3 adds
        full and sliding attention layers, a per-head output gate (``use_attention_gate``), norms after the
        operator and the FFN (``use_sandwich_norm``) and takes ``intermediate_size`` as the MLP width."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_conv = self.layer_kinds(r, layers).count(STATE)
        n_attn = layers - n_conv
        lfm3 = model_type == "lfm3"
        parts = embeddings(r, hidden)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        q, kv = heads * head_dim, kv_heads * head_dim
        taps = r.first_of("conv_L_cache", ("conv_L_cache",))
        bias = switch(r, "conv_bias", False)
        matrices = [Matrix(in_features=hidden, out_features=q, count=n_attn),
                    Matrix(in_features=hidden, out_features=kv, count=2 * n_attn),
                    Matrix(in_features=q, out_features=hidden, count=n_attn),
                    Matrix(in_features=hidden, out_features=3 * hidden, count=n_conv),  # conv in_proj
                    Matrix(in_features=hidden, out_features=hidden, count=n_conv)]  # conv out_proj
        other = 2 * head_dim * n_attn + (hidden * taps + (5 * hidden if bias else 0)) * n_conv
        if lfm3 and switch(r, "use_attention_gate", True):  # g_proj: one gate per head
            matrices.append(Matrix(in_features=hidden, out_features=heads, count=n_attn))
        if lfm3 and r.raw("attention_bias") is True:
            other += (q + 2 * kv + hidden) * n_attn
        parts.append(WeightPart(name="attention", matrices=tuple(matrices), other_parameters=other))
        dense_layers, experts, top_k, width = layers, None, None, 0
        if model_type == "lfm2_moe":
            dense_layers = r.first_of("num_dense_layers", ("num_dense_layers",), kind="count")
            experts = r.first_of("num_experts", ("num_experts",))
            top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            parts += experts_parts(hidden, size, experts, layers - dense_layers,
                                   router_bias=switch(r, "use_expert_bias", True))
            width = (top_k or 1) * size
        if dense_layers:
            inner = r.first_of("intermediate_size", ("intermediate_size",)) if lfm3 else self.ff_dim(r)
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=inner, count=2 * dense_layers),
                Matrix(in_features=inner, out_features=hidden, count=dense_layers))))
            width = max(width, inner)
        norms = 4 if lfm3 and switch(r, "use_sandwich_norm", True) else 2
        parts.append(WeightPart(name="norms", other_parameters=(norms * layers + 1) * hidden, tp_sharded=False))
        r.note(f"{'LFM3' if lfm3 else 'LFM2'}: {n_conv} short-convolution and {n_attn} attention layers")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": q + 2 * kv,
                                                "vocab_size": vocab_of(r)})

    #: Lfm3VlVisionConfig defaults (and, under ``projector_*``, Lfm3VlConfig's), for keys a config omits.
    LFM3_VL_VISION_DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "hidden_size": 1024, "intermediate_size": 2560, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
        "temporal_patch_size": 2, "num_hidden_layers": 14, "num_attention_heads": 16, "num_key_value_heads": 8,
        "conv_kernel_size": 3,
    }

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """LFM3-VL's tower (transformers Lfm3VlVisionModel): a linear patch embedding, an RMSNorm, then layers of
        gated depthwise 2-D convolutions or GQA attention (per-head q/k norms) by ``layer_types`` (default: conv for
        layers 0, 1 and every odd one), each with a SwiGLU MLP and two RMSNorms; the projector normalises each
        patch (LayerNorm) and maps ``spatial_merge_size``^2 merged patches through two linears. Other LFM VL
        towers (LFM2-VL's SigLIP2) are the generic ViT's."""
        if outer.get("model_type") != "lfm3_vl":
            return None
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=self.LFM3_VL_VISION_DEFAULTS, defaults_name="lfm3_vl_vision")
        hidden = v.first_of("hidden_size", ("hidden_size",))
        inner = v.first_of("intermediate_size", ("intermediate_size",))
        layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = v.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = v.first_of("num_kv_heads", ("num_key_value_heads",))
        patch = v.first_of("patch_size", ("patch_size",))
        temporal = v.first_of("temporal_patch_size", ("temporal_patch_size",))
        channels = v.first_of("in_channels", ("in_channels",))
        kernel = v.first_of("conv_kernel_size", ("conv_kernel_size",))
        merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
        if v.has("layer_types"):
            types = v.check("layer_types", v.raw("layer_types"), "list")
            if len(types) != layers:
                raise ConfigError(f"{r.source_name}: vision_config.layer_types has {len(types)} entries for {layers} "
                                  "layers", "make vision_config.layer_types one entry per layer")
            n_conv = sum(1 for t in types if t == "conv")
        else:
            n_conv = sum(1 for i in range(layers) if i < 2 or i % 2)
            v.note("vision_config.layer_types is not in the config; the lfm3_vl_vision default: conv layers 0, 1 "
                   "and every odd one, attention the others")
        n_attn = layers - n_conv
        head_dim = hidden // heads
        tower = WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=channels * temporal * patch * patch, out_features=hidden),  # patch_embed
            Matrix(in_features=hidden, out_features=heads * head_dim, count=n_attn),
            Matrix(in_features=hidden, out_features=kv_heads * head_dim, count=2 * n_attn),
            Matrix(in_features=heads * head_dim, out_features=hidden, count=n_attn),
            Matrix(in_features=hidden, out_features=3 * hidden, count=n_conv),
            Matrix(in_features=hidden, out_features=hidden, count=n_conv),
            Matrix(in_features=hidden, out_features=inner, count=2 * layers),
            Matrix(in_features=inner, out_features=hidden, count=layers)),
            # embedding norm; per layer two RMSNorms; q/k norms; depthwise kernel x kernel convolutions
            other_parameters=hidden + 2 * hidden * layers + 2 * head_dim * n_attn + hidden * kernel * kernel * n_conv)
        o = ConfigReader(outer, source_name=r.source_name, defaults={"projector_hidden_size": 4096, "projector_bias": True},
                         defaults_name="lfm3_vl")
        width = o.first_of("projector_hidden_size", ("projector_hidden_size",))
        bias = switch(o, "projector_bias", True)
        merged = hidden * merge * merge
        projector = WeightPart(name="projector", vision=True, matrices=(
            Matrix(in_features=merged, out_features=width), Matrix(in_features=width, out_features=text_hidden)),
            other_parameters=2 * hidden + ((width + text_hidden) if bias else 0))
        for note in v.notes + o.notes:
            r.note(note)
        r.note(f"vision tower (LFM3-VL, {n_conv} conv and {n_attn} attention layers) reported separately as "
               "weights.vision_*")
        return [tower, projector]

    def ff_dim(self, r: ConfigReader) -> int:
        """The SwiGLU width: ``intermediate_size``, or with ``block_auto_adjust_ff_dim`` two thirds of it, times
        ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of`` (transformers Lfm2MLP)."""
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        if not switch(r, "block_auto_adjust_ff_dim", False):
            return inner
        value = int(2 * inner / 3)
        multiplier = r.raw("block_ffn_dim_multiplier")
        if multiplier is not _MISSING:
            multiplier = r.check("block_ffn_dim_multiplier", multiplier, "ratio")
            value = int(multiplier * value)
        multiple = r.first_of("block_multiple_of", ("block_multiple_of",))
        value = multiple * -(-value // multiple)
        r.note(f"block_auto_adjust_ff_dim: MLP width = 2/3 x intermediate_size {inner}, rounded to {multiple} = {value}")
        return value


PARSERS: tuple[type[ArchParser], ...] = (Lfm2Parser,)
