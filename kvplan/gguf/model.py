"""A GGUF model read from its header(s): a local file or split set, or a file on the Hub.

:func:`read_local` takes the shards the resolver found (:mod:`kvplan.modelref`); :func:`read_hub` picks
the file of a Hub repo by tag (``org/repo:Q4_K_M``, as llama.cpp's ``-hf``) or by name (``--gguf-file``)
and reads its header through HTTP Range requests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kvplan.errors import ConfigError
from kvplan.geometry import ModelGeometry
from kvplan.gguf.files import SPLIT_NAME, pick_by_tag, split_set
from kvplan.gguf.geometry import GgufMetaReader, gguf_geometry
from kvplan.gguf.hub import HubSource, list_gguf_files
from kvplan.gguf.reader import ByteSource, GgufHeader, LocalSource, read_header
from kvplan.gguf.weights import GgufWeights
from kvplan.sources import Source


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
        return gguf_geometry(self.header, model_id=self.model_id)

    def weights(self) -> GgufWeights:
        reader = GgufMetaReader(self.header, label=self.model_id)
        blocks = reader.integer("num_hidden_layers", "block_count")
        assert blocks is not None
        return GgufWeights(tensors=self.header.tensors, block_count=blocks)


def read_local(shards: Sequence[Path]) -> GgufModel:
    """The model whose shards (in order, the first holding the metadata) are ``shards``."""
    sources = [LocalSource(str(path)) for path in shards]
    try:
        return _combine(sources, model_id=model_id_of(shards[0].name),
                        source=Source(kind="gguf", location=str(shards[0])))
    finally:
        for s in sources:
            s.close()


def read_hub(repo_id: str, *, tag: str | None = None, gguf_file: str | None = None, revision: str | None = None,
             token: str | None = None) -> GgufModel:
    """The GGUF file ``gguf_file`` of ``repo_id`` (and the rest of its split set), or the one whose name holds
    ``tag``; only the headers are read."""
    if gguf_file is not None:
        match = re.match(SPLIT_NAME, gguf_file)
        names = [gguf_file]
        if match:
            first = f"{match['prefix']}-00001-of-{match['count']}.gguf"
            names = split_set(list_gguf_files(repo_id, revision=revision, token=token), first)
    else:
        assert tag is not None, "a Hub GGUF is named by its file or by a tag"
        names = pick_by_tag(list_gguf_files(repo_id, revision=revision, token=token), tag, repo_id)
    sources: list[ByteSource] = [HubSource(repo_id, name, revision=revision, token=token) for name in names]
    return _combine(sources, model_id=f"{repo_id}/{model_id_of(names[0])}",
                    source=Source(kind="hub-gguf", location=f"{repo_id}/{names[0]}", revision=revision))


def model_id_of(name: str) -> str:
    """A GGUF model's id from its (first shard's) file name: ``model-00001-of-00002.gguf`` -> ``model``."""
    match = re.match(SPLIT_NAME, name)
    return match["prefix"] if match else name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _combine(sources: Sequence[ByteSource], *, model_id: str, source: Source) -> GgufModel:
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
