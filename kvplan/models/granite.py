"""IBM Granite: Granite 3 dense and MoE (``granite``, ``granitemoe``: Llama's cache and layers), the
Granite sliding-window members (``granite_swa``, ``granitemoe_swa``) and ``granitemoeshared`` (Llama's layout with
attention sinks, every-layer experts and an optional shared MLP), and the Granite 4.0 hybrid
(``granitemoehybrid``): Mamba-2 and attention layers, MoE or dense MLPs."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader, hidden_of, vocab_of
from kvplan.models.decoder import NO_MOE, DecoderLayout, DecoderParser, MoeLayout, every_layer_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.mamba import MAMBA2_DEFAULTS, Mamba2Keys, hybrid_weights, read_mamba2_state
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import StateSpec


class Granite3Parser(LlamaParser):
    """Granite 3 dense and MoE (``granite``, ``granitemoe``; ``granite_moe`` an older name): Llama's cache and
    layers, the MoE members with ``num_local_experts`` experts of ``intermediate_size`` in every layer; and the
    language model of Granite-Docling (``granite_docling_text``)."""

    model_types = ("granite", "granitemoe", "granite_moe", "granite_docling_text")
    weight_types = ("granite", "granitemoe", "granite_docling_text")
    defaults_by_type = {"granite": {"tie_word_embeddings": False}, "granitemoe": {"tie_word_embeddings": False}}
    WINDOWLESS = frozenset({"granite", "granitemoe"})

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type == "granitemoe":
            return every_layer_moe(r, layers, intermediate, top_k)
        return NO_MOE


class GraniteMoeHybridParser(ArchParser):
    """IBM Granite 4.0 hybrid: ``layer_types`` of "mamba" (Mamba-2) and "attention"; all Mamba when absent."""

    family = "granitemoehybrid"
    model_types = ("granitemoehybrid",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
        **MAMBA2_DEFAULTS,
        "vocab_size": 32000, "intermediate_size": 11008, "tie_word_embeddings": False, "num_local_experts": 8,
        "shared_intermediate_size": 1024,
    }
    weight_types = ("granitemoehybrid",)
    MAMBA = Mamba2Keys()
    #: The Hub's names, and transformers 5.25's (GraniteMoeHybridConfig defaults every layer to linear_attention).
    _NAMES = frozenset({"mamba", "attention", "linear_attention", "full_attention"})

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        for key in ("layer_types", "layers_block_type"):
            if r.has(key):
                types = r.check(key, r.raw(key), "list")
                unknown = [name for name in types if name not in self._NAMES]
                if unknown:
                    raise ConfigError(
                        f"{r.source_name}: unknown layer type {unknown[0]!r} in {r.prefix}{key}",
                        'granitemoehybrid layers are "mamba" / "linear_attention" or "attention" / "full_attention"',
                    )
                return self.kinds_from_layer_types(r, types, num_layers, key=key)
        r.note("layer_types is not in the config: the granitemoehybrid default makes every layer a Mamba-2 layer "
               "(linear_attention)")
        return [STATE] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Each layer: a Mamba-2 mixer (gated RMSNorm) or GQA attention; then ``num_local_experts`` experts of
        ``intermediate_size`` and a router (none when 0: Granite-4.0-H-Micro) beside a shared gated MLP of
        ``shared_intermediate_size``; two RMSNorms."""
        layers = self.num_layers(r)
        n_attn = self.layer_kinds(r, layers).count(FULL)
        parts, width = hybrid_weights(r, self, self.MAMBA, n_mamba=layers - n_attn, n_attn=n_attn, gated_norm=True,
                                      mlp_layers=0)
        hidden = hidden_of(r)
        experts = r.first_of("num_experts", ("num_local_experts",), kind="count")
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",)) if experts else None
        shared = r.first_of("shared_intermediate_size", ("shared_intermediate_size",))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=shared, count=2 * layers),
                                                      Matrix(in_features=shared, out_features=hidden, count=layers))))
        width_mlp = shared
        if experts:
            size = r.first_of("intermediate_size", ("intermediate_size",))
            parts += experts_parts(hidden, size, experts, layers)
            width_mlp += (top_k or 1) * size
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"Granite 4.0 hybrid: {layers - n_attn} Mamba-2 and {n_attn} attention layers; "
               + (f"{experts} experts per layer, all resident, beside a shared MLP" if experts else "a dense shared MLP"))
        return count_of(parts, experts or None, top_k, {"hidden_size": hidden, "mlp_width": width_mlp,
                                                        "qkv_width": width, "vocab_size": vocab_of(r)})


class GraniteParser(DecoderParser):
    """Granite SWA (dense and MoE) and Granite-MoE-shared: full / sliding ``layer_types``, Llama-like weights.

    The generic cache rules read ``layer_types`` of full and sliding layers over ``sliding_window``; weights are
    Llama's layout with a learned sink per attention head (the SWA members), ``num_local_experts`` experts of ``intermediate_size`` in every layer (the MoE members) and,
    when ``shared_intermediate_size`` is not 0, a shared gated MLP of that width (transformers GraniteMoeShared)."""

    family = "granite"
    model_types = ("granite_swa", "granitemoe_swa", "granitemoeshared")
    #: GraniteSWAConfig, GraniteMoeSWAConfig and GraniteMoeSharedConfig defaults of the keys weight counting reads.
    defaults_by_type = {"granite_swa": {"tie_word_embeddings": True},
                        "granitemoe_swa": {"tie_word_embeddings": False, "shared_intermediate_size": 0},
                        "granitemoeshared": {"tie_word_embeddings": False, "shared_intermediate_size": 0}}
    weight_types = ("granite_swa", "granitemoe_swa", "granitemoeshared")

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(attention_sinks=model_type.endswith("_swa"))

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type == "granite_swa":
            return NO_MOE
        moe = every_layer_moe(r, layers, intermediate, top_k)
        shared = r.first_of("shared_intermediate_size", ("shared_intermediate_size",), kind="count")
        return MoeLayout(layers=moe.layers, experts=moe.experts, top_k=top_k, expert_size=intermediate,
                         shared_size=shared or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}
#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"granite_moe": "remote code (transformers names the type granitemoe): not counted"}

PARSERS: tuple[type[ArchParser], ...] = (Granite3Parser, GraniteMoeHybridParser, GraniteParser)
