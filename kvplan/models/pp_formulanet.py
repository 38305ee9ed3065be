"""PP-FormulaNet (``pp_formulanet``): a formula-recognition encoder-decoder. Its text decoder
(``pp_formulanet_text``, an MBart-style decoder) is counted here; its vision encoder is the SAM-style tower of
vision_towers.py and its projector (two convolutions, two linears) is in vision_projectors.py.

Weights follow modeling_pp_formulanet.py (PPFormulaNetTextModel): the token embedding, ``max_position_embeddings``
+ 2 learned positions (the MBart offset), a LayerNorm on the embeddings; per layer self-attention and cross-attention
(q/k/v/o of ``d_model``, biased, each with a LayerNorm) and fc1/fc2 of ``decoder_ffn_dim`` (biased) with a LayerNorm;
a final LayerNorm and an untied lm_head without bias.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, embeddings, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class PPFormulaNetTextParser(ArchParser):
    """PP-FormulaNet's MBart-style decoder, cross-attention in every layer."""

    family = "pp_formulanet"
    model_types = ()
    weight_types = ("pp_formulanet_text",)
    #: PPFormulaNetTextConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 50000, "d_model": 512, "decoder_layers": 8, "decoder_ffn_dim": 2048,
                "max_position_embeddings": 2560, "tie_word_embeddings": False}
    #: PPFormulaNetLearnedPositionalEmbedding keeps this many rows beyond max_position_embeddings.
    POSITION_OFFSET = 2

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        d = r.first_of("hidden_size", ("d_model", "hidden_size"))
        layers = r.first_of("num_hidden_layers", ("decoder_layers",))
        ffn = r.first_of("intermediate_size", ("decoder_ffn_dim",))
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",)) + self.POSITION_OFFSET
        parts = embeddings(r, d)
        parts += [
            WeightPart(name="position_embeddings", other_parameters=positions * d),
            WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=d, count=8 * layers),),
                       other_parameters=8 * d * layers),  # self- and cross-attention q/k/v/o, biased
            WeightPart(name="mlp", matrices=(Matrix(in_features=d, out_features=ffn, count=layers),
                                             Matrix(in_features=ffn, out_features=d, count=layers)),
                       other_parameters=(ffn + d) * layers),
            # three LayerNorms per layer; the embedding and final LayerNorms
            WeightPart(name="norms", other_parameters=2 * d * (3 * layers + 2), tp_sharded=False),
        ]
        r.note("PP-FormulaNet's decoder: self- and cross-attention in every layer (its vision encoder is the tower)")
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": ffn, "qkv_width": 3 * d,
                                            "vocab_size": vocab_of(r)})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"pp_formulanet_text": "self-attention K/V per layer: the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (PPFormulaNetTextParser,)
