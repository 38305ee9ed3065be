"""How a checkpoint stores its weights, and where exact sizes come from: dtype widths, the
quantisation layouts of ``quantization_config`` (fp8 block scales, AWQ/GPTQ group scales and zero
points, MXFP4 experts, bitsandbytes, compressed-tensors), the Hub's safetensors metadata, and the
dtype an engine serves them in. Family-free.

Pure: no IO except :func:`weights_from_safetensors`, which imports huggingface_hub inside.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.models.tensors import Quantisation, WeightPart, WeightsEstimate

if TYPE_CHECKING:
    from kvplan.models.base import ConfigReader

#: Bytes per element of the plain dtypes a config or safetensors header names.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "fp32": 4, "f32": 4, "float": 4,
    "float16": 2, "fp16": 2, "f16": 2, "half": 2,
    "bfloat16": 2, "bf16": 2,
    "float8_e4m3fn": 1, "f8_e4m3": 1, "f8_e5m2": 1, "fp8": 1,
    "int8": 1, "i8": 1, "u8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "i16": 2, "int32": 4, "i32": 4, "u32": 4, "int64": 8, "i64": 8, "f64": 8, "float64": 8,
}

def weights_from_bytes(total_bytes: int, *, model_id: str, model_type: str, why: str) -> WeightsEstimate:
    """Weights known only by their size (``--weights-bytes`` for a model kvplan cannot count)."""
    part = WeightPart(name="checkpoint", bytes=total_bytes, storage="as given")
    return WeightsEstimate(
        model_id=model_id, model_type=model_type, parts=(part,), dtype="unknown", dtype_bytes=0, quantisation=None,
        num_experts=None, experts_per_token=None, source="--weights-bytes", hidden_size=0, mlp_width=0, qkv_width=0,
        vocab_size=0, notes=(f"parameters not counted: {why}",),
    )


def with_exact_bytes(weights: WeightsEstimate, total_bytes: int, *, source: str, note: str | None = None) -> WeightsEstimate:
    """The same counts, with the total bytes taken from ``source`` (safetensors or --weights-bytes)."""
    notes = list(weights.notes)
    if note:
        notes.append(note)
    return dataclasses.replace(weights, bytes_override=total_bytes, source=source, notes=tuple(notes))


#: safetensors header dtype names -> bytes per element.
SAFETENSORS_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 1,
}


def weights_from_safetensors(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    fetch: Callable[..., Any] | None = None,
) -> tuple[int, dict[str, int]]:
    """(total bytes, element count per dtype) from the Hub's safetensors headers (no weight download).

    ``fetch`` defaults to ``huggingface_hub.get_safetensors_metadata``; tests pass a stand-in.
    """
    if fetch is None:
        try:
            from huggingface_hub import get_safetensors_metadata as fetch
        except ImportError:  # pragma: no cover - a dependency
            raise SourceError("huggingface_hub is not installed", "pip install huggingface-hub") from None
    try:
        metadata = fetch(repo_id, revision=revision, token=token)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(
            f"{repo_id}: could not read safetensors metadata from the Hub: {first}",
            "pass --weights-from config to count weights from config.json, or --weights-bytes SIZE",
        ) from None
    counts = dict(getattr(metadata, "parameter_count", None) or {})
    if not counts:
        raise SourceError(f"{repo_id}: the Hub lists no safetensors tensors", "pass --weights-bytes SIZE")
    unknown = sorted(set(counts) - set(SAFETENSORS_BYTES))
    if unknown:
        raise SourceError(
            f"{repo_id}: safetensors dtype {', '.join(unknown)} has no known size", "pass --weights-bytes SIZE"
        )
    return sum(SAFETENSORS_BYTES[d] * n for d, n in counts.items()), counts


# ---- storage ---------------------------------------------------------------------------------
def checkpoint_dtype(text: Mapping[str, Any], outer: Mapping[str, Any], r: ConfigReader) -> tuple[str, int]:
    for source in (text, outer):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if isinstance(value, str):
                name = value.lower().removeprefix("torch.")
                if name not in DTYPE_BYTES:
                    raise ConfigError(f"{r.source_name}: {key} {value!r} is not a known dtype", "pass --weights-bytes SIZE")
                return name, DTYPE_BYTES[name]
    r.note("the config names no torch_dtype: weights counted in 16 bits, as engines serve them (--dtype auto)")
    return "float16", 2


def quantisation(qc: Any, model_id: str, r: ConfigReader) -> Quantisation | None:
    if not isinstance(qc, Mapping):
        return None
    method = str(qc.get("quant_method") or "").lower()
    skip = tuple(str(m) for m in (qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore") or ()))
    if method == "fp8" or method == "fbgemm_fp8":
        block = qc.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2:
            return Quantisation(method="fp8", bits=8, block=(int(block[0]), int(block[1])), scale_bytes=4, not_converted=skip)
        return Quantisation(method=method, bits=8, scale_bytes=4, not_converted=skip)
    if method in ("awq", "gptq"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = int(qc.get("group_size") or qc.get("q_group_size") or 128)
        zero = method == "gptq" or qc.get("zero_point", True) is not False
        return Quantisation(
            method=method, bits=bits, group_size=None if group <= 0 else group, scale_bytes=2,
            zero_bits=bits if zero else 0, g_idx=method == "gptq", not_converted=skip,
        )
    if method == "mxfp4":
        # NOTE: gpt-oss ships expert weights as MXFP4: 4-bit values with one e8m0 byte per 32 values.
        return Quantisation(method="mxfp4", bits=4, group_size=32, scale_bytes=1, roles=frozenset({"experts"}),
                            not_converted=skip)
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            return Quantisation(method="bitsandbytes", bits=4, group_size=int(qc.get("bnb_4bit_blocksize") or 64),
                                scale_bytes=4, not_converted=skip)
        if qc.get("load_in_8bit"):
            return Quantisation(method="bitsandbytes", bits=8, scale_bytes=4, not_converted=skip)
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        first = next(iter(groups.values()), {}) if isinstance(groups, Mapping) else {}
        weights = first.get("weights") if isinstance(first, Mapping) else None
        if isinstance(weights, Mapping) and weights.get("num_bits"):
            group = weights.get("group_size") if weights.get("strategy") == "group" else None
            if len(groups) > 1:
                r.note("compressed-tensors: only the first config group's weight format is counted")
            return Quantisation(method="compressed-tensors", bits=int(weights["num_bits"]),
                                group_size=int(group) if group else None, scale_bytes=2,
                                zero_bits=0 if weights.get("symmetric", True) else int(weights["num_bits"]),
                                not_converted=skip)
    raise ConfigError(
        f"{model_id}: quantization_config quant_method {method or '(missing)'!r} is not one kvplan can size",
        "pass --weights-bytes SIZE (the checkpoint's size in bytes)",
    )


def store(part: WeightPart, dtype_bytes: int, quant: Quantisation | None) -> WeightPart:
    plain = part.parameters * dtype_bytes
    if quant is None or part.name not in quant.roles or part.vision or _skipped(part.name, quant.not_converted):
        return dataclasses.replace(part, bytes=plain, storage=f"{dtype_bytes * 8}-bit")
    data = sum(quant.matrix_bytes(m) for m in part.matrices)
    return dataclasses.replace(part, bytes=data + part.other_parameters * dtype_bytes, storage=quant.describe())


#: Module-name fragments in ``modules_to_not_convert`` and the part they leave unquantised.
_SKIP_WORDS = {"attention": ("self_attn", "attn", "attention"), "mlp": ("mlp",), "experts": ("experts",),
               "shared_experts": ("shared_expert",)}


def _skipped(name: str, not_converted: tuple[str, ...]) -> bool:
    words = _SKIP_WORDS.get(name, ())
    for module in not_converted:
        last = module.rstrip(".*").split(".")[-1]
        if last in words:
            return True
    return False


# ---- the dtype an engine serves the weights in -----------------------------------------------
#: ``--dtype`` spellings (vLLM's ``--dtype`` choices and torch names) -> kvplan's dtype name.
SERVE_DTYPES: dict[str, str] = {
    "half": "float16", "float16": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float": "float32", "float32": "float32", "fp32": "float32",
}
class ServingEngine(Protocol):
    """What :func:`served_dtype` reads of an engine profile (``kvplan.engines``)."""

    name: str
    keeps_checkpoint_dtype: bool
    """Loads a checkpoint in its own dtype (transformers 5 ``from_pretrained(dtype="auto")``); every other
    engine's ``--dtype auto`` serves float32 checkpoints in 16 bits."""


