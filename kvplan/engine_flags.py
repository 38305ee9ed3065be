"""Engine flag spellings kvplan accepts as the engines read them: vLLM's token-count suffixes (and
``--max-model-len`` beside kvplan's ``--seq-len``), llama.cpp's ``-c``/``-np``, ``-ctk``/``-ctv`` and
``--tensor-split``. Pure; the CLI and the Python API call these at their edge."""

from __future__ import annotations

import re

from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.units import parse_tokens

_VLLM_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def vllm_human_int(text: str) -> int | None:
    """vLLM's ``human_readable_int`` (``vllm/utils/argparse_utils.py``): lower-case suffixes are decimal
    (``32k`` = 32,000, ``25.6k`` = 25,600), upper-case binary (``32K`` = 32,768, no decimals);
    None where vLLM refuses the text."""
    value = text.strip()
    match = _VLLM_HUMAN_INT.fullmatch(value)
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
    match = _VLLM_HUMAN_INT.fullmatch(value)
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
    return tokens, (f"{flag} {value} = {tokens:,} tokens, as vLLM reads it (vllm/utils/argparse_utils.py "
                    "human_readable_int: lower-case k, m, g = 10**3, 10**6, 10**9; upper-case K, M, G = 2**10, 2**20, "
                    f"2**30{other}); kvplan's own --seq-len reads k as 1024")


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
