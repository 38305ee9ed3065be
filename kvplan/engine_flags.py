"""Engine flag spellings kvplan accepts as the engines read them: vLLM's token-count suffixes (and
``--max-model-len`` beside kvplan's ``--seq-len``), llama.cpp's ``-c``/``-np``, ``-ctk``/``-ctv`` and
``--tensor-split``; which engine a model is sized for, and the engines' own memory flags (``-ngl``, ``-nkvo``,
``-fa``, ``--cpu-offload-gb``, ``--quantization``). Pure; the CLI and the Python API call these at their edge."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.modelref import GGUF_KINDS, Geometry, resolve
from kvplan.units import parse_tokens

if TYPE_CHECKING:
    from kvplan.models import WeightsEstimate

_VLLM_HUMAN_INT = r"(\d+(?:\.\d+)?)([kKmMgGtT])"
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def vllm_human_int(text: str) -> int | None:
    """vLLM's ``human_readable_int`` (``vllm/utils/argparse_utils.py``): lower-case suffixes are decimal
    (``32k`` = 32,000, ``25.6k`` = 25,600), upper-case binary (``32K`` = 32,768, no decimals);
    None where vLLM refuses the text."""
    value = text.strip()
    match = re.fullmatch(_VLLM_HUMAN_INT, value)
    if match is None:
        try:
            return int(value)
        except ValueError:
            return None
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        return None
    return int(number) * _BINARY[suffix]


def vllm_tokens(text: str | int | None, flag: str) -> tuple[int | None, str | None]:
    """A token count given to a vLLM-named flag (``--max-model-len``, ``--max-num-batched-tokens``), read as vLLM
    reads it (:func:`vllm_human_int`), and a note saying so when the text has a suffix (kvplan's own
    ``--seq-len`` reads ``k`` as 1024: the two never disagree silently)."""
    if text is None:
        return None, None
    if isinstance(text, int) and not isinstance(text, bool):
        return parse_tokens(text, what=flag), None
    value = str(text).strip()
    match = re.fullmatch(_VLLM_HUMAN_INT, value)
    if match is None:
        return parse_tokens(value, what=flag), None
    number, suffix = match.groups()
    tokens = vllm_human_int(value)
    if tokens is None:
        raise InputError(f"{flag} {text}: vLLM refuses decimals with binary suffixes like {suffix}",
                         f"use {number}{suffix.lower()} (decimal) or an integer")
    tokens = parse_tokens(tokens, what=flag)
    swapped = suffix.upper() if suffix in _DECIMAL else suffix.lower()
    other = "" if "." in number else f"; {number}{swapped} would be {vllm_human_int(number + swapped):,}"
    # NOTE: vllm/utils/argparse_utils.py human_readable_int: k, m, g = 10**3, 10**6, 10**9; K, M, G = 2**10, 2**20,
    # 2**30 (docs/getting-started.md says it)
    return tokens, (f"{flag} {value} = {tokens:,} tokens, as vLLM reads it (k = 1000, K = 1024{other}); "
                    "kvplan's --seq-len reads k as 1024")


def llama_context(ctx_size: str | None, parallel: int | None, max_model_len: str | None, batch: int,
                  engine: str, *, kv_unified: bool = False,
                  model_max: int | None = None) -> tuple[str | None, int, str | None]:
    """llama.cpp ``-c C -np N`` as kvplan's (``--max-model-len``, ``--batch``) and a note: N slots of C / N tokens.

    ``-c 0`` is llama.cpp's default, the model's trained context (``model_max``) over all slots. A ``C`` that
    ``N`` does not divide is rounded as ``llama_context`` does (src/llama-context.cpp): ``n_ctx = GGML_PAD(C, 256)``,
    ``n_ctx_seq = GGML_PAD(n_ctx / N, 256)`` per slot, and ``n_ctx = n_ctx_seq * N`` (a unified cache, ``-kvu``,
    is not split: each slot takes C / N here, the same cells)."""
    if ctx_size is None and parallel is None:
        return max_model_len, batch, None
    if get_engine(engine).name != "llama.cpp":
        raise InputError("--ctx-size/-c and --parallel/-np are llama.cpp's flags", "add --engine llama.cpp")
    if ctx_size is not None and max_model_len is not None:
        raise InputError("give --ctx-size (llama.cpp) or --max-model-len, not both",
                         "-c is the cells over all slots; --max-model-len the tokens of one")
    slots = parallel or batch
    if ctx_size is None:
        return max_model_len, slots, None
    text = str(ctx_size).strip()
    if not text.isdigit():
        # NOTE: common/arg.cpp parses int flags with std::stoi, which stops at the first non-digit: -c 16k is 16.
        digits = len(text) - len(text.lstrip("0123456789"))
        raise InputError(f"-c {text}: llama.cpp reads -c with std::stoi, which stops at the first non-digit "
                         f"({text[:digits] or 'nothing'}), so kvplan refuses to guess",
                         f"pass the cells as an integer, e.g. -c {parse_tokens(text, what='--ctx-size') if digits else 32768}")
    note = None
    if int(text) == 0:
        if model_max is None:
            raise InputError("-c 0 (llama.cpp's default) is the model's trained context, which this model does not "
                             "name", "pass -c CELLS")
        cells = model_max
        note = f"-c 0 (llama.cpp's default): n_ctx = the model's trained context, {cells:,} cells over {slots} slot(s)"
    else:
        cells = parse_tokens(text, what="--ctx-size")
    if cells % slots:
        if kv_unified:
            per_slot = cells // slots
            return str(per_slot), slots, (f"-c {cells} over -np {slots} with -kvu: one pool of {cells:,} cells, "
                                          f"sized here as {slots} x {per_slot:,} tokens")
        n_ctx = -(-cells // LLAMA_PAD) * LLAMA_PAD
        per_slot = -(-(n_ctx // slots) // LLAMA_PAD) * LLAMA_PAD
        return str(per_slot), slots, (
            f"-c {cells} is not divisible by -np {slots}: llama.cpp pads n_ctx to {n_ctx:,} and gives each slot "
            f"n_ctx_seq = GGML_PAD({n_ctx:,} / {slots}, 256) = {per_slot:,} cells (n_ctx {per_slot * slots:,}; "
            "src/llama-context.cpp, 'n_ctx is not divisible by n_seq_max')")
    return str(cells // slots), slots, note


#: llama.cpp's GGML_PAD of contexts (src/llama-context.cpp).
LLAMA_PAD = 256


def tensor_split_shares(text: str | None) -> tuple[float, ...] | None:
    """llama.cpp ``--tensor-split 3,1`` (or ``3/1``): proportions of layers per device."""
    if text is None:
        return None
    try:
        shares = tuple(float(p) for p in re.split(r"[,/]", text) if p.strip())
    except ValueError:
        raise InputError(f"--tensor-split {text!r} is not a list of proportions", "e.g. --tensor-split 3,1") from None
    if not all(math.isfinite(s) for s in shares):
        raise InputError(f"--tensor-split {text!r} holds a value that is not a finite number (nan or inf)",
                         "give finite proportions, e.g. -ts 3,1")
    if not shares or any(s < 0 for s in shares) or sum(shares) <= 0:
        raise InputError(f"--tensor-split {text!r} needs non-negative proportions, not all zero", "e.g. -ts 3,1")
    return shares


def typed_length(seq_len: str | int | None, max_model_len: str | int | None) -> tuple[str | int | None, str | None]:
    """The tokens per sequence and the flag that gave them (None: neither); both flags naming different token
    counts (--seq-len reads k as 1024, --max-model-len as vLLM does: 16k = 16,000): InputError."""
    if seq_len is not None and max_model_len is not None:
        ours, theirs = parse_tokens(seq_len, what="--seq-len"), vllm_tokens(max_model_len, "--max-model-len")[0]
        if ours != theirs:
            raise InputError(f"--seq-len {seq_len} ({ours:,}) and --max-model-len {max_model_len} ({theirs:,}, as vLLM "
                             "reads it) disagree (they are one setting)", "pass one of them")
        return seq_len, "--seq-len"
    if max_model_len is not None:
        return max_model_len, "--max-model-len"
    return seq_len, None if seq_len is None else "--seq-len"


def typed_tokens(seq_len: str | int | None, max_model_len: str | int | None) -> tuple[int | None, str | None, str | None]:
    """(tokens, the flag that gave them, a note): --seq-len reads k as 1024, --max-model-len (vLLM's name) reads
    the text as vLLM does, and says so when it has a suffix."""
    text, flag = typed_length(seq_len, max_model_len)
    if flag == "--max-model-len":
        tokens, note = vllm_tokens(text, flag)
        return tokens, flag, note
    return (parse_tokens(text, what="--seq-len") if text is not None else None), flag, None


def kv_types(kv_dtype: str, cache_type_k: str | None, cache_type_v: str | None, engine: str) -> tuple[str, str | None]:
    """(K type, V type) from --kv-dtype (both) or llama.cpp's -ctk (K alone: V keeps llama.cpp's f16 unless -ctv)."""
    if cache_type_k is None:
        return kv_dtype, cache_type_v
    if kv_dtype != "auto":
        raise InputError(f"--kv-dtype {kv_dtype} and --cache-type-k {cache_type_k} both set the K type",
                         "give one: -ctk (and -ctv) in llama.cpp's spelling, or --kv-dtype for K and V alike")
    if cache_type_v is None and "cache_type_v" in get_engine(engine).knobs:
        cache_type_v = "f16"  # llama.cpp: -ctk sets K only; V keeps its own default type
    return cache_type_k, cache_type_v


_TRUTHY = ("on", "enabled", "true", "1")
_FALSEY = ("off", "disabled", "false", "0")
_AUTOY = ("auto", "-1")
#: Every word llama.cpp's -fa takes (common/arg.cpp is_truthy / is_falsey / is_autoy).
FLASH_ATTN_WORDS = (*_TRUTHY, *_FALSEY, *_AUTOY)


def flash_attn_off(value: str | None) -> bool:
    """``-fa`` given and off (not given: llama.cpp's default, auto, which turns flash attention on where it can)."""
    return value is not None and flash_attn_value(value) == "off"


def flash_attn_value(value: str | None) -> str:
    """``-fa`` as common/arg.cpp reads it: on, off or auto (an old llama.cpp's bare ``-fa``: on)."""
    if value is None:
        return "on"
    text = value.strip().lower()
    if text in _TRUTHY:
        return "on"
    if text in _FALSEY:
        return "off"
    if text in _AUTOY:
        return "auto"
    raise InputError(f"-fa {value!r}: llama.cpp takes on, off or auto ('unknown value for --flash-attn')",
                     "e.g. -fa on")


# ---- the engine and its flags ----------------------------------------------------------------------

#: Engines whose --engine-version changes what kvplan prints (log lines, budget terms).
VERSIONED_ENGINES = ("vllm", "sglang")


def engine_for(model: str | Geometry | ModelGeometry, gguf_file: str | None, engine: str | None, *,
               fallback: str) -> tuple[str, list[str]]:
    """The engine a model is sized for, and a note saying why: ``engine`` as given (``ollama`` is read as
    llama.cpp, which it runs); when None, llama.cpp for a GGUF (a ``.gguf`` file or folder, ``org/repo:QUANT``,
    ``gguf_file``), else ``fallback``."""
    if engine is not None:
        if str(engine).strip().lower() == "ollama":
            return "llama.cpp", ["--engine ollama: Ollama runs llama.cpp, so the model is sized as llama.cpp "
                                 "(Ollama's num_ctx is llama.cpp's -c, OLLAMA_NUM_PARALLEL its -np)"]
        return engine, []
    if isinstance(model, Geometry):
        kind: str | None = model.source.kind
    elif isinstance(model, ModelGeometry):
        kind = None
    else:
        kind = resolve(model, gguf_file=gguf_file).kind
    if kind in GGUF_KINDS:
        return "llama.cpp", ["engine llama.cpp: the model is a GGUF, which llama.cpp runs (pass --engine to size "
                             "it for another engine)"]
    return fallback, []


def check_engine_version(engine: str, version: str | None) -> None:
    if version is not None and get_engine(engine).name not in VERSIONED_ENGINES:
        raise InputError(f"--engine-version {version}: versions apply to vLLM and SGLang only (their log lines and "
                         f"budget terms changed across releases); kvplan follows one {get_engine(engine).title}",
                         "drop --engine-version")


def engine_flag(engine: str, flag: str, engines: tuple[str, ...] = ("vllm",)) -> None:
    if get_engine(engine).name not in engines:
        names = " and ".join(get_engine(e).title for e in engines)
        raise InputError(f"{flag} is {names}'s flag, but --engine is {get_engine(engine).name}",
                         f"add --engine {engines[0]}, or drop {flag}")


def flash_attn_notes(flash_attn: str | None, engine: str, v_type: str) -> list[str]:
    """llama.cpp ``-fa``: on, off or auto; off with a quantised V cache is refused as llama.cpp refuses it."""
    if flash_attn is None:
        return []
    engine_flag(engine, "-fa/--flash-attn", ("llama.cpp",))
    # NOTE: lazy: an engine's module loads on first use, as kvplan.engines.ENGINES loads it (-fa is llama.cpp's).
    from kvplan.engines.llamacpp import check_flash_attn

    return check_flash_attn(flash_attn_value(flash_attn), "fp16" if v_type == "auto" else v_type)


def kv_host_layers(num_layers: int, n_gpu_layers: int | None, no_kv_offload: bool, engine: str) -> tuple[int, list[str]]:
    """KV layers llama.cpp keeps in host memory: ``-nkvo`` all of them; ``-ngl N`` the layers before
    ``i_gpu_start = max(n_layer + 1 - N, 0)`` (``llama_model::load_tensors``; each layer's KV sits on its
    layer's device, ``src/llama-kv-cache.cpp``)."""
    if n_gpu_layers is None and not no_kv_offload:
        return 0, []
    engine_flag(engine, "-ngl/-nkvo", ("llama.cpp",))
    if n_gpu_layers is not None and n_gpu_layers < 0:
        raise InputError(f"-ngl {n_gpu_layers}: give the layers on the GPU (0 or more)", "e.g. -ngl 99 (all)")
    if no_kv_offload:
        return num_layers, [f"llama.cpp -nkvo: the KV cache of all {num_layers} layers is in host memory, none on "
                            "the GPU"]
    assert n_gpu_layers is not None
    start = max(num_layers + 1 - n_gpu_layers, 0)
    host = min(start, num_layers)
    if not host:
        return 0, []
    return host, [f"llama.cpp -ngl {n_gpu_layers}: layers 0-{host - 1} ({host} of {num_layers}) and their KV cache "
                  f"in host memory (i_gpu_start = max({num_layers} + 1 - {n_gpu_layers}, 0) = {start}, "
                  "llama_model::load_tensors); KV per GPU counts the other layers"]


def weights_on_gpu(weights: WeightsEstimate, n_gpu_layers: int, notes: list[str]) -> WeightsEstimate:
    split = weights.device_split
    if split is None or not hasattr(split, "n_gpu_layers"):
        notes.append(f"-ngl {n_gpu_layers}: the weights given are not split by layer; all are counted on the GPU")
        return weights
    placed = replace(split, n_gpu_layers=n_gpu_layers)
    start, on_gpu = placed.gpu_start()
    if not on_gpu:
        notes.append("llama.cpp -ngl 0: every weight is in host memory")
    elif start:
        notes.append(f"llama.cpp -ngl {n_gpu_layers}: the weights of blocks {start}-{len(placed.block_bytes) - 1} and "
                     "the output layer on the GPU; token_embd and the other blocks in host memory")
    # NOTE: the layer split's own note speaks of every layer offloaded (-ngl all): the -ngl note replaces it.
    kept = tuple(n for n in weights.notes if "-ngl all" not in n) if start else weights.notes
    return replace(weights, device_split=placed, notes=kept)


def cpu_offload_bytes(cpu_offload_gb: float | None, engine: str, notes: list[str]) -> int:
    """vLLM/SGLang ``--cpu-offload-gb``: GiB of weights per GPU in host memory, as bytes."""
    if not cpu_offload_gb:
        return 0
    engine_flag(engine, "--cpu-offload-gb", ("vllm", "sglang"))
    if not math.isfinite(cpu_offload_gb) or cpu_offload_gb < 0:
        raise InputError(f"--cpu-offload-gb {cpu_offload_gb:g} is not a non-negative number of GiB",
                         "e.g. --cpu-offload-gb 4")
    offload_bytes = int(cpu_offload_gb * 2**30)
    notes.append(f"--cpu-offload-gb {cpu_offload_gb:g}: {offload_bytes:,} B of each GPU's weights in host memory "
                 "(GiB, as vLLM's EngineArgs reads it), so the KV budget grows by as much")
    return offload_bytes


#: vLLM --quantization values that name a checkpoint's own method (vllm/model_executor/layers/quantization).
_SAME_METHOD = {"awq_marlin": "awq", "gptq_marlin": "gptq", "gptq_marlin_24": "gptq", "fbgemm_fp8": "fp8",
                "modelopt": "modelopt", "compressed_tensors": "compressed-tensors"}


def quantised_for(loaded: Geometry, quantization: str, engine: str, weights_from: str,
               notes: list[str]) -> tuple[Geometry, str]:
    """``--quantization``: a checkpoint's own method is accepted as it is; ``fp8`` on a 16-bit checkpoint is
    vLLM's and SGLang's online quantisation (linear weights in fp8 on load, ``Fp8LinearMethod``); any other
    method needs a checkpoint made with it, as the engine requires."""
    engine_flag(engine, "--quantization", ("vllm", "sglang"))
    method = quantization.strip().lower()
    qc = loaded.config.get("quantization_config") if isinstance(loaded.config, Mapping) else None
    own = str(qc.get("quant_method", "")).lower() if isinstance(qc, Mapping) else ""
    if own:
        if _SAME_METHOD.get(method, method).replace("_", "-") != own.replace("_", "-"):
            raise InputError(f"--quantization {quantization}: {loaded.model_id} is a {own} checkpoint (its "
                             "quantization_config), and the engine refuses another method",
                             f"drop --quantization, or use --quantization {own}")
        notes.append(f"--quantization {quantization}: the checkpoint's own method ({own}), as its config says")
        return loaded, weights_from
    if method != "fp8":
        raise InputError(f"--quantization {quantization} needs a checkpoint quantised with it (a "
                         f"quantization_config), and {loaded.model_id} has none",
                         "use --quantization fp8 (quantised on load), or a quantised checkpoint")
    if weights_from == "safetensors":
        raise InputError("--weights-from safetensors counts the 16-bit checkpoint, --quantization fp8 the weights "
                         "quantised on load", "pass one of them")
    notes.append("--quantization fp8: linear weights quantised to fp8 on load (vLLM/SGLang Fp8LinearMethod), "
                 "counted from config.json with a float32 scale per output row (vLLM keeps one per tensor)")
    config = {**loaded.config, "quantization_config": {"quant_method": "fp8"}}
    return replace(loaded, config=config), "config"
