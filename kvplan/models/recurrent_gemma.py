"""Google RecurrentGemma (Griffin): ``block_types`` repeated over the layers, ``recurrent`` (RG-LRU) or
``attention`` (local attention over ``attention_window_size`` tokens, ``num_key_value_heads`` heads of
``hidden_size // num_attention_heads``).

A recurrent layer keeps a temporal-conv state of ``conv1d_width - 1`` inputs of ``lru_width`` channels
(model dtype) and the RG-LRU state of ``lru_width`` values in float32 (transformers
``RecurrentGemmaRecurrentBlock``). transformers holds both on the module rather than in the Cache object,
so a measurement of the Cache alone sees only the attention layers; the memory is the same. Weights are
not counted for this family yet.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import SLIDING, STATE, ArchParser, ConfigReader
from kvplan.specs import StateSpec


class RecurrentGemmaParser(ArchParser):
    """block_types: RG-LRU state (conv + float32 recurrent) or local attention over attention_window_size."""

    family = "recurrent_gemma"
    model_types = ("recurrent_gemma",)
    #: RecurrentGemmaConfig defaults (``lru_width`` None means ``hidden_size``; ``num_key_value_heads`` None
    #: means ``num_attention_heads``).
    defaults = {"num_hidden_layers": 26, "hidden_size": 2560, "num_attention_heads": 10, "attention_window_size": 2048,
                "conv1d_width": 4, "block_types": ["recurrent", "recurrent", "attention"]}
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ()
    MAX_CONTEXT = ()

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        blocks = r.first_of("block_types", ("block_types",), kind="list")
        if not blocks or any(b not in ("recurrent", "attention") for b in blocks):
            raise ConfigError(f"{r.source_name}: {r.prefix}block_types must list 'recurrent' or 'attention' blocks",
                              "e.g. [\"recurrent\", \"recurrent\", \"attention\"]")
        r.note(f"block_types {blocks} repeat over the {num_layers} layers; attention layers are local "
               "(attention_window_size)")
        return [SLIDING if blocks[i % len(blocks)] == "attention" else STATE for i in range(num_layers)]

    def sliding_window(self, r: ConfigReader) -> int:
        return r.first_of("sliding_window", ("attention_window_size",))

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        width = r.optional("lru_width", ("lru_width",))
        if width is None:
            width = r.first_of("hidden_size", ("hidden_size",))
            r.note(f"lru_width is not set: the RecurrentGemma default is hidden_size = {width}")
        conv = r.first_of("conv1d_width", ("conv1d_width",))
        return StateSpec(mixer="rg_lru", shapes=(("conv", (conv - 1, width)), ("rnn", (width,))), fp32_tensors=("rnn",))


PARSERS: tuple[type[ArchParser], ...] = (RecurrentGemmaParser,)
