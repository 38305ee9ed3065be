"""Mistral (sliding-window attention in its first releases) and Mixtral (every MLP a mixture of experts)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, MoeLayout, every_layer_moe


class MistralParser(DecoderParser):
    family = "mistral"
    model_types = ("mistral", "ministral")
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
    }
    defaults_by_type = {"mistral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False}}
    weight_types = ("mistral", "ministral")


class MixtralParser(DecoderParser):
    family = "mixtral"
    model_types = ("mixtral",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
    }
    defaults_by_type = {"mixtral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False,
                                    "num_local_experts": 8}}
    weight_types = ("mixtral",)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return every_layer_moe(r, layers, intermediate, top_k)


PARSERS: tuple[type[ArchParser], ...] = (MistralParser, MixtralParser)
