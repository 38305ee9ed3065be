"""What ``--model`` names, decided once, and the one way each kind of model is loaded.

:func:`resolve` reads the text (and ``--revision``, ``--gguf-file``) into a :class:`ModelRef`, in this order:

1. a Hub URL (``https://huggingface.co/ORG/NAME``, ``.../tree/REV``, ``.../blob/REV/FILE``): its repo id,
   revision and file (a ``.gguf`` file or config.json);
2. a local path: a config.json (``file``), a ``.gguf`` file or any shard of a split set (``gguf``), or a
   folder holding config.json (``file``) or one GGUF model (``gguf``);
3. ``org/repo:TAG``: the GGUF file of a Hub repo whose name holds TAG, as llama.cpp's ``-hf`` (``hub-gguf``);
4. a bundled model by Hub id or short alias, case-insensitive, when no revision or ``main`` (the default branch)
   is asked (``bundled``);
5. any other Hub repo id (``hub``), or with ``--gguf-file`` that file of the repo (``hub-gguf``).

:func:`load` then reads it along one path per kind: a config.json (local, bundled, or fetched from the
Hub by :mod:`kvplan.sources`) through :func:`kvplan.models.parse_config`, or a GGUF header through
:mod:`kvplan.gguf`, into a :class:`Geometry`. Nothing here imports the report, the calculator or the CLI.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from kvplan.errors import InputError, SourceError
from kvplan.geometry import ModelGeometry
from kvplan.gguf.files import file_shards, folder_shards, is_gguf_path
from kvplan.hubref import GGUF_TAG, is_repo_id, is_url, parse_hub_url, validate_revision
from kvplan.limits import MAX_MODEL_ARG_CHARS
from kvplan.models import overridden_config, parse_config, parse_override
from kvplan.sources import (
    HF_QUANT_CONFIG,
    Source,
    bundled_index,
    close_bundled,
    fetch_hub_config,
    fetch_hub_sidecar,
    hub_id_of,
    read_json_config,
    read_local_sidecar,
    suggest_bundled,
    with_quant_sidecar,
)
from kvplan.textsafe import printable

if TYPE_CHECKING:
    from kvplan.gguf.model import GgufModel

RefKind = Literal["file", "bundled", "hub", "gguf", "hub-gguf"]
#: The kinds read from a GGUF header rather than a config.json.
GGUF_KINDS = ("gguf", "hub-gguf")
_MODEL_HINT = "pass a Hub id, a bundled alias (kvplan models) or a config.json path"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRef:
    """A resolved ``--model``: which kind of model it is and where it lies. ``kind`` is the word the
    report's ``model.source`` says."""

    kind: RefKind
    given: str
    """The ``--model`` text as given (stripped), for messages."""
    path: Path | None = None
    """``file``: the config.json; ``bundled``: the bundled config; ``gguf``: the first shard."""
    shards: tuple[Path, ...] = ()
    """``gguf``: every shard of the model, in order (one file when it is not split)."""
    folder: Path | None = None
    """The folder ``--model`` named, when it named one (the model id falls back to its name)."""
    repo_id: str | None = None
    """``hub`` and ``hub-gguf``: the repo; ``bundled``: its Hub id."""
    revision: str | None = None
    """The Hub revision (``--revision`` or the URL's); None for local and bundled models."""
    gguf_tag: str | None = None
    """``hub-gguf`` from ``org/repo:TAG``: the text the file's name holds (``Q4_K_M``)."""
    gguf_file: str | None = None
    """``hub-gguf`` from ``--gguf-file`` or a file URL: the file in the repo."""

    def cache_key(self) -> tuple[object, ...]:
        """What the loaded model depends on: this reference, and the size and time of its local files
        (a file changed in place is read again)."""
        stamps: list[tuple[int, int] | None] = []
        local = (self.path, self.path.parent / HF_QUANT_CONFIG) if self.kind == "file" and self.path is not None else ()
        for path in self.shards or local:
            try:
                stat = path.stat()
            except OSError:  # gone since it was resolved: loading says so
                stamps.append(None)
            else:
                stamps.append((stat.st_mtime_ns, stat.st_size))
        return (self.kind, self.path, self.shards, self.folder, self.repo_id, self.revision, self.gguf_tag,
                self.gguf_file, tuple(stamps))


#: The Hub's default branch (huggingface_hub.constants.DEFAULT_REVISION): the revision read when none is given.
DEFAULT_REVISION = "main"


