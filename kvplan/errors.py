"""Errors a user can act on, and the exit codes the CLI maps them to."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_FIT = 1  # computed fine, but a budget or fit check failed
EXIT_USAGE = 2  # bad input: config, flag, file, hub
EXIT_BUG = 101  # unexpected exception


class KvplanError(Exception):
    """Base class: a one-line message and an optional hint on how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(KvplanError):
    """The model config is malformed, incomplete or unsupported."""


class InputError(KvplanError):
    """A flag or argument value is invalid."""


class SourceError(KvplanError):
    """The model config could not be found or fetched."""
