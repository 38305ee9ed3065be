"""Hub repo ids and revisions, checked before any request.

A revision is a branch or tag name as git's check-ref-format allows it (what the Hub accepts), a
``refs/pr/N`` or ``refs/convert/...`` ref, or a commit hash. ``../../x`` never reaches
huggingface_hub, which would write a ref file outside its cache for it.
"""

from __future__ import annotations

import re

from kvplan.errors import InputError

#: The Hub's repo-id rule (huggingface_hub's validate_repo_id): ``[org/]name``, each part 1-96 of
#: letters, digits, ``-``, ``_``, ``.``, not starting or ending with ``-`` or ``.``; no ``--`` or ``..``.
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID = re.compile(rf"^(?:{_REPO_PART}/)?{_REPO_PART}$")
_COMMIT = re.compile(r"^[0-9a-fA-F]{40}$")
#: git check-ref-format: no control characters, space, ~ ^ : ? * [ \ anywhere.
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
MAX_REVISION_CHARS = 255


def is_repo_id(text: str) -> bool:
    return bool(REPO_ID.match(text)) and "--" not in text and ".." not in text and not text.endswith(".git")


def validate_revision(revision: str, *, what: str = "--revision") -> str:
    """``revision`` unchanged when the Hub could hold it; else an InputError naming the rule broken."""
    shown = revision[:60].encode("unicode_escape").decode("ascii") + ("..." if len(revision) > 60 else "")
    hint = "a branch or tag name (main, v1.0), refs/pr/N, or a 40-character commit hash"
    if not revision:
        raise InputError(f"{what} is empty", hint)
    if _COMMIT.match(revision):
        return revision
    if len(revision) > MAX_REVISION_CHARS:
        raise InputError(f"{what} is {len(revision):,} characters long (a git ref has at most {MAX_REVISION_CHARS})", hint)
    problem = None
    if _BAD_REF_CHARS.search(revision):
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
