"""Where a model's config comes from: the :class:`Source` a report names, the bundled configs, reading a
config.json (bounded), and fetching one from the Hugging Face Hub.

Which of them ``--model`` names is decided once, in :mod:`kvplan.modelref`. The Hub client is imported
inside :func:`fetch_hub_config`, so local and bundled models never import huggingface_hub.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kvplan.errors import ConfigError, SourceError
from kvplan.hubref import is_repo_id, validate_revision
from kvplan.limits import MAX_FILE_BYTES
from kvplan.safeload import load_json, read_bounded_text
from kvplan.textsafe import printable


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    """Where a model config came from."""

    kind: str
    """``file``, ``bundled``, ``hub``, ``gguf`` (a local .gguf file or split set: ``location`` is its first
    file) or ``hub-gguf`` (``location`` is ``org/repo/file.gguf``)."""
    location: str
    """The file path, or the repo id for the Hub."""
    revision: str | None = None
    note: str = ""
    """Said in the model's notes when set: a Hub failure answered from the local Hub cache."""


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
    label = label or str(path)
    text = read_bounded_text(path, label=label, what="config.json", error=ConfigError)
    data = load_json(text, label=label, error=ConfigError, hint="fix the file, or download config.json again")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{label} must hold a JSON object, got {type(data).__name__}", "pass a Hugging Face config.json"
        )
    return data


def close_bundled(model: str) -> list[str]:
    """Bundled ids and aliases (as written) close to ``model``: the "did you mean" of a typo."""
    # NOTE: difflib (~4 ms to import) is needed only for a name that is not found.
    import difflib

    index = bundled_index()
    close = difflib.get_close_matches(model.lower(), list(index), n=3, cutoff=0.8)
    spelled = {name.lower(): name for name in bundled_ids()}
    return [spelled.get(name, name) for name in close]


def suggest_bundled(model: str) -> str:
    """A hint naming the bundled models closest to ``model``, or how to list them."""
    import difflib

    close = close_bundled(model) or difflib.get_close_matches(model.lower(), list(bundled_index()), n=3, cutoff=0.6)
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


def fetch_hub_config(repo_id: str, *, revision: str | None, token: str | None) -> tuple[dict[str, Any], Source]:
    """config.json of a Hub repo (config only, through the hub cache) and its :class:`Source`. Honours
    HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_CACHE / HF_HOME as read at call time.

    One deadline (``KVPLAN_HUB_TIMEOUT``) bounds the whole fetch: connect, reads and
    huggingface_hub's retries. When the Hub fails (timeout, 5xx, 429, a redirect loop, a short
    body) a cached copy answers, with a note (``Source.note``); otherwise the error names what happened.
    """
    data, note = _fetch_hub_config(repo_id, revision=revision, token=token)
    return data, Source(kind="hub", location=repo_id, revision=revision, note=note)


def _fetch_hub_config(repo_id: str, *, revision: str | None, token: str | None) -> tuple[dict[str, Any], str]:
    """(config, note): the note is empty unless a Hub failure was answered from the cache."""
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
    hub_token = token or os.environ.get("HF_TOKEN") or None

    def fetch(*, local_files_only: bool) -> str:
        return hf_hub_download(repo_id, "config.json", revision=revision, token=hub_token, endpoint=endpoint,
                               cache_dir=cache_dir, etag_timeout=timeout, local_files_only=local_files_only,
                               tqdm_class=_bounded_progress())

    def cached_or_fail(failure: str) -> tuple[dict[str, Any], str]:
        cached = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
        if isinstance(cached, str) and os.path.isfile(cached):
            note = f"{failure}; config.json of {label} read from the local Hub cache ({cached})"
            return read_json_config(Path(cached), label=f"{label} config.json (cached)"), note
        if close_bundled(repo_id):
            raise SourceError(f"{label} is not bundled, not in the Hub cache, and {failure}", suggest_bundled(repo_id))
        raise SourceError(
            f"{label} is not bundled, not in the Hub cache, and {failure}",
            f"{len(bundled_ids())} models are bundled and work offline (kvplan models lists them, e.g. "
            "meta-llama/Llama-3.1-8B); or pass a local config.json",
        )

    if offline:
        try:
            local = fetch(local_files_only=True)
        except hub_errors.LocalEntryNotFoundError:
            return cached_or_fail("offline mode is on (HF_HUB_OFFLINE)")
        return read_json_config(Path(local), label=f"{label} config.json"), ""

    if not _reachable(endpoint, timeout=min(3.0, timeout)):
        # NOTE: fail fast (no 20 s of retries) and fall back to the hub cache.
        return cached_or_fail(f"the Hub ({endpoint}) cannot be reached")

    outcome: dict[str, Any] = {}

    def download() -> None:
        try:
            outcome["path"] = fetch(local_files_only=False)
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
        return read_json_config(Path(local), label=f"{label} config.json"), note
    if isinstance(exc, _TooLarge):
        raise SourceError(
            f"{label} config.json is {exc.what} than kvplan's {MAX_FILE_BYTES // 1024**2} MiB limit for a config.json; "
            "the download was stopped there", "a real config.json is far smaller; check the repo id") from None
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
            "check the repo id; for a private repo set HF_TOKEN or pass --token; " + suggest_bundled(repo_id),
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


#: NVIDIA ModelOpt's file beside config.json: ``{"producer": {"name": "modelopt"}, "quantization": {...}}``. Many
#: ModelOpt exports (nvidia/*-FP8, *-NVFP4) say their quantisation only here; vLLM (``get_config_filenames``), SGLang
#: and TensorRT-LLM read it when config.json has no ``quantization_config``.
HF_QUANT_CONFIG = "hf_quant_config.json"