def served_dtype(weights_dtype: str, *, engine: ServingEngine, dtype: str = "auto") -> tuple[str, str]:
    """(dtype the engine holds unquantised weights in, why), for ``--dtype`` (``auto`` = the engine's rule).

    NOTE: vLLM's and SGLang's ``--dtype auto`` load a float32 checkpoint in 16 bits (bfloat16 where the
    GPU supports it, else float16: ``_get_and_verify_dtype``); TensorRT-LLM's ``dtype="auto"`` does the
    same and llama.cpp's converter writes 16-bit GGUF by default. transformers 5 keeps the checkpoint's
    dtype (``dtype="auto"``), so the hf-* profiles hold float32 weights in 4 bytes.
    """
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key != "auto":
        if key not in SERVE_DTYPES:
            raise InputError(f"--dtype {dtype!r} is not a weight dtype",
                             "use auto, bfloat16, float16 (half) or float32 (float), as vLLM's --dtype")
        return SERVE_DTYPES[key], f"--dtype {dtype}"
    if weights_dtype in ("float32", "float64") and not engine.keeps_checkpoint_dtype:
        return "bfloat16", (f"{engine.name} --dtype auto serves a {weights_dtype} checkpoint in 16 bits "
                            "(bfloat16; float16 on GPUs without bf16); pass --dtype float32 to keep 4 bytes")
    return weights_dtype, "the checkpoint's dtype" + (f" ({engine.name} loads it as stored)" if
                                                       engine.keeps_checkpoint_dtype else "")


