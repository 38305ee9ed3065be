"""`kvplan check PLAN`: every scenario of a plan file against its budgets (exit 1 when any fails)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli import Format, FormatOpt, OutputOpt, app, cli_errors, emit
from kvplan.errors import EXIT_NOT_FIT
from kvplan.textsafe import printable


@app.command(
    epilog="Examples:\n\n"
    "  kvplan check kvplan.yaml\n\n"
    "  kvplan check kvplan.yaml --output kvplan-report.yaml\n\n"
    "  kvplan check examples/kvplan.yaml --format json\n\n"
    "Exit codes: 0 every budget holds; 1 a budget is exceeded; 2 a bad plan file.",
)
def check(
    plan: Annotated[Path, typer.Argument(help="Plan file: a YAML mapping with a `scenarios:` list.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    timestamp: Annotated[
        bool, typer.Option("--timestamp", help="Record the UTC time in the report (off: reports are byte-identical).")
    ] = False,
) -> None:
    """Check every scenario of a plan file against its KV-cache budgets."""
    with cli_errors():
        from kvplan.checks import check_report
        from kvplan.plan import load_plan

        generated_at = None
        if timestamp:
            from datetime import datetime, timezone

            generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        report = check_report(load_plan(plan), generated_at=generated_at)
        table = None
        if fmt is Format.table:
            from kvplan.render import check_table

            table = check_table(report)
        emit(report, fmt, output, table, inputs=(plan,))
        for row in report["scenarios"]:
            for gate in row["gates"]:
                if not gate["passed"]:
                    typer.echo(printable(f"FAIL {row['name']}: {gate['message']}"), err=True)
    if not report["passed"]:
        raise typer.Exit(EXIT_NOT_FIT)
