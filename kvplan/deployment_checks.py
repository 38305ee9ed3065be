"""Checks of a deployment against the sequence and the model, and the engine-specific flags an engine does not read."""

from __future__ import annotations

from kvplan.adjust import Deployment
from kvplan.engines import ENGINES, EngineProfile, get_engine
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry


def check_lengths(geometry: ModelGeometry, dep: Deployment, seq_len: int | None) -> None:
    """Token and layer counts of the deployment that contradict the sequence or the model."""
    tokens = f"the sequence length {seq_len:,}" if seq_len is not None else "the sequence length"
    if dep.prompt_len is not None and seq_len is not None and dep.prompt_len > seq_len:
        raise InputError(
            f"--prompt-len {dep.prompt_len:,} is longer than {tokens}: the prompt is part of the sequence",
            f"use --prompt-len {seq_len} or less, or raise --seq-len",
        )
    if dep.shared_prefix_tokens and seq_len is not None and dep.shared_prefix_tokens > seq_len:
        raise InputError(
            f"--shared-prefix-tokens {dep.shared_prefix_tokens:,} is longer than {tokens}",
            f"use --shared-prefix-tokens {seq_len} or less",
        )
    if dep.shared_prefix_tokens and dep.prompt_len is not None and dep.shared_prefix_tokens > dep.prompt_len:
        raise InputError(
            f"--shared-prefix-tokens {dep.shared_prefix_tokens:,} is longer than --prompt-len {dep.prompt_len:,}: "
            "the shared prefix is part of each prompt",
            f"use --shared-prefix-tokens {dep.prompt_len} or less",
        )
    if seq_len is not None:
        get_engine(dep.engine).check_length(dep, seq_len, tokens)
    if dep.offload is not None and dep.offload.layers is not None and dep.offload.layers > geometry.num_hidden_layers:
        raise InputError(
            f"--offload layers:{dep.offload.layers} is more than the model's {geometry.num_hidden_layers} layers",
            f"use --offload layers:{geometry.num_hidden_layers} (everything) or fewer",
        )


def check_query_heads(geometry: ModelGeometry, dep: Deployment) -> None:
    """Refuse a tensor-parallel size that does not divide the query heads, where the engine refuses it (its
    ``query_heads_rule``): every rank runs an equal share of the heads."""
    rule = get_engine(dep.engine).query_heads_rule
    heads = next((p.value for p in geometry.provenance if p.field == "num_attention_heads"), None)
    if rule is None or dep.tp == 1 or isinstance(heads, bool) or not isinstance(heads, int) or heads % dep.tp == 0:
        return
    fits = [t for t in range(1, heads + 1) if heads % t == 0]
    raise InputError(
        f"{get_engine(dep.engine).title} cannot split {heads} query heads over --tensor-parallel-size {dep.tp}: "
        f"the heads must divide evenly ({rule})",
        f"use a tensor-parallel size that divides {heads}, such as {', '.join(map(str, fits[-8:]))}",
    )


#: The flag of each engine-specific Deployment field (which engine reads it: ``EngineProfile.knobs``).
KNOB_FLAGS: dict[str, str] = {
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "ubatch_size": "--ubatch-size",
    "kv_unified": "--kv-unified",
    "swa_full_tokens_ratio": "--swa-full-tokens-ratio",
    "max_cache_len": "--max-cache-len",
    "cache_type_v": "--cache-type-v",
}


def _knob_owner(field: str) -> str:
    return next(name for name, cls in ENGINES.items() if field in cls.knobs)


def ignored_knobs(dep: Deployment, engine: EngineProfile) -> list[str]:
    """A note for each engine-specific flag the chosen engine does not read (never silently dropped)."""
    notes = []
    for field, flag in KNOB_FLAGS.items():
        if getattr(dep, field) not in (None, False) and field not in engine.knobs:
            notes.append(f"{flag} is ignored: it applies to --engine {_knob_owner(field)}, not {engine.name}")
    return notes
