"""Moonshot Kimi Linear: Kimi Delta Attention layers and MLA full-attention layers; Kimi K3 (``kimi_k3``, the Hub's
remote code) wraps a ``kimi_linear`` language model (with a full-rank KDA output gate, gated MLA, attention
residuals and a latent MoE, each read from its config key) and a MoonViT vision tower.

Kimi K2 / K2.5 are DeepSeek-V3's architecture and are read by deepseek.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import note_mtp
from kvplan.models.deepseek import mla_weights
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import StateSpec


def kda_weights(hidden: int, heads: int, head_dim: int, conv: int, count: int, *,
                full_rank_gate: bool = False) -> tuple[list[Matrix], int]:
    """``count`` Kimi Delta Attention layers (transformers KimiDeltaAttention; GLM-5-Next's are the same): q/k/v,
    the forget gate's f_a/f_b and the output gate's g_a/g_b low-rank pairs (``full_rank_gate``: one g_proj of the
    full width instead, Kimi K3's ``use_full_rank_gate``), the beta projection, o_proj; and the vectors: the short
    convolutions over q, k and v, A_log, dt_bias, the output norm."""
    inner = heads * head_dim
    gates = [Matrix(in_features=hidden, out_features=head_dim, count=count),  # f_a
             Matrix(in_features=head_dim, out_features=inner, count=count)]  # f_b
    gates += [Matrix(in_features=hidden, out_features=inner, count=count)] if full_rank_gate else [  # g_proj
        Matrix(in_features=hidden, out_features=head_dim, count=count),  # g_a
        Matrix(in_features=head_dim, out_features=inner, count=count)]  # g_b
    return ([Matrix(in_features=hidden, out_features=inner, count=3 * count),  # q, k, v
             *gates,
             Matrix(in_features=hidden, out_features=heads, count=count),  # b_proj
             Matrix(in_features=inner, out_features=hidden, count=count)],  # o_proj
            (3 * inner * conv + heads + inner + head_dim) * count)  # convs, A_log, dt_bias, o_norm


def mlp_and_norms(r: ConfigReader, parts: list[WeightPart], hidden: int, layers: int, n_moe: int, top_k: int | None,
                  experts_keys: tuple[str, ...]) -> tuple[int, int]:
    """Kimi Linear's (and Bailing hybrid's) MLPs, appended to ``parts``: dense SwiGLU MLPs in the layers that are not
    MoE, routed + shared experts with a router correction bias in the ``n_moe`` others, the norms (two per layer and
    the final one); (experts, the MLP width a token passes through).

    Kimi K3's latent MoE (``routed_expert_hidden_size``): the routed experts work in that narrower width, entered
    through ``routed_expert_down_proj`` (hidden -> latent) and left through ``routed_expert_up_proj``, with a latent
    RMSNorm when ``latent_moe_use_norm``; the shared experts stay at hidden_size."""
    n_dense = layers - n_moe
    experts = r.first_of("num_experts", experts_keys)
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    shared = r.first_of("num_shared_experts", ("num_shared_experts", "n_shared_experts"), kind="count")
    latent = r.optional("routed_expert_hidden_size", ("routed_expert_hidden_size",))
    mlp_width = (top_k or 1) * size + shared * size
    if n_dense:
        dense = r.first_of("intermediate_size", ("intermediate_size",))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=dense, count=2 * n_dense),
                                                      Matrix(in_features=dense, out_features=hidden, count=n_dense))))
        mlp_width = max(mlp_width, dense)
    if n_moe and latent:
        routed = experts_parts(latent, size, experts, n_moe)[0]
        parts.append(routed)
        norm = latent if r.flag("latent_moe_use_norm", False) else 0
        parts.append(WeightPart(name="latent_projections", matrices=(
            Matrix(in_features=hidden, out_features=latent, count=n_moe),  # routed_expert_down_proj
            Matrix(in_features=latent, out_features=hidden, count=n_moe)),  # routed_expert_up_proj
            other_parameters=norm * n_moe))
        if shared:
            parts.append(WeightPart(name="shared_experts", matrices=(
                Matrix(in_features=hidden, out_features=shared * size, count=2 * n_moe),
                Matrix(in_features=shared * size, out_features=hidden, count=n_moe))))
        parts.append(WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=n_moe),),
                                other_parameters=experts * n_moe, tp_sharded=False))
        r.note(f"latent MoE: {experts} routed experts of {size} work in routed_expert_hidden_size {latent} "
               f"(down/up projections from and to hidden_size {hidden}); {shared} shared experts at hidden_size")
    elif n_moe:
        parts += experts_parts(hidden, size, experts, n_moe, shared_size=shared * size or None, router_bias=True)
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
    return experts, mlp_width


def moonvit3_weights(outer: Mapping[str, Any], text: ConfigReader, text_hidden: int) -> list[WeightPart]:
    """Kimi K3's MoonViT (the Hub's vision_config, remote code): a patch convolution and a learned 2-D position
    table (``init_pos_emb_height`` x ``init_pos_emb_width``; the temporal one is fixed), ``vt_num_hidden_layers``
    blocks of a fused qkv of ``qkv_hidden_size`` per q/k/v, wo, an fc0/fc1 MLP and two norms, a final norm; then
    the projector: ``merge_kernel_size`` patches merged, two Linears and a norm at the text width. Biases and
    LayerNorm biases only where ``attn_bias`` / ``linear_bias`` / ``patch_embed_proj_bias`` say and ``norm_type``
    is not ``rmsnorm``."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.",
                     defaults_name="kimi_k3_vision")
    hidden = v.first_of("hidden_size", ("vt_hidden_size", "hidden_size"))
    inner = v.first_of("intermediate_size", ("vt_intermediate_size", "intermediate_size"))
    layers = v.first_of("num_hidden_layers", ("vt_num_hidden_layers", "num_hidden_layers"))
    qkv = v.optional("qkv_hidden_size", ("qkv_hidden_size",)) or hidden
    patch = v.first_of("patch_size", ("patch_size",))
    grid = v.first_of("pos_emb_height", ("init_pos_emb_height",)) * v.first_of("pos_emb_width", ("init_pos_emb_width",))
    merge = v.first_of("merge_kernel_size", ("merge_kernel_size",), kind="list")
    norm = hidden if v.raw("norm_type") == "rmsnorm" else 2 * hidden
    attn_bias = (3 * qkv + hidden) if v.raw("attn_bias") is True else 0
    mlp_bias = (inner + hidden) if v.raw("linear_bias") is True else 0
    merged = hidden * merge[0] * merge[1]
    tower = WeightPart(name="vision_tower", vision=True, matrices=(
        Matrix(in_features=3 * patch * patch, out_features=hidden),
        Matrix(in_features=hidden, out_features=3 * qkv, count=layers),  # wqkv
        Matrix(in_features=qkv, out_features=hidden, count=layers),  # wo
        Matrix(in_features=hidden, out_features=inner, count=layers),  # fc0
        Matrix(in_features=inner, out_features=hidden, count=layers)),  # fc1
        other_parameters=(hidden if v.raw("patch_embed_proj_bias") is True else 0) + grid * hidden + norm
        + (2 * norm + attn_bias + mlp_bias) * layers)
    projector = WeightPart(name="projector", vision=True, matrices=(
        Matrix(in_features=merged, out_features=merged), Matrix(in_features=merged, out_features=text_hidden)),
        other_parameters=text_hidden if v.raw("norm_type") == "rmsnorm" else 2 * text_hidden)  # post_norm
    for note in v.notes:
        text.note(note)
    text.note(f"vision tower (Kimi K3 MoonViT, {layers} layers) reported separately as weights.vision_*")
    return [tower, projector]


