"""Engine flag spellings kvplan accepts as the engines read them: vLLM's token-count suffixes,
llama.cpp's ``-c``/``-np`` and ``--tensor-split``. Pure; the CLI calls these at its edge."""

from __future__ import annotations

import re

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


def vllm_token_note(flags: dict[str, str | None], engine: str) -> list[str]:
    """A note for each vLLM-named flag whose text vLLM reads differently from kvplan (``32k``)."""
    notes = []
    for flag, text in flags.items():
        if text is None or not isinstance(text, str):
            continue
        try:
            ours = parse_tokens(text, what=flag)
        except InputError:
            continue
        theirs = vllm_human_int(text)
        if theirs == ours:
            continue
        vllm = f"vLLM reads it as {theirs:,}" if theirs is not None else "vLLM refuses it"
        notes.append(
            f"{flag} {text}: kvplan reads {ours:,} tokens (k = 1024); {vllm} (lower-case k/m = 1000/10**6, "
            f"upper-case K/M = 1024/2**20). Pass the integer to say which you mean"
            + (" to vLLM" if engine.lower() == "vllm" else "")
        )
    return notes


def llama_context(ctx_size: str | None, parallel: int | None, max_model_len: str | None, batch: int,
                  engine: str) -> tuple[str | None, int]:
    """llama.cpp ``-c C -np N`` as kvplan's (``--max-model-len``, ``--batch``): N slots of C / N tokens."""
    if ctx_size is None and parallel is None:
        return max_model_len, batch
    if engine.lower().replace("-", "").replace(".", "") not in ("llamacpp",):
        raise InputError("--ctx-size/-c and --parallel/-np are llama.cpp's flags", "add --engine llama.cpp")
    if ctx_size is not None and max_model_len is not None:
        raise InputError("give --ctx-size (llama.cpp) or --max-model-len, not both",
                         "-c is the cells over all slots; --max-model-len the tokens of one")
    slots = parallel or batch
    if ctx_size is None:
        return max_model_len, slots
    cells = parse_tokens(ctx_size, what="--ctx-size")
    if cells % slots:
        raise InputError(f"-c {cells} is not a multiple of -np {slots}: llama.cpp rounds n_ctx down to a multiple",
                         f"use -c {cells // slots * slots}")
    return str(cells // slots), slots


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
