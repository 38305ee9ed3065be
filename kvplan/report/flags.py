"""How each engine's users spell a suggestion: llama.cpp speaks -c, -np, -ctk/-ctv and -fa (the flash-attention
rule for a quantised V cache is the llama.cpp engine's own note).

Reports keep kvplan's own (vLLM) flag names; tables and table-mode notes say them in the engine's.
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
