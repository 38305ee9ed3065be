"""config.json -> ModelGeometry and weights: the registry of family modules keyed by ``model_type``.

One module per family (``llama.py``, ``qwen.py``, ``gemma.py``...) holds the ``model_type``s it answers
for, its architecture defaults, its cache layout and its weight layout, and lists its parsers in
``PARSERS``. This module finds them, unwraps multimodal configs (``text_config``) and runs them.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.geometry import ModelGeometry
from kvplan.models.base import ArchParser, ConfigReader, hidden_of
from kvplan.models.family_index import CACHE_INDEX as _CACHE_INDEX
from kvplan.models.family_index import WEIGHT_INDEX as _WEIGHT_INDEX
from kvplan.models.tensors import WeightsEstimate
from kvplan.specs import LayerSpec, NoCacheSpec

if TYPE_CHECKING:
    from kvplan.models.storage import (
        DTYPE_BYTES,
        serve_weights,
        served_dtype,
        weights_from_safetensors,
        with_exact_bytes,
    )

#: Names this package re-exports from kvplan.models.storage, imported on first use (weights are not
#: counted by `kvplan estimate`, so its start-up does not pay for the storage rules).
_STORAGE_NAMES = frozenset({"DTYPE_BYTES", "serve_weights", "served_dtype", "weights_from_safetensors",
                            "with_exact_bytes"})

__all__ = [
    "DTYPE_BYTES", "PARSERS", "REGISTRY", "WEIGHT_REGISTRY", "WeightsEstimate", "apply_overrides", "count_weights",
    "parse_config", "parse_override", "resolve_weights", "serve_weights", "served_dtype", "supported_model_types",
    "weights_from_safetensors", "with_exact_bytes",
]

#: Modules of this package that hold generic machinery; every other module is one family.
GENERIC_MODULES = frozenset({"audio", "base", "decoder", "family_index", "storage", "tensors", "vision",
                             "vision_more", "vision_towers"})


def _family_parsers() -> list[type[ArchParser]]:
    """Every family module's ``PARSERS``, in module-name order: adding a family is adding its module."""
    import pkgutil

    found: list[type[ArchParser]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name not in GENERIC_MODULES:
            found += importlib.import_module(f"{__name__}.{info.name}").PARSERS
    return found


def _registry(parsers: list[type[ArchParser]], attribute: str) -> dict[str, type[ArchParser]]:
    registry: dict[str, type[ArchParser]] = {}
    for parser in parsers:
        for model_type in getattr(parser, attribute):
            assert model_type not in registry, f"{model_type} claimed by {registry[model_type]} and {parser}"
            registry[model_type] = parser
    return registry


class _LazyRegistry(Mapping[str, type[ArchParser]]):
    """``model_type`` -> parser, importing only the family module the static index names for a type (start-up
    imports one family, not thirty); iterating, or a type the index does not name, imports every family.
    ``tests/test_models_index.py`` checks the index against the registry built from every module."""

    def __init__(self, index: dict[str, str], attribute: str) -> None:
        self._module_of = {t: module for module, types in index.items() for t in types.split()}
        self._attribute = attribute
        self._found: dict[str, type[ArchParser]] = {}
        self._full: dict[str, type[ArchParser]] | None = None

    def _all(self) -> dict[str, type[ArchParser]]:
        if self._full is None:
            self._full = _registry(_family_parsers(), self._attribute)
        return self._full

    def __getitem__(self, model_type: str) -> type[ArchParser]:
        found = self._found.get(model_type)
        if found is not None:
            return found
        module = self._module_of.get(model_type) if self._full is None else None
        if module is not None:
            for parser in importlib.import_module(f"{__name__}.{module}").PARSERS:
                if model_type in getattr(parser, self._attribute):
                    self._found[model_type] = parser
                    return parser
        return self._all()[model_type]

    def __contains__(self, model_type: object) -> bool:
        if model_type in self._found or model_type in self._module_of:
            return True
        return model_type in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


#: ``model_type`` -> the parser that reads its cache layout.
REGISTRY: Mapping[str, type[ArchParser]] = _LazyRegistry(_CACHE_INDEX, "model_types")
#: ``model_type`` -> the parser that counts its weights (usually the same; a few types whose cache
#: follows another family's rules are counted by their own family's module).
WEIGHT_REGISTRY: Mapping[str, type[ArchParser]] = _LazyRegistry(_WEIGHT_INDEX, "weight_types")


def __getattr__(name: str) -> Any:
    if name in _STORAGE_NAMES:
        from kvplan.models import storage

        return getattr(storage, name)
    if name == "PARSERS":  # the parsers that read a cache layout (the README's architecture table lists them)
        return tuple(p for p in _family_parsers() if p.model_types)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Keys under which multimodal / wrapper configs nest the language model's config.
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")

#: NOTE: the ``model_type``s whose transformers config class nests its language model's config
#: (``sub_configs`` holds ``text_config``; transformers 5.24). Only these, the wrappers below, model
#: types kvplan does not know, and a nested config that names a different ``model_type`` are unwrapped:
#: a plain Llama config with a stray ``"text_config": {}`` is read from its own top-level fields.
NESTING_TYPES = frozenset("""
aimv2 align altclip apertus1p5 aria audioflamingo3 aya_vision blip blip-2 bridgetower chinese_clip clap clip
clipseg clvp cohere2_vision cohere_compass cosmos3_edge cosmos3_omni deepseek_ocr2 deepseek_vl
deepseek_vl_hybrid diffusion_gemma dots3_note embedding_gemma2 emu3 ernie4_5_vl_moe exaone4_5 fast_vlm flava
florence2 fun_asr_nano fuyu gemma3 gemma3n gemma4 gemma4_assistant gemma4_unified gemma4_unified_assistant
glm46v glm4v glm4v_moe glm5_next glm_image glm_ocr glmasr glmga got_ocr2 granite4_vision granite_docling
granite_speech granite_speech_plus grounding-dino groupvit hunyuan_vl hy_v4_vl hyperclovax_vision_v2 idefics2
idefics3 inkling2 inkling2_loop inkling_mm_model instructblip instructblipvideo internvl janus jev kimi_k25
kosmos-2 kosmos-2.5 lfm2_vl lfm3_vl lighton_ocr llama4 llava llava_next llava_next_video llava_onevision
metaclip_2 minicpm_ocr minicpmv4_6 minicpmv4_7 minimax_m3_vl mistral3 mistral_large4 mllama mm-grounding-dino
modernvbert molmo2 moss_transcribe_diarize muse_glimmer muse_spark musicflamingo nemo_speechlm nemotron_h_omni
omdet-turbo omniasr ovis2 owlv2 owlvit paddleocr_vl paligemma pe_audio pe_audio_video pe_video perception_lm
pix2struct pp_chart2table pp_formulanet qianfan_ocr qwen2_5_omni_thinker qwen2_5_vl qwen2_audio qwen2_vl
qwen3_5 qwen3_5_moe qwen3_asr qwen3_omni_moe_thinker qwen3_vl qwen3_vl_moe qwen4_exp sam3 sam3_lite_text
shieldgemma2 siglip siglip2 smolvlm step3p7 t5gemma2_encoder tipsv2 ultravbert unlimited_ocr vibevoice
vibevoice_asr video_llama_3 video_llava videoprism vipllava vision-text-dual-encoder voxtral voxtral_realtime
xclip
""".split())

#: Wrapper model types whose nested text config may omit its own ``model_type``.
WRAPPER_TEXT_TYPES = {
    "llava": "llama", "llava_next": "llama", "llava_onevision": "qwen2", "vipllava": "llama",
    "gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "llama4": "llama4_text", "mistral3": "mistral", "paligemma": "gemma",
    "mllama": "mllama_text_model",
}

ENCODER_ONLY = frozenset(
    {"deberta", "deberta-v2", "distilbert", "albert", "modernbert", "mpnet", "nomic_bert", "xlm"}
)


#: Keys that describe a hybrid or irregular layer layout; the generic rules refuse configs that have them.
HYBRID_MARKERS = (
    "layers_block_type", "hybrid_layer_ids", "hybrid_override_pattern", "block_configs", "attn_layer_indices",
    "attn_type_list", "linear_attn_config", "kv_sharing_modes", "num_kv_shared_layers",
)


def share_cross_layer_kv(reader: ConfigReader, layers: tuple[LayerSpec, ...]) -> tuple[LayerSpec, ...]:
    """Cross-layer attention (Hunyuan ``use_cla``): layer i reuses the K/V of layer i - i % cla_share_factor,
    so only every ``cla_share_factor``-th layer keeps a cache."""
    if reader.raw("use_cla") is not True:
        return layers
    factor = reader.first_of("cla_share_factor", ["cla_share_factor"])
    if factor == 1:
        return layers
    reader.note(
        f"use_cla: layers share K/V in groups of cla_share_factor = {factor}; only layers i % {factor} == 0 "
        "keep a cache"
    )
    return tuple(
        spec if index % factor == 0 or spec.kind in ("state", "no_cache")
        else NoCacheSpec(reason=f"reuses the K/V of layer {index - index % factor} (cross-layer attention)")
        for index, spec in enumerate(layers)
    )


def supported_model_types() -> list[str]:
    return sorted(REGISTRY)


def apply_overrides(config: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with dotted ``key=value`` overrides applied."""
    result = copy.deepcopy(config)
    for key, value in overrides.items():
        node = result
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return result


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` with a JSON value (``8``, ``true``, ``null``, ``[1,0]``) or a bare string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r} is not key=value", "e.g. --set num_key_value_heads=8")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.strip()
    except (ValueError, RecursionError):  # an integer past 4,300 digits, or thousands of brackets
        raise ConfigError(f"--set {key}: the value is too long or too deeply nested to read",
                          "e.g. --set num_key_value_heads=8") from None
    from kvplan.limits import MAX_NESTING
    from kvplan.safeload import nesting_depth

    if nesting_depth(value) > MAX_NESTING:
        raise ConfigError(f"--set {key}: the value is nested deeper than {MAX_NESTING} levels")
    return key, value


def nested_key_of(config: Mapping[str, Any]) -> str | None:
    """The key of the nested language-model config to read, or None: read the top level.

    A nested dict is used only where the architecture nests one (transformers' composite configs, the
    wrappers kvplan knows), for a ``model_type`` kvplan does not know, or when the nested dict names a
    ``model_type`` of its own that differs from the outer one."""
    key = next((k for k in NESTED_TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
    if key is None:
        return None
    outer_type = config.get("model_type")
    if not isinstance(outer_type, str) or not outer_type:
        return key
    inner_type = config[key].get("model_type")
    if outer_type in NESTING_TYPES or outer_type in WRAPPER_TEXT_TYPES or outer_type not in REGISTRY:
        return key
    if isinstance(inner_type, str) and inner_type and inner_type != outer_type:
        return key
    return None


def check_model_types(config: Mapping[str, Any], source_name: str) -> None:
    """``model_type`` (top level and nested) must be a string: ``[]`` or ``7`` names no architecture."""
    for key in ("", *NESTED_TEXT_KEYS):
        node = config.get(key) if key else config
        value = node.get("model_type") if isinstance(node, Mapping) else None
        if value is not None and not isinstance(value, str):
            where = f"{key}.model_type" if key else "model_type"
            raise ConfigError(f"{source_name}: {where} must be a string such as \"llama\", got {value!r}"[:300],
                              "fix the config, or pass --set model_type=NAME")


def overridden_config(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``--set`` overrides in place: where the language model's config is nested, an
    undotted key goes into it (``--set num_key_value_heads=4`` on Llama 4 sets text_config's)."""
    if not overrides:
        return dict(config)
    outer_only = {k: v for k, v in overrides.items() if "." in k}
    result = apply_overrides(dict(config), outer_only)
    nested = nested_key_of(result)
    inner = {k: v for k, v in overrides.items() if "." not in k}
    if nested is None:
        return apply_overrides(result, inner)
    result[nested] = apply_overrides(dict(result[nested]), inner)
    # NOTE: a model_type set on the nested config decides the family; the wrapper stays the wrapper.
    return result


def _override_keys(overrides: Mapping[str, Any], nested: str | None) -> dict[str, str]:
    """override key -> the key a reader of the nested (or flat) config sees it under."""
    keys: dict[str, str] = {}
    for key in overrides:
        if nested and key.startswith(nested + "."):
            keys[key] = key[len(nested) + 1:]
        elif nested and "." in key:
            keys[key] = "^" + key  # an outer key, read through the wrapper
        else:
            keys[key] = key
    return keys


#: Keys every config may carry that kvplan reads outside a family's parser.
_ALWAYS_READ = ("model_type", "torch_dtype", "dtype", "architectures", "quantization_config")


def check_overrides_read(
    overrides: Mapping[str, Any], nested: str | None, reads: set[str], outer_reads: set[str],
    candidates: set[str], source_name: str,
) -> None:
    """An override that no parser read is an error, with a did-you-mean over the keys the family reads."""
    import difflib

    for key, seen in _override_keys(overrides, nested).items():
        pool, name = (outer_reads, seen[1:]) if seen.startswith("^") else (reads, seen)
        parts = name.split(".")
        if any(".".join(parts[:n]) in pool for n in range(1, len(parts) + 1)) or parts[0] in _ALWAYS_READ:
            continue
        close = difflib.get_close_matches(name, sorted(c for c in candidates if isinstance(c, str)), n=3, cutoff=0.6)
        where = f"the nested {nested}" if nested and not seen.startswith("^") else "the config"
        raise ConfigError(
            f"{source_name}: --set {key}: no part of kvplan reads {name!r} from {where}",
            (f"did you mean {' or '.join(close)}?" if close else
             "kvplan reads the keys named in the layer table's sources; check the spelling"),
        )


def parse_config(
    config: Any,
    *,
    model_id: str,
    source_name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ModelGeometry:
    """Read a Hugging Face ``config.json`` dict into a per-layer :class:`ModelGeometry`."""
    source_name = source_name or model_id
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"{source_name}: config must be a JSON object, got {type(config).__name__}",
            "pass a Hugging Face config.json",
        )
    overrides = dict(overrides or {})
    from kvplan.models.base import TrackedConfig

    reads: set[str] = set()
    outer_reads: set[str] = set()
    check_model_types(config, source_name)
    full = overridden_config(config, overrides)
    check_model_types(full, source_name)
    nested_key = nested_key_of(full)
    outer_type = full.get("model_type")
    outer = TrackedConfig(full, outer_reads)
    if nested_key is not None:
        effective = TrackedConfig(full[nested_key], reads)
        prefix = nested_key + "."
    else:
        effective = TrackedConfig(full, reads)
        prefix = ""
    overridden = frozenset(k for k in _override_keys(overrides, nested_key).values() if not k.startswith("^"))

    inner_type = effective.get("model_type") if nested_key else None
    model_type = inner_type or (WRAPPER_TEXT_TYPES.get(outer_type) if nested_key else outer_type) or outer_type
    if not isinstance(model_type, str) or not model_type:
        model_type = None
    if model_type in ENCODER_ONLY or outer_type in ENCODER_ONLY:
        raise ConfigError(
            f"{source_name}: model_type {model_type!r} is an encoder-only model; it keeps no KV cache",
            "kvplan sizes decoder caches; pick a decoder or encoder-decoder model",
        )
    parser_cls = REGISTRY.get(model_type or "") or REGISTRY.get(outer_type or "") or ArchParser
    parser = parser_cls()
    reader = ConfigReader(
        effective,
        source_name=source_name,
        prefix=prefix,
        outer=outer,
        defaults=parser.defaults_for(model_type or ""),
        defaults_name=model_type or "generic",
        overridden=overridden,
    )
    if parser_cls is ArchParser:
        markers = [key for key in HYBRID_MARKERS if reader.has(key)]
        if markers:
            raise ConfigError(
                f"{source_name}: model_type {model_type!r} is not one kvplan knows, and its config has "
                f"{', '.join(markers)}: a layer layout the generic rules cannot read",
                "report the model to kvplan; meanwhile describe it with a known model_type via --set",
            )
        reader.note(
            f"model_type {model_type!r} is not one kvplan knows; read with the generic alias rules "
            "(check the layer table)"
        )
    if nested_key:
        reader.note(f"language model read from the nested {nested_key} (model_type {model_type})")

    layers = share_cross_layer_kv(reader, tuple(parser.build_layers(reader)))
    num_hidden_layers = parser.num_layers(reader)
    max_context = parser.max_context(reader)
    max_context_source = reader.provenance[-1].source if max_context is not None else None
    encoder_len = parser.encoder_len(reader)
    encoder_source = None
    if encoder_len is not None:
        encoder_source = next(p.source for p in reversed(reader.provenance) if p.field == "encoder_len")

    dtype, dtype_source = _config_dtype(effective, outer, prefix, overridden, source_name)
    if overrides:
        _check_overrides(full, overrides, nested_key, reads, outer_reads, parser, reader, model_id, source_name)
    architectures = outer.get("architectures") or effective.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    return ModelGeometry(
        model_id=model_id,
        model_type=str(outer_type or model_type or "unknown"),
        family=parser.family,
        architecture=architecture if isinstance(architecture, str) else None,
        layers=layers,
        num_hidden_layers=num_hidden_layers,
        max_context_tokens=max_context,
        max_context_source=max_context_source,
        default_encoder_len=encoder_len,
        default_encoder_len_source=encoder_source,
        config_dtype=dtype,
        config_dtype_source=dtype_source,
        provenance=_dedupe(reader.provenance),
        notes=tuple(n for n in (_defaults_warning(reader, str(model_type or outer_type or "generic")),) if n)
        + tuple(reader.notes),
    )


def _check_overrides(
    full: Mapping[str, Any], overrides: Mapping[str, Any], nested_key: str | None, reads: set[str],
    outer_reads: set[str], parser: ArchParser, reader: ConfigReader, model_id: str, source_name: str,
) -> None:
    """Refuse a ``--set`` key that neither the cache layout nor the weight count reads."""
    from kvplan.errors import KvplanError

    try:  # the weight count reads its own keys (intermediate_size, vocab_size...): they count as read
        count_weights(full, model_id=model_id, reads=reads, outer_reads=outer_reads)
    except KvplanError:
        pass
    candidates = (set(reads) | set(reader.defaults)) - set(overrides) - {
        k for k in _override_keys(overrides, nested_key).values()}
    for aliases in (parser.LAYERS, parser.HEADS, parser.HIDDEN, parser.KV_HEADS, parser.HEAD_DIM,
                    parser.HEAD_DIM_V, parser.MAX_CONTEXT):
        candidates.update(aliases)
    check_overrides_read(overrides, nested_key, reads, outer_reads, candidates, source_name)


def _dtype_value(config: Mapping[str, Any], key: str, where: str) -> str | None:
    value = config.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{where}{key} must be a dtype name such as \"bfloat16\", got {value!r}"[:300],
                      f"fix the config, or pass --set {key}=bfloat16")


def _config_dtype(
    effective: Mapping[str, Any], outer: Mapping[str, Any], prefix: str, overridden: frozenset[str],
    source_name: str = "config",
) -> tuple[str | None, str | None]:
    # NOTE: a --set on the text config wins; then the top-level dtype (what vLLM and transformers load a
    # composite model in), then the nested text config's.
    for key in ("torch_dtype", "dtype"):
        value = _dtype_value(effective, key, f"{source_name}: {prefix}")
        if key in overridden and value is not None:
            return value, f"--set {key}"
    for key in ("torch_dtype", "dtype"):
        value = _dtype_value(outer, key, f"{source_name}: ")
        if value is not None:
            return value, f"config: {key}"
    for key in ("torch_dtype", "dtype"):
        value = _dtype_value(effective, key, f"{source_name}: {prefix}")
        if value is not None:
            return value, f"config: {prefix}{key}"
    return None, None


#: The fields that size a model: when one comes from an architecture default rather than the config, the
#: answer is right only if the model is the architecture's default size. (A default head_dim is not one:
#: families such as Gemma 3 fix it for every size.)
CORE_FIELDS = ("num_hidden_layers", "num_attention_heads", "num_kv_heads", "hidden_size", "kv_lora_rank")
#: The first words of the note that says so; the table prints such notes beside the answer.
WARNING_PREFIX = "WARNING: "


def defaulted_core(geometry: ModelGeometry) -> list[str]:
    """The core geometry fields whose value is an architecture default, not a config value."""
    return [p.field for p in geometry.provenance if p.field in CORE_FIELDS and p.source.startswith("default of")]


def require_config_geometry(geometry: ModelGeometry, *, what: str = "--strict") -> None:
    """``--strict``: refuse a config whose core geometry comes from architecture defaults."""
    fields = defaulted_core(geometry)
    if fields:
        raise ConfigError(
            f"{geometry.model_id}: {what}: the config does not give {', '.join(fields)}; kvplan would use the "
            f"{geometry.model_type} architecture defaults",
            "add the fields to the config (or pass them with --set), or drop " + what,
        )


def _defaults_warning(reader: ConfigReader, model_type: str) -> str | None:
    fields = [p for p in _dedupe(reader.provenance) if p.field in CORE_FIELDS and p.source.startswith("default of")]
    if not fields:
        return None
    given = ", ".join(f"{p.field} = {p.value}" for p in fields)
    return (f"{WARNING_PREFIX}core geometry from the {model_type} architecture defaults, not the config ({given}): "
            "right only if the model is that default size (--strict refuses such a config)")


def _dedupe(items: list) -> tuple:
    seen: dict[str, object] = {}
    for item in items:
        seen.setdefault(item.field, item)
    return tuple(seen.values())


# ---- weights ----------------------------------------------------------------------------------
def count_weights(
    config: Mapping[str, Any], *, model_id: str, reads: set[str] | None = None, outer_reads: set[str] | None = None,
) -> WeightsEstimate:
    """Parameters and bytes of the checkpoint a ``config.json`` describes.

    ``reads`` and ``outer_reads`` collect the keys read (of the language model's config and of the outer one)."""
    from kvplan.models.base import TrackedConfig

    if not isinstance(config, Mapping):
        raise ConfigError(f"{model_id}: config must be a JSON object", "pass a Hugging Face config.json")
    check_model_types(config, model_id)
    reads = set() if reads is None else reads
    outer = TrackedConfig(config, set() if outer_reads is None else outer_reads)
    nested_key = nested_key_of(outer)
    outer_type = outer.get("model_type")
    if nested_key:
        text = TrackedConfig(outer[nested_key], reads)
        model_type = text.get("model_type") or WRAPPER_TEXT_TYPES.get(str(outer_type)) or outer_type
    else:
        text = TrackedConfig(outer, reads)
        model_type = outer_type
    model_type = str(model_type or "")
    if model_type == "gemma3" and nested_key:
        model_type = "gemma3_text"
    parser = WEIGHT_REGISTRY.get(model_type) or ArchParser
    defaults = parser().defaults_for(model_type)
    r = ConfigReader(
        text, source_name=model_id, prefix=f"{nested_key}." if nested_key else "", outer=outer,
        defaults=defaults, defaults_name=model_type or "generic",
    )
    # the lm_head belongs to the outer model, whose own config's tie_word_embeddings transformers reads (a nested
    # text config may say otherwise: Qwen3VLMoeTextConfig defaults to true, Qwen3VLMoeConfig to false)
    if nested_key and isinstance(outer.get("tie_word_embeddings"), bool) \
            and text.get("tie_word_embeddings") != outer["tie_word_embeddings"]:
        text = TrackedConfig({**text, "tie_word_embeddings": outer["tie_word_embeddings"]}, reads)
        r.config = text

    counted = parser().count_weights(r, model_type)
    parts = counted.parts
    text_only = _text_only_architecture(outer)
    if text_only:
        r.note(f"architectures names {text_only}: the language model alone, without the vision/audio towers")
    elif isinstance(outer.get("vision_config"), Mapping):
        # the width the family read (Kosmos-2.5's text model names it embed_dim), else the generic hidden_size
        text_hidden = counted.hidden_size or hidden_of(r)
        tower = parser().vision_weights(outer, r, text_hidden)
        if tower is None:
            from kvplan.models.vision import vision_weights  # NOTE: only for a vision config (a start-up cost)

            tower = vision_weights(outer, r, text_hidden=text_hidden)
        parts += tower
    from kvplan.models.audio import audio_weights
    from kvplan.models.storage import checkpoint_dtype, quantisation, store

    parts += [] if text_only else audio_weights(outer, r)

    dtype, dtype_bytes = checkpoint_dtype(text, outer, r)
    qc = outer.get("quantization_config")
    quant = quantisation(text.get("quantization_config") if qc is None else qc, model_id, r)
    stored = tuple(store(part, dtype_bytes, quant) for part in parts)
    return WeightsEstimate(
        model_id=model_id, model_type=model_type, parts=stored, dtype=dtype, dtype_bytes=dtype_bytes,
        quantisation=quant, num_experts=counted.num_experts, experts_per_token=counted.experts_per_token,
        source="config", notes=tuple(r.notes), hidden_size=counted.hidden_size, mlp_width=counted.mlp_width,
        qkv_width=counted.qkv_width, vocab_size=counted.vocab_size,
    )


def _text_only_architecture(outer: Mapping[str, Any]) -> str | None:
    """The ``*ForCausalLM`` class a multimodal config names, which builds its language model alone
    (``Llama4ForCausalLM``, ``MllamaForCausalLM``, ``Gemma3ForCausalLM`` on a wrapper config), or None."""
    archs = outer.get("architectures")
    towers = any(isinstance(outer.get(k), Mapping) for k in ("vision_config", "audio_config"))
    # only a wrapper (its language model nested in text_config): GitForCausalLM holds its image encoder
    towers = towers and isinstance(outer.get("text_config"), Mapping)
    if towers and isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0].endswith("ForCausalLM"):
        return archs[0]
    return None


