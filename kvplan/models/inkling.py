"""Thinking Machines Inkling (``inkling_text``, ``inkling2_text``, ``inkling2_loop_text`` and their
multimodal wrappers): every layer is attention plus short convolutions.

``layer_types`` names each layer ``hybrid_sliding`` (sliding-window attention of
``sliding_window_size`` tokens with the ``swa_*`` heads and head dim) or ``hybrid`` (full attention
with ``num_key_value_heads`` x ``head_dim``). Every layer also keeps four short-convolution states
of ``conv_kernel_size`` inputs each, in float32 whatever the model dtype (transformers runs the
convolutions in float32): on K and on V (the layer's K/V width) and before attention and the MLP
(``hidden_size``). Inkling-2-Loop runs layers ``loop_layer_index_start`` to ``loop_layer_index_end``
``loop_num_passes`` times, each pass with caches of its own.

Weights (transformers Inkling / Inkling2 / Inkling2Loop): per-layer-kind attention heads (``swa_*`` on
sliding layers) with short convolutions on K and V, a hidden-state-conditioned relative position bias over
``d_rel`` profiles of ``rel_extent`` (sliding layers: ``sliding_window_size``) distances, two short convolutions
on the residual stream, and an untied embedding with its own RMSNorm. Inkling: q/k RMSNorms, ``r_proj``,
MoE (routed + ``n_shared_experts`` shared experts sharing the router) or dense MLPs by ``mlp_layer_types``.
Inkling2: scaled q norms, a gated o_proj, per-head attention sinks, dynamic K/V convolutions and q/k/v input
norms on full layers, block attention residuals, MoE in every layer, an lm_head of ``unpadded_vocab_size``
rows; the loop variant adds four message gates per looped layer and the message queries. The multimodal
wrappers' towers: Inkling's hierarchical patch encoder (its layer widths planned as transformers'
``plan_out_scales`` does) and audio-token embedding; Inkling2's ViT with layer scales and a patch merger.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import FullAttentionSpec, LayerSpec, SlidingWindowSpec, StateSpec

_SLIDING, _FULL = "hybrid_sliding", "hybrid"


class InklingParser(ArchParser):
    """hybrid_sliding (swa_* heads) / hybrid (full) attention, four float32 short-conv states per layer."""

    family = "inkling"
    model_types = ("inkling_text", "inkling2_text", "inkling2_loop_text")
    #: InklingTextConfig defaults; Inkling2's differ where ``defaults_by_type`` says. ``layer_types``
    #: defaults to ``hybrid`` every sixth layer (``(i + 1) % 6 == 0``), ``hybrid_sliding`` otherwise.
    defaults = {"num_hidden_layers": 66, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
                "swa_num_key_value_heads": 16, "swa_head_dim": 128, "sliding_window_size": 512, "conv_kernel_size": 4,
                "hidden_size": 6144, "max_position_embeddings": 131072, "swa_num_attention_heads": 64, "d_rel": 16,
                "rel_extent": 1024, "vocab_size": 201024, "intermediate_size": 24576, "moe_intermediate_size": 3072,
                "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 2}
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "inkling2_text": {"num_hidden_layers": 48, "num_attention_heads": 48, "swa_num_key_value_heads": 8,
                          "sliding_window_size": 1024, "hidden_size": 4608, "max_position_embeddings": 1048576,
                          "swa_num_attention_heads": 48, "moe_intermediate_size": 2304, "n_routed_experts": 384,
                          "num_experts_per_tok": 8, "unpadded_vocab_size": 200058, "n_layers_per_attn_res_block": 6},
        "inkling2_loop_text": {"num_hidden_layers": 24, "num_attention_heads": 24, "swa_num_key_value_heads": 8,
                               "sliding_window_size": 1024, "hidden_size": 2304, "max_position_embeddings": 1048576,
                               "loop_layer_index_start": 6, "loop_layer_index_end": 18, "loop_num_passes": 3,
                               "swa_num_attention_heads": 24, "moe_intermediate_size": 1152, "n_routed_experts": 128,
                               "num_experts_per_tok": 8, "unpadded_vocab_size": 200058, "loop_gate_rank": 64},
    }
    weight_types = ("inkling_text", "inkling2_text", "inkling2_loop_text")
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ("head_dim",)

    def layer_types(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = r.raw("layer_types")
        if not r.has("layer_types"):
            if r.has("local_layer_ids") and r.defaults_name == "inkling_text":
                local = r.check("local_layer_ids", r.raw("local_layer_ids"), "list")
                r.note("layer_types is not in the config: layers in local_layer_ids are hybrid_sliding, the others "
                       "hybrid (InklingTextConfig)")
                return [_SLIDING if i in local else _FULL for i in range(num_layers)]
            r.note("layer_types is not in the config; the Inkling default: hybrid every sixth layer, hybrid_sliding "
                   "otherwise")
            return [_FULL if (i + 1) % 6 == 0 else _SLIDING for i in range(num_layers)]
        r.check("layer_types", types, "list")
        if len(types) != num_layers or any(t not in (_SLIDING, _FULL) for t in types):
            raise ConfigError(
                f"{r.source_name}: {r.prefix}layer_types must hold {num_layers} entries of {_SLIDING!r} or {_FULL!r}",
                "one entry per layer",
            )
        return list(types)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        types = self.layer_types(r, num_layers)
        hidden = r.first_of("hidden_size", ("hidden_size",))
        kernel = r.first_of("conv_kernel_size", ("conv_kernel_size", "sconv_kernel_size"))
        full = swa = None
        if _FULL in types:
            heads, dim = r.first_of("num_kv_heads", self.KV_HEADS), r.first_of("head_dim", self.HEAD_DIM)
            full = FullAttentionSpec(num_kv_heads=heads, head_size=dim, head_size_v=dim)
        if _SLIDING in types:
            heads = r.first_of("swa_num_kv_heads", ("swa_num_key_value_heads",))
            dim = r.first_of("swa_head_dim", ("swa_head_dim",))
            window = r.first_of("sliding_window", ("sliding_window_size", "sliding_window"))
            swa = SlidingWindowSpec(num_kv_heads=heads, head_size=dim, head_size_v=dim, sliding_window=window)
        attention: list[LayerSpec] = []
        states: list[LayerSpec] = []
        for kind in types:
            spec = full if kind == _FULL else swa
            assert spec is not None
            attention.append(spec)
            kv = spec.num_kv_heads * spec.head_size
            names = ("conv_k", "conv_v", "conv_attn", "conv_mlp")
            # NOTE: (kernel - 1, channels) as vLLM sizes a short conv; transformers keeps all ``kernel`` inputs.
            states.append(StateSpec(mixer="short_conv", shapes=tuple(zip(names, ((kernel - 1, kv), (kernel - 1, kv),
                                    (kernel - 1, hidden), (kernel - 1, hidden)), strict=True)), fp32_tensors=names))
        r.note(f"Inkling: every layer keeps attention K/V and four float32 short-convolution states of "
               f"conv_kernel_size = {kernel} inputs (K, V, pre-attention, pre-MLP)")
        passes = r.optional("loop_num_passes", ("loop_num_passes",)) if r.defaults_name == "inkling2_loop_text" else None
        if passes and passes > 1:
            start = r.first_of("loop_layer_index_start", ("loop_layer_index_start",))
            end = min(r.first_of("loop_layer_index_end", ("loop_layer_index_end",)), num_layers)
            if start < end:
                r.note(f"loop_num_passes = {passes}: layers {start}..{end - 1} run {passes} times, each pass with "
                       f"caches of its own ({(passes - 1) * (end - start)} extra layer caches)")
                attention += attention[start:end] * (passes - 1)
                states += states[start:end] * (passes - 1)
        return attention + states

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        types = self.layer_types(r, layers)
        kernel = r.first_of("conv_kernel_size", ("conv_kernel_size", "sconv_kernel_size"))
        d_rel = r.first_of("d_rel", ("d_rel",))
        v2 = model_type != "inkling_text"
        attention: list[Matrix] = []
        other = 0
        widths = []
        for kind in (_SLIDING, _FULL):
            n = types.count(kind)
            if not n:
                continue
            if kind == _SLIDING:
                heads = r.first_of("swa_num_attention_heads", ("swa_num_attention_heads",))
                kv_heads = r.first_of("swa_num_kv_heads", ("swa_num_key_value_heads",))
                head_dim = r.first_of("swa_head_dim", ("swa_head_dim",))
                extent = r.first_of("sliding_window", ("sliding_window_size", "sliding_window"))
            else:
                heads = r.first_of("num_attention_heads", self.HEADS)
                kv_heads = r.first_of("num_kv_heads", self.KV_HEADS)
                head_dim = r.first_of("head_dim", self.HEAD_DIM)
                extent = r.first_of("rel_extent", ("rel_extent",))
            q, kv = heads * head_dim, kv_heads * head_dim
            widths.append(q + 2 * kv)
            attention += [Matrix(in_features=hidden, out_features=q, count=n),
                          Matrix(in_features=hidden, out_features=kv, count=2 * n),
                          Matrix(in_features=hidden, out_features=heads * d_rel, count=n),  # relative states
                          Matrix(in_features=q, out_features=hidden, count=n)]
            other += d_rel * extent * n  # the relative-position profiles
            if not v2:
                other += (2 * kv * kernel + 2 * head_dim) * n  # K/V short convolutions, q/k norms
                continue
            # the o_proj gate, the sinks; scaled q and relative-state norms
            attention += [Matrix(in_features=hidden, out_features=q, count=n),
                          Matrix(in_features=hidden, out_features=heads, count=n)]
            other += (q + heads * d_rel) * n
            if kind == _SLIDING:
                other += 2 * kv * kernel * n  # K/V short convolutions
            else:  # dynamic K/V convolutions: static taps and per-token taps per KV head; q/k/v input norms
                attention.append(Matrix(in_features=hidden, out_features=kv_heads * kernel, count=2 * n))
                other += (2 * kernel * kv + 3 * hidden) * n
        vocab = vocab_of(r)
        head_rows = r.first_of("unpadded_vocab_size", ("unpadded_vocab_size",)) if v2 else vocab
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=hidden, out_features=vocab),)),
                 WeightPart(name="lm_head", matrices=(Matrix(in_features=hidden, out_features=head_rows),)),
                 WeightPart(name="attention", matrices=tuple(attention), other_parameters=other)]
        r.note(f"{model_type}: the lm_head is its own matrix ({head_rows} rows; the config class ties nothing)")
        top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
        experts = r.first_of("num_experts", ("n_routed_experts", "num_local_experts"))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        n_moe, n_dense, shared = layers, 0, 0
        if not v2:
            n_moe = len(self.moe_layers(r, layers))
            n_dense = layers - n_moe
            shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
        parts.append(WeightPart(name="experts", matrices=(
            Matrix(in_features=hidden, out_features=size, count=2 * experts * n_moe),
            Matrix(in_features=size, out_features=hidden, count=experts * n_moe))))
        if shared and n_moe:
            parts.append(WeightPart(name="shared_experts", matrices=(
                Matrix(in_features=hidden, out_features=size, count=2 * shared * n_moe),
                Matrix(in_features=size, out_features=hidden, count=shared * n_moe))))
        # the router scores the shared experts too (Inkling); the correction bias; Inkling's global scale
        parts.append(WeightPart(name="router", tp_sharded=False, matrices=(
            Matrix(in_features=hidden, out_features=experts + shared, count=n_moe),),
            other_parameters=(experts + (0 if v2 else 1)) * n_moe))
        mlp_width = top_k * size + shared * size
        if n_dense:
            inner = r.first_of("intermediate_size", ("intermediate_size",))
            parts.append(WeightPart(name="mlp", other_parameters=n_dense, matrices=(  # + a global scale each
                Matrix(in_features=hidden, out_features=inner, count=2 * n_dense),
                Matrix(in_features=inner, out_features=hidden, count=n_dense))))
            mlp_width = max(mlp_width, inner)
        # per layer: two RMSNorms and two residual short convolutions; the final norm and the embedding's norm
        norms = (2 * hidden + 2 * hidden * kernel) * layers + 2 * hidden
        if v2:
            # block attention residual queries: the MLP's every layer, attention's after layer 0 (3 on full
            # layers), the final one; sliding layers' one input norm is counted above, full layers' three in other
            n_full_after_0 = sum(1 for i, t in enumerate(types) if t == _FULL and i > 0)
            n_sliding_after_0 = sum(1 for i, t in enumerate(types) if t == _SLIDING and i > 0)
            norms += hidden * (layers + 3 * n_full_after_0 + n_sliding_after_0 + 1)
            norms -= hidden * types.count(_FULL)  # full layers have q/k/v input norms (in other) instead
            if model_type == "inkling2_loop_text":
                start = r.first_of("loop_layer_index_start", ("loop_layer_index_start",), kind="count")
                end = r.first_of("loop_layer_index_end", ("loop_layer_index_end",))
                rank = r.first_of("loop_gate_rank", ("loop_gate_rank",))
                looped = max(0, min(end, layers) - start)
                # four message gates per looped layer (down from 2 x hidden, forget and message up), the message queries
                parts.append(WeightPart(name="attention", matrices=(
                    Matrix(in_features=2 * hidden, out_features=rank, count=4 * looped),
                    Matrix(in_features=rank, out_features=hidden, count=8 * looped))))
                norms += (end - start) * 4 * hidden
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        r.note(f"{model_type}: {types.count(_SLIDING)} sliding and {types.count(_FULL)} full layers; {experts} experts "
               f"in {n_moe} layers, all resident")
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                        {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": max(widths, default=0),
                         "vocab_size": vocab})

    #: InklingVisionConfig / InklingAudioConfig / Inkling2VisionConfig defaults of the keys the towers' counts read.
    TOWER_DEFAULTS: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "inkling_vision": {"patch_size": 40, "temporal_patch_size": 2, "num_channels": 3, "n_layers": 24},
        "inkling_audio": {"n_mel_bins": 80, "mel_vocab_size": 256},
        "inkling2_vision": {"hidden_size": 1024, "num_hidden_layers": 23, "num_channels": 3, "patch_size": 20,
                            "mlp_ratio": 4.0, "spatial_merge_size": 2, "posemb_grid_size": 32,
                            "projection_hidden_dim": 4096, "projector_bias": False},
    }

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        kind = "inkling2_vision" if r.defaults_name in ("inkling2_text", "inkling2_loop_text") else "inkling_vision"
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=self.TOWER_DEFAULTS[kind], defaults_name=kind)
        parts = self.inkling2_vision(v, text_hidden) if kind == "inkling2_vision" else self.inkling_vision(v, text_hidden)
        audio = outer.get("audio_config")
        if kind == "inkling_vision" and isinstance(audio, Mapping):
            a = ConfigReader(audio, source_name=r.source_name, prefix="audio_config.",
                             defaults=self.TOWER_DEFAULTS["inkling_audio"], defaults_name="inkling_audio")
            codes = a.first_of("n_mel_bins", ("n_mel_bins", "num_codebooks")) * a.first_of(
                "mel_vocab_size", ("mel_vocab_size", "codebook_size"))
            # one embedding row per (codebook, code), then an RMSNorm
            parts.append(WeightPart(name="audio_tower", vision=True, other_parameters=(codes + 1) * text_hidden))
            r.notes.extend(n for n in a.notes if n not in r.notes)
        r.notes.extend(n for n in v.notes if n not in r.notes)
        r.note(f"{kind} tower{' and audio embedding' if kind == 'inkling_vision' else ''} reported separately as "
               "weights.vision_*")
        return parts

    @staticmethod
    def inkling2_vision(v: ConfigReader, text_hidden: int) -> list[WeightPart]:
        """Inkling2VisionModel: patch embedding, class token and its position, a learned position grid, a LayerNorm;
        ViT layers with biased q/k/v/out and MLP, two LayerNorms and two layer scales; the merger's two linears."""
        hidden = v.first_of("hidden_size", ("hidden_size",))
        layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
        inner = v.optional("intermediate_size", ("intermediate_size",))
        if inner is None:
            inner = int(hidden * v.first_of("mlp_ratio", ("mlp_ratio",), kind="ratio"))
        patch = v.first_of("patch_size", ("patch_size",))
        channels = v.first_of("num_channels", ("num_channels",))
        grid = v.first_of("posemb_grid_size", ("posemb_grid_size",))
        merge = v.first_of("spatial_merge_size", ("spatial_merge_size",))
        width = v.first_of("projection_hidden_dim", ("projection_hidden_dim",))
        bias = v.flag("projector_bias", False)
        tower = WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=channels * patch * patch, out_features=hidden),
            Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
            Matrix(in_features=hidden, out_features=inner, count=layers),
            Matrix(in_features=inner, out_features=hidden, count=layers)),
            other_parameters=2 * hidden + grid * grid * hidden + 2 * hidden
            + (4 * hidden + inner + hidden + 4 * hidden + 2 * hidden) * layers)
        projector = WeightPart(name="projector", vision=True, matrices=(
            Matrix(in_features=hidden * merge * merge, out_features=width), Matrix(in_features=width, out_features=text_hidden)),
            other_parameters=(width + text_hidden) if bias else 0)
        return [tower, projector]

    @staticmethod
    def inkling_vision(v: ConfigReader, text_hidden: int) -> list[WeightPart]:
        """InklingVisionModel: ``n_layers`` folding projections whose widths follow transformers' ``plan_out_scales``
        (spatial then temporal folds of the patch, channels rounded up to 64), each but the last with an RMSNorm,
        the last into the language model; a final RMSNorm."""
        patch = v.first_of("patch_size", ("patch_size",))
        temporal = v.first_of("temporal_patch_size", ("temporal_patch_size",))
        channels = v.first_of("num_channels", ("num_channels",))
        layers = v.first_of("num_hidden_layers", ("n_layers", "num_hidden_layers"))
        scales = inkling_scales(v, temporal, patch, layers, channels)
        matrices = []
        norms = text_hidden
        for i, (start, end) in enumerate(itertools.pairwise(scales)):
            fold = (end[0] // start[0]) * (end[1] // start[1]) * (end[2] // start[2])
            out = text_hidden if i == layers - 1 else end[3]
            matrices.append(Matrix(in_features=start[3] * fold, out_features=out))
            norms += out if i != layers - 1 else 0
        return [WeightPart(name="vision_tower", vision=True, matrices=tuple(matrices), other_parameters=norms)]

    def moe_layers(self, r: ConfigReader, layers: int) -> list[int]:
        """Inkling's ``mlp_layer_types`` ("dense"/"sparse" per layer); absent, every layer is MoE (the
        InklingTextConfig default ``dense_mlp_idx`` 0)."""
        if not r.has("mlp_layer_types"):
            dense = r.first_of("dense_mlp_idx", ("dense_mlp_idx",), required=False, kind="count") or 0
            return list(range(min(dense, layers), layers))
        types = r.check("mlp_layer_types", r.raw("mlp_layer_types"), "list")
        if len(types) != layers or any(t not in ("dense", "sparse") for t in types):
            raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must hold 'dense' or 'sparse' for each of "
                              f"the {layers} layers", "fix mlp_layer_types or drop it")
        return [i for i, t in enumerate(types) if t == "sparse"]

    def max_context(self, r: ConfigReader) -> int | None:
        return r.optional("max_context_tokens", ("max_position_embeddings",))