def resolve(model: str, *, revision: str | None = None, gguf_file: str | None = None) -> ModelRef:
    """The kind and place of the model ``model`` names (see the module's docstring for the order). Touches the
    disk (existence, a folder's listing) but never the network; raises a one-line SourceError or InputError."""
    model = model.strip()
    if not model:
        raise SourceError("--model is empty", _MODEL_HINT)
    if len(model) > MAX_MODEL_ARG_CHARS:
        raise SourceError(
            f"--model is {len(model):,} characters long; kvplan's limit is {MAX_MODEL_ARG_CHARS:,} "
            "(longer than any file path or Hub repo id)", _MODEL_HINT,
        )
    if revision is not None:
        validate_revision(revision)
    if gguf_file is not None and not is_gguf_path(gguf_file):
        raise SourceError(f"--gguf-file {gguf_file!r} is not a .gguf file name", "e.g. --gguf-file model-Q4_K_M.gguf")
    if is_url(model):
        return _from_hub_url(model, revision=revision, gguf_file=gguf_file)
    try:
        local = _local(model, gguf_file=gguf_file)
    except OSError as exc:  # a path part longer than NAME_MAX, a folder that cannot be listed ...
        raise SourceError(f"cannot use --model {printable(model[:80])!r}: {exc.strerror or exc}", _MODEL_HINT) from None
    if local is not None:
        return local
    if is_gguf_path(model):
        raise SourceError(f"no such file: {model}", "check the path to the .gguf file")
    tagged = re.match(GGUF_TAG, model)
    if tagged:
        if gguf_file is not None:
            raise InputError(f"--model {model} names a GGUF by its tag and --gguf-file names one by its file",
                             f"pass one of them: --model {tagged['repo']} --gguf-file {gguf_file}, or --model {model}")
        return ModelRef(kind="hub-gguf", given=model, repo_id=tagged["repo"], revision=revision, gguf_tag=tagged["tag"])
    if model.endswith(".json") or model.startswith((".", "/", "~")) or os.sep + os.sep in model:
        raise SourceError(f"no such file: {model}", "check the path to config.json")
    return _from_hub_id(model, given=model, revision=revision, gguf_file=gguf_file)


def _local(model: str, *, gguf_file: str | None) -> ModelRef | None:
    """The local file or folder ``model`` names; None when there is none."""
    path = Path(model).expanduser()
    if not path.exists():
        return None
    if gguf_file is not None:
        raise SourceError(f"--gguf-file picks a file of a Hub repo, but --model {model} is a local path",
                          f"pass the local file itself: --model {path / gguf_file if path.is_dir() else path}")
    if path.is_dir():
        config = path / "config.json"
        if config.is_file():  # a Hugging Face checkout: its config.json wins over any .gguf beside it
            return ModelRef(kind="file", given=model, path=config, folder=path)
        shards = folder_shards(path, label=model)
        if shards is None:
            raise SourceError(f"directory {model} has no config.json and no .gguf model ({_holding(path)})",
                              f"kvplan looked for {path / 'config.json'} (a Hugging Face model) and "
                              f"{path / '*.gguf'} (a GGUF model); point --model at the file, put one there (hf "
                              f"download ORG/NAME config.json --local-dir {path}), or pass a Hub id")
        return ModelRef(kind="gguf", given=model, path=shards[0], shards=tuple(shards), folder=path)
    if is_gguf_path(model):
        shards = file_shards(path)
        return ModelRef(kind="gguf", given=model, path=shards[0], shards=tuple(shards))
    # NOTE: a FIFO or device is read, bounded, as a file.
    return ModelRef(kind="file", given=model, path=path)


def _holding(folder: Path) -> str:
    """What a folder holds, in a few words: ``it is empty``, ``it holds a.txt, b.bin and 3 more``."""
    try:
        names = sorted(entry.name for entry in itertools.islice(folder.iterdir(), 100))
    except OSError as exc:
        return f"it cannot be listed: {exc.strerror or exc}"
    if not names:
        return "it is empty"
    shown = ", ".join(printable(name[:60]) for name in names[:3])
    return f"it holds {shown}" + (f" and {len(names) - 3}{'+' if len(names) == 100 else ''} more" if len(names) > 3 else "")


