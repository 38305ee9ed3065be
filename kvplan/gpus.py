"""The GPU catalog: memory and memory bandwidth of common accelerators (kvplan/data/gpus.yaml).

PyYAML is imported inside :func:`load_catalog`, so importing this module stays cheap.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvplan.errors import ConfigError, InputError
from kvplan.units import GiB

#: Words dropped before matching a GPU name ("NVIDIA GeForce RTX 4090" -> "rtx4090").
_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "amd", "instinct", "apple")


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuSpec:
    """One GPU type: its memory, bandwidth and where the figures come from."""

    name: str
    memory_bytes: int
    """Total memory as torch.cuda reports it (less than the marketed size; see ``memory_source``)."""
    bandwidth_bytes_per_s: int
    """Peak memory bandwidth, decimal bytes per second as published."""
    vendor: str = ""
    aliases: tuple[str, ...] = ()
    source: str = ""
    """Where the published figures (bandwidth, marketed memory) come from: the vendor datasheet."""
    memory_source: str = ""
    """Where ``memory_bytes`` comes from (an engine log, PyTorch's out-of-memory message, an estimate)."""


def normalise_name(name: str) -> str:
    """``"NVIDIA H100-80GB"`` -> ``"h10080gb"``: lower case, vendor words and separators dropped."""
    key = str(name).strip().lower()
    for word in _VENDOR_WORDS:
        key = re.sub(rf"\b{word}\b", " ", key)
    return re.sub(r"[^a-z0-9]", "", key)


@lru_cache(maxsize=1)
def load_catalog() -> tuple[GpuSpec, ...]:
    """Every GPU in the shipped catalog, in file order."""
    from importlib.resources import files

    import yaml  # NOTE: ~20 ms to import; only commands that name a GPU read the catalog

    text = (files("kvplan") / "data" / "gpus.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    entries = data.get("gpus") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError("kvplan/data/gpus.yaml has no 'gpus' list", "reinstall kvplan")
    return tuple(_spec(entry) for entry in entries)


def _spec(entry: Any) -> GpuSpec:
    try:
        return GpuSpec(
            name=str(entry["name"]),
            memory_bytes=round(float(entry["memory_gib"]) * GiB),
            bandwidth_bytes_per_s=round(float(entry["bandwidth_gb_s"]) * 10**9),
            vendor=str(entry.get("vendor", "")),
            aliases=tuple(str(a) for a in entry.get("aliases") or ()),
            source=str(entry.get("source", "")),
            memory_source=str(entry.get("memory_source", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"kvplan/data/gpus.yaml: bad entry {entry!r} ({exc})", "reinstall kvplan") from None


@lru_cache(maxsize=1)
def _index() -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for gpu in load_catalog():
        for name in (gpu.name, *gpu.aliases):
            key = normalise_name(name)
            if key in index and index[key] is not gpu:
                raise AssertionError(f"gpus.yaml: {name!r} names both {index[key].name} and {gpu.name}")
            index[key] = gpu
    return index


def lookup(name: str) -> GpuSpec:
    """A catalog GPU by name or alias, ignoring case, spaces, '-', '_' and vendor words.

    Raises :class:`InputError` with a did-you-mean hint for unknown names.
    """
    key = normalise_name(name)
    gpu = _index().get(key) if key else None
    if gpu is not None:
        return gpu
    spellings = {normalise_name(n): n for g in load_catalog() for n in (g.name, *g.aliases)}
    close = difflib.get_close_matches(key, list(spellings), n=3, cutoff=0.6)
    names = list(dict.fromkeys(_index()[c].name for c in close))
    hint = f"did you mean {' or '.join(names)}? " if names else ""
    hint += "kvplan gpus lists the catalog; for any other GPU pass --gpu-mem (and --gpu-bandwidth), e.g. --gpu-mem 48GiB"
    raise InputError(f"--gpu {name!r} is not in kvplan's GPU catalog", hint)


def custom_gpu(memory_bytes: int, bandwidth_bytes_per_s: int | None, *, name: str = "custom") -> GpuSpec:
    """A GPU given by ``--gpu-mem`` / ``--gpu-bandwidth`` (bandwidth 0 = unknown)."""
    if memory_bytes <= 0:
        raise InputError(f"--gpu-mem must be positive, got {memory_bytes}", "e.g. --gpu-mem 80GiB")
    return GpuSpec(name=name, memory_bytes=memory_bytes, bandwidth_bytes_per_s=bandwidth_bytes_per_s or 0,
                   memory_source="--gpu-mem")


def parse_bandwidth(text: str) -> int:
    """``3.35TB/s``, ``3350GB/s``, ``900GB`` (per second implied) -> bytes per second (decimal units)."""
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?)b?(?:/s|ps)?\s*$", str(text).strip().lower())
    if not match:
        raise InputError(
            f"--gpu-bandwidth {text!r} is not a bandwidth", "use a rate in bytes per second, e.g. 3.35TB/s or 936GB/s"
        )
    number, prefix, binary = match.groups()
    base = 1024 if binary else 1000
    scale = base ** {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}[prefix]
    value = int(float(number) * scale)
    if value <= 0:
        raise InputError(f"--gpu-bandwidth must be positive, got {text!r}", "e.g. --gpu-bandwidth 3.35TB/s")
    return value
