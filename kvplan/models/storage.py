"""How a checkpoint stores its weights, and where exact sizes come from: dtype widths, the
quantisation layouts of ``quantization_config`` (fp8 block scales, AWQ/GPTQ group scales and zero
points, MXFP4 experts, bitsandbytes, compressed-tensors), the Hub's safetensors metadata, and the
dtype an engine serves them in. Family-free.

Pure: no IO except :func:`weights_from_safetensors`, which imports huggingface_hub inside.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
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
    return replace(weights, bytes_override=total_bytes, source=source, notes=tuple(notes))


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
            from huggingface_hub import get_safetensors_metadata
        except ImportError:  # pragma: no cover - a dependency
            raise SourceError("huggingface_hub is not installed", "pip install huggingface-hub") from None
        fetch = get_safetensors_metadata
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
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{r.source_name}: {key} must be a dtype name such as \"bfloat16\", got {value!r}"[:300],
                                  f"fix the config, or pass --set {key}=bfloat16")
            if isinstance(value, str):
                name = value.lower().removeprefix("torch.")
                if name not in DTYPE_BYTES:
                    raise ConfigError(f"{r.source_name}: {key} {value!r} is not a known dtype", "pass --weights-bytes SIZE")
                return name, DTYPE_BYTES[name]
    r.note("the config names no torch_dtype: weights counted in 16 bits, as engines serve them (--dtype auto)")
    return "float16", 2


#: Weight bit widths the integer quantisation formats store (AWQ 4; GPTQ 2, 3, 4, 8; compressed-tensors 4, 8).
QUANT_BITS = range(2, 9)
#: Upper bound on a group or block size: larger than any matrix dimension kvplan accepts.
MAX_GROUP = 1 << 24


def _where(model_id: str, key: str) -> str:
    return f"{model_id}: quantization_config.{key}"


def _quant_int(qc: Mapping[str, Any], key: str, model_id: str, *, path: str = "", lo: int, hi: int, what: str,
               default: int | None = None, allow: tuple[int, ...] = ()) -> int | None:
    """An integer field of ``quantization_config`` (bool and fractional floats refused), within lo..hi."""
    value = qc.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer() and abs(value) <= hi:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{_where(model_id, path + key)} must be an integer ({what}), got {value!r}"[:300],
                          "fix the config, or pass --weights-bytes SIZE")
    if value in allow:
        return value
    if not lo <= value <= hi:
        raise ConfigError(f"{_where(model_id, path + key)} = {value} is out of range: {what} is {lo}..{hi}",
                          "fix the config, or pass --weights-bytes SIZE")
    return value


def _not_converted(qc: Mapping[str, Any], model_id: str) -> tuple[str, ...]:
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"):
        value = qc.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
            raise ConfigError(f"{_where(model_id, key)} must be a list of module names, got {value!r}"[:300],
                              "fix the config, or pass --weights-bytes SIZE")
        if value:
            return tuple(value)
    return ()


def quantisation(qc: Any, model_id: str, r: ConfigReader) -> Quantisation | None:
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise ConfigError(
            f"{model_id}: quantization_config must be a mapping (quant_method, bits...), got {type(qc).__name__} "
            f"{qc!r}"[:300],
            "fix the config, or pass --weights-bytes SIZE (the checkpoint's size in bytes)",
        )
    if not qc:
        return None
    method_value = qc.get("quant_method")
    if method_value is not None and not isinstance(method_value, str):
        raise ConfigError(f"{_where(model_id, 'quant_method')} must be a string, got {method_value!r}"[:300],
                          "fix the config, or pass --weights-bytes SIZE")
    method = (method_value or "").lower()
    skip = _not_converted(qc, model_id)
    if method == "fp8" or method == "fbgemm_fp8":
        block = qc.get("weight_block_size")
        if block is None:
            return Quantisation(method=method, bits=8, scale_bytes=4, not_converted=skip)
        if (not isinstance(block, list) or len(block) != 2
                or not all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_GROUP for b in block)):
            raise ConfigError(f"{_where(model_id, 'weight_block_size')} must be a pair of positive integers "
                              f"[out, in], got {block!r}"[:300], "fix the config, or pass --weights-bytes SIZE")
        return Quantisation(method="fp8", bits=8, block=(block[0], block[1]), scale_bytes=4, not_converted=skip)
    if method in ("awq", "gptq"):
        bits_key = "bits" if "bits" in qc or "w_bit" not in qc else "w_bit"
        bits = _quant_int(qc, bits_key, model_id, lo=QUANT_BITS.start, hi=QUANT_BITS.stop - 1,
                          what="weight bits", default=4)
        group_key = "group_size" if "group_size" in qc or "q_group_size" not in qc else "q_group_size"
        # NOTE: GPTQ's group_size -1 means one scale per output channel (no groups).
        group = _quant_int(qc, group_key, model_id, lo=1, hi=MAX_GROUP, what="group size (-1: per channel)",
                           default=128, allow=(-1,))
        assert bits is not None and group is not None
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
        if qc.get("load_in_4bit") is True:
            block_size = _quant_int(qc, "bnb_4bit_blocksize", model_id, lo=1, hi=MAX_GROUP, what="block size",
                                    default=64)
            assert block_size is not None
            return Quantisation(method="bitsandbytes", bits=4, group_size=block_size, scale_bytes=4,
                                not_converted=skip)
        if qc.get("load_in_8bit") is True:
            return Quantisation(method="bitsandbytes", bits=8, scale_bytes=4, not_converted=skip)
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        if groups is not None and not isinstance(groups, Mapping):
            raise ConfigError(f"{_where(model_id, 'config_groups')} must be a mapping, got {groups!r}"[:300],
                              "fix the config, or pass --weights-bytes SIZE")
        groups = groups or {}
        name, first = next(iter(groups.items()), ("", {}))
        weights = first.get("weights") if isinstance(first, Mapping) else None
        if isinstance(weights, Mapping) and weights.get("num_bits") is not None:
            prefix = f"config_groups.{name}.weights."
            bits = _quant_int(weights, "num_bits", model_id, path=prefix, lo=QUANT_BITS.start, hi=QUANT_BITS.stop - 1, what="weight bits")
            group = None
            if weights.get("strategy") == "group":
                group = _quant_int(weights, "group_size", model_id, path=prefix, lo=1,
                                   hi=MAX_GROUP, what="group size")
            assert bits is not None
            if len(groups) > 1:
                r.note("compressed-tensors: only the first config group's weight format is counted")
            # the scales' dtype when the config names it (MXFP4: uint8 exponents), else 16-bit
            scale_bytes = DTYPE_BYTES.get(str(weights.get("scale_dtype") or "").removeprefix("torch."), 2)
            return Quantisation(method="compressed-tensors", bits=bits, group_size=group, scale_bytes=scale_bytes,
                                zero_bits=0 if weights.get("symmetric", True) is not False else bits,
                                not_converted=skip)
    if method == "modelopt":
        return _modelopt(qc, model_id, r, skip)
    raise ConfigError(
        f"{model_id}: quantization_config quant_method {method or '(missing)'!r} is not one kvplan can size",
        "pass --weights-bytes SIZE (the checkpoint's size in bytes)",
    )


#: ModelOpt ``quant_algo`` values -> (bits, values per scale, scale bytes, fp8 block). NOTE: NVFP4 = 4-bit e2m1 values
#: with one fp8 scale per 16 (plus one fp32 scale per tensor, not counted), whatever the activations (W4A16_NVFP4
#: keeps them 16-bit); FP8 = 8-bit values with a per-tensor scale (counted per output row, as the fp8 layout does);
#: FP8_PB_WO = 8-bit values with 128 x 128 block scales (vLLM modelopt.py, TensorRT-LLM QuantAlgo).
MODELOPT_FORMATS: dict[str, tuple[int, int | None, int, tuple[int, int] | None]] = {
    "NVFP4": (4, 16, 1, None), "W4A16_NVFP4": (4, 16, 1, None), "FP8": (8, None, 4, None),
    "FP8_PER_CHANNEL_PER_TOKEN": (8, None, 4, None), "FP8_PB_WO": (8, None, 4, (128, 128)),
    "FP8_BLOCK_SCALES": (8, None, 4, (128, 128)),
}
#: Module-name words -> the weight part a ModelOpt mixed-precision entry quantises (first match wins).
_MODULE_ROLES = (("shared_expert", "shared_experts"), ("experts", "experts"), ("lm_head", "lm_head"),
                 ("embed_tokens", "embed_tokens"), ("attn", "attention"), ("attention", "attention"),
                 ("mixer", "attention"), ("mlp", "mlp"), ("ffn", "mlp"))


def _modelopt_format(algo: str, model_id: str, where: str, skip: tuple[str, ...]) -> Quantisation:
    found = MODELOPT_FORMATS.get(algo.upper())
    if found is None:
        raise ConfigError(f"{_where(model_id, where)} = {algo!r} is not a ModelOpt format kvplan can size "
                          f"(it knows {', '.join(MODELOPT_FORMATS)})", "pass --weights-bytes SIZE")
    bits, group, scale, block = found
    name = "modelopt-nvfp4" if bits == 4 else "modelopt-fp8"
    return Quantisation(method=name, bits=bits, group_size=group, scale_bytes=scale, block=block, not_converted=skip)


def _group_algo(weights: Any) -> str | None:
    """The ModelOpt format a ``config_groups`` entry's ``weights`` describe: 4-bit float = NVFP4, 8-bit = FP8."""
    if not isinstance(weights, Mapping):
        return None
    bits = weights.get("num_bits")
    return "NVFP4" if bits == 4 else "FP8" if bits == 8 else None