def _from_hub_url(text: str, *, revision: str | None, gguf_file: str | None) -> ModelRef:
    url = parse_hub_url(text)
    if revision is not None and url.revision is not None and revision != url.revision:
        raise InputError(f"the URL names revision {url.revision!r} and --revision says {revision!r}",
                         "drop --revision, or pass the URL of that revision")
    revision = revision if revision is not None else url.revision
    if url.filename is not None:
        if is_gguf_path(url.filename):
            if gguf_file is not None and gguf_file != url.filename:
                raise InputError(f"the URL names {url.filename} and --gguf-file says {gguf_file}", "drop --gguf-file")
            gguf_file = url.filename
        elif url.filename != "config.json":
            raise SourceError(f"--model {printable(text[:200])} names {printable(url.filename[:100])}; kvplan reads a "
                              "repo's config.json or a .gguf file",
                              f"pass https://huggingface.co/{url.repo_id}, or the URL of a .gguf file in it")
    return _from_hub_id(url.repo_id, given=text, revision=revision, gguf_file=gguf_file)


def _from_hub_id(repo_id: str, *, given: str, revision: str | None, gguf_file: str | None) -> ModelRef:
    """A bundled model, or a repo (and with ``gguf_file``, a GGUF file in it) on the Hub."""
    if gguf_file is not None:
        if not is_repo_id(repo_id):
            raise SourceError(f"--gguf-file picks a file of a Hub repo, but --model {repo_id!r} is not a Hub repo id",
                              "pass the repo as org/name, or a local .gguf file as --model")
        return ModelRef(kind="hub-gguf", given=given, repo_id=repo_id, revision=revision, gguf_file=gguf_file)
    bundled = bundled_index().get(repo_id.lower())
    # NOTE: `main`, the default branch (huggingface_hub's DEFAULT_REVISION: no revision reads it), is what a
    # bundled config was taken from: a URL's /tree/main, /blob/main/config.json or --revision main reads it.
    if bundled is not None and revision in (None, DEFAULT_REVISION) and (repo_id == given or "/" in repo_id):
        return ModelRef(kind="bundled", given=given, path=bundled, repo_id=hub_id_of(bundled))
    if "/" not in repo_id and close_bundled(repo_id):  # a typo of a bundled alias, not a Hub namespace
        raise SourceError(f"--model {repo_id!r} is not a bundled model or a file", suggest_bundled(repo_id))
    if not is_repo_id(repo_id):
        raise SourceError(f"--model {repo_id!r} is neither a file, a bundled model nor a Hub repo id",
                          suggest_bundled(repo_id))
    return ModelRef(kind="hub", given=given, repo_id=repo_id, revision=revision)


# ---- loading: one path per kind ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Geometry:
    """A model read and parsed once: its per-layer geometry, where the config came from, and the config
    itself (capacity counts the weights from it). Attributes of :class:`ModelGeometry` (``layers``,
    ``num_hidden_layers``, ``max_context_tokens`` ...) read through."""

    model_geometry: ModelGeometry
    source: Source
    config: dict[str, Any]
    """The config.json with the ``--set`` overrides in place, so the weights count sees them too (shared by
    every user of the cache: read it, do not change it)."""
    model_id: str
    revision: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """``--set`` overrides applied to ``model_geometry`` (the estimate report echoes them)."""
    gguf: GgufModel | None = None
    """The GGUF model (header and tensor table) when the model is a GGUF file; capacity takes its weights
    from the tensor table (``config`` is then empty)."""

    def __getattr__(self, name: str) -> Any:
        if name == "model_geometry":  # not yet set (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.model_geometry, name)

    def __iter__(self) -> Iterator[Any]:
        """``model_geometry, source = kvplan.load_geometry(...)``: the pair earlier versions returned."""
        return iter((self.model_geometry, self.source))


def normalise_overrides(overrides: Mapping[str, Any] | Iterable[str] | None) -> dict[str, Any]:
    """``--set`` overrides as a dict: a mapping as is, ``KEY=VALUE`` strings parsed."""
    if overrides is None:
        return {}
    if isinstance(overrides, Mapping):
        return dict(overrides)
    return dict(parse_override(item) for item in overrides)


