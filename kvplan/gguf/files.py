"""GGUF file names: one file, a split set (``-00001-of-00003.gguf``), the models in a folder or a Hub repo.

A split model keeps its metadata in the first shard and its tensors across all of them (llama.cpp
``gguf-split``); kvplan reads the first shard's metadata and every shard's tensor table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from kvplan.errors import ConfigError, SourceError

SPLIT_NAME = r"(?i)^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$"
#: Files beside a model that are not the language model (vision projectors, drafts kept apart).
NOT_MODEL = r"(?i)(^|[-_.])mmproj([-_.]|$)"


def is_gguf_path(model: str) -> bool:
    return model.lower().endswith(".gguf")


def split_set(names: Iterable[str], first: str) -> list[str]:
    """All shard names of the split set ``first`` belongs to, in order; [first] when it is not split.

    Raises when a shard is missing, naming it."""
    match = re.match(SPLIT_NAME, first)
    if not match:
        return [first]
    prefix, count = match["prefix"], int(match["count"])
    present = {n for n in names}
    shards = [f"{prefix}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    missing = [s for s in shards if s not in present]
    if missing:
        raise SourceError(
            f"split GGUF {prefix} has {count} shards but {missing[0]} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
            "download every shard of the model into the same folder",
        )
    return shards


def model_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """Distinct models among GGUF file names: first shard (or single file) -> its shards, projectors left out."""
    groups: dict[str, list[str]] = {}
    names = sorted(n for n in names if is_gguf_path(n) and not re.search(NOT_MODEL, Path(n).name))
    for name in names:
        match = re.match(SPLIT_NAME, name)
        key = f"{match['prefix']}-00001-of-{match['count']}.gguf" if match else name
        groups.setdefault(key, []).append(name)
    return groups


def folder_shards(folder: Path, *, label: str) -> list[Path] | None:
    """The shards, in order, of the one GGUF model in ``folder`` (projectors aside); None when it holds none."""
    groups = model_groups(p.name for p in folder.iterdir() if p.is_file())
    if not groups:
        return None
    if len(groups) > 1:
        raise SourceError(
            f"folder {label} holds {len(groups)} GGUF models: {', '.join(sorted(groups))}",
            "point --model at one .gguf file (the first shard of a split model)",
        )
    (first,) = groups
    return [folder / name for name in split_set(groups[first], first)]


def file_shards(path: Path) -> list[Path]:
    """``path`` alone, or every shard of the split set it belongs to, in order."""
    match = re.match(SPLIT_NAME, path.name)
    if not match:
        return [path]
    first = f"{match['prefix']}-00001-of-{match['count']}.gguf"
    return [path.parent / name for name in split_set([p.name for p in path.parent.iterdir()], first)]


def pick_by_tag(names: Iterable[str], tag: str, repo_id: str) -> list[str]:
    """The shards of the model whose file name contains ``tag`` (``Q4_K_M``), case-insensitive, as
    llama.cpp's ``-hf org/repo:TAG`` matches it."""
    groups = model_groups(names)
    if not groups:
        raise SourceError(f"{repo_id} has no .gguf files", "pass a repo that holds GGUF files, or a local .gguf path")
    wanted = tag.lower()
    hits = {first: shards for first, shards in groups.items() if wanted in first.lower()}
    if not hits:
        raise SourceError(
            f"{repo_id} has no GGUF file whose name contains {tag!r}",
            f"its GGUF files: {', '.join(sorted(groups))}; pass one with --gguf-file NAME",
        )
    if len(hits) > 1:
        raise ConfigError(
            f"{repo_id}: {len(hits)} GGUF files match {tag!r}: {', '.join(sorted(hits))}",
            "pass the exact file with --gguf-file NAME",
        )
    ((first, _shards),) = hits.items()
    return split_set(groups[first], first)
