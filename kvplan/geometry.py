"""A model's cache geometry: its layers in order, plus where every value came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvplan.specs import LayerSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    """Where one value of the geometry came from."""

    field: str
    """kvplan's name for the value (``num_kv_heads``, ``sliding_window``...)."""
    value: object
    source: str
    """Where it came from: ``config: text_config.num_key_value_heads``, ``default of gemma3_text``,
    ``derived: hidden_size // num_attention_heads``, ``--set``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RopeScaling:
    """The config's ``rope_scaling`` (transformers 5: ``rope_parameters``), as far as a context length needs it."""

    rope_type: str
    """``rope_type`` (or the older ``type``): ``yarn``, ``linear``, ``dynamic``, ``llama3``, ``longrope`` ..."""
    factor: float
    """``factor`` (1.0 when absent, as for ``default``)."""
    original_max_position_embeddings: int | None
    source: str
    """Which config key held it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelGeometry:
    """A model's cache-holding layers, where each value came from, and the notes read with them."""

    model_id: str
    model_type: str
    """The config's top-level ``model_type``."""
    family: str
    """The kvplan parser that read it (``llama``, ``gemma3``, ``generic``...)."""
    architecture: str | None
    layers: tuple[LayerSpec, ...]
    """Every cache-holding entry in layer order (an encoder-decoder layer has two: self and cross)."""
    num_hidden_layers: int
    """Decoder layers of the model (the length of the stack, cached or not)."""
    max_context_tokens: int | None
    max_context_source: str | None
    default_encoder_len: int | None
    default_encoder_len_source: str | None
    config_dtype: str | None
    """The checkpoint's dtype name as written in the config, if any."""
    config_dtype_source: str | None
    provenance: tuple[Provenance, ...] = ()
    notes: tuple[str, ...] = ()
    defaults_in_sub_config: bool = False
    """The config was read from a nested sub-config (``text_config``), which transformers saves as its difference
    from the sub-config class's defaults (``configuration_utils.recursive_diff_dict``): a key missing there means
    the class default, so a defaulted core field is the checkpoint's own value, not a guess."""
    rope_scaling: RopeScaling | None = None
    """RoPE scaling, which vLLM applies to the maximum context (``_get_and_verify_max_len``); None: none."""
    checkpoint_kv_dtype: str | None = None
    """The KV dtype a ModelOpt checkpoint's quantisation names (``kv_cache_quant_algo``, ``kv_cache_scheme``), which
    vLLM, SGLang and TensorRT-LLM take for ``--kv-cache-dtype auto``; None: the checkpoint names none."""
    checkpoint_kv_dtype_source: str | None = None
    """Which file and key named it (``hf_quant_config.json: quantization.kv_cache_quant_algo = FP8``)."""
    spec_groups: tuple[tuple[LayerSpec, tuple[int, ...]], ...] = field(init=False, repr=False, compare=False)
    """Each distinct spec of ``layers`` with the indices of its layers, in order of its first layer (the
    grouping every sizing starts from, made once with the geometry)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec_groups", group_specs(self.layers))

    @property
    def grows_with_tokens(self) -> bool:
        return any(spec.grows_with_tokens for spec, _indices in self.spec_groups)

    @property
    def has_cross_attention(self) -> bool:
        return any(spec.kind == "cross_attention" for spec, _indices in self.spec_groups)


def group_specs(layers: Sequence[LayerSpec]) -> tuple[tuple[LayerSpec, tuple[int, ...]], ...]:
    """Each distinct spec of ``layers`` (equal by value) with the indices of its layers, in order of first use."""
    members: dict[LayerSpec, list[int]] = {}
    for index, spec in enumerate(layers):
        members.setdefault(spec, []).append(index)
    return tuple((spec, tuple(indices)) for spec, indices in members.items())
