"""Find a model's config.json: a local path, a bundled model, or the Hugging Face Hub.

The Hub client is imported inside :func:`fetch_hub_config`, so local and bundled models never
import huggingface_hub.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, SourceError
from kvplan.hubref import is_repo_id, validate_revision
from kvplan.limits import MAX_MODEL_ARG_CHARS
from kvplan.report import Source
from kvplan.textsafe import printable


def bundled_dir() -> Path:
    """``model_configs/``: inside the installed package, or beside it in a source checkout."""
    # NOTE: the package's own folder, as importlib.resources.files("kvplan") names it for an installed
    # package (kvplan ships as plain files); importing importlib.resources costs `kvplan estimate` ~4 ms.
    installed = Path(__file__).resolve().parent / "model_configs"
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
    """A config.json as a dict: size, encoding, nesting and integer length bounded (kvplan.safeload)."""
    from kvplan.safeload import load_json, read_bounded_text

    label = label or str(path)
    text = read_bounded_text(path, label=label, what="config.json", error=ConfigError)
    data = load_json(text, label=label, error=ConfigError, hint="fix the file, or download config.json again")
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
    check_model_arg(model)
    if revision is not None:
        validate_revision(revision)
    _refuse_gguf(model)
    path = Path(model).expanduser()
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError as exc:  # a path part longer than NAME_MAX, ...
        raise SourceError(f"cannot use --model {printable(model[:80])!r}: {exc.strerror or exc}",
                          "pass a Hub id, a bundled alias (kvplan models) or a config.json path") from None
    if is_dir:
        config_path = path / "config.json"
        if not config_path.is_file():
            raise SourceError(f"directory {model} has no config.json", "point --model at the config.json itself")
        data = read_json_config(config_path)
        return data, Source(kind="file", location=str(config_path)), _id_from_config(data, path.name)
    if is_file or (path.exists() and not is_dir):  # a FIFO or device is read, bounded, as a file
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
    if not is_repo_id(model):
        raise SourceError(
            f"--model {model!r} is neither a file, a bundled model nor a Hub repo id",
            _suggest(model),
        )
    data, _location, note = fetch_hub_config_noted(model, revision=revision, token=token)
    if note:
        return data, CachedHubSource(kind="hub", location=model, revision=revision, note=note), model
    return data, Source(kind="hub", location=model, revision=revision), model


def check_model_arg(model: str) -> None:
    """Refuse a --model longer than any file path or Hub repo id, before anything touches the disk."""
    if len(model) > MAX_MODEL_ARG_CHARS:
        raise SourceError(
            f"--model is {len(model):,} characters long; kvplan's limit is {MAX_MODEL_ARG_CHARS:,} "
            "(longer than any file path or Hub repo id)",
            "pass a Hub id, a bundled alias (kvplan models) or a config.json path",
        )


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
    check_model_arg(model.strip())
    if revision is not None:
        validate_revision(revision)
    try:
        if not _may_be_gguf(model.strip(), gguf_file):
            return None  # NOTE: kvplan.gguf is imported only for what may be a GGUF reference
        from kvplan.gguf import load_gguf

        found = load_gguf(model.strip(), gguf_file=gguf_file, revision=revision, token=token)
    except OSError as exc:  # a path part longer than NAME_MAX, ...
        raise SourceError(f"cannot use --model {printable(model[:80])!r}: {exc.strerror or exc}",
                          "pass a Hub id, a bundled alias (kvplan models) or a config.json path") from None
    if found is not None and overrides:
        raise SourceError("--set overrides config.json keys; a GGUF model is read from its own metadata",
                          "drop --set, or pass the model's config.json")
    return found


def _may_be_gguf(model: str, gguf_file: str | None) -> bool:
    """Whether ``kvplan.gguf.load_gguf`` could take ``model``: a ``--gguf-file``, ``org/repo:TAG``, a
    ``.gguf`` path or a folder (a bundled id or config.json never is)."""
    return (gguf_file is not None or ":" in model or model.lower().endswith(".gguf")
            or Path(model).expanduser().is_dir())


def _refuse_gguf(model: str) -> None:
    if ":" not in model and not model.lower().endswith(".gguf"):
        return  # NOTE: cannot be a GGUF reference; kvplan.gguf is not imported
    from kvplan.gguf import hub_reference
    from kvplan.gguf.files import is_gguf_path

    if is_gguf_path(model) or hub_reference(model, None) is not None:
        raise SourceError(f"--model {model} is a GGUF model, which has no config.json to read",
                          "read it with kvplan.load_geometry (every command does), or pass the model's config.json")


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
    import difflib

    index = bundled_index()
    close = difflib.get_close_matches(model.lower(), list(index), n=3, cutoff=0.8)
    spelled = {name.lower(): name for name in bundled_ids()}
    return [spelled.get(name, name) for name in close]


def _suggest(model: str) -> str:
    import difflib

    close = _close_bundled(model) or difflib.get_close_matches(model.lower(), list(bundled_index()), n=3, cutoff=0.6)
    if close:
        return f"did you mean {', '.join(close)}? (kvplan models lists the bundled models)"
    return "kvplan models lists the bundled models; or pass a local config.json"


#: Seconds one Hub fetch may take in all (connect, reads, retries), unless KVPLAN_HUB_TIMEOUT says.
DEFAULT_HUB_TIMEOUT = 20.0


def hub_timeout() -> float:
    """The overall deadline of one Hub fetch: ``KVPLAN_HUB_TIMEOUT`` seconds (default 20)."""
    raw = os.environ.get("KVPLAN_HUB_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_HUB_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise SourceError(f"KVPLAN_HUB_TIMEOUT={printable(raw[:40])!r} is not a number of seconds from 0 to 3600",
                          "e.g. KVPLAN_HUB_TIMEOUT=20")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class CachedHubSource(Source):
    """A Hub model answered from the local Hub cache because the Hub failed."""

    note: str = ""


def source_notes(source: Source) -> tuple[str, ...]:
    """Notes about where the config came from (a Hub failure answered from the cache)."""
    note = getattr(source, "note", "")
    return (note,) if note else ()


def _hub_failure(exc: BaseException, endpoint: str) -> str | None:
    """What went wrong talking to the Hub, from the exception and its causes; None when unknown."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 20:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for item in chain:
        name = type(item).__name__
        status = getattr(getattr(item, "response", None), "status_code", None)
        if isinstance(status, int) and status >= 400:
            return _hub_failure_status(status, endpoint)
        if name == "TooManyRedirects":
            return f"the Hub ({endpoint}) redirected in a loop"
        if name in ("RemoteProtocolError", "IncompleteRead", "ChunkedEncodingError") or "Consistency check" in str(item):
            return f"the Hub ({endpoint}) closed the connection before the whole config.json arrived"
        if "Timeout" in name or isinstance(item, TimeoutError):
            return f"the Hub ({endpoint}) timed out"
        if name in ("ConnectError", "ConnectionError") or isinstance(item, ConnectionError):
            return f"the Hub ({endpoint}) cannot be reached"
    return None


