"""Cohere: Command-R (``cohere``, read with the Llama rules in llama.py) and Command-R7B / Command-A
(``cohere2``), which interleave sliding and global layers as Gemma 3 does."""

from __future__ import annotations

from kvplan.models.base import ArchParser
from kvplan.models.gemma import Gemma3Parser


class Cohere2Parser(Gemma3Parser):
    """Command-R7B / Command-A: 3 sliding layers then 1 global (``sliding_window_pattern`` 4)."""

    family = "cohere2"
    model_types = ("cohere2",)
    weight_types = ()
    defaults = {"max_position_embeddings": 8192, "sliding_window": 4096, "sliding_window_pattern": 4}


PARSERS: tuple[type[ArchParser], ...] = (Cohere2Parser,)
