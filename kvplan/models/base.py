"""The generic machinery every family module builds on: reading config.json values through alias
lists with provenance and notes, the parser base class with its cache and weight hooks, and the
readers of the weight keys every family shares (hidden size, vocabulary, tied embeddings, switches).

A parser never invents a value silently: a key the file lacks is taken from the architecture's
own default (as its transformers config class defines it) and noted, derived from other keys and
noted, or reported as an error that names the field and every alias tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.geometry import Provenance
from kvplan.limits import MAX_LAYERS, check_limit
from kvplan.models.tensors import Matrix, WeightCount, WeightPart
from kvplan.specs import (
    ChunkedLocalSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SlidingWindowSpec,
    StateSpec,
)

#: Upper bound on any single dimension (heads, head dim, layers...), to catch absurd input.
MAX_DIM = 1 << 24

#: Upper bound on a width multiplier (MPT expansion_ratio is 4; LFM2's ffn multiplier about 1).
MAX_RATIO = 1024

_MISSING: Any = object()

FULL, SLIDING, CHUNKED, STATE, NONE = "full", "sliding", "chunked", "state", "none"

#: ``layer_types`` strings (transformers and vendor spellings) -> kvplan layer kind.
LAYER_TYPE_NAMES: dict[str, str] = {
    "full_attention": FULL, "attention": FULL, "global_attention": FULL, "full": FULL, "global": FULL,
    "sliding_attention": SLIDING, "sliding_window": SLIDING, "sliding": SLIDING,
    "local_attention": SLIDING, "local": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": STATE, "mamba": STATE, "mamba2": STATE, "conv": STATE,
    "gated_delta_net": STATE, "linear": STATE,
    "mlp": NONE, "moe": NONE,
    # UnlimitedOCR: the whole prefill (the reference) plus a window over generated tokens
    "reference_sliding_attention": FULL,
}


class TrackedConfig(dict[str, Any]):
    """A config dict that records the keys looked up in it (``--set`` keys nothing reads are refused)."""

    __slots__ = ("reads",)

    def __init__(self, data: Mapping[str, Any], reads: set[str]) -> None:
        super().__init__(data)
        self.reads = reads

    def __getitem__(self, key: Any) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.reads.add(key)
        return super().__contains__(key)


class ConfigReader:
    """One config dict (already unwrapped from ``text_config``), read with provenance."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        source_name: str,
        prefix: str = "",
        outer: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        defaults_name: str = "",
        overridden: frozenset[str] = frozenset(),
    ) -> None:
        self.config = config
        self.source_name = source_name
        self.prefix = prefix
        self.outer = outer or {}
        self.defaults = dict(defaults or {})
        self.defaults_name = defaults_name
        self.overridden = overridden
        self.provenance: list[Provenance] = []
        self.notes: list[str] = []

    # ---- raw access -------------------------------------------------------------------------
    def raw(self, key: str) -> Any:
        """The value at ``key`` (dotted for nested dicts), or _MISSING; JSON null counts as missing."""
        node: Any = self.config
        reads = getattr(node, "reads", None)
        if reads is not None:
            reads.add(key)
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return _MISSING if node is None else node

    def has(self, key: str) -> bool:
        return self.raw(key) is not _MISSING

    def where(self, key: str) -> str:
        if key in self.overridden:
            return f"--set {key}"
        return f"config: {self.prefix}{key}"

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def record(self, field: str, value: Any, source: str) -> None:
        self.provenance.append(Provenance(field=field, value=value, source=source))

    # ---- typed access -----------------------------------------------------------------------
    def first_of(
        self,
        field: str,
        aliases: Sequence[str],
        *,
        required: bool = True,
        kind: str = "int",
        use_defaults: bool = True,
    ) -> Any:
        """First alias present in the config, else the architecture default, else error/None."""
        for key in aliases:
            value = self.raw(key)
            if value is not _MISSING:
                value = self.check(key, value, kind)
                self.record(field, value, self.where(key))
                return value
        if use_defaults:
            for key in aliases:
                if key in self.defaults and self.defaults[key] is not None:
                    value = self.defaults[key]
                    self.record(field, value, f"default of {self.defaults_name}: {key}")
                    self.note(
                        f"{self.prefix}{key} is not in the config; using the {self.defaults_name} "
                        f"architecture default {key} = {value}"
                    )
                    return value
        if required:
            tried = ", ".join(self.prefix + key for key in aliases)
            raise ConfigError(
                f"{self.source_name}: required field {field} is missing (tried {tried})",
                f"add it to the config, or pass --set {aliases[0]}=VALUE",
            )
        return None

    def optional(self, field: str, aliases: Sequence[str], *, kind: str = "int") -> Any:
        return self.first_of(field, aliases, required=False, kind=kind)

    def check(self, key: str, value: Any, kind: str) -> Any:
        where = f"{self.source_name}: {self.prefix}{key}"
        if kind in ("int", "count"):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where} must be an integer, got {value!r}"[:300], "fix the config or pass --set")
            if value == 0 and kind == "count":
                return value
            if value <= 0:
                raise ConfigError(f"{where} must be positive, got {value}", "fix the config or pass --set")
            if value > MAX_DIM and key not in _LONG_KEYS:
                raise ConfigError(f"{where} = {value:,} is absurdly large (limit {MAX_DIM:,})", "check the config")
            if value > (1 << 40):
                raise ConfigError(f"{where} = {value:,} is absurdly large", "check the config")
            return value
        if kind == "ratio":  # a positive, finite multiplier (MPT expansion_ratio, LFM2 block_ffn_dim_multiplier)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_RATIO:
                raise ConfigError(f"{where} must be a positive number up to {MAX_RATIO:,}, got {value!r}"[:300],
                                  "fix the config or pass --set")
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true or false, got {value!r}"[:300], "fix the config or pass --set")
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise ConfigError(f"{where} must be a string, got {value!r}"[:300], "fix the config or pass --set")
            return value
        if kind == "list":
            if not isinstance(value, list):
                raise ConfigError(f"{where} must be a list, got {value!r}"[:300], "fix the config or pass --set")
            return value
        if kind == "any":
            return value
        raise AssertionError(kind)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean switch, with the architecture's default when absent (noted)."""
        value = self.raw(key)
        if value is _MISSING:
            value = self.defaults.get(key, default)
            if key in self.defaults:
                self.note(f"{self.prefix}{key} is not in the config; using the {self.defaults_name} default {value}")
            return bool(value)
        return self.check(key, value, "bool")


