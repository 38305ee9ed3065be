"""`kvplan models [QUERY]`: the bundled models, one line of geometry each."""

from typing import Annotated, Optional

import typer

from kvplan.catalog import filter_models, models_report
from kvplan.cli.options import Format, FormatOpt, emit, lazy_table

EPILOG = "Examples:\n\n  kvplan models\n\n  kvplan models llama\n\n  kvplan models qwen3 --format json"


def models(
    query: Annotated[
        Optional[str],
        typer.Argument(help="Only models whose Hub id, alias or model_type contains this (case-insensitive).",
                       show_default=False),
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """List the bundled models (they work offline) with a one-line geometry each."""
    report = filter_models(models_report(), query) if query else models_report()
    emit(report, fmt, None, lazy_table("models_table", report) if fmt is Format.table else None)