def _modelopt(qc: Mapping[str, Any], model_id: str, r: ConfigReader, skip: tuple[str, ...]) -> Quantisation:
    """NVIDIA ModelOpt: one ``quant_algo`` for every quantised matrix, or ``MIXED_PRECISION`` with each module's
    format in ``quantized_layers`` (module -> ``quant_algo``) or in ``config_groups`` (weights + ``targets``)."""
    algo = qc.get("quant_algo")
    if algo is None:  # some exports name only the config groups
        groups = qc.get("config_groups")
        first: Any = next(iter(groups.values()), {}) if isinstance(groups, Mapping) and groups else {}
        algo = _group_algo(first.get("weights") if isinstance(first, Mapping) else None)
        if algo is None:
            raise ConfigError(f"{_where(model_id, 'quant_algo')} is missing and config_groups names no 4- or 8-bit "
                              "weights", "pass --weights-bytes SIZE (the checkpoint's size in bytes)")
        r.note(f"ModelOpt: no quant_algo; config_groups' weights read as {algo}")
    if not isinstance(algo, str):
        raise ConfigError(f"{_where(model_id, 'quant_algo')} must be a string, got {algo!r}"[:300],
                          "fix the config, or pass --weights-bytes SIZE")
    if algo.upper() != "MIXED_PRECISION":
        return _modelopt_format(algo, model_id, "quant_algo", skip)
    modules: dict[str, str] = {}
    layers = qc.get("quantized_layers")
    if isinstance(layers, Mapping):
        for name, entry in layers.items():
            if isinstance(entry, Mapping) and isinstance(entry.get("quant_algo"), str):
                modules[str(name)] = entry["quant_algo"]
    groups = qc.get("config_groups")
    if not modules and isinstance(groups, Mapping):
        for group in groups.values():
            if not isinstance(group, Mapping):
                continue
            group_algo = _group_algo(group.get("weights"))
            targets = group.get("targets")
            if group_algo and isinstance(targets, list):
                modules.update({str(t): group_algo for t in targets})
    if not modules:
        raise ConfigError(f"{_where(model_id, 'quantized_layers')}: a MIXED_PRECISION checkpoint names no module's "
                          "format (quantized_layers or config_groups targets)", "pass --weights-bytes SIZE")
    votes: dict[str, dict[str, int]] = {}
    for name, module_algo in modules.items():
        parts = name.split(".")
        if parts[0] == "mtp":  # the multi-token-prediction layers, which kvplan does not count
            continue
        role = next((role for word, role in _MODULE_ROLES if any(word in part for part in parts)), None)
        if role is not None and module_algo.upper() != "UNQUANTIZED":
            votes.setdefault(role, {}).setdefault(module_algo.upper(), 0)
            votes[role][module_algo.upper()] += 1
    by_role = []
    for role, counts in sorted(votes.items()):
        chosen = max(counts, key=lambda a: counts[a])
        # the per-module list is the whole story: ``ignore`` names the modules it leaves out
        by_role.append((role, _modelopt_format(chosen, model_id, f"quantized_layers ({role})", ())))
        if len(counts) > 1:
            r.note(f"ModelOpt mixed precision: {role} modules are {', '.join(f'{n} {a}' for a, n in counts.items())}; "
                   f"all counted as {chosen}")
    r.note("ModelOpt mixed precision: " + "; ".join(f"{role} {q.describe()}" for role, q in by_role)
           + "; other weights in the checkpoint dtype (a part's modules the list leaves out are counted in its "
           "part's format)")
    return Quantisation(method="modelopt-mixed", bits=min(q.bits for _, q in by_role), roles=frozenset(votes),
                        not_converted=skip, by_role=tuple(by_role))


