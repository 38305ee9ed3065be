"""Gated DeltaNet hybrids read by ``layer_types``: AllenAI OLMo-Hybrid (``olmo_hybrid``) and Lara-mini
(``lara_mini``).

``linear_attention`` layers keep a Gated DeltaNet state, as Qwen3-Next's do: a short convolution over q,
k and v (``2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads *
linear_value_head_dim`` channels, ``linear_conv_kernel_dim`` taps) and a ``(linear_num_value_heads,
linear_key_head_dim, linear_value_head_dim)`` recurrent state; ``full_attention`` and
``sliding_attention`` layers cache GQA K/V. Weights are not counted for these families yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.qwen import Qwen3NextParser
from kvplan.models.tensors import WeightCount


class DeltaNetHybridParser(Qwen3NextParser):
    """Gated DeltaNet state (conv window + float32 recurrent state) and full / sliding GQA by layer_types."""

    family = "deltanet_hybrid"
    model_types = ("olmo_hybrid", "lara_mini")
    defaults = {}
    #: OlmoHybridConfig and LaraMiniConfig defaults (their default ``layer_types``: OLMo-Hybrid full attention every
    #: fourth layer; Lara-mini a fixed list of linear, sliding and full layers, which a config file carries).
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "olmo_hybrid": {"hidden_size": 3840, "num_hidden_layers": 32, "num_attention_heads": 30,
                        "num_key_value_heads": 30, "linear_num_key_heads": 30, "linear_num_value_heads": 30,
                        "linear_key_head_dim": 96, "linear_value_head_dim": 192, "linear_conv_kernel_dim": 4,
                        "full_attention_interval": 4},
        "lara_mini": {"hidden_size": 1024, "num_hidden_layers": 34, "num_attention_heads": 16, "num_key_value_heads": 4,
                      "head_dim": 128, "linear_num_key_heads": 8, "linear_num_value_heads": 16,
                      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                      "sliding_window": 512},
    }
    weight_types = ()
    sliding_window_applies = False

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        return ArchParser.count_weights(self, r, model_type)


PARSERS: tuple[type[ArchParser], ...] = (DeltaNetHybridParser,)
