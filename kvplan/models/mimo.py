"""Xiaomi MiMo (``mimo``: MiMo-7B, Qwen2's layers plus multi-token-prediction layers) and MiMo-V2-Flash:
sliding-window and full-attention layers with their own head counts, attention
sinks, and fine-grained MoE after a dense first layer.

Which layers slide comes from ``layer_types`` (transformers' form) or ``hybrid_layer_pattern`` (the Hub's,
1 = sliding), else MiMoV2FlashConfig's rule (layer 0 and every sixth layer full). Full layers cache
``num_key_value_heads`` heads of K ``head_dim`` and V ``v_head_dim``; sliding layers the ``swa_*`` values
(transformers MiMoV2FlashAttention: twice the full layers' KV heads when the config names none).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.decoder import DecoderLayout, DecoderParser, note_mtp
from kvplan.models.qwen import QwenParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention
from kvplan.specs import FullAttentionSpec, LayerSpec, SlidingWindowSpec


class MimoParser(QwenParser):
    """MiMo-7B (``mimo``, the Hub's remote-code MiMoConfig, a Qwen2Config): Qwen2's cache and layers, and
    ``num_nextn_predict_layers`` MTP layers that the checkpoint holds and whose weights are counted.

    Each MTP layer (MiMoMTPLayers in the Hub's modeling_mimo.py, as vLLM's mimo_mtp.py loads it) is a Qwen2
    attention and MLP, five RMSNorms (input, post-attention, token, hidden, final) and an input projection of
    ``2 * hidden_size -> hidden_size``. Engines serve them only to draft tokens (speculative decoding)."""

    family = "mimo"
    model_types = ("mimo",)
    weight_types = ("mimo",)
    #: MiMoConfig = Qwen2Config defaults (transformers 5.25) + num_nextn_predict_layers 0.
    defaults = {
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
        "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28, "tie_word_embeddings": False,
        "num_nextn_predict_layers": 0,
    }
    defaults_by_type = {}
    MTP_KEY = ""  # the MTP layers are counted here, not only noted

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qkv_bias=True, o_bias=False)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        counted = super().count_weights(r, model_type)
        mtp = r.first_of("num_nextn_predict_layers", ("num_nextn_predict_layers",), kind="count")
        if not mtp:
            return counted
        hidden = hidden_of(r)
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads, head_dim = self.kv_heads(r, heads), self.head_dim(r, heads)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        matrices = [*gqa_attention(hidden, heads, kv_heads, head_dim, mtp),
                    Matrix(in_features=hidden, out_features=inner, count=2 * mtp),
                    Matrix(in_features=inner, out_features=hidden, count=mtp),
                    Matrix(in_features=2 * hidden, out_features=hidden, count=mtp)]  # input_proj
        qkv_bias = (heads + 2 * kv_heads) * head_dim
        part = WeightPart(name="mtp", matrices=tuple(matrices), other_parameters=(qkv_bias + 5 * hidden) * mtp)
        r.note(f"num_nextn_predict_layers = {mtp}: the checkpoint's MTP layers are counted (Qwen2 attention and MLP, "
               "an input projection, five norms each); engines use them only for speculative decoding")
        return replace(counted, parts=[*counted.parts, part])


class MimoV2FlashParser(DecoderParser):
    """MiMo-V2-Flash: ``hybrid_layer_pattern`` / ``layer_types`` full vs sliding layers, ``swa_*`` KV heads, K 192 / V 128."""

    family = "mimo_v2_flash"
    model_types = ("mimo_v2_flash",)
    weight_types = ("mimo_v2_flash",)
    #: MiMoV2FlashConfig defaults (transformers 5.24).
    defaults = {
        "vocab_size": 152576, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 48,
        "num_attention_heads": 64, "num_key_value_heads": 4, "max_position_embeddings": 131072,
        "moe_intermediate_size": 2048, "num_experts_per_tok": 8, "n_routed_experts": 256, "head_dim": 192,
        "v_head_dim": 128, "sliding_window": 129, "tie_word_embeddings": False,
    }

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if r.has("layer_types") or r.has("hybrid_layer_pattern"):
            flags = _per_layer(r, "hybrid_layer_pattern", "layer_types", "sliding_attention", num_layers)
            return [SLIDING if flag else FULL for flag in flags]
        r.note("no layer_types or hybrid_layer_pattern: MiMoV2FlashConfig makes layer 0 and every layer with "
               "(i + 1) % 6 == 0 full attention, the rest sliding")
        return [FULL if i == 0 or not (i + 1) % 6 else SLIDING for i in range(num_layers)]

    def sliding_window(self, r: ConfigReader) -> int:
        if r.has("sliding_window_size"):
            size = r.first_of("sliding_window_size", ["sliding_window_size"])
            r.note(f"sliding_window = sliding_window_size + 1 = {size + 1} (MiMoV2FlashConfig)")
            return size + 1
        return r.first_of("sliding_window", ["sliding_window"])

    def layer_dims(self, r: ConfigReader, prefix: str) -> tuple[int, int, int, int]:
        """(attention heads, KV heads, K head dim, V head dim) of the full (``""``) or sliding (``"swa_"``) layers."""
        heads = r.first_of(f"{prefix}num_attention_heads", (f"{prefix}num_attention_heads", "num_attention_heads"))
        if prefix and not r.has("swa_num_key_value_heads"):
            kv_heads = 2 * r.first_of("num_kv_heads", ("num_key_value_heads",))
            r.note(f"no swa_num_key_value_heads: sliding layers cache 2 x num_key_value_heads = {kv_heads} KV heads "
                   "(transformers MiMoV2FlashAttention)")
        else:
            kv_heads = r.first_of(f"{prefix}num_key_value_heads", (f"{prefix}num_key_value_heads",))
        head_dim = r.first_of(f"{prefix}head_dim", (f"{prefix}head_dim", "head_dim"))
        v_dim = r.first_of(f"{prefix}v_head_dim", (f"{prefix}v_head_dim", "v_head_dim"))
        if kv_heads > heads or heads % kv_heads:
            raise ConfigError(f"{r.source_name}: {heads} attention heads are not a multiple of {kv_heads} KV heads",
                              f"check {prefix}num_key_value_heads / {prefix}num_attention_heads")
        return heads, kv_heads, head_dim, v_dim

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        kinds = self.layer_kinds(r, self.num_layers(r))
        specs: list[LayerSpec] = []
        if FULL in kinds:
            _h, kv, k_dim, v_dim = self.layer_dims(r, "")
            full = FullAttentionSpec(num_kv_heads=kv, head_size=k_dim, head_size_v=v_dim)
        if SLIDING in kinds:
            _h, kv, k_dim, v_dim = self.layer_dims(r, "swa_")
            sliding = SlidingWindowSpec(num_kv_heads=kv, head_size=k_dim, head_size_v=v_dim,
                                        sliding_window=self.sliding_window(r))
        for kind in kinds:
            specs.append(full if kind == FULL else sliding)
        return specs

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        sliding = [kind == SLIDING for kind in self.layer_kinds(r, layers)]
        if r.has("moe_layer_freq") or r.has("mlp_layer_types"):
            sparse = _per_layer(r, "moe_layer_freq", "mlp_layer_types", "sparse", layers)
        else:
            r.note("no mlp_layer_types or moe_layer_freq: MiMoV2FlashConfig makes layer 0 dense, the rest MoE")
            sparse = [i > 0 for i in range(layers)]
        n_swa, n_moe = sum(sliding), sum(sparse)
        attention: list[Matrix] = []
        other = 0
        qkv_width = 0
        for count, prefix, sinks_key in ((layers - n_swa, "", "add_full_attention_sink_bias"),
                                         (n_swa, "swa_", "add_swa_attention_sink_bias")):
            if not count:
                continue
            heads, kv_heads, head_dim, v_dim = self.layer_dims(r, prefix)
            attention += [Matrix(in_features=hidden, out_features=heads * head_dim, count=count),
                          Matrix(in_features=hidden, out_features=kv_heads * head_dim, count=count),
                          Matrix(in_features=hidden, out_features=kv_heads * v_dim, count=count),
                          Matrix(in_features=heads * v_dim, out_features=hidden, count=count)]
            if switch(r, sinks_key, bool(prefix)):  # transformers: sinks on every sliding layer
                other += heads * count  # one learned sink logit per head
            qkv_width = max(qkv_width, heads * head_dim + kv_heads * (head_dim + v_dim))
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        intermediate = r.first_of("intermediate_size", ("intermediate_size",))
        if layers - n_moe:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - n_moe)),
                Matrix(in_features=intermediate, out_features=hidden, count=layers - n_moe))))
        experts = top_k = None
        width = intermediate
        if n_moe:
            experts = r.first_of("num_experts", ("n_routed_experts", "num_experts"))
            top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            # the router keeps an e_score_correction_bias per expert whatever topk_method says
            # (transformers MiMoV2FlashTopkRouter: a saved buffer)
            parts += experts_parts(hidden, size, experts, n_moe, router_bias=True)
            width = max(width, (top_k or 1) * size)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"MiMo-V2-Flash: {n_swa} sliding-window and {layers - n_swa} full-attention layers; {experts} experts "
               f"in {n_moe} of {layers} layers, all resident")
        note_mtp(r, self.MTP_KEY)
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": qkv_width,
                                                "vocab_size": vocab_of(r)})


def _per_layer(r: ConfigReader, flags_key: str, types_key: str, marked: str, layers: int) -> list[bool]:
    """One flag per layer, from the Hub's 0/1 list (``flags_key``) or transformers' names (``types_key``)."""
    for key, test in ((flags_key, lambda v: v == 1), (types_key, lambda v: v == marked)):
        value: Any = r.raw(key)
        if isinstance(value, list):
            if len(value) < layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}{key} has {len(value)} entries for {layers} layers",
                                  f"make {key} one entry per layer")
            return [bool(test(v)) for v in value[:layers]]
    tried = f"{r.prefix}{flags_key}, {r.prefix}{types_key}"
    raise ConfigError(f"{r.source_name}: required field {types_key} is missing (tried {tried})",
                      f"add {types_key}: one entry per layer")


PARSERS: tuple[type[ArchParser], ...] = (MimoParser, MimoV2FlashParser)
