"""RWKV (v4, ``rwkv``): every layer is recurrent; no K/V cache.

transformers keeps five ``(batch, hidden_size, num_hidden_layers)`` state tensors: the previous token's
input to time mixing and to channel mixing in the model dtype, and the WKV numerator, denominator and
running maximum in float32 (``RwkvModel.forward``). Per layer and sequence that is ``2 * hidden_size``
values in the model dtype and ``3 * hidden_size`` in float32. transformers returns the state as the
output's ``state``, not a Cache object. Weights are not counted for this family yet.
"""

from __future__ import annotations

from kvplan.models.base import STATE, ArchParser, ConfigReader
from kvplan.specs import StateSpec


class RwkvParser(ArchParser):
    """Recurrent state only: two model-dtype and three float32 hidden-size vectors per layer."""

    family = "rwkv"
    model_types = ("rwkv",)
    #: RwkvConfig defaults.
    defaults = {"hidden_size": 4096, "num_hidden_layers": 32, "context_length": 1024}
    MAX_CONTEXT = ("context_length", "max_position_embeddings")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("RWKV: every layer keeps a fixed recurrent state (no K/V cache)")
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        hidden = r.first_of("hidden_size", ("hidden_size",))
        return StateSpec(mixer="rwkv", shapes=(("att_x", (hidden,)), ("ffn_x", (hidden,)), ("wkv_num", (hidden,)),
                                                ("wkv_den", (hidden,)), ("wkv_max", (hidden,))),
                         fp32_tensors=("wkv_num", "wkv_den", "wkv_max"))


PARSERS: tuple[type[ArchParser], ...] = (RwkvParser,)
