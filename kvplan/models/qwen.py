"""Qwen: Qwen (1, remote code, read by the Llama rules), Qwen2/2.5/3 (+MoE, +VL), and the hybrid Qwen3-Next and
Qwen3.5 (gated delta net + gated attention)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.models.base import (
    FULL,
    SLIDING,
    STATE,
    ArchParser,
    ConfigReader,
    embeddings,
    hidden_of,
    vocab_of,
    with_config_ssm_dtype,
)
from kvplan.models.decoder import NO_MOE, DecoderLayout, DecoderParser, MoeLayout, sparse_step_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention
from kvplan.models.vision_projectors import PROJECTORS as VISION_PROJECTORS
from kvplan.specs import StateSpec


class QwenParser(DecoderParser):
    """Qwen2/2.5/3 (+MoE): windows only when ``use_sliding_window``, only for layers >= max_window_layers."""

    family = "qwen"
    model_types: ClassVar[tuple[str, ...]] = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_5_vl_text",
                   "qwen2_vl_text", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_text", "qwen3_vl_moe_text")
    defaults = {"use_sliding_window": False, "max_window_layers": 28, "max_position_embeddings": 32768}
    #: Qwen2MoeConfig / Qwen3MoeConfig / Qwen3VLMoeTextConfig defaults of the MoE keys (transformers 5.24).
    defaults_by_type = {"qwen2": {"tie_word_embeddings": False}, "qwen3": {"tie_word_embeddings": False},
                        "qwen2_moe": {"tie_word_embeddings": False, "num_experts": 60, "moe_intermediate_size": 1408,
                                      "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632},
                        "qwen3_moe": {"tie_word_embeddings": False, "num_experts": 128, "moe_intermediate_size": 768,
                                      "num_experts_per_tok": 8},
                        "qwen3_vl_moe_text": {"num_experts": 60, "moe_intermediate_size": 1408,
                                              "num_experts_per_tok": 4},
                        # Qwen2_5OmniTextConfig (the thinker's language model; the thinker's own
                        # tie_word_embeddings, false, governs the lm_head)
                        "qwen2_5_omni_text": {"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
                                              "num_hidden_layers": 28, "num_attention_heads": 28,
                                              "num_key_value_heads": 4},
                        # Qwen3OmniMoeTextConfig (the Qwen3-Omni thinker's language model: Qwen3-MoE's layers)
                        "qwen3_omni_moe_text": {"vocab_size": 3584, "hidden_size": 2048, "intermediate_size": 18944,
                                                "num_hidden_layers": 28, "num_attention_heads": 28,
                                                "num_key_value_heads": 4, "num_experts": 128,
                                                "moe_intermediate_size": 768, "num_experts_per_tok": 8,
                                                "decoder_sparse_step": 1}}
    weight_types: ClassVar[tuple[str, ...]] = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text",
                    "qwen3_vl_moe_text", "qwen2_5_omni_text", "qwen3_omni_moe_text")
    _LAYOUTS = {
        "qwen2": DecoderLayout(qkv_bias=True, o_bias=False),
        "qwen2_moe": DecoderLayout(qkv_bias=True, o_bias=False, shared_expert_gate=True),
        "qwen2_vl_text": DecoderLayout(qkv_bias=True, o_bias=False),
        "qwen2_5_vl_text": DecoderLayout(qkv_bias=True, o_bias=False),
        "qwen2_5_omni_text": DecoderLayout(qkv_bias=True, o_bias=False),
        "qwen3": DecoderLayout(qk_norm=True), "qwen3_moe": DecoderLayout(qk_norm=True),
        "qwen3_vl_text": DecoderLayout(qk_norm=True), "qwen3_vl_moe_text": DecoderLayout(qk_norm=True),
        "qwen3_omni_moe_text": DecoderLayout(qk_norm=True),
    }
    _MOE = frozenset({"qwen2_moe", "qwen3_moe", "qwen3_vl_moe_text", "qwen3_omni_moe_text"})

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.flag("use_sliding_window", False):
            if r.has("sliding_window"):
                r.note("use_sliding_window is false: sliding_window is ignored, every layer is full attention")
            return [FULL] * num_layers
        if not r.has("sliding_window"):
            return [FULL] * num_layers
        first = r.first_of("max_window_layers", ["max_window_layers"])
        r.note(f"use_sliding_window is true: layers {first} and above slide (max_window_layers = {first})")
        return [SLIDING if index >= first else FULL for index in range(num_layers)]

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return self._LAYOUTS.get(model_type, DecoderLayout())

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        """Qwen3OmniMoeTextConfig has no ``head_dim``: Qwen3OmniMoeThinkerTextAttention floors hidden_size // heads
        (its defaults, 2048 and 28 heads, give 73)."""
        if r.defaults_name != "qwen3_omni_moe_text" or r.has("head_dim"):
            return super().head_dim(r, heads)
        hidden = r.first_of("hidden_size", ("hidden_size",))
        value = hidden // heads
        r.record("head_dim", value, f"derived: hidden_size // num_attention_heads = {hidden} // {heads} (floored)")
        r.note(f"head_dim = hidden_size // num_attention_heads = {hidden} // {heads} = {value}, floored "
               "(Qwen3OmniMoeThinkerTextAttention)")
        return value

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type in self._MOE:
            return sparse_step_moe(r, layers, top_k)
        return NO_MOE

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        # Qwen3-Omni's thinker holds Qwen3-VL's tower (Qwen3OmniMoeVisionEncoder)
        qwen3_towers = ("qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_omni_moe_text")
        return qwen3_vl_vision(outer, r) if r.raw("model_type") in qwen3_towers else None


class Qwen3NextParser(ArchParser):
    """Qwen3-Next: gated delta net layers, full attention every ``full_attention_interval``-th layer."""

    family = "qwen3_next"
    model_types: ClassVar[tuple[str, ...]] = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
    defaults = {
        "head_dim": 256, "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    }
    #: Qwen3NextConfig defaults of the keys weight counting reads.
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {"qwen3_next": {"tie_word_embeddings": False, "shared_expert_intermediate_size": 512,
                                       "num_experts": 512, "moe_intermediate_size": 512, "num_experts_per_tok": 10,
                                       "decoder_sparse_step": 1}}
    weight_types: ClassVar[tuple[str, ...]] = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        interval = r.first_of("full_attention_interval", ["full_attention_interval"])
        r.note(f"layer i is full attention when (i + 1) % {interval} == 0, else a gated delta net state")
        return [FULL if (i + 1) % interval == 0 else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        hk = r.first_of("linear_num_key_heads", ["linear_num_key_heads"])
        hv = r.first_of("linear_num_value_heads", ["linear_num_value_heads"])
        dk = r.first_of("linear_key_head_dim", ["linear_key_head_dim"])
        dv = r.first_of("linear_value_head_dim", ["linear_value_head_dim"])
        conv = r.first_of("linear_conv_kernel_dim", ["linear_conv_kernel_dim"])
        return with_config_ssm_dtype(r, StateSpec(
            mixer="gated_delta_net",
            shapes=(("conv", (conv - 1, 2 * hk * dk + hv * dv)), ("ssm", (hv, dk, dv))),
        ))

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Qwen3-Next: gated full attention every full_attention_interval-th layer (q_proj doubled for the
        output gate, q/k norms), Gated DeltaNet elsewhere, MoE MLPs with a gated shared expert."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = r.first_of("head_dim", ("head_dim",))
        interval = r.first_of("full_attention_interval", ("full_attention_interval",))
        types = r.raw("layer_types")
        if isinstance(types, list) and len(types) == layers:
            n_full = sum(1 for t in types if t in ("full_attention", "attention"))
        else:
            n_full = sum(1 for i in range(layers) if (i + 1) % interval == 0)
        n_linear = layers - n_full
        hk = r.first_of("linear_num_key_heads", ("linear_num_key_heads",))
        hv = r.first_of("linear_num_value_heads", ("linear_num_value_heads",))
        dk = r.first_of("linear_key_head_dim", ("linear_key_head_dim",))
        dv = r.first_of("linear_value_head_dim", ("linear_value_head_dim",))
        conv = r.first_of("linear_conv_kernel_dim", ("linear_conv_kernel_dim",))
        key_dim, value_dim = hk * dk, hv * dv
        parts = embeddings(r, hidden)
        attention = gqa_attention(hidden, heads, kv_heads, head_dim, n_full, q_factor=2)
        attention += [Matrix(in_features=hidden, out_features=2 * key_dim + 2 * value_dim, count=n_linear),  # in_proj_qkvz
                      Matrix(in_features=hidden, out_features=2 * hv, count=n_linear),  # in_proj_ba
                      Matrix(in_features=value_dim, out_features=hidden, count=n_linear)]  # out_proj
        # q/k norms of the full layers; conv1d, dt_bias, A_log and the gated norm of the DeltaNet layers
        other = 2 * head_dim * n_full + ((2 * key_dim + value_dim) * conv + 2 * hv + dv) * n_linear
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        dense = model_type == "qwen3_5_text"  # Qwen3.5 dense: a gated MLP in every layer, no experts
        # Qwen3.5-MoE has no dense MLP and so no intermediate_size
        intermediate = r.first_of("intermediate_size", ("intermediate_size",)) if dense or r.has("intermediate_size") else 0
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok", "experts_per_token", "moe_topk"))
        layout = NO_MOE if dense else sparse_step_moe(r, layers, top_k)
        moe, experts, expert_size, shared = layout.layers, layout.experts, layout.expert_size, layout.shared_size
        if len(moe) < layers:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - len(moe))),
                Matrix(in_features=intermediate, out_features=hidden, count=layers - len(moe)))))
        if moe:
            assert experts is not None and expert_size is not None
            parts += experts_parts(hidden, expert_size, experts, len(moe), shared_size=shared, shared_gate=True)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        name = "Qwen3-Next" if model_type == "qwen3_next" else "Qwen3.5"
        experts_text = f"{experts} experts per MoE layer, all resident" if moe else "a dense MLP in every layer"
        r.note(f"{name}: {n_full} gated full-attention and {n_linear} Gated DeltaNet layers; {experts_text}; "
               "the multi-token-prediction layer is not counted")
        shape = {"hidden_size": hidden, "mlp_width": (top_k or 1) * (expert_size or intermediate) + (shared or 0),
                 "qkv_width": 2 * key_dim + 2 * value_dim, "vocab_size": vocab_of(r)}
        return count_of(parts, experts if moe else None, top_k if moe else None, shape)

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        # MiniCPM-V 4.6 / 4.7 wrap a Qwen3.5 text model around their own tower (kvplan/models/vision_towers.py)
        return None if outer.get("model_type") in VISION_PROJECTORS else qwen3_vl_vision(outer, r)


def qwen3_vl_vision(outer: Mapping[str, Any], text: ConfigReader) -> list[WeightPart]:
    """The Qwen3-VL / Qwen3.5 vision tower: a 3-D patch convolution, learned positions, ``depth`` ViT blocks
    (fused qkv, GELU MLP, LayerNorms, all with biases), the patch merger into the language model, and one
    more merger per ``deepstack_visual_indexes`` entry (transformers Qwen3VLVisionModel)."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.")
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    depth = v.first_of("depth", ("depth",))
    patch = v.first_of("patch_size", ("patch_size",))
    temporal = v.first_of("temporal_patch_size", ("temporal_patch_size",))
    channels = v.first_of("num_channels", ("in_channels", "num_channels"))
    positions = v.first_of("num_position_embeddings", ("num_position_embeddings",))
    merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
    out = v.first_of("out_hidden_size", ("out_hidden_size",))
    deepstack = v.raw("deepstack_visual_indexes")
    n_deep = len(deepstack) if isinstance(deepstack, list) else 0
    merged = hidden * merge * merge
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=channels * temporal * patch * patch, out_features=hidden),  # patch_embed
                  Matrix(in_features=hidden, out_features=3 * hidden, count=depth),  # qkv
                  Matrix(in_features=hidden, out_features=hidden, count=depth),  # proj
                  Matrix(in_features=hidden, out_features=inner, count=depth),
                  Matrix(in_features=inner, out_features=hidden, count=depth)),
        # patch bias, positions; per block the qkv/proj/MLP biases and two LayerNorms (weight + bias)
        other_parameters=hidden + positions * hidden + (3 * hidden + hidden + inner + hidden + 4 * hidden) * depth,
    )
    # the merger normalises each patch (hidden) before the 2x2 shuffle; the deepstack mergers after it
    projector = WeightPart(
        name="projector", vision=True,
        matrices=(Matrix(in_features=merged, out_features=merged, count=1 + n_deep),
                  Matrix(in_features=merged, out_features=out, count=1 + n_deep)),
        other_parameters=2 * hidden + (merged + out) * (1 + n_deep) + 2 * merged * n_deep,
    )
    text.note(f"vision tower (Qwen3-VL ViT, {depth} blocks, {n_deep} deepstack mergers) reported separately as "
              "weights.vision_*")
    return [tower, projector]


class QwenV1Parser(LlamaParser):
    """Qwen (1) (``qwen``, remote code): its MHA cache read by the Llama rules."""

    model_types = ("qwen",)
    weight_types = ()


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {
    "qwen": "remote code: not counted",
    **{t: "a wrapper: its weights are counted under its text_config's model_type"
       for t in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")},
}

#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"qwen2_5_omni_text": "the thinker's language model, Qwen2's GQA: the generic rules read its cache",
                  "qwen3_omni_moe_text": "the thinker's language model, Qwen3's GQA: the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (QwenV1Parser, QwenParser, Qwen3NextParser)
