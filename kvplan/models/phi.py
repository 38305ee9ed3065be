"""Microsoft Phi: Phi-1/2 (GPT-style parallel blocks), Phi-3/3.5/4 (Llama-style gated decoder)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, classic_decoder
from kvplan.models.tensors import WeightCount


class PhiParser(DecoderParser):
    family = "phi"
    model_types = ("phi", "phi3", "phimoe", "phi4")
    defaults = {}
    defaults_by_type = {"phi3": {"tie_word_embeddings": False}, "phi": {"tie_word_embeddings": False}}
    weight_types = ("phi", "phi3")

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        if model_type == "phi3":
            return super().count_weights(r, model_type)  # Phi-3: the gated decoder (fused qkv and gate_up)
        # Phi-1/2: one LayerNorm per layer (parallel attention and MLP), biases everywhere, an lm_head bias
        return classic_decoder(r, model_type, inner_aliases=("intermediate_size",), norms_per_layer=1,
                               lm_head_bias=True)


PARSERS: tuple[type[ArchParser], ...] = (PhiParser,)
