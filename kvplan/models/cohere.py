"""Cohere: Command-R (``cohere``, read with the Llama rules in llama.py) and Command-R7B / Command-A
(``cohere2``), which interleave sliding and global layers as Gemma 3 does."""

from __future__ import annotations

from kvplan.models.base import ArchParser
from kvplan.models.decoder import DecoderLayout
from kvplan.models.gemma import Gemma3Parser


class Cohere2Parser(Gemma3Parser):
    """Command-R7B / Command-A: 3 sliding layers then 1 global (``sliding_window_pattern`` 4)."""

    family = "cohere2"
    model_types = ("cohere2",)
    weight_types = ("cohere2",)
    defaults = {"max_position_embeddings": 8192, "sliding_window": 4096, "sliding_window_pattern": 4}

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        """One LayerNorm (weight only) per layer: attention and MLP run in parallel on its output."""
        return DecoderLayout(norms_per_layer=1)


PARSERS: tuple[type[ArchParser], ...] = (Cohere2Parser,)
