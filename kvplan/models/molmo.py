"""AllenAI Molmo2's language model (``molmo2_text``): the pre-norm gated decoder with q/k RMSNorms per head
(``qk_norm_type`` "qwen3") or over all heads ("olmo"), and an embedding of ``vocab_size +
additional_vocab_size`` rows beside an lm_head of ``vocab_size``. Its vision tower is in vision_towers.py."""

from __future__ import annotations

from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart


class Molmo2TextParser(DecoderParser):
    family = "molmo"
    model_types = ("molmo2_text",)
    weight_types = ("molmo2_text",)
    #: Molmo2TextConfig's defaults (transformers 5.24) of the keys weight counting reads.
    defaults_by_type: ClassVar[dict[str, dict[str, Any]]] = {"molmo2_text": {
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 151936, "additional_vocab_size": 128, "qk_norm_type": "qwen3", "num_hidden_layers": 36,
        "intermediate_size": 12288, "tie_word_embeddings": False}}

    def attention_weights(
        self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
    ) -> tuple[list[Matrix], int, int]:
        matrices, other, width = super().attention_weights(r, model_type, hidden, layers, heads)
        kind = r.first_of("qk_norm_type", ("qk_norm_type",), kind="str")
        if kind not in ("qwen3", "olmo"):
            raise ConfigError(f"{r.source_name}: qk_norm_type must be qwen3 or olmo, got {kind!r}", "fix the config")
        head_dim = self.head_dim(r, heads)
        norms = 2 * head_dim if kind == "qwen3" else (heads + self.kv_heads(r, heads)) * head_dim
        return matrices, other + norms * layers, width

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        counted = super().count_weights(r, model_type)
        extra = r.first_of("additional_vocab_size", ("additional_vocab_size",), kind="count")
        parts = [*counted.parts, WeightPart(name="embed_tokens", matrices=(
            Matrix(in_features=counted.hidden_size, out_features=extra),))] if extra else counted.parts
        return WeightCount(parts=parts, num_experts=counted.num_experts, experts_per_token=counted.experts_per_token,
                           hidden_size=counted.hidden_size, mlp_width=counted.mlp_width, qkv_width=counted.qkv_width,
                           vocab_size=counted.vocab_size)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (Molmo2TextParser,)
