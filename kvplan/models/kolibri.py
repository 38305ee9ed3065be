"""Aleph Alpha Kolibri 1.1 (``kolibri1_1``, transformers 5.25): sliding-window layers and, every fifth layer,
indexed attention (full-length K/V; an indexer selects the keys each query attends to, and transformers' cache keeps
no tensor of its own for it), some of which read another layer's K/V (``kv_source_layers``) and store none.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader
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
    #: Kolibri1_1Config defaults (transformers 5.25) of the keys the cache reads.
    defaults = {"hidden_size": 2560, "num_hidden_layers": 50, "num_attention_heads": 48, "num_key_value_heads": 4,
                "head_dim": 128, "sliding_window": 513, "max_position_embeddings": 262144}

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


#: Model types whose cache is read here but whose weights are not counted, and why.
WEIGHTS_NOT_COUNTED = {"kolibri1_1": "not counted yet: layers that read another's K/V have no k/v projections, "
                                     "and its experts layout is not modelled; pass --weights-bytes"}

PARSERS: tuple[type[ArchParser], ...] = (Kolibri1_1Parser,)
