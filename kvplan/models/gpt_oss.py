"""OpenAI gpt-oss: alternating sliding (128) and full attention, attention sinks, MoE in every layer."""

from __future__ import annotations

from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, every_layer_moe


class GptOssParser(DecoderParser):
    """gpt-oss: ``layer_types`` when present, else alternating (even layers slide, window 128)."""

    family = "gpt_oss"
    model_types = ("gpt_oss",)
    defaults = {
        "num_hidden_layers": 36, "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 64, "sliding_window": 128, "max_position_embeddings": 131072,
    }
    defaults_by_type = {"gpt_oss": {"tie_word_embeddings": False}}
    weight_types = ("gpt_oss",)

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("no layer_types: gpt-oss alternates, even layers slide")
        return [SLIDING if (i + 1) % 2 else FULL for i in range(num_layers)]

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        # attention sinks; biases on every expert and on the router
        return DecoderLayout(attention_sinks=True, expert_bias=True, router_bias=True)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return every_layer_moe(r, layers, intermediate, top_k)


PARSERS: tuple[type[ArchParser], ...] = (GptOssParser,)