#: ModelOpt's KV-cache formats -> kvplan's KV dtype (vLLM MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP).
MODELOPT_KV_DTYPES = {"FP8": "fp8_e4m3", "NVFP4": "nvfp4"}


def checkpoint_kv_dtype(qc: Any) -> tuple[str, str] | None:
    """(kvplan KV dtype, the key that says it) when a ModelOpt ``quantization_config`` names the format its K/V
    scales were calibrated for: ``kv_cache_quant_algo`` (``FP8``, ``NVFP4``; hf_quant_config.json's key) or
    ``kv_cache_scheme`` (config.json's form: 8-bit float = FP8, 4-bit float = NVFP4). None otherwise, and for a
    value no engine maps (vLLM then falls back to ``auto``).

    NOTE: vLLM (``get_kv_cache_quant_algo_string``, vllm-project/vllm#30785), SGLang (``configure_kv_cache_dtype``)
    and TensorRT-LLM (``_update_from_hf_quant_config``) resolve ``--kv-cache-dtype auto`` to it."""
    if not isinstance(qc, Mapping) or not str(qc.get("quant_method") or "").lower().startswith("modelopt"):
        return None
    scheme = qc.get("kv_cache_scheme")
    if isinstance(scheme, Mapping):
        if scheme.get("type") == "float" and scheme.get("num_bits") in (8, 4):
            bits = scheme["num_bits"]
            return MODELOPT_KV_DTYPES["FP8" if bits == 8 else "NVFP4"], f"kv_cache_scheme ({bits}-bit float)"
        return None
    algo = qc.get("kv_cache_quant_algo")
    if isinstance(algo, str) and algo.upper() in MODELOPT_KV_DTYPES:
        return MODELOPT_KV_DTYPES[algo.upper()], f"kv_cache_quant_algo = {algo}"
    return None


