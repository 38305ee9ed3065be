"""CLI commands beyond `estimate` and `models`, one module each.

Each module imports only typer and kvplan.cli at import time (heavy work is imported inside the
command function) and registers itself with ``@app.command()``; cli.py imports them all.
"""
