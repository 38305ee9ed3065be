"""`kvplan check PLAN`: every scenario of a plan file against its budgets (exit 1 when any fails)."""

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer

from kvplan.check_stream import output_format, run_check, write_check
from kvplan.cli.options import Format, FormatOpt, OutputOpt, VerboseOpt, echo_wrapped, writing_stdout
from kvplan.errors import EXIT_NOT_FIT
from kvplan.plan import load_plan

EPILOG = (
    "Examples:\n\n"
    "  kvplan check kvplan.yaml\n\n"
    "  kvplan check kvplan.yaml --output kvplan-report.yaml\n\n"
    "  kvplan check examples/kvplan.yaml --format json --full\n\n"
    "Exit codes: 0 every budget holds; 1 a budget is exceeded; 2 a bad plan file."
)


def check(
    plan: Annotated[Path, typer.Argument(help="Plan file: a YAML mapping with a `scenarios:` list.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    timestamp: Annotated[
        bool, typer.Option("--timestamp", help="Record the UTC time in the report (off: reports are byte-identical).")
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Write each scenario's whole estimate and capacity report (default: one "
                           "compact row per scenario: its inputs, KV bytes, fit, concurrency and gates).")
    ] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Check every scenario of a plan file against its KV-cache budgets."""
    generated_at = None
    if timestamp:
        generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    to_stdout = output is not None and str(output) == "-"
    formats = {f for f in (output_format(fmt.value, output), "yaml" if to_stdout else fmt.value)
               if f in ("yaml", "json")}
    loaded = load_plan(plan)
    run = run_check(loaded, formats=formats, table=fmt is Format.table and not to_stdout, full=full,
                    generated_at=generated_at)
    inputs = (plan, *map(Path, loaded.input_paths()))  # --output may be none of them
    try:
        with writing_stdout():
            write_check(run, fmt.value, output, lambda text: typer.echo(text, nl=False), inputs=inputs,
                        verbose=verbose)
    finally:
        run.close()
    for name, message in run.warnings:
        echo_wrapped(f"{name}: {message}", prefix="WARNING ")
    for name, message in run.failures:
        echo_wrapped(f"{name}: {message}", prefix="FAIL ")
    if not run.passed:
        raise typer.Exit(EXIT_NOT_FIT)
