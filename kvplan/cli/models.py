"""`kvplan models`: the bundled models, one line of geometry each."""

from __future__ import annotations

from kvplan.cli.options import Format, FormatOpt, emit, lazy_table

EPILOG = "Examples:\n\n  kvplan models\n\n  kvplan models --format json"


def models(fmt: FormatOpt = Format.table) -> None:
    """List the bundled models (they work offline) with a one-line geometry each."""
    from kvplan.catalog import models_report

    report = models_report()
    emit(report, fmt, None, lazy_table("models_table", report) if fmt is Format.table else None)