def with_quant_sidecar(config: dict[str, Any], sidecar: Any, label: str) -> tuple[dict[str, Any], str]:
    """(config, note): ``config`` with the ModelOpt ``quantization`` of hf_quant_config.json as its
    ``quantization_config`` (``quant_method: modelopt``, as transformers writes it), when config.json names none;
    ``_kvplan.quantization_config_file`` says where it came from. Another producer's file is left out, noted."""
    if config.get("quantization_config") is not None:
        return config, ""
    if not isinstance(sidecar, dict):
        raise ConfigError(f"{label} must hold a JSON object, got {type(sidecar).__name__}",
                          f"fix or remove {HF_QUANT_CONFIG}")
    producer = sidecar.get("producer")
    name = producer.get("name") if isinstance(producer, dict) else None
    quantization = sidecar.get("quantization")
    if not (isinstance(name, str) and name.lower() == "modelopt" and isinstance(quantization, dict)):
        return config, (f"{label} is not a ModelOpt export (producer.name modelopt with a quantization object): "
                        "not read")
    meta = config.get("_kvplan")
    marked = {**(meta if isinstance(meta, dict) else {}), "quantization_config_file": HF_QUANT_CONFIG}
    return {**config, "quantization_config": {"quant_method": "modelopt", **quantization}, "_kvplan": marked}, ""


def read_local_sidecar(config_path: Path) -> tuple[dict[str, Any] | None, str]:
    """(hf_quant_config.json beside ``config_path`` or None, its label)."""
    path = config_path.parent / HF_QUANT_CONFIG
    if not path.is_file():
        return None, str(path)
    return read_json_config(path, label=str(path)), str(path)


def fetch_hub_sidecar(repo_id: str, *, revision: str | None, token: str | None, cache_only: bool = False,
                      ) -> tuple[dict[str, Any] | None, str]:
    """(hf_quant_config.json of a Hub repo or None, a note when it could not be read). Called after
    :func:`fetch_hub_config` answered: the same endpoint, cache and token, within one more KVPLAN_HUB_TIMEOUT; a repo
    without the file (the common case) is None without a note. Offline mode, and ``cache_only`` (config.json itself
    came from the cache because the Hub failed), read only the Hub cache."""
    from huggingface_hub import errors as hub_errors
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    offline = any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
                  for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None
    )
    label = f"{repo_id}" + (f"@{revision}" if revision else "") + f" {HF_QUANT_CONFIG}"
    if offline or cache_only:
        cached = try_to_load_from_cache(repo_id, HF_QUANT_CONFIG, cache_dir=cache_dir, revision=revision)
        if isinstance(cached, str) and os.path.isfile(cached):
            return read_json_config(Path(cached), label=f"{label} (cached)"), ""
        return None, ""  # not cached, or cached as absent
    timeout = hub_timeout()
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    outcome: dict[str, Any] = {}

    def download() -> None:
        try:
            outcome["path"] = hf_hub_download(repo_id, HF_QUANT_CONFIG, revision=revision,
                                              token=token or os.environ.get("HF_TOKEN") or None, endpoint=endpoint,
                                              cache_dir=cache_dir, etag_timeout=timeout,
                                              tqdm_class=_bounded_progress())
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=download, name=f"kvplan-hub-fetch-{next(_FETCHES)}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return None, f"{label} not read: the Hub did not answer within {timeout:g} s (KVPLAN_HUB_TIMEOUT)"
    exc = outcome.get("error")
    if exc is None:
        return read_json_config(Path(outcome["path"]), label=label), ""
    if isinstance(exc, hub_errors.EntryNotFoundError) and not isinstance(exc, hub_errors.LocalEntryNotFoundError):
        return None, ""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None, f"{label} not read ({printable(text[:200])}): a quantisation it names is not counted"


class _TooLarge(Exception):
    """A Hub download past :data:`~kvplan.limits.MAX_FILE_BYTES`, stopped as it came in."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@lru_cache(maxsize=1)
def _bounded_progress() -> type:
    """huggingface_hub's (silent) progress bar, raising :class:`_TooLarge` when the announced size or the bytes
    received pass the config.json limit: huggingface_hub's ``http_get`` reports every chunk to it before writing
    the chunk, so at most one chunk (10 MiB) past the limit is read, whatever the body's length."""
    from huggingface_hub.utils import tqdm as hub_tqdm

    class BoundedProgress(hub_tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.received = int(kwargs.get("initial") or 0)
            total = kwargs.get("total")
            if isinstance(total, int) and total > MAX_FILE_BYTES:
                self.close()
                raise _TooLarge(f"{total:,} bytes, larger")

        def update(self, n: float | None = 1) -> bool | None:
            self.received += int(n or 0)
            if self.received > MAX_FILE_BYTES:
                raise _TooLarge("larger")
            return super().update(n)

    return BoundedProgress


class _AbandonedFetch(RuntimeError):
    """Raised in a fetch thread that kvplan stopped waiting for."""


class _HubLogWatch:
    """Keeps huggingface_hub's retry warnings off the terminal and remembers the last one per thread,
    so a fetch cut short by the deadline can say what the Hub kept answering (HTTP 500, 429...)."""

    def __init__(self) -> None:
        # NOTE: logging (~4 ms to import) is needed only for a Hub fetch.
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
    # NOTE: socket (~4 ms to import) is needed only for a Hub fetch.
    import socket

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
