"""config.json -> ModelGeometry: the registry of family parsers keyed by ``model_type``."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from kvplan.arch.base import ArchParser, ConfigReader
from kvplan.arch.dense import (
    ChatGlmParser,
    DbrxParser,
    FalconParser,
    GemmaParser,
    Gpt2Parser,
    GptBigCodeParser,
    LlamaParser,
    MistralParser,
    MixtralParser,
    MptParser,
    NemotronNasParser,
    PhiParser,
    QwenParser,
)
from kvplan.arch.encdec import EncoderDecoderParser, T5Parser, WhisperParser
from kvplan.arch.hybrid import (
    BambaParser,
    FalconH1Parser,
    GraniteMoeHybridParser,
    JambaParser,
    KimiLinearParser,
    Lfm2Parser,
    Mamba2Parser,
    MambaParser,
    MiniMaxParser,
    NemotronHParser,
    Qwen3NextParser,
)
from kvplan.arch.mla import DeepseekParser
from kvplan.arch.multimodal import MllamaParser
from kvplan.arch.windowed import (
    Cohere2Parser,
    Exaone4Parser,
    Gemma2Parser,
    Gemma3nParser,
    Gemma3Parser,
    GptOssParser,
    Llama4Parser,
)
from kvplan.errors import ConfigError
from kvplan.geometry import ModelGeometry
from kvplan.specs import LayerSpec, NoCacheSpec

PARSERS: tuple[type[ArchParser], ...] = (
    LlamaParser, MistralParser, MixtralParser, QwenParser, PhiParser, GemmaParser, Gpt2Parser,
    GptBigCodeParser, FalconParser, MptParser, ChatGlmParser, Gemma2Parser, Gemma3Parser, Cohere2Parser,
    GptOssParser, Llama4Parser, DeepseekParser, MambaParser, Mamba2Parser, JambaParser, NemotronHParser,
    Qwen3NextParser, MiniMaxParser, FalconH1Parser, GraniteMoeHybridParser, BambaParser, Lfm2Parser,
    EncoderDecoderParser, WhisperParser, T5Parser, MllamaParser, Exaone4Parser, DbrxParser, NemotronNasParser,
    Gemma3nParser, KimiLinearParser,
)

REGISTRY: dict[str, type[ArchParser]] = {
    model_type: parser for parser in PARSERS for model_type in parser.model_types
}

#: Keys under which multimodal / wrapper configs nest the language model's config.
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")

#: Wrapper model types whose nested text config may omit its own ``model_type``.
WRAPPER_TEXT_TYPES = {
    "llava": "llama", "llava_next": "llama", "llava_onevision": "qwen2", "vipllava": "llama",
    "gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "llama4": "llama4_text", "mistral3": "mistral", "paligemma": "gemma",
    "mllama": "mllama_text_model",
}

ENCODER_ONLY = frozenset(
    {"bert", "roberta", "xlm-roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert",
     "modernbert", "camembert", "mpnet", "nomic_bert", "xlm"}
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
    outer = dict(config)
    nested_key = next((k for k in NESTED_TEXT_KEYS if isinstance(outer.get(k), Mapping)), None)
    outer_type = outer.get("model_type")
    if nested_key is not None:
        inner_overrides = {}
        for key, value in overrides.items():
            if key.startswith(nested_key + "."):
                inner_overrides[key[len(nested_key) + 1:]] = value
            elif "." not in key:
                inner_overrides[key] = value
            else:
                outer = apply_overrides(outer, {key: value})
        effective = apply_overrides(dict(outer[nested_key]), inner_overrides)
        prefix = nested_key + "."
        overridden = frozenset(inner_overrides)
    else:
        effective = apply_overrides(outer, overrides)
        outer = effective
        prefix = ""
        overridden = frozenset(overrides)

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

    dtype, dtype_source = _config_dtype(effective, outer, prefix, overridden)
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
        notes=tuple(reader.notes),
    )


def _config_dtype(
    effective: Mapping[str, Any], outer: Mapping[str, Any], prefix: str, overridden: frozenset[str]
) -> tuple[str | None, str | None]:
    # NOTE: a --set on the text config wins; then the top-level dtype (what vLLM and transformers load a
    # composite model in), then the nested text config's.
    for key in ("torch_dtype", "dtype"):
        value = effective.get(key)
        if key in overridden and isinstance(value, str):
            return value, f"--set {key}"
    for key in ("torch_dtype", "dtype"):
        value = outer.get(key)
        if isinstance(value, str):
            return value, f"config: {key}"
    for key in ("torch_dtype", "dtype"):
        value = effective.get(key)
        if isinstance(value, str):
            return value, f"config: {prefix}{key}"
    return None, None


def _dedupe(items: list) -> tuple:
    seen: dict[str, object] = {}
    for item in items:
        seen.setdefault(item.field, item)
    return tuple(seen.values())
