"""BERT-style encoders used as decoders (BERT, RoBERTa, CamemBERT, XLM-RoBERTa, ELECTRA).

These stacks are encoders: as ``*ForMaskedLM`` or a classifier they keep no cache, and kvplan
refuses them. transformers also runs them as causal decoders (``is_decoder``, ``BertLMHeadModel``,
``RobertaForCausalLM``...): then every layer caches multi-head K/V of ``hidden_size //
num_attention_heads`` per head, and with ``add_cross_attention`` (the decoder of an
``encoder-decoder`` model) cross-attention K/V over the encoder output too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, embeddings, vocab_of
from kvplan.specs import LayerSpec

#: BertConfig defaults of the keys read here; the others differ where ``defaults_by_type`` says.
_BERT = {"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768, "intermediate_size": 3072,
         "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522, "tie_word_embeddings": True,
         "is_decoder": False, "add_cross_attention": False}


def decoder_use(r: ConfigReader) -> str | None:
    """Why this BERT-style config runs as a causal decoder (``is_decoder`` or a causal-LM architecture), or None."""
    if r.raw("is_decoder") is True:
        return "is_decoder is true"
    archs = r.outer.get("architectures") or r.raw("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and (
            archs[0].endswith("ForCausalLM") or archs[0].endswith("LMHeadModel")):
        return f"architectures names {archs[0]}"
    return None


class BertParser(ArchParser):
    """Only as a decoder (is_decoder, *ForCausalLM, *LMHeadModel): MHA K/V per layer; encoder use refused."""

    family = "bert"
    model_types = ("bert", "roberta", "camembert", "xlm-roberta", "electra")
    defaults = _BERT
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "roberta": {"vocab_size": 50265},
        "electra": {"num_attention_heads": 4, "hidden_size": 256, "intermediate_size": 1024, "embedding_size": 128},
    }
    weight_types = model_types
    sliding_window_applies = False
    KV_HEADS = ()
    HEAD_DIM = ()

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        why = decoder_use(r)
        if why is None:
            raise ConfigError(
                f"{r.source_name}: model_type {r.raw('model_type')!r} is an encoder-only model; it keeps no KV cache",
                "kvplan sizes decoder caches; a BERT-style model caches only as a decoder (is_decoder: true, "
                "or a *ForCausalLM / *LMHeadModel architecture)",
            )
        r.note(f"{why}: the BERT-style stack runs as a causal decoder, multi-head K/V in every layer")
        layers = super().build_layers(r)
        if r.raw("add_cross_attention") is True:
            dims = self.attention_dims(r)
            r.note("add_cross_attention is true: every layer also caches cross-attention K/V over the encoder output")
            layers += [self.cross_spec(dims)] * len(layers)
        return layers

    def encoder_len(self, r: ConfigReader) -> int | None:
        if r.raw("add_cross_attention") is True:
            return r.optional("encoder_len", ("max_position_embeddings",))
        return None

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Word, position and token-type embeddings (ELECTRA: of ``embedding_size`` with a projection), post-norm
        layers (q/k/v/o, intermediate and output with biases, two LayerNorms with bias), the LM head transform
        (dense + LayerNorm) and the decoder bias; cross-attention blocks with ``add_cross_attention``."""
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        types = r.first_of("type_vocab_size", ("type_vocab_size",))
        emb = r.optional("embedding_size", ("embedding_size",)) or h
        vocab = vocab_of(r)
        cross = r.raw("add_cross_attention") is True
        blocks = layers * (2 if cross else 1)
        parts = embeddings(r, emb)
        other = (positions + types) * emb + 2 * emb + (emb * h + h if emb != h else 0)
        parts.append(WeightPart(name="position_embeddings", other_parameters=other))
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=h, out_features=h, count=4 * blocks),),
                                other_parameters=4 * h * blocks + 2 * h * blocks))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=inner, count=layers),
                                                      Matrix(in_features=inner, out_features=h, count=layers)),
                                other_parameters=(inner + h) * layers))
        # LM head transform: dense h -> emb with bias, LayerNorm, decoder bias over the vocabulary
        parts.append(WeightPart(name="norms", other_parameters=2 * h * layers + h * emb + emb + 2 * emb + vocab,
                                tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h, "vocab_size": vocab})

    def bare_model_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The stack as ``AutoModel`` builds it (the encoder of an ``encoder-decoder``): no LM head (transform,
        decoder bias, untied lm_head) but the pooler (dense h x h with bias)."""
        counted = self.count_weights(r, model_type)
        h = r.first_of("hidden_size", ("hidden_size",))
        emb = r.optional("embedding_size", ("embedding_size",)) or h
        head = h * emb + emb + 2 * emb + vocab_of(r)
        parts = [replace(p, other_parameters=p.other_parameters - head) if p.name == "norms" else p
                 for p in counted.parts if p.name != "lm_head"]
        parts.append(WeightPart(name="pooler", matrices=(Matrix(in_features=h, out_features=h),), other_parameters=h))
        return replace(counted, parts=parts)


PARSERS: tuple[type[ArchParser], ...] = (BertParser,)