#: Context-length fields may legitimately be huge (Llama 4: 10M).
_LONG_KEYS = frozenset(
    {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len",
     "model_max_length", "n_ctx", "max_target_positions", "max_source_positions", "sliding_window",
     "attention_chunk_size"}
)


class ArchParser:
    """Generic decoder parser. Families subclass it and override only their quirks."""

    family: ClassVar[str] = "generic"
    model_types: ClassVar[tuple[str, ...]] = ()
    #: The architecture's defaults for keys a sparse config may omit (transformers config class).
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: Per-``model_type`` additions to ``defaults``: with it, the family's one table of architecture
    #: defaults, read by the cache layout and the weight count alike.
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: Whether a ``sliding_window`` value, alone, makes every layer sliding.
    sliding_window_applies: ClassVar[bool] = True
    #: The ``model_type``s whose weights this parser counts (:meth:`count_weights`); usually its own.
    weight_types: ClassVar[tuple[str, ...]] = ()

    LAYERS: ClassVar[tuple[str, ...]] = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
    HEADS: ClassVar[tuple[str, ...]] = ("num_attention_heads", "n_head", "n_heads", "num_heads")
    HIDDEN: ClassVar[tuple[str, ...]] = ("hidden_size", "n_embd", "n_embed", "d_model", "model_dim", "dim")
    KV_HEADS: ClassVar[tuple[str, ...]] = ("n_head_kv", "num_kv_heads", "num_key_value_heads")
    HEAD_DIM: ClassVar[tuple[str, ...]] = ("head_dim", "attention_head_dim", "hidden_size_per_head", "kv_channels", "d_kv")
    HEAD_DIM_V: ClassVar[tuple[str, ...]] = ("head_dim_v", "v_head_dim")
    MAX_CONTEXT: ClassVar[tuple[str, ...]] = (
        "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
        "max_seq_len", "model_max_length", "n_ctx",
    )

    # ---- entry point --------------------------------------------------------------------------
    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        kinds = self.layer_kinds(r, num_layers)
        specs: list[LayerSpec] = []
        attn: dict[str, int] | None = None
        window: int | None = None
        chunk: int | None = None
        for index, kind in enumerate(kinds):
            if kind in (FULL, SLIDING, CHUNKED):
                if attn is None:
                    attn = self.attention_dims(r)
                mla = attn.get("mla")
                if kind == FULL:
                    specs.append(self.full_spec(attn) if not mla else self.mla_spec(attn))
                elif kind == SLIDING:
                    window = window or self.sliding_window(r)
                    specs.append(self.windowed(attn, SlidingWindowSpec, sliding_window=window))
                else:
                    chunk = chunk or r.first_of("attention_chunk_size", ["attention_chunk_size"])
                    specs.append(self.windowed(attn, ChunkedLocalSpec, attention_chunk_size=chunk))
            elif kind == STATE:
                specs.append(self.state_spec(r, index))
            elif kind == NONE:
                specs.append(NoCacheSpec(reason="no attention or state in this layer"))
            else:
                raise AssertionError(kind)
        return specs

    # ---- hooks --------------------------------------------------------------------------------
    def defaults_for(self, model_type: str) -> Mapping[str, Any]:
        """The architecture defaults that apply to this ``model_type``."""
        return {**self.defaults, **self.defaults_by_type.get(model_type, {})}

    def num_layers(self, r: ConfigReader) -> int:
        num_layers = r.first_of("num_hidden_layers", self.LAYERS)
        check_limit(num_layers, MAX_LAYERS, "the config's layer count")
        return num_layers

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = r.raw("layer_types")
        if types is not _MISSING:
            return self.kinds_from_layer_types(r, types, num_layers)
        return self.pattern_kinds(r, num_layers)

    def kinds_from_layer_types(
        self, r: ConfigReader, types: Any, num_layers: int, *, key: str = "layer_types"
    ) -> list[str]:
        r.check(key, types, "list")
        if len(types) != num_layers:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}{key} has {len(types)} entries but the model has {num_layers} layers",
                f"make {key} one entry per layer",
            )
        kinds = []
        for name in types:
            if not isinstance(name, str) or name not in LAYER_TYPE_NAMES:
                raise ConfigError(
                    f"{r.source_name}: unknown layer type {name!r} in {r.prefix}{key}",
                    f"kvplan knows: {', '.join(sorted(LAYER_TYPE_NAMES))}",
                )
            kinds.append(LAYER_TYPE_NAMES[name])
        if "reference_sliding_attention" in types:
            r.note("reference_sliding_attention layers keep the whole prompt plus a window over generated tokens: "
                   "priced as full attention, exact while fewer tokens than the window are generated, above after")
        r.record("layer_types", _summarise(kinds), r.where(key))
        return kinds

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        """Which layers slide when the config has no ``layer_types``: the family's rule."""
        if r.has("sliding_window"):
            if r.raw("use_sliding_window") is False:
                r.note("use_sliding_window is false: sliding_window is ignored, every layer is full attention")
            elif self.sliding_window_applies:
                window = r.raw("sliding_window")
                r.note(f"sliding_window = {window} applies to every layer (no layer_types in the config)")
                return [SLIDING] * num_layers
            else:
                r.note(f"sliding_window is set but the {self.family} architecture does not use it; full attention")
        return [FULL] * num_layers

    def sliding_window(self, r: ConfigReader) -> int:
        return r.first_of("sliding_window", ["sliding_window"])

    def attention_dims(self, r: ConfigReader) -> dict[str, int]:
        heads = r.first_of("num_attention_heads", self.HEADS)
        if r.has("kv_lora_rank"):
            rank = r.first_of("kv_lora_rank", ["kv_lora_rank"])
            rope = r.first_of("qk_rope_head_dim", ["qk_rope_head_dim"])
            return {"mla": 1, "kv_lora_rank": rank, "qk_rope_head_dim": rope, "num_attention_heads": heads}
        kv_heads = self.kv_heads(r, heads)
        if kv_heads > heads:
            raise ConfigError(
                f"{r.source_name}: {kv_heads} KV heads is more than the {heads} attention heads",
                "check num_key_value_heads / num_attention_heads",
            )
        if heads % kv_heads:
            raise ConfigError(
                f"{r.source_name}: {heads} attention heads are not a multiple of {kv_heads} KV heads",
                "grouped-query attention needs num_attention_heads divisible by num_key_value_heads",
            )
        head_size = self.head_dim(r, heads)
        head_size_v = r.optional("head_size_v", self.HEAD_DIM_V) or head_size
        return {"num_kv_heads": kv_heads, "head_size": head_size, "head_size_v": head_size_v}

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        value = r.optional("num_kv_heads", self.KV_HEADS)
        if value is not None:
            return value
        if r.raw("multi_query") is True:
            r.record("num_kv_heads", 1, r.where("multi_query"))
            r.note("multi_query is true: one KV head (MQA)")
            return 1
        r.record("num_kv_heads", heads, "derived: no KV-head field, so num_kv_heads = num_attention_heads (MHA)")
        r.note(
            f"no KV-head field (tried {', '.join(self.KV_HEADS)}): multi-head attention, "
            f"num_kv_heads = num_attention_heads = {heads}"
        )
        return heads

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        value = r.optional("head_dim", self.HEAD_DIM)
        if value is not None:
            return value
        hidden = r.first_of("hidden_size", self.HIDDEN)
        if hidden % heads:
            raise ConfigError(
                f"{r.source_name}: no head_dim field and hidden size {hidden} is not divisible by {heads} heads",
                "pass --set head_dim=VALUE",
            )
        value = hidden // heads
        r.record("head_dim", value, f"derived: hidden_size // num_attention_heads = {hidden} // {heads}")
        r.note(f"head_dim derived as hidden_size // num_attention_heads = {hidden} // {heads} = {value}")
        return value

    def full_spec(self, attn: Mapping[str, int]) -> LayerSpec:
        return FullAttentionSpec(
            num_kv_heads=attn["num_kv_heads"], head_size=attn["head_size"], head_size_v=attn["head_size_v"]
        )

    def cross_spec(self, attn: Mapping[str, int]) -> LayerSpec:
        """Cross-attention over an encoder's output, with the decoder's own K/V geometry."""
        return CrossAttentionSpec(
            num_kv_heads=attn["num_kv_heads"], head_size=attn["head_size"], head_size_v=attn["head_size_v"]
        )

    def mla_spec(self, attn: Mapping[str, int]) -> LayerSpec:
        return MLASpec(kv_lora_rank=attn["kv_lora_rank"], qk_rope_head_dim=attn["qk_rope_head_dim"])

    def windowed(self, attn: Mapping[str, int], cls: type, **window: int) -> LayerSpec:
        if attn.get("mla"):
            raise ConfigError("windowed MLA layers are not supported", "report the model to kvplan")
        return cls(
            num_kv_heads=attn["num_kv_heads"], head_size=attn["head_size"], head_size_v=attn["head_size_v"], **window
        )

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        raise ConfigError(
            f"{r.source_name}: layer {index} is a recurrent/linear layer but kvplan has no state rule "
            f"for model_type {r.raw('model_type')!r}",
            "use a supported hybrid family (mamba, mamba2, jamba, nemotron_h, qwen3_next, minimax, falcon_h1, "
            "granitemoehybrid, bamba, lfm2)",
        )

    def max_context(self, r: ConfigReader) -> int | None:
        return r.optional("max_context_tokens", self.MAX_CONTEXT)

    def encoder_len(self, r: ConfigReader) -> int | None:
        return None

    def encoder_output_len(self, r: ConfigReader) -> int | None:
        """Tokens this model hands a decoder's cross-attention when it is the ``encoder`` of a composite
        encoder-decoder (a ViT: its patches and class token); None: the encoder's position limit bounds it."""
        return None

    # ---- weights --------------------------------------------------------------------------------
    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """The vision tower and projector of ``outer["vision_config"]``; None: the generic ViT counts them."""
        return None

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The language model's weight tensors, read from the same config as the cache."""
        raise ConfigError(
            f"{r.source_name}: kvplan cannot count the weights of model_type {model_type!r} from its config",
            "pass --weights-bytes SIZE (the checkpoint's size), or --kv-budget SIZE to size the cache directly",
        )


