"""IBM Bamba: Mamba-2 layers with attention at ``attn_layer_indices``."""

from __future__ import annotations

from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, hidden_of, layer_indices, vocab_of
from kvplan.models.mamba import MAMBA2_DEFAULTS, Mamba2Keys, hybrid_weights, read_mamba2_state
from kvplan.models.tensors import WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


class BambaParser(ArchParser):
    """Bamba: attention at ``attn_layer_indices``, Mamba-2 everywhere else."""

    family = "bamba"
    model_types = ("bamba",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 262144, **MAMBA2_DEFAULTS,
        "vocab_size": 128000, "intermediate_size": 14336, "tie_word_embeddings": False,
    }
    weight_types = ("bamba",)
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

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Each layer: a Mamba-2 mixer (gated RMSNorm) or GQA attention, then a gated MLP; two RMSNorms."""
        layers = self.num_layers(r)
        n_attn = self.layer_kinds(r, layers).count(FULL)
        parts, width = hybrid_weights(r, self, self.MAMBA, n_mamba=layers - n_attn, n_attn=n_attn, gated_norm=True,
                                      mlp_layers=layers)
        hidden = hidden_of(r)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"Bamba: {layers - n_attn} Mamba-2 and {n_attn} attention layers, a gated MLP in each")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": r.first_of(
            "intermediate_size", ("intermediate_size",)), "qkv_width": width, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (BambaParser,)
