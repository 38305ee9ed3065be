"""RWKV (v4, ``rwkv``): every layer is recurrent; no K/V cache.

transformers keeps five ``(batch, hidden_size, num_hidden_layers)`` state tensors: the previous token's
input to time mixing and to channel mixing in the model dtype, and the WKV numerator, denominator and
running maximum in float32 (``RwkvModel.forward``). Per layer and sequence that is ``2 * hidden_size``
values in the model dtype and ``3 * hidden_size`` in float32. transformers returns the state as the
output's ``state``, not a Cache object.

Weights (transformers Rwkv): per block two LayerNorms (the first block a third, ``pre_ln``), time mixing (key,
value, receptance of ``attention_hidden_size`` and the output, time decay/first and three mix vectors) and
channel mixing (key to ``intermediate_size``, receptance, value back, two mix vectors); a final LayerNorm and an
untied head.
"""

from __future__ import annotations

from kvplan.models.base import STATE, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


class RwkvParser(ArchParser):
    """Recurrent state only: two model-dtype and three float32 hidden-size vectors per layer."""

    family = "rwkv"
    model_types = ("rwkv",)
    #: RwkvConfig defaults.
    defaults = {"hidden_size": 4096, "num_hidden_layers": 32, "context_length": 1024, "vocab_size": 50277,
                "tie_word_embeddings": False}
    weight_types = ("rwkv",)
    MAX_CONTEXT = ("context_length", "max_position_embeddings")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("RWKV: every layer keeps a fixed recurrent state (no K/V cache)")
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        hidden = r.first_of("hidden_size", ("hidden_size",))
        return StateSpec(mixer="rwkv", shapes=(("att_x", (hidden,)), ("ffn_x", (hidden,)), ("wkv_num", (hidden,)),
                                                ("wkv_den", (hidden,)), ("wkv_max", (hidden,))),
                         fp32_tensors=("wkv_num", "wkv_den", "wkv_max"))


    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        attn = r.optional("attention_hidden_size", ("attention_hidden_size",)) or hidden
        inner = r.optional("intermediate_size", ("intermediate_size",))
        if inner is None:
            inner = 4 * hidden
            r.note(f"intermediate_size is not set: the RwkvConfig default 4 x hidden_size = {inner}")
        time_mix = [Matrix(in_features=hidden, out_features=attn, count=3 * layers),  # key, value, receptance
                    Matrix(in_features=attn, out_features=hidden, count=layers)]  # output
        channel_mix = [Matrix(in_features=hidden, out_features=inner, count=layers),
                       Matrix(in_features=hidden, out_features=hidden, count=layers),  # receptance
                       Matrix(in_features=inner, out_features=hidden, count=layers)]
        parts = embeddings(r, hidden)
        parts += [WeightPart(name="attention", matrices=tuple(time_mix), other_parameters=(2 * attn + 3 * hidden) * layers),
                  WeightPart(name="mlp", matrices=tuple(channel_mix), other_parameters=2 * hidden * layers),
                  # two LayerNorms (weight + bias) per block, pre_ln on the first, ln_out
                  WeightPart(name="norms", other_parameters=2 * hidden * (2 * layers + 2), tp_sharded=False)]
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": 3 * attn,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (RwkvParser,)
