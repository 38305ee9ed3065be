"""IBM Granite: Granite 3 dense and MoE (``granite``, ``granitemoe``, read by the Llama rules) and the
Granite 4.0 hybrid (``granitemoehybrid``): Mamba-2 and attention layers, MoE or dense MLPs."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import STATE, ArchParser, ConfigReader
from kvplan.models.mamba import MAMBA2_DEFAULTS, Mamba2Keys, read_mamba2_state
from kvplan.specs import StateSpec


class GraniteMoeHybridParser(ArchParser):
    """IBM Granite 4.0 hybrid: ``layer_types`` of "mamba" (Mamba-2) and "attention"; all Mamba when absent."""

    family = "granitemoehybrid"
    model_types = ("granitemoehybrid",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
        **MAMBA2_DEFAULTS,
    }
    MAMBA = Mamba2Keys()
    _NAMES = frozenset({"mamba", "attention"})

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        for key in ("layer_types", "layers_block_type"):
            if r.has(key):
                types = r.check(key, r.raw(key), "list")
                unknown = [name for name in types if name not in self._NAMES]
                if unknown:
                    raise ConfigError(
                        f"{r.source_name}: unknown layer type {unknown[0]!r} in {r.prefix}{key}",
                        'granitemoehybrid layers are "mamba" or "attention"',
                    )
                return self.kinds_from_layer_types(r, types, num_layers, key=key)
        r.note("layer_types is not in the config: the granitemoehybrid default makes every layer a Mamba-2 layer")
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)


PARSERS: tuple[type[ArchParser], ...] = (GraniteMoeHybridParser,)