#: Config keys that name the recurrent (ssm) state's dtype, and the engines that read each one.
SSM_DTYPE_KEYS = ("mamba_ssm_dtype", "mamba_ssm_cache_dtype")


def with_config_ssm_dtype(r: ConfigReader, spec: StateSpec) -> StateSpec:
    """The state spec with its ``ssm`` tensor in float32 when the config names it (``mamba_ssm_dtype``: Qwen3.5;
    ``mamba_ssm_cache_dtype``: Nemotron-H). A 16-bit value leaves the state in the model dtype (noted)."""
    for key in SSM_DTYPE_KEYS:
        value = r.raw(key)
        if value is _MISSING:
            continue
        name = str(r.check(key, value, "str")).lower().removeprefix("torch.")
        r.record("ssm_state_dtype", name, r.where(key))
        if name in ("float32", "fp32"):
            r.note(
                f"{key} = float32: the recurrent (ssm) state is sized in float32 and the conv state in the model "
                "dtype, as vLLM (mamba_ssm_cache_dtype auto reads the config), SGLang, transformers and llama.cpp "
                "keep it"
            )
            return replace(spec, fp32_tensors=tuple(sorted({*spec.fp32_tensors, "ssm"})))
        if name not in ("bfloat16", "float16", "bf16", "fp16", "auto"):
            raise ConfigError(f"{r.source_name}: {r.prefix}{key} = {value!r} is not a dtype kvplan knows",
                              "use float32, bfloat16 or float16")
        r.note(f"{key} = {name}: the recurrent state is sized in the model dtype")
        return spec
    return spec


