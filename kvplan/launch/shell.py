"""A pasted launch line as words: shell splitting, the program it runs, and its flags read against a table.

Pure. :func:`split_line` undoes what a shell would (``shlex``, backslash-newline continuations, leading
``NAME=value`` environment words, ``env``); :func:`read_flags` walks the words with one engine's table of
flags, taking ``--flag=value`` and ``--flag value`` alike, as argparse (vLLM, SGLang), click (trtllm-serve)
and llama.cpp's ``common/arg.cpp`` all do.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import InputError

_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(\.\d+)?")

#: What one flag's value becomes: API keyword -> value (an empty mapping: read, nothing to size).
Keywords = Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Flag:
    """One flag of an engine's parser: its spellings, whether it takes a value, and what it maps to."""

    names: tuple[str, ...]
    read: Callable[[str | None], Keywords]
    """The value (None for a switch) as API keywords; raises InputError for a value the engine refuses."""
    takes_value: bool = True
    optional_value: tuple[str, ...] = ()
    """A switch whose value may be left out (llama.cpp's old bare ``-fa``); the next word, unless it is a flag, is
    its value (one of these words, else the flag's reader refuses it)."""


@dataclass(kw_only=True, slots=True)
class ReadFlags:
    keywords: dict[str, Any] = field(default_factory=dict)
    """API keyword -> value, in the order read (a flag given twice: the last wins, as argparse does)."""
    given: dict[str, str] = field(default_factory=dict)
    """API keyword -> the flag text that set it, for messages."""
    positional: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Flags read but not sized (``--port``, ``--host`` ...), in the order given, each once."""
    defaults: list[str] = field(default_factory=list)
    """Flags whose value is kvplan's default already (``--max-model-len auto``, ``-ngl all``)."""


def split_line(text: str) -> tuple[dict[str, str], list[str]]:
    """(environment words, argv) of a pasted command line: continuations joined, ``NAME=value`` words and an
    ``env`` prefix taken off the front. Raises InputError for an unbalanced quote or an empty line."""
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        words = shlex.split(joined, comments=True)
    except ValueError as exc:
        raise InputError(f"--cmd: cannot split the line as a shell would ({exc})",
                         "paste the command as you run it, quotes balanced") from None
    env: dict[str, str] = {}
    while words and (_ENV_WORD.fullmatch(words[0]) or words[0] == "env"):
        word = words.pop(0)
        if word != "env":
            name, _, value = word.partition("=")
            env[name] = value
    if not words:
        raise InputError("--cmd is empty", "paste the engine's launch line, e.g. --cmd 'vllm serve MODEL --tp 2'")
    return env, words


def is_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _NUMBER.fullmatch(word)


def read_flags(words: Sequence[str], table: Sequence[Flag], *, switches: frozenset[str] = frozenset(),
               engine: str) -> ReadFlags:
    """Walk ``words`` (the words after the program) with ``table``. A flag not in the table is ignored, its
    value with it unless it is one of ``switches`` (the engine's known flags without a value) or the next word
    is itself a flag."""
    by_name = {name: flag for flag in table for name in flag.names}
    out = ReadFlags()
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            out.positional.extend(words[i:])
            break
        if not is_flag(word):
            out.positional.append(word)
            continue
        name, eq, attached = word.partition("=")
        flag = by_name.get(name)
        if flag is None:
            if name not in out.ignored:
                out.ignored.append(name)
            if not eq and name not in switches and i < len(words) and not is_flag(words[i]):
                i += 1  # its value
            continue
        value: str | None = attached if eq else None
        if flag.takes_value and value is None:
            if i >= len(words):
                raise InputError(f"--cmd: {name} needs a value ({engine})", f"e.g. {name} VALUE")
            value = words[i]
            i += 1
        elif not flag.takes_value and value is None and flag.optional_value and i < len(words) \
                and not is_flag(words[i]):
            value = words[i]
            i += 1
        keywords = flag.read(value)
        if not keywords:
            out.defaults.append(name if value is None else f"{name} {value}")
        for keyword, result in keywords.items():
            out.keywords[keyword] = result
            out.given[keyword] = name if value is None else f"{name} {value}"
    return out


def to_int(flag: str, *, minimum: int = 0) -> Callable[[str | None], int]:
    """An integer flag (``type=int``): refused, as the engine refuses it, when the text is not an integer."""

    def parse(value: str | None) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise InputError(f"--cmd: {flag} {value!r} is not an integer", f"e.g. {flag} 2") from None
        if number < minimum:
            raise InputError(f"--cmd: {flag} {number} must be at least {minimum}", f"e.g. {flag} {max(minimum, 1)}")
        return number

    return parse


def to_float(flag: str) -> Callable[[str | None], float]:
    def parse(value: str | None) -> float:
        try:
            return float(str(value).strip())
        except ValueError:
            raise InputError(f"--cmd: {flag} {value!r} is not a number", f"e.g. {flag} 0.9") from None

    return parse
