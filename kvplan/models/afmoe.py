"""Arcee AFMoE (``afmoe``, Trinity) and Poolside Laguna (``laguna``, built on AFMoE's modeling): GQA with per-head
q/k norms and an output gate, MoE with shared experts and a router bias after the dense first layers.

AFMoE's cache (sliding and full layers by ``layer_types``) is read by the generic rules; Laguna's by its own entry
(LagunaConfig: every layer full unless ``layer_types`` says otherwise). Weights: transformers modeling_afmoe.py,
modeling_laguna.py.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, mlp_types_moe
from kvplan.models.tensors import Matrix


class AfmoeParser(DecoderParser):
    """AFMoE: a sigmoid output gate (``gate_proj``, heads x head_dim) on attention, four norms per layer (before
    and after attention and the MLP), dense MLPs in the first ``num_dense_layers`` layers, then experts of
    ``moe_intermediate_size`` with ``num_shared_experts`` shared ones and an expert bias."""

    family = "afmoe"
    model_types = ("afmoe",)
    weight_types = ("afmoe",)
    defaults_by_type = {"afmoe": {"tie_word_embeddings": False, "num_dense_layers": 1, "num_experts": 64,
                                  "num_shared_experts": 2, "moe_intermediate_size": 1408}}

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, norms_per_layer=4, router_bias=True)

    def attention_weights(self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
                          ) -> tuple[list[Matrix], int, int]:
        attention, other, width = super().attention_weights(r, model_type, hidden, layers, heads)
        gate = Matrix(in_features=hidden, out_features=heads * self.head_dim(r, heads), count=layers)
        return [*attention, gate], other, width

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        dense = r.first_of("num_dense_layers", ("num_dense_layers",), kind="count")
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("num_shared_experts", ("num_shared_experts",), kind="count")
        return MoeLayout(layers=list(range(min(dense, layers), layers)), experts=r.first_of("num_experts", ("num_experts",)),
                         top_k=top_k, expert_size=size, shared_size=shared * size or None)


class LagunaParser(DecoderParser):
    """Laguna: per-layer query head counts (``num_attention_heads_per_layer``), an output gate per head
    (``gating`` true or "per-head") or per channel, per-head q/k norms; dense or MoE per ``mlp_layer_types``
    (default: a dense first layer), a shared expert of ``shared_expert_intermediate_size``, a router correction
    bias."""

    family = "laguna"
    model_types = ("laguna",)
    weight_types = ("laguna",)
    #: LagunaConfig defaults (transformers 5.25); ``first_k_dense_replace`` stands for its default mlp_layer_types.
    defaults_by_type = {"laguna": {
        "vocab_size": 100352, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 40,
        "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
        "sliding_window": 512, "tie_word_embeddings": False, "num_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "gating": True,
        "attention_bias": False, "first_k_dense_replace": 1}}

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        """LagunaConfig without ``layer_types``: every layer full attention, whatever ``sliding_window`` says."""
        if r.has("sliding_window"):
            r.note("no layer_types: LagunaConfig makes every layer full attention (sliding_window applies only to "
                   "layers layer_types marks sliding_attention)")
        return [FULL] * num_layers

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(router_bias=True)

    def attention_weights(self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
                          ) -> tuple[list[Matrix], int, int]:
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        per_layer = r.raw("num_attention_heads_per_layer")
        if isinstance(per_layer, list):
            r.check("num_attention_heads_per_layer", per_layer, "list")
            if len(per_layer) < layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}num_attention_heads_per_layer has {len(per_layer)} "
                                  f"entries for {layers} layers", "one query head count per layer")
            counts = [r.check("num_attention_heads_per_layer", h, "int") for h in per_layer[:layers]]
        else:
            counts = [heads] * layers
        gating = r.raw("gating") if r.has("gating") else r.defaults.get("gating", True)
        per_head = gating is True or gating == "per-head"
        bias = r.raw("attention_bias") is True
        attention: list[Matrix] = []
        other = 0
        for h in counts:
            q, kv = h * head_dim, kv_heads * head_dim
            attention += [Matrix(in_features=hidden, out_features=q), Matrix(in_features=hidden, out_features=kv, count=2),
                          Matrix(in_features=q, out_features=hidden),
                          Matrix(in_features=hidden, out_features=h if per_head else q)]  # g_proj
            other += 2 * head_dim + ((q + 2 * kv + hidden) if bias else 0)  # q/k norms (+ biases)
        return attention, other, max(counts) * head_dim + 2 * kv_heads * head_dim

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if not r.has("mlp_layer_types"):
            r.note("mlp_layer_types is not in the config: LagunaConfig's default, a dense first layer, MoE after it")
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("shared_expert_intermediate_size", ("shared_expert_intermediate_size",), kind="count")
        return mlp_types_moe(r, layers, experts=r.first_of("num_experts", ("num_experts",)), top_k=top_k,
                             expert_size=size, shared_size=shared or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (AfmoeParser, LagunaParser)
