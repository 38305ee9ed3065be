"""The kvplan command line: parse flags, call one pure function, render. Nothing more.

``app.py`` holds the root app, the error boundary and ``main``; ``options.py`` the shared options and
output; every other module is one command. ``kvplan.cli.app`` names the typer app (the module is
``sys.modules["kvplan.cli.app"]``).
"""

from kvplan.cli.app import app, main

__all__ = ["app", "main"]