def resolve_weights(
    config: Mapping[str, Any],
    *,
    model_id: str,
    source_kind: str,
    weights_bytes: int | None = None,
    weights_from: str = "auto",
    revision: str | None = None,
    token: str | None = None,
    required: bool = True,
    fetch: Callable[..., Any] | None = None,
) -> tuple[WeightsEstimate | None, list[str]]:
    """The weights for ``kvplan capacity``, and notes on where they came from.

    ``weights_from``: ``config`` counts from config.json; ``safetensors`` reads the Hub's safetensors
    headers (Hub models only); ``auto`` = safetensors for Hub models when online, else config.
    ``--weights-bytes`` beats both. With ``required=False`` a model kvplan cannot count gives None.
    """
    from kvplan.models.storage import weights_from_bytes, weights_from_safetensors, with_exact_bytes

    if weights_from not in ("auto", "config", "safetensors"):
        raise InputError(f"--weights-from {weights_from!r} is not auto, config or safetensors", "e.g. --weights-from config")
    if weights_from == "safetensors" and source_kind != "hub":
        raise InputError(
            "--weights-from safetensors reads the Hub's metadata, but --model is a local or bundled config",
            "pass the Hub repo id with --revision (bundled names resolve offline), or --weights-bytes SIZE",
        )
    notes: list[str] = []
    try:
        counted = count_weights(config, model_id=model_id)
    except ConfigError as exc:
        if weights_bytes is not None:
            return weights_from_bytes(weights_bytes, model_id=model_id, model_type=str(config.get("model_type")),
                                      why=exc.message), notes
        if not required:
            notes.append(f"weights not counted ({exc.message}); pass --weights-bytes for the decode floor")
            return None, notes
        raise
    if weights_bytes is not None:
        return with_exact_bytes(counted, weights_bytes, source="--weights-bytes",
                                note=f"weight bytes from --weights-bytes ({weights_bytes:,}); counted "
                                f"{counted.counted_bytes:,}"), notes
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if weights_from == "safetensors" or (weights_from == "auto" and source_kind == "hub" and not offline):
        try:
            total, counts = weights_from_safetensors(model_id, revision=revision, token=token, fetch=fetch)
        except SourceError as exc:
            if weights_from == "safetensors":
                raise
            notes.append(f"safetensors metadata unavailable ({exc.message}); weights counted from config.json")
            return counted, notes
        dtypes = ", ".join(f"{d} {n:,}" for d, n in sorted(counts.items()))
        return with_exact_bytes(counted, total, source="safetensors",
                                note=f"weight bytes from the Hub's safetensors metadata ({dtypes} elements); "
                                f"counted from config: {counted.counted_bytes:,}"), notes
    return counted, notes
