"""Pix2Struct (``pix2struct``): an image-to-text encoder-decoder. Its text decoder (``pix2struct_text_model``) is
counted here; its vision encoder is the Pix2Struct ViT of vision_towers.py, read by vision.py.

Weights follow modeling_pix2struct.py (Pix2StructTextModel): the token embedding; per layer T5-style self-attention
and cross-attention over the encoder output (q/k/v/o of hidden_size x hidden_size, no biases, each with an RMS
LayerNorm), a gated feed-forward of ``d_ff`` (wi_0, wi_1, wo, no biases) with its norm; the relative-position bias
table (``relative_attention_num_buckets`` x ``num_heads``) in the first layer only; a final norm and an untied lm_head.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class Pix2StructTextParser(ArchParser):
    """Pix2Struct's text decoder, with cross-attention in every layer."""

    family = "pix2struct"
    model_types = ()
    weight_types = ("pix2struct_text_model",)
    #: Pix2StructTextConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 50244, "hidden_size": 768, "d_ff": 2048, "num_layers": 12, "num_heads": 12,
                "relative_attention_num_buckets": 32, "tie_word_embeddings": False}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_layers", "num_hidden_layers"))
        heads = r.first_of("num_attention_heads", ("num_heads", "num_attention_heads"))
        inner = r.first_of("intermediate_size", ("d_ff", "intermediate_size"))
        buckets = r.first_of("relative_attention_num_buckets", ("relative_attention_num_buckets",))
        parts = embeddings(r, hidden)
        parts += [
            # self- and cross-attention q/k/v/o; the first layer's relative-position bias table
            WeightPart(name="attention", matrices=(Matrix(in_features=hidden, out_features=hidden, count=8 * layers),),
                       other_parameters=buckets * heads),
            WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                                             Matrix(in_features=inner, out_features=hidden, count=layers))),
            WeightPart(name="norms", other_parameters=(3 * layers + 1) * hidden, tp_sharded=False),
        ]
        r.note("Pix2Struct's decoder: self- and cross-attention in every layer (its vision encoder is the tower)")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": 3 * hidden,
                                            "vocab_size": vocab_of(r)})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"pix2struct_text_model": "self-attention K/V per layer: the generic rules read its cache (its "
                                          "cross-attention over the image is not cached by kvplan's reading)"}

PARSERS: tuple[type[ArchParser], ...] = (Pix2StructTextParser,)
