"""BLIP's captioning model (``blip``): a ViT image encoder and a BERT-style text decoder (``blip_text_model``) that
cross-attends to it in every layer. The decoder is counted here; the tower is the BLIP ViT of vision_towers.py.

Weights follow modeling_blip_text.py (BlipTextLMHeadModel, as BlipForConditionalGeneration holds it): word and
position embeddings (no token types) with a LayerNorm; per layer BERT's self-attention (q/k/v/o biased, a LayerNorm),
with ``is_decoder`` a cross-attention block whose k/v read ``encoder_hidden_size`` features, the intermediate and
output dense layers (biased, a LayerNorm); the LM head's transform (dense + LayerNorm) and one vocabulary bias, its
projection tied to the word embedding.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, switch, tied, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class BlipTextParser(ArchParser):
    """BLIP's text decoder."""

    family = "blip"
    model_types = ()
    weight_types = ("blip_text_model",)
    #: BlipTextConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 30524, "hidden_size": 768, "encoder_hidden_size": 768, "intermediate_size": 3072,
                "num_hidden_layers": 12, "max_position_embeddings": 512, "is_decoder": True,
                "tie_word_embeddings": True}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        vocab = vocab_of(r)
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        cross = switch(r, "is_decoder", True)
        enc = r.first_of("encoder_hidden_size", ("encoder_hidden_size",)) if cross else h
        attention = [Matrix(in_features=h, out_features=h, count=4 * layers)]
        attention_other = (4 * h + 2 * h) * layers  # biases, the output LayerNorm
        if cross:  # q and o of the decoder width, k and v from the encoder's
            attention += [Matrix(in_features=h, out_features=h, count=2 * layers),
                          Matrix(in_features=enc, out_features=h, count=2 * layers)]
            attention_other *= 2
        parts = [
            WeightPart(name="embed_tokens", matrices=(Matrix(in_features=h, out_features=vocab),)),
            WeightPart(name="position_embeddings", other_parameters=positions * h + 2 * h),  # with the LayerNorm
            WeightPart(name="attention", matrices=tuple(attention), other_parameters=attention_other),
            WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=inner, count=layers),
                                             Matrix(in_features=inner, out_features=h, count=layers)),
                       other_parameters=(inner + h) * layers),
            # the output LayerNorm of every layer; the LM head's transform (dense, LayerNorm) and vocabulary bias
            WeightPart(name="norms", other_parameters=2 * h * layers + h * h + h + 2 * h + vocab, tp_sharded=False),
        ]
        if not tied(r):
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=h, out_features=vocab),)))
        if cross:
            r.note("BLIP's text decoder: cross-attention over the image in every layer (its ViT is the tower)")
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h,
                                            "vocab_size": vocab})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"blip_text_model": "BERT-style self-attention K/V per layer: the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (BlipTextParser,)
