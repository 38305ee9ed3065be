"""`kvplan gpus`: the GPU catalog that `--gpu` reads (memory and bandwidth of each GPU)."""

from kvplan.cli.options import Format, FormatOpt, emit, lazy_table

EPILOG = "Examples:\n\n  kvplan gpus\n\n  kvplan gpus --format json"


def gpus(fmt: FormatOpt = Format.table) -> None:
    """List the GPU catalog: memory and bandwidth of each GPU `--gpu` accepts."""
    from kvplan import __version__
    from kvplan.gpus import load_catalog
    from kvplan.report import SCHEMA_VERSION

    report = {
        "schema_version": SCHEMA_VERSION, "kvplan_version": __version__, "command": "gpus",
        "gpus": [
            {"name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
             "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s, "aliases": list(g.aliases), "source": g.source,
             "memory_source": g.memory_source}
            for g in load_catalog()
        ],
    }
    emit(report, fmt, None, lazy_table("gpus_table", report) if fmt is Format.table else None)
