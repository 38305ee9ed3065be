"""`kvplan diff OLD NEW`: what changed per scenario between two reports (exit 1 past --max-increase)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import Format, FormatOpt, echo_wrapped, emit
from kvplan.errors import EXIT_NOT_FIT
from kvplan.report.diff import diff_report, load_report, parse_threshold

EPILOG = (
    "Examples:\n\n"
    "  kvplan diff main-report.yaml pr-report.yaml\n\n"
    "  kvplan diff old.yaml new.yaml --max-increase 10%\n\n"
    "  kvplan diff old.yaml new.yaml --max-increase 1GiB --format json\n\n"
    "Exit codes: 0 no scenario grew past --max-increase; 1 one did; 2 a bad report file."
)


def diff(
    old: Annotated[Path, typer.Argument(help="The earlier report (kvplan check --output, or an estimate report).")],
    new: Annotated[Path, typer.Argument(help="The later report.")],
    max_increase: Annotated[
        Optional[str],
        typer.Option("--max-increase", help="Fail (exit 1) when a scenario's KV bytes grow by more than this: "
                     "a percentage of the old bytes (10%) or a size (1GiB). Exactly at the limit passes."),
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Show what changed per scenario between two reports: KV bytes, ratio and the inputs that changed."""
    threshold = parse_threshold(max_increase) if max_increase is not None else None
    report = diff_report(load_report(old), load_report(new), old_label=str(old), new_label=str(new),
                         max_increase=threshold)
    table = None
    if fmt is Format.table:
        # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
        from kvplan.report.render import diff_table

        table = diff_table(report)
    emit(report, fmt, None, table)
    for row in report["scenarios"]:
        if row["over_threshold"]:
            grew = "KV cache"
            if row["change_bytes"] is not None:
                grew += (f" grew by {row['change_bytes']:,} bytes ({row['old_kv_cache_bytes']:,} -> "
                         f"{row['new_kv_cache_bytes']:,})")
            if row["change_bytes_per_gpu"] is not None:
                grew += (f", per GPU by {row['change_bytes_per_gpu']:,} bytes ({row['old_kv_cache_bytes_per_gpu']:,} -> "
                         f"{row['new_kv_cache_bytes_per_gpu']:,})")
            echo_wrapped(f"{row['name']}: {grew}, past --max-increase {max_increase}", prefix="FAIL ")
    if not report["passed"]:
        raise typer.Exit(EXIT_NOT_FIT)
