"""Aleph Alpha Kolibri 1.1 (``kolibri1_1``, transformers 5.25): sliding-window layers and, every fifth layer,
indexed attention (full-length K/V; an indexer selects the keys each query attends to, and transformers' cache keeps
no tensor of its own for it), some of which read another layer's K/V (``kv_source_layers``) and store none.

Weights follow modeling_kolibri1_1.py: q/o projections and a q norm in every layer; k/v projections and a k norm only
in a layer that keeps its own K/V (one reading another's has none); the indexer has no weights; a gated MLP of
``mlp_only_intermediate_size`` in ``mlp_only_layers``, elsewhere every expert (gated, ``moe_intermediate_size``), a
shared expert (``shared_expert_intermediate_size``, no gate) and a router with a saved correction bias; four norms per
layer, the final norm and an untied lm_head.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader, embeddings, hidden_of, layer_indices, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import LayerSpec, SharedKVSpec

#: Kolibri1_1Config: which indexed-attention layer each indexed-attention layer reads the K/V of (by position among
#: them): the 2nd, 3rd and 10th read the 1st's, the 7th to 9th the 6th's.
DEFAULT_SOURCES = (0, 0, 0, 3, 4, 5, 5, 5, 5, 0)
KINDS = {"sliding_attention": SLIDING, "indexed_attention": FULL}


class Kolibri1_1Parser(ArchParser):
    """``layer_types`` of ``sliding_attention`` and ``indexed_attention`` (the config class's default: layer i
    indexed when (i + 1) % 5 == 0); a layer whose ``kv_source_layers`` entry names another layer keeps no cache
    (transformers puts a ``DummyLayer`` in its ``DynamicCache``; ``kv_sharing_modes`` says ``reuse``)."""

    family = "kolibri"
    model_types = ("kolibri1_1",)
    weight_types = ("kolibri1_1",)
    #: Kolibri1_1Config defaults (transformers 5.25) of the keys the cache and the weight count read
    #: (``num_experts`` is saved as ``num_local_experts``: the config class's attribute_map).
    defaults = {"hidden_size": 2560, "num_hidden_layers": 50, "num_attention_heads": 48, "num_key_value_heads": 4,
                "head_dim": 128, "sliding_window": 513, "max_position_embeddings": 262144, "vocab_size": 128000,
                "tie_word_embeddings": False, "num_local_experts": 384, "num_experts_per_tok": 6,
                "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                "mlp_only_intermediate_size": 3584}

    def attention_types(self, r: ConfigReader, num_layers: int) -> list[Any]:
        if r.has("layer_types"):
            types = r.first_of("layer_types", ("layer_types",), kind="list")
        else:
            types = ["indexed_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(num_layers)]
            r.note("layer_types is not in the config; the Kolibri1_1Config default: layer i is indexed attention when "
                   "(i + 1) % 5 == 0, else sliding")
        if len(types) != num_layers or not set(types) <= set(KINDS):
            raise ConfigError(f"{r.source_name}: {r.prefix}layer_types must give sliding_attention or indexed_attention "
                              f"for each of the {num_layers} layers", "fix layer_types (Kolibri1_1Config)")
        return list(types)

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = self.attention_types(r, num_layers)
        r.note("indexed_attention layers keep full-length K/V (the indexer selects among them and caches nothing "
               "of its own in transformers)")
        return [KINDS[t] for t in types]

    def kv_sources(self, r: ConfigReader, types: list[Any]) -> list[int]:
        """Each layer's ``kv_source_layers`` entry, or Kolibri1_1Config's default layout."""
        if r.has("kv_source_layers"):
            sources = r.first_of("kv_source_layers", ("kv_source_layers",), kind="list")
            if len(sources) != len(types) or any(
                    isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= i or sources[s] != s
                    or types[s] != types[i] for i, s in enumerate(sources)):
                raise ConfigError(f"{r.source_name}: {r.prefix}kv_source_layers must name, for each layer, itself or an "
                                  "earlier layer of the same type that keeps its own K/V",
                                  "fix kv_source_layers (Kolibri1_1Config)")
            return list(sources)
        indexed = [i for i, t in enumerate(types) if t == "indexed_attention"]
        if len(indexed) > len(DEFAULT_SOURCES):
            raise ConfigError(f"{r.source_name}: {len(indexed)} indexed-attention layers and no kv_source_layers: the "
                              f"Kolibri1_1Config default covers {len(DEFAULT_SOURCES)}", "add kv_source_layers")
        sources = list(range(len(types)))
        for layer, source in zip(indexed, DEFAULT_SOURCES):
            sources[layer] = indexed[source]
        if indexed:
            r.note("kv_source_layers is not in the config; the Kolibri1_1Config default: of the indexed-attention "
                   "layers, the 2nd, 3rd and 10th read the 1st's K/V, the 7th to 9th the 6th's")
        return sources

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        specs = super().build_layers(r)
        sources = self.kv_sources(r, self.attention_types(r, len(specs)))
        reusing = [i for i, s in enumerate(sources) if s != i]
        if reusing:
            r.note(f"kv_source_layers: {len(reusing)} layers read an earlier layer's K/V and keep none of their own")
        return [SharedKVSpec(reason=f"reads the K/V of layer {s} (kv_source_layers)") if s != i else spec
                for i, (spec, s) in enumerate(zip(specs, sources))]

    def dense_layers(self, r: ConfigReader, num_layers: int) -> frozenset[int]:
        """``mlp_only_layers``, or Kolibri1_1Config's default: the first two layers."""
        if r.has("mlp_only_layers"):
            return layer_indices(r, "mlp_only_layers", r.raw("mlp_only_layers"), num_layers)
        r.note("mlp_only_layers is not in the config; the Kolibri1_1Config default: layers 0 and 1 have a dense MLP")
        return frozenset(i for i in (0, 1) if i < num_layers)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        sources = self.kv_sources(r, self.attention_types(r, layers))
        own = sum(1 for i, s in enumerate(sources) if s == i)
        if own < layers:
            r.note(f"kv_source_layers: {layers - own} layers read another layer's K/V and have no k/v projections")
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=heads * head_dim, count=layers),
            Matrix(in_features=hidden, out_features=kv_heads * head_dim, count=2 * own),
            Matrix(in_features=heads * head_dim, out_features=hidden, count=layers)),
            other_parameters=head_dim * (layers + own)))  # q_norm in every layer, k_norm where k is projected
        dense = self.dense_layers(r, layers)
        n_dense, n_moe = len(dense), layers - len(dense)
        dense_size = r.first_of("mlp_only_intermediate_size", ("mlp_only_intermediate_size",))
        if n_dense:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=dense_size, count=2 * n_dense),
                Matrix(in_features=dense_size, out_features=hidden, count=n_dense))))
        experts = r.first_of("num_experts", ("num_local_experts", "num_experts"))
        top_k = r.first_of("num_experts_per_tok", ("num_experts_per_tok",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("shared_expert_intermediate_size", ("shared_expert_intermediate_size",), kind="count")
        if n_moe:
            # the router's e_score_correction_bias is a buffer the checkpoint saves
            parts += experts_parts(hidden, size, experts, n_moe, shared_size=shared, router_bias=True)
            r.note(f"MoE: {experts} experts of intermediate size {size} in {n_moe} of {layers} layers, all resident; "
                   f"{top_k} routed per token")
        # input, post-attention, post-self-attention and post-MLP norms; the final norm
        parts.append(WeightPart(name="norms", other_parameters=(4 * layers + 1) * hidden, tp_sharded=False))
        width = max(dense_size if n_dense else 0, top_k * size + shared if n_moe else 0)
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                        {"hidden_size": hidden, "mlp_width": width, "qkv_width": (heads + 2 * kv_heads) * head_dim,
                         "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (Kolibri1_1Parser,)