def load(ref: ModelRef, *, token: str | None = None, overrides: Mapping[str, Any] | None = None) -> Geometry:
    """Read and parse the model ``ref`` names: a config.json through :func:`kvplan.models.parse_config` with
    ``overrides`` applied, or a GGUF header (which takes no overrides)."""
    resolved = dict(overrides or {})
    if ref.kind in GGUF_KINDS:
        if resolved:
            raise SourceError("--set overrides config.json keys; a GGUF model is read from its own metadata",
                              "drop --set, or pass the model's config.json")
        gguf = _read_gguf(ref, token=token)
        parsed = gguf.geometry()
        return Geometry(model_geometry=parsed, source=gguf.source, config={}, model_id=parsed.model_id,
                        revision=ref.revision, overrides=MappingProxyType(resolved), gguf=gguf)
    config, source, model_id = read_config(ref, token=token)
    parsed = parse_config(config, model_id=model_id, source_name=model_id, overrides=resolved)
    if source.note:  # e.g. the Hub failed and its cached copy was read
        parsed = replace(parsed, notes=(source.note, *parsed.notes))
    return Geometry(model_geometry=parsed, source=source, config=overridden_config(config, resolved),
                    model_id=model_id, revision=ref.revision, overrides=MappingProxyType(resolved))


def read_config(ref: ModelRef, *, token: str | None = None) -> tuple[dict[str, Any], Source, str]:
    """(config dict, where it came from, model id) of a config.json reference: a local file, a bundled
    model, or a Hub repo."""
    if ref.kind == "file" and ref.path is not None:
        data = read_json_config(ref.path)
        fallback = ref.folder.name if ref.folder is not None else ref.path.stem
        note = ""
        # a checkout's config.json (a folder, or a file of that name) may have hf_quant_config.json beside it
        if data.get("quantization_config") is None and (ref.folder is not None or ref.path.name == "config.json"):
            sidecar, label = read_local_sidecar(ref.path)
            if sidecar is not None:
                data, note = with_quant_sidecar(data, sidecar, label)
        return data, Source(kind="file", location=str(ref.path), note=note), _id_from_config(data, fallback)
    if ref.kind == "bundled" and ref.path is not None and ref.repo_id is not None:
        data = read_json_config(ref.path, label=f"bundled {ref.repo_id}")
        return data, Source(kind="bundled", location=ref.repo_id), ref.repo_id
    if ref.kind == "hub" and ref.repo_id is not None:
        data, source = fetch_hub_config(ref.repo_id, revision=ref.revision, token=token)
        if data.get("quantization_config") is None:
            # a Hub that failed for config.json (answered from the cache) is not asked again
            sidecar, note = fetch_hub_sidecar(ref.repo_id, revision=ref.revision, token=token,
                                              cache_only=bool(source.note))
            if sidecar is not None:
                data, note = with_quant_sidecar(data, sidecar, f"{ref.repo_id} {HF_QUANT_CONFIG}")
            if note:
                source = replace(source, note="; ".join(n for n in (source.note, note) if n))
        return data, source, ref.repo_id
    raise SourceError(f"--model {printable(ref.given[:200])} is a GGUF model, which has no config.json to read",
                      "read it with kvplan.load_geometry (every command does), or pass the model's config.json")


def load_raw_config(model: str, *, revision: str | None = None, token: str | None = None
                    ) -> tuple[dict[str, Any], Source, str]:
    """(config dict, where it came from, model id) for ``--model``, unparsed (the transformers cross-check
    builds the model from it); a GGUF reference is refused."""
    return read_config(resolve(model, revision=revision), token=token)


def _read_gguf(ref: ModelRef, *, token: str | None) -> GgufModel:
    # NOTE: the GGUF reader (its imports cost 10-15 % of kvplan.api's own) loads only for a GGUF reference, as a
    # family module loads only for its model_type; llama.cpp's gguf package and numpy load when a header is read.
    from kvplan.gguf.model import read_hub, read_local

    if ref.kind == "gguf":
        try:
            return read_local(ref.shards)
        except OSError as exc:
            raise SourceError(f"cannot use --model {printable(ref.given[:80])!r}: {exc.strerror or exc}",
                              _MODEL_HINT) from None
    assert ref.repo_id is not None
    return read_hub(ref.repo_id, tag=ref.gguf_tag, gguf_file=ref.gguf_file, revision=ref.revision, token=token)


def _id_from_config(data: dict[str, Any], fallback: str) -> str:
    meta = data.get("_kvplan")
    if isinstance(meta, dict) and isinstance(meta.get("hub_id"), str):
        return meta["hub_id"]
    name = data.get("_name_or_path")
    if isinstance(name, str) and name and not name.startswith((".", "/")):
        return name
    return fallback
