"""GGUF models (llama.cpp, Ollama, LM Studio): geometry and weights from the file's header alone.

``load_gguf(model)`` answers None when ``model`` is not a GGUF reference, so callers try it before
the config.json sources. References: a ``.gguf`` path (any shard of a split set), a folder holding
one GGUF model, ``org/repo:TAG`` (the file whose name holds TAG, as llama.cpp's ``-hf``), or a repo
id with ``gguf_file``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kvplan.errors import ConfigError, SourceError
from kvplan.geometry import ModelGeometry
from kvplan.gguf.reader import ByteSource, GgufHeader, LocalSource, read_header
from kvplan.gguf.weights import GgufWeights
from kvplan.report import Source

__all__ = ["GgufModel", "hub_reference", "load_gguf"]

_REPO_TAG = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*):(?P<tag>[A-Za-z0-9._-]+)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class GgufModel:
    model_id: str
    source: Source
    header: GgufHeader
    """The first shard's header, with the tensors of every shard."""
    files: tuple[str, ...]
    bytes_read: int
    """Header bytes read over all shards (the whole cost of reading the model)."""

    def geometry(self) -> ModelGeometry:
        from kvplan.gguf.geometry import gguf_geometry

        return gguf_geometry(self.header, model_id=self.model_id)

    def weights(self) -> GgufWeights:
        from kvplan.gguf.geometry import GgufMetaReader

        reader = GgufMetaReader(self.header, label=self.model_id)
        blocks = reader.integer("num_hidden_layers", "block_count")
        assert blocks is not None
        return GgufWeights(tensors=self.header.tensors, block_count=blocks)


def hub_reference(model: str, gguf_file: str | None) -> tuple[str, str | None] | None:
    """(repo id, tag) when ``model`` names a GGUF on the Hub; None otherwise."""
    match = _REPO_TAG.match(model.strip())
    if match:
        return match["repo"], match["tag"]
    if gguf_file is not None:
        return model.strip(), None
    return None


def load_gguf(
    model: str, *, gguf_file: str | None = None, revision: str | None = None, token: str | None = None
) -> GgufModel | None:
    """Read the GGUF header(s) ``model`` names; None when it is not a GGUF reference."""
    from kvplan.gguf import files

    local = files.local_files(model) if gguf_file is None else None
    if local is not None:
        sources: list[ByteSource] = [LocalSource(str(path)) for path in local]
        try:
            return _combine(sources, model_id=_model_id(local[0].name), source=Source(kind="gguf", location=str(local[0])))
        finally:
            for s in sources:
                s.close()  # type: ignore[attr-defined]
    ref = hub_reference(model, gguf_file)
    if ref is None:
        return None
    repo_id, tag = ref
    from kvplan.gguf.hub import HubSource, list_gguf_files

    if gguf_file is not None:
        if not files.is_gguf_path(gguf_file):
            raise SourceError(f"--gguf-file {gguf_file!r} is not a .gguf file name", "e.g. --gguf-file model-Q4_K_M.gguf")
        match = files.SPLIT_NAME.match(gguf_file)
        names = [gguf_file]
        if match:
            first = f"{match['prefix']}-00001-of-{match['count']}.gguf"
            names = files.split_set(list_gguf_files(repo_id, revision=revision, token=token), first)
    else:
        assert tag is not None
        names = files.pick_by_tag(list_gguf_files(repo_id, revision=revision, token=token), tag, repo_id)
    hub_sources: list[ByteSource] = [HubSource(repo_id, name, revision=revision, token=token) for name in names]
    return _combine(hub_sources, model_id=f"{repo_id}/{_model_id(names[0])}",
                    source=Source(kind="hub-gguf", location=f"{repo_id}/{names[0]}", revision=revision))


def _model_id(name: str) -> str:
    from kvplan.gguf.files import SPLIT_NAME

    match = SPLIT_NAME.match(name)
    return match["prefix"] if match else name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _combine(sources: list[ByteSource], *, model_id: str, source: Source) -> GgufModel:
    headers = [read_header(s) for s in sources]
    first = headers[0]
    count = first.metadata.get("split.count")
    if len(headers) > 1 and count is not None and count != len(headers):
        raise ConfigError(f"{first.label}: split.count = {count} but {len(headers)} shards were found",
                          "download every shard of the model")
    if first.architecture is None and len(headers) > 1:
        raise ConfigError(f"{first.label}: the first shard has no general.architecture", "re-split the model with llama.cpp")
    tensors = tuple(t for h in headers for t in h.tensors)
    combined = replace(first, tensors=tensors)
    return GgufModel(model_id=model_id, source=source, header=combined, files=tuple(h.label for h in headers),
                     bytes_read=sum(h.header_bytes for h in headers))
