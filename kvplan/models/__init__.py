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
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.geometry import ModelGeometry
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.storage import (
    DTYPE_BYTES,
    checkpoint_dtype,
    quantisation,
    serve_weights,
    served_dtype,
    store,
    weights_from_bytes,
    weights_from_safetensors,
    with_exact_bytes,
)
from kvplan.models.tensors import WeightsEstimate, hidden_of
from kvplan.models.vision import vision_weights
from kvplan.specs import LayerSpec, NoCacheSpec

__all__ = [
    "DTYPE_BYTES", "PARSERS", "REGISTRY", "WEIGHT_REGISTRY", "WeightsEstimate", "apply_overrides", "count_weights",
    "parse_config", "parse_override", "resolve_weights", "serve_weights", "served_dtype", "supported_model_types",
    "weights_from_safetensors", "with_exact_bytes",
]

#: Modules of this package that hold generic machinery; every other module is one family.
GENERIC_MODULES = frozenset({"base", "decoder", "storage", "tensors", "vision"})


def _family_parsers() -> list[type[ArchParser]]:
    """Every family module's ``PARSERS``, in module-name order: adding a family is adding its module."""
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


_ALL = _family_parsers()
#: The parsers that read a cache layout (the README's architecture table lists them).
PARSERS: tuple[type[ArchParser], ...] = tuple(p for p in _ALL if p.model_types)
#: ``model_type`` -> the parser that reads its cache layout.
REGISTRY: dict[str, type[ArchParser]] = _registry(_ALL, "model_types")
#: ``model_type`` -> the parser that counts its weights (usually the same; a few types whose cache
#: follows another family's rules are counted by their own family's module).
WEIGHT_REGISTRY: dict[str, type[ArchParser]] = _registry(_ALL, "weight_types")

#: Keys under which multimodal / wrapper configs nest the language model's config.
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")

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


# ---- weights ----------------------------------------------------------------------------------
def count_weights(config: Mapping[str, Any], *, model_id: str) -> WeightsEstimate:
    """Parameters and bytes of the checkpoint a ``config.json`` describes."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{model_id}: config must be a JSON object", "pass a Hugging Face config.json")
    outer = dict(config)
    nested_key = next((k for k in NESTED_TEXT_KEYS if isinstance(outer.get(k), Mapping)), None)
    outer_type = outer.get("model_type")
    if nested_key:
        text = dict(outer[nested_key])
        model_type = text.get("model_type") or WRAPPER_TEXT_TYPES.get(str(outer_type)) or outer_type
    else:
        text = outer
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
    if nested_key and "tie_word_embeddings" not in text and isinstance(outer.get("tie_word_embeddings"), bool):
        text = {**text, "tie_word_embeddings": outer["tie_word_embeddings"]}
        r.config = text

    counted = parser().count_weights(r, model_type)
    parts = counted.parts
    if isinstance(outer.get("vision_config"), Mapping):
        tower = parser().vision_weights(outer, r, hidden_of(r))
        parts += tower if tower is not None else vision_weights(outer, r, text_hidden=hidden_of(r))

    dtype, dtype_bytes = checkpoint_dtype(text, outer, r)
    quant = quantisation(outer.get("quantization_config") or text.get("quantization_config"), model_id, r)
    stored = tuple(store(part, dtype_bytes, quant) for part in parts)
    return WeightsEstimate(
        model_id=model_id, model_type=model_type, parts=stored, dtype=dtype, dtype_bytes=dtype_bytes,
        quantisation=quant, num_experts=counted.num_experts, experts_per_token=counted.experts_per_token,
        source="config", notes=tuple(r.notes), hidden_size=counted.hidden_size, mlp_width=counted.mlp_width,
        qkv_width=counted.qkv_width, vocab_size=counted.vocab_size,
    )


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
