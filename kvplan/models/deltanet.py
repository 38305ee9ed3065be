"""Gated DeltaNet hybrids read by ``layer_types``: AllenAI OLMo-Hybrid (``olmo_hybrid``) and Lara-mini
(``lara_mini``).

``linear_attention`` layers keep a Gated DeltaNet state, as Qwen3-Next's do: a short convolution over q,
k and v (``2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads *
linear_value_head_dim`` channels, ``linear_conv_kernel_dim`` taps) and a ``(linear_num_value_heads,
linear_key_head_dim, linear_value_head_dim)`` recurrent state; ``full_attention`` and
``sliding_attention`` layers cache GQA K/V.

Weights (transformers OlmoHybrid / LaraMini): a Gated DeltaNet layer holds q, k, v, the output gate z, the
per-head a and b projections, the output projection, a depthwise convolution over q, k and v, ``A_log``,
``dt_bias`` and a gated RMSNorm of one value head; an attention layer holds GQA q/k/v/o with q/k RMSNorms
(OLMo-Hybrid: over all heads, Lara-mini: per head). OLMo-Hybrid has a gated MLP in every layer, Lara-mini
a mixture of experts with an ungated shared expert in every layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.models.base import STATE, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.qwen import Qwen3NextParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention


class DeltaNetHybridParser(Qwen3NextParser):
    """Gated DeltaNet state (conv window + float32 recurrent state) and full / sliding GQA by layer_types."""

    family = "deltanet_hybrid"
    model_types = ("olmo_hybrid", "lara_mini")
    defaults = {}
    #: OlmoHybridConfig and LaraMiniConfig defaults (their default ``layer_types``: OLMo-Hybrid full attention every
    #: fourth layer; Lara-mini a fixed list of linear, sliding and full layers, which a config file carries).
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "olmo_hybrid": {"hidden_size": 3840, "num_hidden_layers": 32, "num_attention_heads": 30,
                        "num_key_value_heads": 30, "linear_num_key_heads": 30, "linear_num_value_heads": 30,
                        "linear_key_head_dim": 96, "linear_value_head_dim": 192, "linear_conv_kernel_dim": 4,
                        "full_attention_interval": 4, "intermediate_size": 11008, "vocab_size": 100352,
                        "tie_word_embeddings": False},
        "lara_mini": {"hidden_size": 1024, "num_hidden_layers": 34, "num_attention_heads": 16, "num_key_value_heads": 4,
                      "head_dim": 128, "linear_num_key_heads": 8, "linear_num_value_heads": 16,
                      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                      "sliding_window": 512, "vocab_size": 151936, "tie_word_embeddings": True, "num_experts": 128,
                      "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 4},
    }
    weight_types = ("olmo_hybrid", "lara_mini")
    sliding_window_applies = False

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_linear = self.layer_kinds(r, layers).count(STATE)
        n_attn = layers - n_linear
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        hk = r.first_of("linear_num_key_heads", ("linear_num_key_heads",))
        hv = r.first_of("linear_num_value_heads", ("linear_num_value_heads",))
        dk = r.first_of("linear_key_head_dim", ("linear_key_head_dim",))
        dv = r.first_of("linear_value_head_dim", ("linear_value_head_dim",))
        conv = r.first_of("linear_conv_kernel_dim", ("linear_conv_kernel_dim",))
        key_dim, value_dim = hk * dk, hv * dv
        attention = gqa_attention(hidden, heads, kv_heads, head_dim, n_attn)
        attention += [Matrix(in_features=hidden, out_features=2 * key_dim + 2 * value_dim, count=n_linear),  # q k v z
                      Matrix(in_features=hidden, out_features=hv, count=2 * n_linear),  # a, b
                      Matrix(in_features=value_dim, out_features=hidden, count=n_linear)]  # out
        q, kv = heads * head_dim, kv_heads * head_dim
        qk_norm = q + kv if model_type == "olmo_hybrid" else 2 * head_dim
        other = qk_norm * n_attn + ((2 * key_dim + value_dim) * conv + 2 * hv + dv) * n_linear
        if r.raw("attention_bias") is True:
            other += (q + 2 * kv + hidden) * n_attn
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        top_k = experts = None
        if model_type == "lara_mini":
            top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
            experts = r.first_of("num_experts", ("num_experts",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            shared = r.first_of("shared_expert_intermediate_size", ("shared_expert_intermediate_size",))
            parts += experts_parts(hidden, size, experts, layers, shared_size=shared)
            mlp_width = top_k * size + shared
            r.note(f"Lara-mini: {experts} experts and a shared expert in every layer, all resident")
        else:
            mlp_width = r.first_of("intermediate_size", ("intermediate_size",))
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=mlp_width, count=2 * layers),
                Matrix(in_features=mlp_width, out_features=hidden, count=layers))))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"{n_linear} Gated DeltaNet and {n_attn} attention layers counted")
        return count_of(parts, experts, top_k,
                        {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": 2 * key_dim + 2 * value_dim,
                         "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (DeltaNetHybridParser,)
