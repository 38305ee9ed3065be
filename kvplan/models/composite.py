"""Composite encoder-decoder configs that nest an ``encoder`` and a ``decoder`` config of their own:
``encoder-decoder`` (any two text models, e.g. BERT2BERT), ``vision-encoder-decoder`` (ViT + a text
decoder: TrOCR, Donut), ``speech-encoder-decoder`` and T5Gemma (``t5gemma``, ``t5gemma2``).

The decoder config is read by its own family's rules (its ``model_type``, its class defaults) and
every decoder layer adds cross-attention K/V over the encoder output with the decoder's own K/V
geometry, unless the decoder's family already lays cross-attention out (``add_cross_attention``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, tied
from kvplan.models.registry import REGISTRY, WEIGHT_REGISTRY
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import CrossAttentionSpec, LayerSpec, NoCacheSpec, StateSpec


def _sub_reader(r: ConfigReader, key: str, weights: bool = False) -> tuple[ArchParser, ConfigReader, str]:
    """The parser and reader of the nested ``encoder`` or ``decoder`` config."""
    sub = r.raw(key)
    if not isinstance(sub, Mapping):
        raise ConfigError(
            f"{r.source_name}: required field {key} is missing (tried {r.prefix}{key})",
            f"a {r.raw('model_type')} config nests its {key} config under {key!r}",
        )
    sub_type = str(sub.get("model_type") or "")
    found = (WEIGHT_REGISTRY if weights else REGISTRY).get(sub_type)
    if found is None and key == "encoder":  # an image encoder (ViT) caches nothing: its family counts weights only
        found = WEIGHT_REGISTRY.get(sub_type)
    parser = (found or ArchParser)()
    reader = ConfigReader(sub, source_name=r.source_name, prefix=f"{r.prefix}{key}.", outer=sub,
                          defaults=parser.defaults_for(sub_type), defaults_name=sub_type or "generic",
                          overridden=frozenset(k[len(key) + 1:] for k in r.overridden if k.startswith(key + ".")))
    return parser, reader, sub_type


def _merge(r: ConfigReader, sub: ConfigReader) -> None:
    r.provenance += sub.provenance
    for note in sub.notes:
        r.note(note)


class CompositeParser(ArchParser):
    """The nested decoder config read by its own family, plus cross-attention per decoder layer."""

    family = "composite_encoder_decoder"
    model_types = ("encoder-decoder", "vision-encoder-decoder", "speech-encoder-decoder", "t5gemma", "t5gemma2")
    weight_types = model_types

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        parser, dec, sub_type = _sub_reader(r, "decoder")
        layers = parser.build_layers(dec)
        if not any(isinstance(s, CrossAttentionSpec) for s in layers):
            dims = parser.attention_dims(dec)
            cached = [s for s in layers if not isinstance(s, (StateSpec, NoCacheSpec))]
            layers += [parser.cross_spec(dims)] * len(cached)
        _merge(r, dec)
        r.note(f"decoder read from the nested decoder config (model_type {sub_type or 'unknown'}); every decoder "
               "layer also caches cross-attention K/V over the encoder output (fixed by the encoder length)")
        return layers

    def num_layers(self, r: ConfigReader) -> int:
        parser, dec, _ = _sub_reader(r, "decoder")
        value = parser.num_layers(dec)
        _merge(r, dec)
        return value

    def max_context(self, r: ConfigReader) -> int | None:
        parser, dec, _ = _sub_reader(r, "decoder")
        value = parser.max_context(dec)
        _merge(r, dec)
        return value

    def encoder_len(self, r: ConfigReader) -> int | None:
        if not isinstance(r.raw("encoder"), Mapping):
            return None
        parser, enc, _ = _sub_reader(r, "encoder")
        value = parser.encoder_output_len(enc)
        if value is None:
            value = enc.optional("encoder_len", ("max_position_embeddings", "max_source_positions"))
        _merge(r, enc)
        return value

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The encoder's and the decoder's own weight counts (each by its family), added. The encoder is the
        family's bare model (``AutoModel``: no LM head; BERT's pooler where the family says so)."""
        counts: list[WeightCount] = []
        for key in ("encoder", "decoder"):
            parser, sub, sub_type = _sub_reader(r, key, weights=True)
            bare = getattr(parser, "bare_model_weights", None) if key == "encoder" else None
            if bare is not None:
                counts.append(bare(sub, sub_type))
            else:
                count = parser.count_weights(sub, sub_type)
                if key == "encoder":
                    count = replace(count, parts=[p for p in count.parts if p.name != "lm_head"])
                counts.append(count)
            _merge(r, sub)
        enc, dec = counts
        parts: list[Any] = [p for c in counts for p in c.parts]
        if model_type != "t5gemma" and model_type != "t5gemma2":
            parts += self._projection(r, model_type, enc.hidden_size, dec.hidden_size)
        if model_type == "t5gemma" and not tied(r):  # T5Gemma's own tie_word_embeddings governs its lm_head
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=dec.hidden_size,
                                                                     out_features=dec.vocab_size),)))
        r.note("encoder-decoder: the encoder's and the decoder's weights are counted by their own families")
        return count_of(parts, dec.num_experts, dec.experts_per_token,
                        {"hidden_size": dec.hidden_size, "mlp_width": dec.mlp_width, "qkv_width": dec.qkv_width,
                         "vocab_size": dec.vocab_size})


    @staticmethod
    def _projection(r: ConfigReader, model_type: str, encoder_hidden: int, decoder_hidden: int) -> list[WeightPart]:
        """``enc_to_dec_proj`` (modeling_encoder_decoder.py and its vision and speech twins): a biased linear
        from the encoder's width to the decoder's when they differ and the decoder sets no
        ``cross_attention_hidden_size`` (the speech model compares the encoder's ``output_hidden_size``)."""
        decoder = r.raw("decoder")
        encoder = r.raw("encoder")
        if not isinstance(decoder, Mapping) or decoder.get("cross_attention_hidden_size") is not None:
            return []
        compared = encoder_hidden
        if model_type == "speech-encoder-decoder" and isinstance(encoder, Mapping):
            compared = encoder.get("output_hidden_size") or encoder_hidden
        if compared == decoder_hidden:
            return []
        r.note(f"encoder width {encoder_hidden} != decoder width {decoder_hidden}: enc_to_dec_proj projects the "
               "encoder output (a biased linear)")
        return [WeightPart(name="projector", matrices=(Matrix(in_features=encoder_hidden, out_features=decoder_hidden),),
                           other_parameters=decoder_hidden)]


PARSERS: tuple[type[ArchParser], ...] = (CompositeParser,)
