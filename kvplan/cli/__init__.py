"""The kvplan command line: parse flags, call one pure function, render. Nothing more.

``app.py`` holds the root app, the error boundary and ``main``; ``options.py`` the shared options and
output; every other module is one command. ``kvplan.cli.app`` names the typer app (the module is
``sys.modules["kvplan.cli.app"]``).
"""

import sys
from typing import Any

from kvplan.cli.app import main

__all__ = ["app", "main"]

# NOTE: importing the submodule bound ``app`` here to the module; ``kvplan.cli.app`` names the typer app,
# built on first use (`kvplan COMMAND` builds only its command), so the binding goes.
del globals()["app"]


def __getattr__(name: str) -> Any:
    if name == "app":
        return sys.modules[f"{__name__}.app"].app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
