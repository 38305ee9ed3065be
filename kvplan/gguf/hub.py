"""A GGUF file on the Hugging Face Hub, read through HTTP Range requests: the header only.

``org/repo:Q4_K_M`` picks the file whose name holds the tag (as llama.cpp's ``-hf`` does), from the
repo's file list; ``--gguf-file NAME`` names it. The header is read in growing ranges (1 MiB, then
doubling) until it parses, so a 200 GB file costs a few megabytes. huggingface_hub is imported
inside these functions; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are read at call time.
"""

from __future__ import annotations

import os
from typing import Any

from kvplan.errors import SourceError
from kvplan.gguf.reader import ByteSource


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _offline() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _check_online(label: str) -> None:
    if _offline():
        raise SourceError(
            f"{label}: reading a GGUF header from the Hub needs the network, and offline mode is on (HF_HUB_OFFLINE)",
            "download the .gguf file and pass its path to --model",
        )
    from huggingface_hub import constants as hub_constants

    # NOTE: the library reads HF_HUB_OFFLINE once, at import; follow the environment of this call.
    hub_constants.HF_HUB_OFFLINE = False


def _raise_for(exc: Exception, label: str) -> None:
    from huggingface_hub import errors as hub_errors

    if isinstance(exc, hub_errors.GatedRepoError):
        raise SourceError(f"{label} is gated: your token is missing or has not been granted access",
                          "accept the licence on the Hub, then set HF_TOKEN or pass --token") from None
    if isinstance(exc, hub_errors.RevisionNotFoundError):
        raise SourceError(f"{label}: revision not found on the Hub", "check --revision") from None
    if isinstance(exc, hub_errors.RepositoryNotFoundError):
        raise SourceError(f"{label} was not found on the Hugging Face Hub (or it is private)",
                          "check the repo id; for a private repo set HF_TOKEN or pass --token") from None
    if isinstance(exc, hub_errors.EntryNotFoundError):
        raise SourceError(f"{label}: no such file in the repo", "check --gguf-file against the repo's file list") from None
    if isinstance(exc, hub_errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise SourceError(f"{label}: the Hub answered HTTP {status}", "check the repo and token, or try again later") from None
    raise SourceError(f"{label}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                      "check the network, or download the .gguf file and pass its path") from None


def list_gguf_files(repo_id: str, *, revision: str | None, token: str | None) -> list[str]:
    """The repo's file names (from the Hub's model info)."""
    _check_online(repo_id)
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=_endpoint()).model_info(repo_id, revision=revision, token=token or os.environ.get("HF_TOKEN") or None)
    except Exception as exc:  # huggingface_hub and transport errors, mapped to one line
        _raise_for(exc, repo_id)
        raise
    return [s.rfilename for s in (info.siblings or [])]


class HubSource(ByteSource):
    """Ranged reads of one Hub file; ``size`` comes from the first answer's Content-Range."""

    def __init__(self, repo_id: str, filename: str, *, revision: str | None, token: str | None) -> None:
        _check_online(f"{repo_id}/{filename}")
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers

        self.label = f"{repo_id}/{filename}" + (f"@{revision}" if revision else "")
        self.url = hf_hub_url(repo_id, filename, revision=revision, endpoint=_endpoint())
        self.headers = build_hf_headers(token=token or os.environ.get("HF_TOKEN") or None)
        self.requests = 0
        self.size = 1 << 62  # until the first answer says
        self.size = self._fetch(0, 1 << 20, probe=True)[1]

    def _fetch(self, offset: int, n: int, *, probe: bool = False) -> tuple[bytes, int]:
        from huggingface_hub import get_session
        from huggingface_hub.utils import hf_raise_for_status

        self.requests += 1
        headers = {**self.headers, "Range": f"bytes={offset}-{offset + n - 1}"}
        try:
            with get_session().stream("GET", self.url, headers=headers, follow_redirects=True,
                                      timeout=float(os.environ.get("KVPLAN_HUB_TIMEOUT", "10"))) as response:
                if response.status_code == 416 and not probe:
                    return b"", self.size
                hf_raise_for_status(response)
                if response.status_code != 206:
                    raise SourceError(
                        f"{self.label}: the server ignored the byte range (HTTP {response.status_code})",
                        "download the .gguf file and pass its path to --model",
                    )
                total = _total_size(response.headers.get("Content-Range"), self.label)
                chunks: list[bytes] = []
                got = 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    got += len(chunk)
                    if got >= n:
                        break
                data = b"".join(chunks)[:n]
        except SourceError:
            raise
        except Exception as exc:  # huggingface_hub and transport errors, mapped to one line
            _raise_for(exc, self.label)
            raise
        if probe:
            self._probe = data
        return data, total

    def read(self, offset: int, n: int) -> bytes:
        probe = getattr(self, "_probe", b"")
        if offset + n <= len(probe):
            return probe[offset:offset + n]
        return self._fetch(offset, n)[0]


def _total_size(header: Any, label: str) -> int:
    # "bytes 0-1048575/123456789"
    try:
        return int(str(header).rsplit("/", 1)[1])
    except (IndexError, ValueError):
        raise SourceError(f"{label}: the server sent no usable Content-Range ({header!r})",
                          "download the .gguf file and pass its path to --model") from None
