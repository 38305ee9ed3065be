"""Find a model's config.json: a local path, a bundled model, or the Hugging Face Hub.

The Hub client is imported inside :func:`fetch_hub_config`, so local and bundled models never
import huggingface_hub.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, SourceError
from kvplan.report import Source

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def bundled_dir() -> Path:
    """``model_configs/``: inside the installed package, or beside it in a source checkout."""
    installed = Path(str(files("kvplan"))) / "model_configs"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent / "model_configs"


@lru_cache(maxsize=1)
def bundled_index() -> dict[str, Path]:
    """Lower-cased Hub id and short alias (the repo name) -> file. Hub ids win over aliases."""
    index: dict[str, Path] = {}
    aliases: dict[str, Path] = {}
    folder = bundled_dir()
    if not folder.is_dir():
        return index
    for path in sorted(folder.glob("*.json")):
        org, sep, name = path.stem.partition("__")
        if not sep:
            continue
        index[f"{org}/{name}".lower()] = path
        aliases.setdefault(name.lower(), path)
    for alias, path in aliases.items():
        index.setdefault(alias, path)
    return index


def bundled_ids() -> list[str]:
    """Hub ids of the bundled models, sorted."""
    return sorted(
        {f"{p.stem.partition('__')[0]}/{p.stem.partition('__')[2]}" for p in bundled_index().values()},
        key=str.lower,
    )


def hub_id_of(path: Path) -> str:
    org, _, name = path.stem.partition("__")
    return f"{org}/{name}"


def read_json_config(path: Path, *, label: str | None = None) -> dict[str, Any]:
    label = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot read {label}: {exc.strerror or exc}", "check the path and its permissions") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{label} is not UTF-8 text", "pass a Hugging Face config.json") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{label} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "fix the file, or download config.json again",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{label} must hold a JSON object, got {type(data).__name__}", "pass a Hugging Face config.json"
        )
    return data


def load_raw_config(
    model: str, *, revision: str | None = None, token: str | None = None
) -> tuple[dict[str, Any], Source, str]:
    """(config dict, where it came from, model id) for ``--model``.

    Order: (1) a path to a config.json or a directory holding one; (2) a bundled model by Hub id
    or short alias, case-insensitive; (3) any other Hub repo id, fetched with huggingface_hub.
    """
    model = model.strip()
    if not model:
        raise SourceError("--model is empty", "pass a Hub id, a bundled alias (kvplan models) or a config.json path")
    _refuse_gguf(model)
    path = Path(model).expanduser()
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise SourceError(f"directory {model} has no config.json", "point --model at the config.json itself")
        data = read_json_config(config_path)
        return data, Source(kind="file", location=str(config_path)), _id_from_config(data, path.name)
    if path.is_file():
        data = read_json_config(path)
        return data, Source(kind="file", location=str(path)), _id_from_config(data, path.stem)
    if model.endswith(".json") or model.startswith((".", "/", "~")) or os.sep + os.sep in model:
        raise SourceError(f"no such file: {model}", "check the path to config.json")

    bundled = bundled_index().get(model.lower())
    if bundled is not None and revision is None:
        data = read_json_config(bundled, label=f"bundled {hub_id_of(bundled)}")
        return data, Source(kind="bundled", location=hub_id_of(bundled)), hub_id_of(bundled)

    if "/" not in model and _close_bundled(model):  # a typo of a bundled alias, not a Hub namespace
        raise SourceError(f"--model {model!r} is not a bundled model or a file", _suggest(model))
    if not _REPO_ID.match(model):
        raise SourceError(
            f"--model {model!r} is neither a file, a bundled model nor a Hub repo id",
            _suggest(model),
        )
    data, _location = fetch_hub_config(model, revision=revision, token=token)
    return data, Source(kind="hub", location=model, revision=revision), model


def load_gguf_model(
    model: str,
    *,
    gguf_file: str | None = None,
    revision: str | None = None,
    token: str | None = None,
    overrides: object = None,
) -> Any:
    """The GGUF model ``model`` names (a ``.gguf`` path or folder, ``org/repo:TAG``, or a repo with
    ``gguf_file``), header read; None when ``model`` is not a GGUF reference."""
    from kvplan.gguf import load_gguf

    found = load_gguf(model.strip(), gguf_file=gguf_file, revision=revision, token=token)
    if found is not None and overrides:
        raise SourceError("--set overrides config.json keys; a GGUF model is read from its own metadata",
                          "drop --set, or pass the model's config.json")
    return found


def _refuse_gguf(model: str) -> None:
    from kvplan.gguf import hub_reference
    from kvplan.gguf.files import is_gguf_path

    if is_gguf_path(model) or hub_reference(model, None) is not None:
        raise SourceError(f"--model {model} is a GGUF model, which this command does not read yet",
                          "kvplan estimate reads GGUF files; for this command pass the model's config.json")


def _id_from_config(data: dict[str, Any], fallback: str) -> str:
    meta = data.get("_kvplan")
    if isinstance(meta, dict) and isinstance(meta.get("hub_id"), str):
        return meta["hub_id"]
    name = data.get("_name_or_path")
    if isinstance(name, str) and name and not name.startswith((".", "/")):
        return name
    return fallback


def _close_bundled(model: str) -> list[str]:
    """Bundled ids and aliases (as written) close to ``model``: the "did you mean" of a typo."""
    index = bundled_index()
    close = difflib.get_close_matches(model.lower(), list(index), n=3, cutoff=0.8)
    spelled = {name.lower(): name for name in bundled_ids()}
    return [spelled.get(name, name) for name in close]


def _suggest(model: str) -> str:
    close = _close_bundled(model) or difflib.get_close_matches(model.lower(), list(bundled_index()), n=3, cutoff=0.6)
    if close:
        return f"did you mean {', '.join(close)}? (kvplan models lists the bundled models)"
    return "kvplan models lists the bundled models; or pass a local config.json"


def fetch_hub_config(repo_id: str, *, revision: str | None, token: str | None) -> tuple[dict[str, Any], str]:
    """config.json of a Hub repo (config only, through the hub cache). Honours HF_ENDPOINT,
    HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_CACHE / HF_HOME as read at call time."""
    try:
        from huggingface_hub import errors as hub_errors
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - a dependency
        raise SourceError(
            f"{repo_id} is not bundled and huggingface_hub is not installed", "pip install huggingface-hub"
        ) from None

    offline = any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    unreachable = False
    if not offline and not _reachable(endpoint):
        # NOTE: fail fast (no 20 s of retries) and fall back to the hub cache.
        offline = unreachable = True
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None
    )
    label = f"{repo_id}" + (f"@{revision}" if revision else "")
    import logging

    from huggingface_hub import constants as hub_constants
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    # NOTE: the library reads HF_HUB_OFFLINE once, at import; follow the environment of this call.
    hub_constants.HF_HUB_OFFLINE = offline
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    try:
        local = hf_hub_download(
            repo_id,
            "config.json",
            revision=revision,
            token=token or os.environ.get("HF_TOKEN") or None,
            endpoint=endpoint,
            cache_dir=cache_dir,
            local_files_only=offline,
            etag_timeout=float(os.environ.get("KVPLAN_HUB_TIMEOUT", "10")),
        )
    except hub_errors.GatedRepoError:
        raise SourceError(
            f"{repo_id} is gated: your token is missing or has not been granted access",
            f"accept the licence at https://huggingface.co/{repo_id}, then set HF_TOKEN or pass --token",
        ) from None
    except hub_errors.RevisionNotFoundError:
        raise SourceError(f"revision {revision!r} of {repo_id} was not found on the Hub", "check --revision") from None
    except hub_errors.RepositoryNotFoundError:
        raise SourceError(
            f"{repo_id} was not found on the Hugging Face Hub (or it is private)",
            "check the repo id; for a private repo set HF_TOKEN or pass --token; " + _suggest(repo_id),
        ) from None
    except hub_errors.LocalEntryNotFoundError:
        why = f"the Hub ({endpoint}) cannot be reached" if unreachable else "offline mode is on (HF_HUB_OFFLINE)"
        if _close_bundled(repo_id):
            raise SourceError(f"{label} is not bundled, not in the Hub cache, and {why}", _suggest(repo_id)) from None
        raise SourceError(
            f"{label} is not bundled, not in the Hub cache, and {why}",
            f"{len(bundled_ids())} models are bundled and work offline (kvplan models lists them, e.g. "
            "meta-llama/Llama-3.1-8B); or pass a local config.json",
        ) from None
    except hub_errors.EntryNotFoundError:
        raise SourceError(f"{label} has no config.json", "pass a local config.json instead") from None
    except hub_errors.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise SourceError(
                f"{label}: the Hub refused access (HTTP {status})",
                "set HF_TOKEN or pass --token with a token that can read this repo",
            ) from None
        raise SourceError(f"{label}: the Hub answered HTTP {status}: {str(exc).splitlines()[0]}", "try again later") from None
    except (OSError, ValueError) as exc:
        raise SourceError(
            f"{label}: could not fetch config.json: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "check the network, or use a bundled model (kvplan models) or a local config.json",
        ) from None
    return read_json_config(Path(local), label=f"{label} config.json"), str(local)


def _reachable(endpoint: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub endpoint opens within ``timeout`` seconds."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError:
        return False
    return True
