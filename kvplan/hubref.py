"""Hub repo ids, revisions, ``org/repo:TAG`` and Hub URLs, read and checked before any request.

A revision is a branch or tag name as git's check-ref-format allows it (what the Hub accepts), a
``refs/pr/N`` or ``refs/convert/...`` ref, or a commit hash. ``../../x`` never reaches
huggingface_hub, which would write a ref file outside its cache for it.

A Hub URL is read as the repo id it names, with its revision and file when it has them:
``https://huggingface.co/ORG/NAME``, ``.../tree/REV``, ``.../blob/REV/FILE`` or ``.../resolve/REV/FILE``
(the page, the file view and the download link), on huggingface.co, hf.co or the ``HF_ENDPOINT`` host.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from kvplan.errors import InputError, SourceError

#: The Hub's repo-id rule (huggingface_hub's validate_repo_id): ``[org/]name``, each part 1-96 of
#: letters, digits, ``-``, ``_``, ``.``, not starting or ending with ``-`` or ``.``; no ``--`` or ``..``.
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID = rf"^(?:{_REPO_PART}/)?{_REPO_PART}$"
#: ``org/repo:TAG``: the GGUF file of a Hub repo whose name holds TAG, as llama.cpp's ``-hf`` reads it.
GGUF_TAG = r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*):(?P<tag>[A-Za-z0-9._-]+)$"
_COMMIT = r"^[0-9a-fA-F]{40}$"
#: git check-ref-format: no control characters, space, ~ ^ : ? * [ \ anywhere.
_BAD_REF_CHARS = r"[\x00-\x20\x7f~^:?*\[\\]"
MAX_REVISION_CHARS = 255


def is_repo_id(text: str) -> bool:
    return bool(re.match(REPO_ID, text)) and "--" not in text and ".." not in text and not text.endswith(".git")


def validate_revision(revision: str, *, what: str = "--revision") -> str:
    """``revision`` unchanged when the Hub could hold it; else an InputError naming the rule broken."""
    shown = revision[:60].encode("unicode_escape").decode("ascii") + ("..." if len(revision) > 60 else "")
    hint = "a branch or tag name (main, v1.0), refs/pr/N, or a 40-character commit hash"
    if not revision:
        raise InputError(f"{what} is empty", hint)
    if re.match(_COMMIT, revision):
        return revision
    if len(revision) > MAX_REVISION_CHARS:
        raise InputError(f"{what} is {len(revision):,} characters long (a git ref has at most {MAX_REVISION_CHARS})", hint)
    problem = None
    if re.search(_BAD_REF_CHARS, revision):
        problem = "holds a space, a control character or one of ~ ^ : ? * [ \\"
    elif ".." in revision or "@{" in revision or revision == "@":
        problem = "holds '..' or '@{'"
    elif revision.startswith("/") or revision.endswith(("/", ".", ".lock")) or "//" in revision:
        problem = "starts or ends with '/', ends with '.' or '.lock', or holds '//'"
    elif any(part.startswith(".") for part in revision.split("/")):
        problem = "has a path part starting with '.'"
    if problem:
        raise InputError(f"{what} {shown!r} is not a valid branch, tag or commit: it {problem}", hint)
    return revision


#: Hosts whose URLs name Hub models (besides the ``HF_ENDPOINT`` host).
HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")
_URL_HINT = "pass https://huggingface.co/ORG/NAME (or .../tree/REV, .../blob/REV/FILE), or the repo id ORG/NAME"


@dataclass(frozen=True, kw_only=True, slots=True)
class HubUrl:
    """What a Hub URL names."""

    repo_id: str
    revision: str | None = None
    """From ``/tree/REV``, ``/blob/REV/...`` or ``/resolve/REV/...`` (URL-decoded: ``refs%2Fpr%2F1``)."""
    filename: str | None = None
    """The file in the repo, from ``/blob/REV/FILE`` or ``/resolve/REV/FILE``."""


def is_url(text: str) -> bool:
    return text.lower().startswith(("https://", "http://"))


def parse_hub_url(url: str) -> HubUrl:
    """The repo, revision and file a Hub model URL names; a SourceError for any other URL."""
    shown = url[:120].encode("unicode_escape").decode("ascii")
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:  # a malformed port or bracket
        raise SourceError(f"--model {shown!r} is not a valid URL", _URL_HINT) from None
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    if host not in HUB_HOSTS and (host, parts.port) != ((endpoint.hostname or "").lower(), endpoint.port):
        raise SourceError(f"--model {shown!r} is a URL, but not a Hugging Face Hub one", _URL_HINT)
    path = [unquote(p) for p in parts.path.split("/") if p]
    if path and path[0] in ("datasets", "spaces"):
        raise SourceError(f"--model {shown!r} names a {path[0][:-1]}, not a model", _URL_HINT)
    if len(path) == 1 or (len(path) > 1 and path[1] in ("tree", "blob", "resolve")):
        repo, rest = path[:1], path[1:]
    else:
        repo, rest = path[:2], path[2:]
    repo_id = "/".join(repo)
    if not repo or not is_repo_id(repo_id):
        raise SourceError(f"--model {shown!r} names no Hub repo", _URL_HINT)
    if not rest:
        return HubUrl(repo_id=repo_id)
    if rest[0] == "tree" and len(rest) == 2:
        return HubUrl(repo_id=repo_id, revision=validate_revision(rest[1], what="the URL's revision"))
    if rest[0] in ("blob", "resolve") and len(rest) >= 3:
        return HubUrl(repo_id=repo_id, revision=validate_revision(rest[1], what="the URL's revision"),
                      filename="/".join(rest[2:]))
    raise SourceError(f"--model {shown!r} is a Hub URL kvplan cannot read: it is not the model's page, "
                      "a /tree/REV or a file", _URL_HINT)
