"""Zyphra ZAYA: every ``hybrid`` layer is CCA attention (compressed convolutional attention) with a GQA K/V
cache of ``num_key_value_heads`` x ``head_dim``, plus two small states in the model dtype: the q/k
convolution window, ``(num_attention_heads + num_key_value_heads) * head_dim`` channels of
``(cca_time0 - 1) + (cca_time1 - 1)`` inputs, and the delayed half of V,
``num_key_value_heads * head_dim // 2`` values (transformers ``ZayaAttention``). Weights are not counted
for this family yet.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.specs import FullAttentionSpec, LayerSpec, StateSpec


class ZayaParser(ArchParser):
    """CCA attention: GQA K/V plus a q/k conv window and the delayed half of V per layer."""

    family = "zaya"
    model_types = ("zaya",)
    #: ZayaConfig defaults.
    defaults = {"hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 8, "num_key_value_heads": 2,
                "head_dim": 128, "cca_time0": 2, "cca_time1": 2, "max_position_embeddings": 131072}
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ("head_dim",)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        types = r.raw("layer_types")
        if r.has("layer_types") and (not isinstance(types, list) or len(types) != num_layers
                                     or any(t != "hybrid" for t in types)):
            raise ConfigError(f"{r.source_name}: {r.prefix}layer_types must be {num_layers} x 'hybrid'",
                              "every ZAYA layer is a hybrid CCA layer")
        heads = r.first_of("num_attention_heads", self.HEADS)
        dims = self.attention_dims(r)
        kv, head_dim = dims["num_kv_heads"], dims["head_size"]
        window = r.first_of("cca_time0", ("cca_time0",)) - 1 + r.first_of("cca_time1", ("cca_time1",)) - 1
        state = StateSpec(mixer="cca", shapes=(("conv_qk", (window, (heads + kv) * head_dim)),
                                                ("delayed_v", (kv * head_dim // 2,))))
        r.note(f"ZAYA CCA: every layer caches K/V and keeps a q/k conv window of {window} inputs and the delayed "
               "half of V (model dtype)")
        return [FullAttentionSpec(**dims)] * num_layers + [state] * num_layers


PARSERS: tuple[type[ArchParser], ...] = (ZayaParser,)
