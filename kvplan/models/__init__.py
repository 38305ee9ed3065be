"""config.json -> ModelGeometry and weights: the public face of kvplan's model families.

One module per family (``llama.py``, ``qwen.py``, ``gemma.py``...) holds the ``model_type``s it answers
for, its architecture defaults, its cache layout and its weight layout, and lists its parsers in
``PARSERS``; registry.py finds them by ``model_type``, nesting.py unwraps multimodal configs
(``text_config``), weights.py counts weights. This module reads a config into a per-layer geometry.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError, KvplanError
from kvplan.geometry import ModelGeometry, RopeScaling
from kvplan.limits import MAX_NESTING
from kvplan.models.base import ArchParser, ConfigReader, TrackedConfig
from kvplan.models.nesting import WRAPPER_TEXT_TYPES, check_model_types, decoder_key_of, node_at
from kvplan.models.registry import REGISTRY, WEIGHT_REGISTRY, family_parsers
from kvplan.models.storage import (
    DTYPE_BYTES,
    checkpoint_kv_dtype,
    serve_weights,
    served_dtype,
    weights_from_safetensors,
    with_exact_bytes,
)
from kvplan.models.tensors import WeightsEstimate
from kvplan.models.weights import count_weights, resolve_weights
from kvplan.safeload import nesting_depth
from kvplan.specs import LayerSpec, NoCacheSpec

__all__ = [
    "DTYPE_BYTES", "PARSERS", "REGISTRY", "WEIGHT_REGISTRY", "WeightsEstimate", "apply_overrides", "check_defaults",
    "count_weights", "no_decoder_types", "overridden_config", "parse_config", "parse_override", "require_config_geometry",
    "resolve_weights", "serve_weights", "served_dtype", "supported_model_types", "weights_from_safetensors",
    "with_exact_bytes",
]


def __getattr__(name: str) -> Any:
    if name == "PARSERS":  # the parsers that read a cache layout (the docs' architecture table lists them)
        return tuple(p for p in family_parsers() if p.model_types)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Encoder-only model types: they keep no KV cache, and kvplan says so rather than read them as decoders.
ENCODER_ONLY = frozenset(
    {"deberta", "deberta-v2", "distilbert", "albert", "modernbert", "mpnet", "nomic_bert"}
)


@functools.cache
def no_decoder_types() -> tuple[str, frozenset[str]]:
    """(the transformers version it was derived from, the model types with no decoder): kvplan/data/
    no_decoder_types.txt, written by tools/no_decoder_types.py from transformers' auto mappings."""
    # NOTE: importlib.resources (and the tempfile, shutil and zipfile it brings) is imported here, for the one model
    # type in a hundred that needs the list: at module top it costs `kvplan estimate` about 1.5 ms.
    from importlib.resources import files

    text = (files("kvplan") / "data" / "no_decoder_types.txt").read_text(encoding="utf-8")
    header = text.splitlines()[0]
    version = header.split("transformers ", 1)[1].split(" ", 1)[0] if "transformers " in header else "?"
    return version, frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def refuse_without_decoder(source_name: str, *model_types: object) -> None:
    """A model type transformers gives no decoder (a vision or audio tower, an encoder, a classifier) and no
    family module reads keeps no KV cache: refused by name rather than read as a decoder by the generic rules."""
    unknown = [t for t in model_types if isinstance(t, str) and t not in REGISTRY]
    if not unknown:
        return  # NOTE: a type a family module reads needs no list (reading it costs `kvplan estimate` ~2 ms)
    version, types = no_decoder_types()
    for model_type in unknown:
        if model_type in types:
            raise ConfigError(
                f"{source_name}: model_type {model_type!r} has no decoder (transformers {version} gives it no "
                "generating model: a vision or audio tower, an encoder or a classifier); it keeps no KV cache",
                "kvplan sizes decoder caches: pass the config of the model that generates (a multimodal config "
                "nests its language model under text_config)",
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
    """Every model_type whose cache layout a family module reads (imports them all)."""
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
    if nesting_depth(value) > MAX_NESTING:
        raise ConfigError(f"--set {key}: the value is nested deeper than {MAX_NESTING} levels")
    return key, value


def overridden_config(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``--set`` overrides in place: where the language model's config is nested, an
    undotted key goes into it (``--set num_key_value_heads=4`` on Llama 4 sets text_config's)."""
    if not overrides:
        return dict(config)
    outer_only = {k: v for k, v in overrides.items() if "." in k}
    result = apply_overrides(dict(config), outer_only)
    nested = decoder_key_of(result)
    inner = {k: v for k, v in overrides.items() if "." not in k}
    if nested is None:
        return apply_overrides(result, inner)
    *parents, last = nested.split(".")
    node = result
    for part in parents:  # copy the path down to the nested config: the caller's dicts stay as they were
        node[part] = dict(node[part])
        node = node[part]
    node[last] = apply_overrides(dict(node[last]), inner)
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


def _checkpoint_kv_dtype(full: Mapping[str, Any], effective: Mapping[str, Any], prefix: str
                         ) -> tuple[str | None, str | None]:
    """The KV dtype the checkpoint's ModelOpt quantisation names, and where (the config's own
    ``quantization_config``, the nested one's, or hf_quant_config.json read in its place)."""
    qc, where = full.get("quantization_config"), "config: quantization_config"
    if qc is None and prefix:
        qc, where = effective.get("quantization_config"), f"config: {prefix}quantization_config"
    found = checkpoint_kv_dtype(qc)
    if found is None:
        return None, None
    meta = full.get("_kvplan")
    if isinstance(meta, Mapping) and meta.get("quantization_config_file") and where == "config: quantization_config":
        where = f"{meta['quantization_config_file']}: quantization"
    return found[0], f"{where}.{found[1]}"


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

    reads: set[str] = set()
    outer_reads: set[str] = set()
    check_model_types(config, source_name)
    full = overridden_config(config, overrides)
    check_model_types(full, source_name)
    nested_key = decoder_key_of(full)
    outer_type = full.get("model_type")
    outer = TrackedConfig(full, outer_reads)
    if nested_key is not None:
        effective = TrackedConfig(node_at(full, nested_key), reads)
        prefix = nested_key + "."
    else:
        effective = TrackedConfig(full, reads)
        prefix = ""
    overridden = frozenset(k for k in _override_keys(overrides, nested_key).values() if not k.startswith("^"))

    inner_type = effective.get("model_type") if nested_key else None
    model_type = inner_type or (WRAPPER_TEXT_TYPES.get(outer_type or "") if nested_key else outer_type) or outer_type
    if not isinstance(model_type, str) or not model_type:
        model_type = None
    if model_type in ENCODER_ONLY or outer_type in ENCODER_ONLY:
        raise ConfigError(
            f"{source_name}: model_type {model_type!r} is an encoder-only model; it keeps no KV cache",
            "kvplan sizes decoder caches; pick a decoder or encoder-decoder model",
        )
    refuse_without_decoder(source_name, model_type, outer_type)
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
        counted = WEIGHT_REGISTRY.get(model_type or "")
        if counted is not None:
            # NOTE: a type whose weights a family counts, whose cache is plain: the generic rules read it.
            reader.note(f"model_type {model_type!r}: its cache is read with the generic alias rules, its weights by "
                        f"{counted.__module__.replace('.', '/')}.py")
        else:
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
    rope = _rope_scaling(effective, prefix)
    kv_quant, kv_quant_source = _checkpoint_kv_dtype(full, effective, prefix)
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
        defaults_in_sub_config=nested_key is not None,
        rope_scaling=rope,
        checkpoint_kv_dtype=kv_quant,
        checkpoint_kv_dtype_source=kv_quant_source,
        notes=tuple(n for n in (_defaults_warning(reader, str(model_type or outer_type or "generic"),
                                                  nested=nested_key is not None),) if n)
        + tuple(reader.notes),
    )


def _check_overrides(
    full: Mapping[str, Any], overrides: Mapping[str, Any], nested_key: str | None, reads: set[str],
    outer_reads: set[str], parser: ArchParser, reader: ConfigReader, model_id: str, source_name: str,
) -> None:
    """Refuse a ``--set`` key that neither the cache layout nor the weight count reads."""
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
    """``--strict``: refuse a config whose core geometry comes from architecture defaults (even a sub-config's)."""
    fields = defaulted_core(geometry)
    if fields:
        raise ConfigError(
            f"{geometry.model_id}: {what}: the config does not give {', '.join(fields)}; kvplan would use the "
            f"{geometry.model_type} architecture defaults",
            "add the fields to the config (or pass them with --set), or drop " + what,
        )


def check_defaults(geometry: ModelGeometry, *, allow_defaults: bool = False, strict: bool = False,
                   allow_flag: str = "--allow-defaults", strict_flag: str = "--strict") -> None:
    """No confident number from defaults: refuse a config whose layer count, heads or hidden size would come from
    the architecture's defaults, unless ``allow_defaults``. A nested sub-config's missing key is not a guess
    (transformers saves a sub-config as its difference from the class defaults); ``strict`` refuses it too."""
    if strict:
        require_config_geometry(geometry, what=strict_flag)
    if allow_defaults or geometry.defaults_in_sub_config:
        return
    defaulted = [p for p in geometry.provenance if p.field in CORE_FIELDS and p.source.startswith("default of")]
    if not defaulted:
        return
    given = ", ".join(f"{p.field} = {p.value}" for p in defaulted)
    sets = " ".join(f"--set {p.source.rsplit(': ', 1)[-1]}=N" for p in defaulted)
    raise ConfigError(
        f"{geometry.model_id}: the config does not give {', '.join(p.field for p in defaulted)}; kvplan would "
        f"size it from the {geometry.model_type} architecture defaults ({given}), right only if the model is "
        "that default size",
        f"add the fields to the config or pass {sets}; or {allow_flag} to size the default anyway",
    )


def _defaults_warning(reader: ConfigReader, model_type: str, *, nested: bool = False) -> str | None:
    fields = [p for p in _dedupe(reader.provenance) if p.field in CORE_FIELDS and p.source.startswith("default of")]
    if not fields:
        return None
    given = ", ".join(f"{p.field} = {p.value}" for p in fields)
    if not nested:
        return (f"{WARNING_PREFIX}core geometry from the {model_type} architecture defaults, not the config "
                f"({given}): right only if the model is that default size (sized anyway: --allow-defaults)")
    return (f"{WARNING_PREFIX}core geometry from the {model_type} architecture defaults, not the config ({given}): "
            "right only if the model is that default size (--strict refuses such a config)")


def _dedupe(items: list) -> tuple:
    seen: dict[str, object] = {}
    for item in items:
        seen.setdefault(item.field, item)
    return tuple(seen.values())




def _rope_scaling(config: Any, prefix: str) -> RopeScaling | None:
    """``rope_scaling`` (transformers 4) or ``rope_parameters`` (transformers 5, possibly one entry per layer type:
    the ``full_attention`` one counts) with a scaling type; None when absent or plain."""
    for key in ("rope_scaling", "rope_parameters"):
        value = config.get(key)
        if isinstance(value, dict) and isinstance(value.get("full_attention"), dict):
            value, key = value["full_attention"], f"{key}.full_attention"
        if not isinstance(value, dict):
            continue
        rope_type = value.get("rope_type", value.get("type"))
        factor = value.get("factor", 1.0)
        original = value.get("original_max_position_embeddings")
        if not isinstance(rope_type, str) or rope_type == "default" or isinstance(factor, bool):
            continue
        if not isinstance(factor, (int, float)) or factor <= 0:
            continue
        return RopeScaling(rope_type=rope_type, factor=float(factor),
                           original_max_position_embeddings=original if isinstance(original, int) and original > 0
                           else None, source=f"{prefix}{key}")
    return None