def layer_indices(r: ConfigReader, key: str, value: Any, num_layers: int) -> frozenset[int]:
    """A config list of 0-based layer indices (``attn_layer_indices``, ``cross_attention_layers``), checked."""
    r.check(key, value, "list")
    bad = [i for i in value if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < num_layers]
    if bad:
        raise ConfigError(
            f"{r.source_name}: {r.prefix}{key} holds {bad[0]!r}, not a layer index in 0..{num_layers - 1}"[:300],
            f"make {key} a list of 0-based layer indices below num_hidden_layers ({num_layers})",
        )
    return frozenset(value)


def _summarise(kinds: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


# ---- weight keys every family reads -------------------------------------------------------------
def hidden_of(r: ConfigReader) -> int:
    return r.first_of("hidden_size", ("hidden_size", "n_embd", "d_model", "dim"))


def vocab_of(r: ConfigReader) -> int:
    return r.first_of("vocab_size", ("vocab_size", "padded_vocab_size", "n_vocab"))


def tied(r: ConfigReader) -> bool:
    value = r.raw("tie_word_embeddings")
    if isinstance(value, bool):
        return value
    if value is not _MISSING:
        r.check("tie_word_embeddings", value, "bool")  # raises: 1, "true" are not booleans
    if "tie_word_embeddings" in r.defaults:
        tied = bool(r.defaults["tie_word_embeddings"])
        r.note(f"tie_word_embeddings is not in the config; the {r.defaults_name} default is {str(tied).lower()}")
        return tied
    r.note("tie_word_embeddings is not in the config; transformers' default true (lm_head shares the embedding)")
    return True


def switch(r: ConfigReader, key: str, default: bool) -> bool:
    value = r.raw(key)
    if isinstance(value, bool):
        return value
    if value is not _MISSING:
        r.check(key, value, "bool")  # raises: 1, "true" are not booleans
    default = bool(r.defaults.get(key, default))
    r.note(f"{r.prefix}{key} is not in the config; the {r.defaults_name} default is {str(default).lower()}")
    return default


def embeddings(r: ConfigReader, hidden: int, *, lm_head_bias: bool = False) -> list[WeightPart]:
    vocab = vocab_of(r)
    parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=hidden, out_features=vocab),))]
    if not tied(r):
        parts.append(
            WeightPart(name="lm_head", matrices=(Matrix(in_features=hidden, out_features=vocab),),
                       other_parameters=vocab if lm_head_bias else 0)
        )
    return parts