def store(part: WeightPart, dtype_bytes: int, quant: Quantisation | None) -> WeightPart:
    plain = part.parameters * dtype_bytes
    own = quant.for_role(part.name) if quant is not None else None
    if own is None or part.vision or _skipped(part.name, own.not_converted):
        return replace(part, bytes=plain, storage=f"{dtype_bytes * 8}-bit")
    data = sum(own.matrix_bytes(m) for m in part.matrices)
    return replace(part, bytes=data + part.other_parameters * dtype_bytes, storage=own.describe())


#: Module-name fragments in ``modules_to_not_convert`` and the part they leave unquantised.
_SKIP_WORDS = {"attention": ("self_attn", "attn", "attention"), "mlp": ("mlp",), "experts": ("experts",),
               "shared_experts": ("shared_expert",)}


#: A module name of each part, for ``re:`` patterns (compressed-tensors' form) to be matched against.
_SAMPLE_MODULES = {"attention": ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj"),
                   "mlp": ("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.down_proj"),
                   "experts": ("model.layers.0.mlp.experts.0.gate_proj", "model.layers.0.block_sparse_moe.experts.0.w1"),
                   "shared_experts": ("model.layers.0.mlp.shared_experts.gate_proj",
                                      "model.layers.0.block_sparse_moe.shared_experts.down_proj")}


def _skipped(name: str, not_converted: tuple[str, ...]) -> bool:
    words = _SKIP_WORDS.get(name, ())
    for module in not_converted:
        if module.startswith("re:"):  # a regular expression over module names: does it take this part's modules?
            try:
                pattern = re.compile(module[3:])
            except re.error:
                continue
            if all(pattern.match(sample) for sample in _SAMPLE_MODULES.get(name, ())) and name in _SAMPLE_MODULES:
                return True
            continue
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

    @property
    def name(self) -> str: ...

    @property
    def keeps_checkpoint_dtype(self) -> bool:
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
    if weights.source in ("gguf", "llama.cpp rule"):  # a GGUF file's tensors, or llama.cpp's quant rule
        if dtype.strip().lower() != "auto":
            return weights, f"--dtype {dtype} ignored: a GGUF's tensors are held as the file stores them ({weights.dtype})"
        return weights, None
    if not weights.counted:
        if dtype.strip().lower() != "auto":
            return weights, f"--dtype {dtype} ignored: the weights were given as bytes (--weights-bytes)"
        return weights, None
    name, why = served_dtype(weights.dtype, engine=engine, dtype=dtype)
    new_bytes = DTYPE_BYTES[name]
    if name == weights.dtype or (new_bytes == weights.dtype_bytes and dtype.strip().lower() == "auto"):
        return weights, None
    parts = tuple(store(replace(p, bytes=0, storage=""), new_bytes, weights.quantisation)
                  for p in weights.parts)
    counted = sum(p.bytes for p in parts)
    override = weights.bytes_override
    if override is not None and weights.source == "safetensors" and weights.counted_bytes:
        override = override * counted // weights.counted_bytes
    note = (f"weights held in {name} ({new_bytes} bytes per value) although the checkpoint is {weights.dtype}: {why}"
            + ("; --weights-bytes taken as given" if weights.source == "--weights-bytes" else ""))
    return replace(weights, parts=parts, dtype=name, dtype_bytes=new_bytes, bytes_override=override,
                               notes=(*weights.notes, note)), note
