"""Zyphra ZAYA: every ``hybrid`` layer is CCA attention (compressed convolutional attention) with a GQA K/V
cache of ``num_key_value_heads`` x ``head_dim``, plus two small states in the model dtype: the q/k
convolution window, ``(num_attention_heads + num_key_value_heads) * head_dim`` channels of
``(cca_time0 - 1) + (cca_time1 - 1)`` inputs, and the delayed half of V,
``num_key_value_heads * head_dim // 2`` values (transformers ``ZayaAttention``).

Weights (transformers Zaya): CCA projections (q, k, V split into current and delayed halves, a depthwise and a
grouped q/k convolution with biases, a per-KV-head norm temperature), o_proj; a mixture of experts in every
layer whose router is an MLP over ``router_hidden_size`` with one extra "skip" class; learned residual scalings
around attention and the MLP.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import FullAttentionSpec, LayerSpec, StateSpec


class ZayaParser(ArchParser):
    """CCA attention: GQA K/V plus a q/k conv window and the delayed half of V per layer."""

    family = "zaya"
    model_types = ("zaya",)
    #: ZayaConfig defaults.
    defaults = {"hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 8, "num_key_value_heads": 2,
                "head_dim": 128, "cca_time0": 2, "cca_time1": 2, "max_position_embeddings": 131072,
                "vocab_size": 262272, "tie_word_embeddings": True, "moe_intermediate_size": 2048, "num_experts": 16,
                "num_experts_per_tok": 1, "router_hidden_size": 256}
    weight_types = ("zaya",)
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ("head_dim",)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        types = r.raw("layer_types")
        if r.has("layer_types") and (not isinstance(types, list) or len(types) != num_layers
                                     or any(t != "hybrid" for t in types)):
            raise ConfigError(f"{r.source_name}: {r.prefix}layer_types must be {num_layers} x 'hybrid'",
                              "every ZAYA layer is a hybrid CCA layer")
        heads = r.first_of("num_attention_heads", self.HEADS)
        dims = self.attention_dims(r)
        kv, head_dim = dims["num_kv_heads"], dims["head_size"]
        window = r.first_of("cca_time0", ("cca_time0",)) - 1 + r.first_of("cca_time1", ("cca_time1",)) - 1
        state = StateSpec(mixer="cca", shapes=(("conv_qk", (window, (heads + kv) * head_dim)),
                                                ("delayed_v", (kv * head_dim // 2,))))
        r.note(f"ZAYA CCA: every layer caches K/V and keeps a q/k conv window of {window} inputs and the delayed "
               "half of V (model dtype)")
        return [FullAttentionSpec(**dims)] * num_layers + [state] * num_layers

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = r.first_of("head_dim", self.HEAD_DIM)
        t0 = r.first_of("cca_time0", ("cca_time0",))
        t1 = r.first_of("cca_time1", ("cca_time1",))
        q, kv = heads * head_dim, kv_heads * head_dim
        channels = q + kv  # the q/k convolutions' channels, in heads + kv_heads groups of head_dim
        attention = [Matrix(in_features=hidden, out_features=q, count=layers),
                     Matrix(in_features=hidden, out_features=kv, count=layers),
                     Matrix(in_features=hidden, out_features=kv // 2, count=2 * layers),  # V current and delayed
                     Matrix(in_features=q, out_features=hidden, count=layers)]
        # depthwise and grouped convolutions with biases, the q/k norm temperature per KV head
        other = (channels * t0 + channels * head_dim * t1 + 2 * channels + kv_heads) * layers
        if r.raw("attention_bias") is True:
            other += (q + kv + 2 * (kv // 2) + hidden) * layers
        parts = embeddings(r, hidden, lm_head_bias=r.raw("lm_head_bias") is True)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        experts = r.first_of("num_experts", ("num_experts",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
        router = r.first_of("router_hidden_size", ("router_hidden_size",))
        classes = experts + 1  # the experts and a skip class
        parts.append(WeightPart(name="experts", matrices=(
            Matrix(in_features=hidden, out_features=size, count=2 * experts * layers),
            Matrix(in_features=size, out_features=hidden, count=experts * layers))))
        parts.append(WeightPart(name="router", tp_sharded=False, matrices=(
            Matrix(in_features=hidden, out_features=router, count=layers),
            Matrix(in_features=router, out_features=router, count=2 * layers),
            Matrix(in_features=router, out_features=classes, count=layers)),
            # down_proj, fc1 and fc2 biases, the router MLP's norm, balancing biases; a state scale after layer 0
            other_parameters=(4 * router + classes) * layers + router * (layers - 1)))
        # two RMSNorms and two residual scalings (4 vectors each) per layer; the final norm; the input scaling
        parts.append(WeightPart(name="norms", other_parameters=(10 * layers + 3) * hidden, tp_sharded=False))
        r.note(f"ZAYA: {experts} experts (+ a skip class) in each of {layers} layers, all resident")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": top_k * size,
                                                "qkv_width": q + 2 * kv, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (ZayaParser,)