def fetch_hub_config(repo_id: str, *, revision: str | None, token: str | None) -> tuple[dict[str, Any], str]:
    """config.json of a Hub repo (config only, through the hub cache). Honours HF_ENDPOINT,
    HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_CACHE / HF_HOME as read at call time.

    One deadline (``KVPLAN_HUB_TIMEOUT``) bounds the whole fetch: connect, reads and
    huggingface_hub's retries. When the Hub fails (timeout, 5xx, 429, a redirect loop, a short
    body) a cached copy answers, with a note; otherwise the error names what happened.
    """
    data, location, _note = fetch_hub_config_noted(repo_id, revision=revision, token=token)
    return data, location


def fetch_hub_config_noted(
    repo_id: str, *, revision: str | None, token: str | None
) -> tuple[dict[str, Any], str, str]:
    """(config, local path, note): the note is empty unless a Hub failure was answered from the cache."""
    if not is_repo_id(repo_id):
        raise SourceError(f"{printable(repo_id[:100])!r} is not a Hub repo id", "a Hub repo id is org/name")
    if revision is not None:
        validate_revision(revision)
    try:
        from huggingface_hub import errors as hub_errors
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency
        raise SourceError(
            f"{repo_id} is not bundled and huggingface_hub is not installed", "pip install huggingface-hub"
        ) from None

    offline = any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )
    timeout = hub_timeout()
    deadline = time.monotonic() + timeout
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None
    )
    label = f"{repo_id}" + (f"@{revision}" if revision else "")
    from huggingface_hub import constants as hub_constants
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    # NOTE: the library reads HF_HUB_OFFLINE once, at import; follow the environment of this call.
    hub_constants.HF_HUB_OFFLINE = offline
    # NOTE: each read may wait at most the whole deadline; the deadline below bounds the retries.
    hub_constants.HF_HUB_DOWNLOAD_TIMEOUT = max(1, int(timeout))
    watch = _hub_log_watch()
    watch.hook_session()
    kwargs = {"revision": revision, "token": token or os.environ.get("HF_TOKEN") or None, "endpoint": endpoint,
              "cache_dir": cache_dir, "etag_timeout": timeout}

    def cached_or_fail(failure: str) -> tuple[dict[str, Any], str, str]:
        cached = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
        if isinstance(cached, str) and os.path.isfile(cached):
            note = f"{failure}; config.json of {label} read from the local Hub cache ({cached})"
            return read_json_config(Path(cached), label=f"{label} config.json (cached)"), cached, note
        if _close_bundled(repo_id):
            raise SourceError(f"{label} is not bundled, not in the Hub cache, and {failure}", _suggest(repo_id))
        raise SourceError(
            f"{label} is not bundled, not in the Hub cache, and {failure}",
            f"{len(bundled_ids())} models are bundled and work offline (kvplan models lists them, e.g. "
            "meta-llama/Llama-3.1-8B); or pass a local config.json",
        )

    if offline:
        try:
            local = hf_hub_download(repo_id, "config.json", local_files_only=True, **kwargs)
        except hub_errors.LocalEntryNotFoundError:
            return cached_or_fail("offline mode is on (HF_HUB_OFFLINE)")
        return read_json_config(Path(local), label=f"{label} config.json"), str(local), ""

    if not _reachable(endpoint, timeout=min(3.0, timeout)):
        # NOTE: fail fast (no 20 s of retries) and fall back to the hub cache.
        return cached_or_fail(f"the Hub ({endpoint}) cannot be reached")

    outcome: dict[str, Any] = {}

    def download() -> None:
        try:
            outcome["path"] = hf_hub_download(repo_id, "config.json", local_files_only=False, **kwargs)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    # NOTE: huggingface_hub retries 5xx and 429 with back-off (up to 5 times) and follows each read's
    # own timeout; a thread joined against the deadline bounds all of it. The thread is a daemon, so a
    # Hub that never answers cannot keep the process alive.
    started = time.time()
    worker = threading.Thread(target=download, name=f"kvplan-hub-fetch-{next(_FETCHES)}", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    seen = watch.failure(worker.name, endpoint)
    if worker.is_alive():
        watch.abandon(worker.name)
        return cached_or_fail(f"{seen}, and kept failing on retries for {timeout:g} s (KVPLAN_HUB_TIMEOUT)"
                               if seen else
                               f"the Hub ({endpoint}) did not answer within {timeout:g} s (KVPLAN_HUB_TIMEOUT)")
    exc = outcome.get("error")
    if exc is None:
        local = outcome["path"]
        note = ""
        if seen and os.path.getmtime(os.path.realpath(local)) < started:
            # NOTE: huggingface_hub itself answers from its cache when the metadata request fails.
            note = f"{seen}; config.json of {label} read from the local Hub cache ({local})"
        return read_json_config(Path(local), label=f"{label} config.json"), str(local), note
    if isinstance(exc, hub_errors.GatedRepoError):
        raise SourceError(
            f"{repo_id} is gated: your token is missing or has not been granted access",
            f"accept the licence at https://huggingface.co/{repo_id}, then set HF_TOKEN or pass --token",
        ) from None
    if isinstance(exc, hub_errors.RevisionNotFoundError):
        raise SourceError(f"revision {revision!r} of {repo_id} was not found on the Hub", "check --revision") from None
    if isinstance(exc, hub_errors.RepositoryNotFoundError):
        raise SourceError(
            f"{repo_id} was not found on the Hugging Face Hub (or it is private)",
            "check the repo id; for a private repo set HF_TOKEN or pass --token; " + _suggest(repo_id),
        ) from None
    if isinstance(exc, hub_errors.EntryNotFoundError) and not isinstance(exc, hub_errors.LocalEntryNotFoundError):
        raise SourceError(f"{label} has no config.json", "pass a local config.json instead") from None
    failure = _hub_failure(exc, endpoint)
    if failure is not None and ("HTTP 401" in failure or "HTTP 403" in failure):
        raise SourceError(f"{label}: {failure}", "set HF_TOKEN or pass --token with a token that can read this repo")
    if failure is None:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        failure = f"fetching config.json failed: {printable(text[:200])}"
    return cached_or_fail(failure)


class _AbandonedFetch(RuntimeError):
    """Raised in a fetch thread that kvplan stopped waiting for."""


class _HubLogWatch:
    """Keeps huggingface_hub's retry warnings off the terminal and remembers the last one per thread,
    so a fetch cut short by the deadline can say what the Hub kept answering (HTTP 500, 429...)."""

    def __init__(self) -> None:
        import logging

        self.last: dict[str | None, str] = {}
        self.abandoned: set[str] = set()
        watch = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if len(watch.last) > 64:
                    watch.last.clear()
                message = record.getMessage()
                if not message.startswith("Retrying in"):
                    watch.last[record.threadName] = message

        handler = Handler(logging.WARNING)
        # NOTE: the loggers of huggingface_hub's retries and resumed downloads; not propagating keeps
        # them off stderr, even from a fetch still retrying after the deadline.
        for name in ("huggingface_hub.utils._http", "huggingface_hub.file_download"):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            logger.setLevel(logging.WARNING)
            logger.propagate = False

    def hook_session(self) -> None:
        """Record every HTTP error status huggingface_hub's client receives, by thread: the library
        answers from its cache without a word when a metadata request fails."""
        from huggingface_hub.utils import get_session

        session = get_session()
        hooks = session.event_hooks
        if self.on_response not in hooks.get("response", []):
            session.event_hooks = {**hooks, "request": [*hooks.get("request", []), self.on_request],
                                   "response": [*hooks.get("response", []), self.on_response]}

    def abandon(self, thread: str) -> None:
        """A fetch past its deadline makes no further request (its retries stop at the next one)."""
        self.abandoned.add(thread)

    def on_request(self, request: Any) -> None:
        if threading.current_thread().name in self.abandoned:
            raise _AbandonedFetch("kvplan gave up on this Hub fetch at its deadline")

    def on_response(self, response: Any) -> None:
        if response.status_code >= 400 and response.status_code != 404:  # 404s are raised as such
            self.last[threading.current_thread().name] = f"HTTP Error {response.status_code} thrown"

    def failure(self, thread: str, endpoint: str) -> str | None:
        import re

        message = self.last.get(thread, "")
        status = re.search(r"HTTP Error (\d{3})", message)
        if status:
            return _hub_failure_status(int(status.group(1)), endpoint)
        if "Rate limited" in message:
            return _hub_failure_status(429, endpoint)
        if "complete message body" in message or "resume download" in message:
            return f"the Hub ({endpoint}) closed the connection before the whole config.json arrived"
        if "timed out" in message.lower():
            return f"the Hub ({endpoint}) timed out"
        return None


_FETCHES = itertools.count(1)


@lru_cache(maxsize=1)
def _hub_log_watch() -> _HubLogWatch:
    return _HubLogWatch()


def _hub_failure_status(status: int, endpoint: str) -> str:
    meaning = {429: "rate limited", 500: "internal error", 502: "bad gateway", 503: "unavailable",
               504: "gateway timeout", 401: "unauthorised", 403: "forbidden"}.get(status, "error")
    return f"the Hub ({endpoint}) answered HTTP {status} ({meaning})"


def _reachable(endpoint: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub endpoint opens within ``timeout`` seconds."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port out of range
        return False
    if not host:
        return False
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True