def serve_weights(weights: WeightsEstimate, *, engine: ServingEngine, dtype: str = "auto") -> tuple[WeightsEstimate, str | None]:
    """The weights as ``engine`` holds them in memory, and a note when that differs from the checkpoint.

    Quantised matrices keep their format; plain tensors take the served dtype. Exact bytes from the Hub's
    safetensors metadata are scaled by the same ratio; ``--weights-bytes`` is taken as given.
    """
    if not weights.counted:
        if dtype.strip().lower() != "auto":
            return weights, f"--dtype {dtype} ignored: the weights were given as bytes (--weights-bytes)"
        return weights, None
    name, why = served_dtype(weights.dtype, engine=engine, dtype=dtype)
    new_bytes = DTYPE_BYTES[name]
    if name == weights.dtype or (new_bytes == weights.dtype_bytes and dtype.strip().lower() == "auto"):
        return weights, None
    parts = tuple(store(dataclasses.replace(p, bytes=0, storage=""), new_bytes, weights.quantisation)
                  for p in weights.parts)
    counted = sum(p.bytes for p in parts)
    override = weights.bytes_override
    if override is not None and weights.source == "safetensors" and weights.counted_bytes:
        override = override * counted // weights.counted_bytes
    note = (f"weights held in {name} ({new_bytes} bytes per value) although the checkpoint is {weights.dtype}: {why}"
            + ("; --weights-bytes taken as given" if weights.source == "--weights-bytes" else ""))
    return dataclasses.replace(weights, parts=parts, dtype=name, dtype_bytes=new_bytes, bytes_override=override,
                               notes=(*weights.notes, note)), note
