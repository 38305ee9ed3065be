"""IBM Bamba: Mamba-2 layers with attention at ``attn_layer_indices``."""

from __future__ import annotations

from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, layer_indices
from kvplan.models.mamba import MAMBA2_DEFAULTS, Mamba2Keys, read_mamba2_state
from kvplan.specs import StateSpec


class BambaParser(ArchParser):
    """Bamba: attention at ``attn_layer_indices``, Mamba-2 everywhere else."""

    family = "bamba"
    model_types = ("bamba",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 262144, **MAMBA2_DEFAULTS,
    }
    MAMBA = Mamba2Keys()

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.has("attn_layer_indices"):
            r.note("attn_layer_indices is not in the config: the bamba default makes every layer a Mamba-2 layer")
            return [STATE] * num_layers
        attention = layer_indices(r, "attn_layer_indices", r.raw("attn_layer_indices"), num_layers)
        r.record("layer_types", f"attention at {sorted(attention)}", r.where("attn_layer_indices"))
        r.note(f"attention layers are attn_layer_indices {sorted(attention)}; the others keep a Mamba-2 state")
        return [FULL if i in attention else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)


PARSERS: tuple[type[ArchParser], ...] = (BambaParser,)
