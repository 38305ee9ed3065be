"""Microsoft Phi: Phi-1/2 (GPT-style parallel blocks), Phi-3/3.5/4 (Llama-style gated decoder), and Phi-3-small
(``phi3small``, remote code read by the Llama rules)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import NO_MOE, DecoderLayout, DecoderParser, MoeLayout, classic_decoder, every_layer_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import WeightCount


class PhiParser(DecoderParser):
    family = "phi"
    model_types = ("phi", "phi3", "phimoe", "phi4")
    defaults = {}
    defaults_by_type = {"phi3": {"tie_word_embeddings": False}, "phi": {"tie_word_embeddings": False}}
    weight_types = ("phi", "phi3", "phimoe")

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        """PhiMoE: LayerNorms with biases and an optional lm_head bias (``lm_head_bias``)."""
        return DecoderLayout(norm_bias=True, lm_head_bias=True) if model_type == "phimoe" else DecoderLayout()

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        """PhiMoE: every layer is ``num_local_experts`` experts of ``intermediate_size``."""
        return every_layer_moe(r, layers, intermediate, top_k) if model_type == "phimoe" else NO_MOE

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        if model_type in ("phi3", "phimoe"):
            return super().count_weights(r, model_type)  # Phi-3: the gated decoder (fused qkv and gate_up)
        # Phi-1/2: one LayerNorm per layer (parallel attention and MLP), biases everywhere, an lm_head bias
        return classic_decoder(r, model_type, inner_aliases=("intermediate_size",), norms_per_layer=1,
                               lm_head_bias=True)


class Phi3SmallParser(LlamaParser):
    """Phi-3-small (``phi3small``, remote code): its GQA cache read by the Llama rules."""

    model_types = ("phi3small",)
    weight_types = ()


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"phi3small": "remote code: not counted", "phi4": "not a transformers model type: not counted"}

PARSERS: tuple[type[ArchParser], ...] = (PhiParser, Phi3SmallParser)
