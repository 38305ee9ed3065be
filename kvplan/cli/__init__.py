"""The kvplan command line: parse flags, call one pure function, render. Nothing more.

``root.py`` holds the root app, the error boundary and ``main``; ``options.py`` the shared options and
output; every other module is one command. ``kvplan.cli.app`` is the typer app, built on first use
(`kvplan COMMAND` builds only its command).
"""

from typing import Any

from kvplan.cli import root
from kvplan.cli.root import main

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        return root.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
