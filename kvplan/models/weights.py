"""The weights of a ``config.json``: its family's count of the language model's tensors, the vision and audio
towers a multimodal config carries, stored in the checkpoint's dtype and quantisation; and the weights
``kvplan capacity`` uses (counted, the Hub's safetensors headers, or ``--weights-bytes``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.models.audio import audio_weights
from kvplan.models.base import ArchParser, ConfigReader, TrackedConfig, hidden_of
from kvplan.models.nesting import WRAPPER_TEXT_TYPES, check_model_types, nested_key_of
from kvplan.models.registry import WEIGHT_REGISTRY
from kvplan.models.storage import (
    checkpoint_dtype,
    quantisation,
    store,
    weights_from_bytes,
    weights_from_safetensors,
    with_exact_bytes,
)
from kvplan.models.tensors import WeightsEstimate
from kvplan.models.vision import vision_weights


def count_weights(
    config: Mapping[str, Any], *, model_id: str, reads: set[str] | None = None, outer_reads: set[str] | None = None,
) -> WeightsEstimate:
    """Parameters and bytes of the checkpoint a ``config.json`` describes.

    ``reads`` and ``outer_reads`` collect the keys read (of the language model's config and of the outer one)."""
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
            tower = vision_weights(outer, r, text_hidden=text_hidden)
        parts += tower
    parts += [] if text_only else audio_weights(outer, r)

    dtype, dtype_bytes = checkpoint_dtype(text, outer, r)
    qc = outer.get("quantization_config")
    quant = quantisation(text.get("quantization_config") if qc is None else qc, model_id, r)
    meta = outer.get("_kvplan")
    if quant is not None and qc is not None and isinstance(meta, Mapping) and meta.get("quantization_config_file"):
        r.note(f"quantization from {meta['quantization_config_file']} (config.json names none), as vLLM, SGLang and "
               f"TensorRT-LLM read it: {quant.describe()}")
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