def _prime_factors(number: int) -> list[int]:
    factors = []
    while number % 2 == 0:
        factors.append(2)
        number //= 2
    for p in range(3, math.isqrt(number) + 1, 2):
        while number % p == 0:
            factors.append(p)
            number //= p
    if number > 1:
        factors.append(number)
    return factors


def inkling_scales(v: ConfigReader, temporal: int, patch: int, layers: int, channels: int) -> list[tuple[int, ...]]:
    """The (t, h, w, channels) grid after each Inkling vision layer, as transformers' ``plan_out_scales`` plans it:
    candidate scales (the unfolded patch, then spatial folds by the patch size's prime factors, then temporal ones),
    and for each layer the candidate nearest (in log size) to an even log-spaced progression; first and last fixed."""
    hs = list(_cumprod(_prime_factors(patch)[::-1]))
    ts = list(_cumprod(_prime_factors(temporal)[::-1]))
    if not hs or not ts:
        raise ConfigError(f"{v.source_name}: vision_config patch_size and temporal_patch_size must be at least 2",
                          "pass --weights-bytes SIZE for this checkpoint")
    top = hs[-1]
    scales = [(1, 1, 1, channels)]
    scales += [(1, h, h, math.ceil(h * h * channels / 64) * 64) for h in hs]
    # NOTE: transformers rounds the temporal scales' channels as ceil(h^2 * c * t) * 64, kept as it computes them
    scales += [(t, top, top, top * top * channels * t * 64) for t in ts]
    if layers < len(scales):
        raise ConfigError(
            f"{v.source_name}: an Inkling vision tower of {layers} layers over {len(scales)} candidate scales is planned "
            "by an assignment solver kvplan does not reproduce", "pass --weights-bytes SIZE for this checkpoint")
    sizes = [math.log(s[0] * s[1] * s[2]) for s in scales]
    total = math.log(patch * patch * temporal * channels)
    ideal = [total * i / layers for i in range(layers + 1)]

    def nearest(x: float) -> int:
        return min(range(len(scales)), key=lambda j: abs(x - sizes[j]))

    picks = [nearest(x) for x in ideal]
    picks[0], picks[-1] = 0, len(scales) - 1
    return [scales[j] for j in picks]


def _cumprod(values: list[int]) -> list[int]:
    out, acc = [], 1
    for value in values:
        acc *= value
        out.append(acc)
    return out


PARSERS: tuple[type[ArchParser], ...] = (InklingParser,)
