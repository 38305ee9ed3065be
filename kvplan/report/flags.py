"""How users spell flags. A report names the length flag the user typed (``--seq-len`` or vLLM's
``--max-model-len``: one setting, two spellings), and tables say capacity suggestions in the engine's own
flags: llama.cpp speaks -c, -np, -ctk/-ctv and -fa (the flash-attention rule for a quantised V cache is the
llama.cpp engine's own note).

Reports keep kvplan's own (vLLM) flag names otherwise; tables and table-mode notes say them in the engine's.
"""

from __future__ import annotations

import re


def engine_flags(suggestion: str, engine: str, batch: int = 1) -> str:
    """A capacity suggestion in the flags of ``engine``; llama.cpp speaks -c (all slots), -np, -ctk/-ctv, -fa."""
    if engine != "llama.cpp":
        return suggestion
    if match := re.match(r"--max-model-len (\d+)", suggestion):
        tokens = int(match[1])
        return (f"-c {batch * tokens} -np {batch} ({tokens:,} tokens per slot; -c counts all slots)"
                if batch > 1 else f"-c {tokens} (the longest context that fits)")
    if match := re.match(r"--batch (\d+)", suggestion):
        return f"-np {match[1]}{suggestion[match.end():]}"
    if match := re.match(r"--kv-dtype (\S+)", suggestion):
        dtype, rest = match[1], suggestion[match.end():]
        if dtype.startswith(("q", "iq")):
            return f"-ctk {dtype} -ctv {dtype} -fa{rest.rstrip(')')}; a quantised V cache needs flash attention)"
        return f"-ctk {dtype} -ctv {dtype}{rest}"
    if match := re.search(r"--(?:tp|pp) (\d+)", suggestion):
        return suggestion.replace(match[0], f"{match[1]} GPUs with the layers split (-ts, -sm layer)")
    return suggestion


#: The two spellings of the tokens per sequence: kvplan's (k = 1024) and vLLM's (k = 1000).
SEQ_FLAGS = ("--seq-len", "--max-model-len")


def spell_source(source: str | None, flag: str | None) -> str | None:
    """A length's source naming ``flag``, the length flag the user typed, where it names the other one."""
    if flag is None or source is None:
        return source
    return flag if source == _other(flag) else source


def spell_note(note: str, flag: str | None) -> str:
    """A note that starts with the other length flag, starting with ``flag`` (the one the user typed)."""
    if flag is None:
        return note
    other = _other(flag)
    return flag + note[len(other):] if note.startswith(other + " ") else note


def _other(flag: str) -> str:
    return SEQ_FLAGS[1 - SEQ_FLAGS.index(flag)]