class KimiLinearParser(ArchParser):
    """Kimi Linear: Kimi Delta Attention (KDA) layers and MLA full-attention layers.

    ``linear_attn_config.kda_layers`` lists the KDA layers **1-based** (KimiLinearConfig.is_kda_layer:
    ``layer_idx + 1 in kda_layers``); the others are full attention, MLA when ``kv_lora_rank`` is set.
    A KDA layer keeps short-convolution states for q, k and v, ``(conv - 1, num_heads * head_dim)`` each,
    and a ``(num_heads, head_dim, head_dim)`` recurrent state that vLLM keeps in float32
    (``kda_state_shape`` / ``kda_state_dtype``).
    """

    family = "kimi_linear"
    model_types = ("kimi_linear",)
    #: KimiLinearConfig defaults of the keys weight counting reads.
    defaults_by_type = {"kimi_linear": {"tie_word_embeddings": False, "num_experts": 256, "moe_intermediate_size": 1024,
                                        "num_shared_experts": 1, "first_k_dense_replace": 1, "intermediate_size": 9216,
                                        "qk_rope_head_dim": 64, "linear_head_dim": 128, "linear_num_heads": 32,
                                        "linear_conv_kernel_dim": 4}}
    weight_types = ("kimi_linear",)
    _KDA = "linear_attn_config.kda_layers"
    #: KDA geometry: transformers 5.x flattens ``linear_attn_config`` into ``linear_*`` keys.
    KDA_HEADS = ("linear_num_heads", "linear_attn_config.num_heads")
    KDA_HEAD_DIM = ("linear_head_dim", "linear_attn_config.head_dim")
    KDA_CONV = ("linear_conv_kernel_dim", "linear_attn_config.short_conv_kernel_size")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types") or not r.has(self._KDA):
            return super().layer_kinds(r, num_layers)
        kda = r.first_of("kda_layers", [self._KDA], kind="list")
        bad = [i for i in kda if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= num_layers]
        if bad:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}{self._KDA} holds {bad[0]!r}, not a 1-based layer number in 1..{num_layers}",
                "kda_layers numbers layers from 1 (KimiLinearConfig.is_kda_layer)",
            )
        r.record("layer_types", f"KDA at 1-based {sorted(set(kda))}", r.where(self._KDA))
        r.note(f"{self._KDA} is 1-based: layer i is KDA when i + 1 is listed; the others are full attention")
        return [STATE if i + 1 in kda else FULL for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        heads = r.first_of("kda_num_heads", self.KDA_HEADS)
        head_dim = r.first_of("kda_head_dim", self.KDA_HEAD_DIM)
        conv = r.first_of("kda_conv_kernel", self.KDA_CONV)
        if conv < 2:
            raise ConfigError(
                f"{r.source_name}: the KDA short_conv_kernel_size must be at least 2, got {conv}",
                "fix the config",
            )
        return StateSpec(
            mixer="kda",
            shapes=(("conv", (conv - 1, 3 * heads * head_dim)), ("ssm", (heads, head_dim, head_dim))),
            fp32_tensors=("ssm",),
        )

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        return moonvit3_weights(outer, r, text_hidden) if outer.get("model_type") == "kimi_k3" else None

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """KDA layers: q/k/v, their short convolutions, the forget gate (f_a/f_b, A_log, dt_bias), the beta
        projection, the output gate (g_a/g_b) and norm, o_proj. Full layers: MLA (deepseek.py's layout).
        MLP: dense for the first ``first_k_dense_replace`` layers, then routed + shared experts with a
        router correction bias (transformers KimiLinear)."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_kda = self.layer_kinds(r, layers).count(STATE)
        n_full = layers - n_kda
        heads = r.first_of("kda_num_heads", self.KDA_HEADS)
        head_dim = r.first_of("kda_head_dim", self.KDA_HEAD_DIM)
        conv = r.first_of("kda_conv_kernel", self.KDA_CONV)
        inner = heads * head_dim
        full_rank_gate = r.flag("use_full_rank_gate", False) if r.has("use_full_rank_gate") else \
            r.raw("linear_attn_config.use_full_rank_gate") is True
        attention, other = kda_weights(hidden, heads, head_dim, conv, n_kda, full_rank_gate=full_rank_gate)
        width = 3 * inner
        if n_full:
            mla_heads = r.first_of("num_attention_heads", self.HEADS)
            mla, mla_other, mla_width = mla_weights(r, hidden, n_full, mla_heads)
            if r.flag("mla_use_output_gate", False):  # Kimi K3: a full-width sigmoid gate on the MLA output
                mla.append(Matrix(in_features=hidden, out_features=mla_heads * r.first_of(
                    "v_head_dim", ("v_head_dim",)), count=n_full))
            attention += mla
            other += mla_other
            width = max(width, mla_width)
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_token", "num_experts_per_tok"))
        first_dense = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
        n_moe = max(0, layers - first_dense)
        experts, mlp_width = mlp_and_norms(r, parts, hidden, layers, n_moe, top_k, ("num_experts", "n_routed_experts"))
        if r.has("attn_res_block_size"):
            # Kimi K3's attention residuals: before attention and before the MLP, an RMSNorm and a 1 x hidden
            # projection per layer, and one pair before the final norm
            parts.append(WeightPart(name="residual_mixers", other_parameters=(4 * layers + 2) * hidden,
                                    tp_sharded=False))
            r.note("attn_res_block_size: attention residuals, a norm and a 1 x hidden_size projection before each "
                   "attention and MLP and before the output")
        r.note(f"Kimi Linear: {n_kda} KDA and {n_full} MLA layers; {experts} experts in {n_moe} of {layers} layers, "
               "all resident")
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                        {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": width, "vocab_size": vocab_of(r)})


class BailingHybridParser(KimiLinearParser):
    """KDA layers (q/k/v conv, float32 recurrent state) and MLA every layer_group_size-th layer (Kimi Linear's layout).

    inclusionAI Bailing hybrid (Ring-linear): the Kimi Linear cache layout -- KDA layers (short-convolution
    states for q, k and v, a float32 recurrent state) and MLA full-attention layers -- with its own keys: the KDA
    heads are ``num_attention_heads`` of ``head_dim`` (as the config file has it; transformers then reuses
    ``head_dim`` for the rope dim and keeps the KDA one as ``linear_head_dim``), the kernel
    ``short_conv_kernel_size``, and full attention every ``layer_group_size``-th layer when ``layer_types``
    is absent.

    Weights (transformers BailingHybrid): KDA layers hold q/k/v, their float32 short convolution, a forget
    gate (one ``f_proj`` to the full width, ``A_log``, ``dt_bias``), ``b_proj``, a full-width output gate
    ``g_proj``, the gated output norm and ``o_proj``; MLA layers add a per-head output gate ``g_proj``;
    ``mlp_layer_types`` (else ``first_k_dense_replace``) picks dense or MoE MLPs, the MoE with shared experts
    and a router correction bias."""

    family = "bailing_hybrid"
    model_types = ("bailing_hybrid",)
    #: BailingHybridConfig defaults.
    defaults_by_type = {"bailing_hybrid": {"num_hidden_layers": 42, "num_attention_heads": 32, "head_dim": 128,
                                           "short_conv_kernel_size": 4, "layer_group_size": 6, "kv_lora_rank": 512,
                                           "qk_rope_head_dim": 64, "max_position_embeddings": 262144,
                                           "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 157184,
                                           "hidden_size": 2560, "intermediate_size": 6144, "moe_intermediate_size": 768,
                                           "num_experts": 512, "num_shared_experts": 1, "first_k_dense_replace": 2,
                                           "tie_word_embeddings": False}}
    weight_types = ("bailing_hybrid",)
    KDA_HEADS = ("linear_num_heads", "num_attention_heads")
    KDA_HEAD_DIM = ("linear_head_dim", "head_dim")
    KDA_CONV = ("linear_conv_kernel_dim", "short_conv_kernel_size")
    MAX_CONTEXT = ("max_position_embeddings", "model_max_length")

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        group = r.first_of("layer_group_size", ("layer_group_size",))
        r.note(f"layer i is MLA full attention when (i + 1) % layer_group_size ({group}) == 0, else KDA")
        return [FULL if (i + 1) % group == 0 else STATE for i in range(num_layers)]

    def attention_dims(self, r: ConfigReader) -> dict[str, int]:
        dims = super().attention_dims(r)
        if not dims.get("mla"):
            raise ConfigError(f"{r.source_name}: bailing_hybrid full-attention layers are MLA; kv_lora_rank is missing",
                              "add kv_lora_rank to the config")
        return dims

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_kda = self.layer_kinds(r, layers).count(STATE)
        n_full = layers - n_kda
        heads = r.first_of("kda_num_heads", self.KDA_HEADS)
        head_dim = r.first_of("kda_head_dim", self.KDA_HEAD_DIM)
        conv = r.first_of("kda_conv_kernel", self.KDA_CONV)
        inner = heads * head_dim
        attention = [Matrix(in_features=hidden, out_features=inner, count=5 * n_kda),  # q, k, v, f_proj, g_proj
                     Matrix(in_features=hidden, out_features=heads, count=n_kda),  # b_proj
                     Matrix(in_features=inner, out_features=hidden, count=n_kda)]  # o_proj
        other = (3 * inner * conv + heads + inner + head_dim) * n_kda  # conv1d, A_log, dt_bias, o_norm
        width = 3 * inner
        if n_full:
            mla_heads = r.first_of("num_attention_heads", self.HEADS)
            mla, mla_other, mla_width = mla_weights(r, hidden, n_full, mla_heads)
            attention += mla + [Matrix(in_features=hidden, out_features=mla_heads, count=n_full)]  # head-wise gate
            if r.raw("attention_bias") is True:  # kv_a_proj_with_mqa, o_proj (and q_a_proj) biases
                q_rank = r.optional("q_lora_rank", ("q_lora_rank",)) or 0
                mla_other += (r.first_of("kv_lora_rank", ("kv_lora_rank",))
                              + r.first_of("qk_rope_head_dim", ("qk_rope_head_dim",)) + hidden + q_rank) * n_full
            other += mla_other
            width = max(width, mla_width)
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        n_moe = len(self.moe_layers(r, layers))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_token", "num_experts_per_tok"))
        experts, mlp_width = mlp_and_norms(r, parts, hidden, layers, n_moe, top_k, ("num_experts", "num_local_experts"))
        note_mtp(r, "num_nextn_predict_layers")
        r.note(f"Bailing hybrid: {n_kda} KDA and {n_full} MLA layers; {experts} experts in {n_moe} of {layers} "
               "layers, all resident")
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                        {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": width, "vocab_size": vocab_of(r)})

    def moe_layers(self, r: ConfigReader, layers: int) -> list[int]:
        """``mlp_layer_types`` ("dense"/"sparse" per layer), else MoE from ``first_k_dense_replace`` on."""
        if r.has("mlp_layer_types"):
            types = r.check("mlp_layer_types", r.raw("mlp_layer_types"), "list")
            if len(types) != layers or any(t not in ("dense", "sparse") for t in types):
                raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must hold 'dense' or 'sparse' for "
                                  f"each of the {layers} layers", "fix mlp_layer_types or drop it")
            return [i for i, t in enumerate(types) if t == "sparse"]
        first_dense = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
        return list(range(min(first_dense, layers), layers))


PARSERS: tuple[type[ArchParser], ...] = (KimiLinearParser, BailingHybridParser)
