"""`kvplan gpus`: the GPU catalog that `--gpu` reads (memory and bandwidth of each GPU)."""

from kvplan.cli.options import Format, FormatOpt, emit, lazy_table
from kvplan.gpus import load_catalog
from kvplan.report import gpus_report

EPILOG = "Examples:\n\n  kvplan gpus\n\n  kvplan gpus --format json"


def gpus(fmt: FormatOpt = Format.table) -> None:
    """List the GPU catalog: memory and bandwidth of each GPU `--gpu` accepts."""
    report = gpus_report(load_catalog())
    emit(report, fmt, None, lazy_table("gpus_table", report) if fmt is Format.table else None)
