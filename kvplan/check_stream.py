"""`kvplan check` written scenario by scenario, so memory stays flat however long the plan is.

The report's ``passed`` and ``num_failed`` come before its ``scenarios``, so nothing can be printed
before the last scenario has run (and a bad scenario must leave stdout and ``--output`` empty, exit 2).
Each row is serialised as soon as it is computed, into a temporary file per format, and dropped; at
the end the header is written and the rows copied after it. The text is that of
``to_yaml(check_report(plan))`` / ``to_json(...)``: PyYAML writes a block sequence in a block mapping
indentless, so ``to_yaml([row])`` is the row's text in the whole document, and JSON indents a row of
``scenarios`` by two levels.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kvplan.checks import CheckRunner, ScenarioResult, check_header
from kvplan.errors import InputError
from kvplan.limits import MAX_REPORT_BYTES, MAX_REPORT_NODES
from kvplan.outfile import refuse_inputs, write_atomic
from kvplan.plan import Plan
from kvplan.report import to_yaml

#: Characters copied from a spool file at a time.
_CHUNK = 1 << 20


def _json_row(row: dict[str, Any], first: bool) -> str:
    text = json.dumps(row, indent=2, sort_keys=False)
    return ("" if first else ",\n") + "\n".join("    " + line for line in text.split("\n"))


class _ReportSize:
    """The nodes and bytes of the report being written, refused past what `kvplan diff` reads
    (:data:`~kvplan.limits.MAX_REPORT_NODES`, :data:`~kvplan.limits.MAX_REPORT_BYTES`), so kvplan reads back
    every report it writes."""

    __slots__ = ("bytes", "nodes")

    def __init__(self) -> None:
        self.nodes, self.bytes = _HEADER_NODES, _HEADER_BYTES

    def add(self, row: dict[str, Any], pieces: Iterable[str], *, name: str, full: bool) -> None:
        self.nodes += _count_nodes(row)
        self.bytes += max(len(piece.encode("utf-8")) for piece in pieces)
        if self.nodes > MAX_REPORT_NODES or self.bytes > MAX_REPORT_BYTES:
            what = (f"{self.nodes:,} YAML nodes (limit {MAX_REPORT_NODES:,})" if self.nodes > MAX_REPORT_NODES else
                    f"{self.bytes / 1024**2:,.0f} MiB (limit {MAX_REPORT_BYTES // 1024**2} MiB)")
            raise InputError(
                f"the check report passes {what} at scenario {name!r}, more than `kvplan diff` reads back",
                "write compact rows (without --full), or split the plan" if full else
                "split the plan, or shorten what each scenario repeats (long names, large set: overrides)")


#: Room kept for the report's header (its own nodes and bytes are a few dozen / a few KiB).
_HEADER_NODES, _HEADER_BYTES = 1_000, 64 * 1024


def _count_nodes(value: Any) -> int:
    """YAML nodes of ``value`` as the reader counts them: each mapping, sequence, key and scalar."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count


def table_row(result: ScenarioResult, row: dict[str, Any]) -> dict[str, Any]:
    """What ``render.check_table`` reads of a row: the name, the KV bytes, the gates, and the model and
    serving inputs as the estimate resolved them."""
    est = result.estimate
    dep = est.deployment
    return {
        "name": row["name"], "kv_cache_bytes": row["kv_cache_bytes"], "gates": row["gates"],
        "estimate": {"model": {"id": est.geometry.model_id},
                     "inputs": {"batch": est.batch, "seq_len": est.seq_len, "kv_dtype": est.kv_dtype.name,
                                "engine": dep.engine, "tp": dep.tp, "pp": dep.pp}},
    }


@dataclass(kw_only=True, slots=True)
class CheckRun:
    """A finished check: its header, the failing gates, and the serialised rows per format."""

    header: dict[str, Any]
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(scenario, gate message) of every failing gate, in order."""
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """(scenario, warning) of every estimate note a reader must see (core geometry from architecture defaults)."""
    rows: list[dict[str, Any]] | None = None
    """Table rows (``table_row``) when a table was asked for."""
    spools: dict[str, IO[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.header["passed"])

    def chunks(self, fmt: str) -> Iterator[str]:
        """The whole report in ``fmt`` (``yaml`` or ``json``), piece by piece."""
        spool = self.spools[fmt]
        spool.seek(0)
        if fmt == "yaml":
            yield to_yaml(self.header) + "scenarios:\n"
        else:
            yield json.dumps({**self.header, "scenarios": []}, indent=2)[: -len("[]\n}")] + "[\n"
        while piece := spool.read(_CHUNK):
            yield piece
        if fmt == "json":
            yield "\n  ]\n}\n"

    def table_report(self) -> dict[str, Any]:
        """The report as ``render.check_table`` reads it (table rows)."""
        return {**self.header, "scenarios": self.rows or []}

    def close(self) -> None:
        for spool in self.spools.values():
            spool.close()


def run_check(plan: Plan, *, formats: set[str], table: bool = False, full: bool = False,
              generated_at: str | None = None) -> CheckRun:
    """Run every scenario of ``plan``, serialising each row in ``formats`` (``yaml``, ``json``) as it
    comes: a compact row, or the whole row with ``full``; ``table`` keeps table rows. Raises what
    ``CheckRunner.results`` raises."""
    run = CheckRun(header={}, rows=[] if table else None)
    run.spools = {fmt: tempfile.TemporaryFile("w+", encoding="utf-8") for fmt in sorted(formats)}
    failed = 0
    size = _ReportSize()
    try:
        for index, result in enumerate(CheckRunner(plan=plan).results()):
            name = result.scenario.name
            failed += not result.passed
            run.failures.extend((name, gate.message) for gate in result.gates if not gate.passed)
            run.warnings.extend((name, warning) for warning in result.warnings)
            row = result.full_row() if full else result.compact_row()
            pieces = {fmt: to_yaml([row]) if fmt == "yaml" else _json_row(row, index == 0) for fmt in run.spools}
            if pieces:
                size.add(row, pieces.values(), name=name, full=full)
            for fmt, piece in pieces.items():
                run.spools[fmt].write(piece)
            if run.rows is not None:
                run.rows.append(table_row(result, row))
    except BaseException:
        run.close()
        raise
    run.header = check_header(plan, num_failed=failed, generated_at=generated_at)
    return run


def output_format(fmt: str, output: Path | None) -> str | None:
    """The format ``--output`` is written in (json for a .json name or --format json, else yaml);
    None without --output or with ``--output -`` (stdout)."""
    if output is None or str(output) == "-":
        return None
    return "json" if fmt == "json" or output.suffix.lower() == ".json" else "yaml"


def write_check(run: CheckRun, fmt: str, output: Path | None, echo: Callable[[str], None],
                inputs: tuple[Path, ...] = (), *, verbose: bool = False) -> None:
    """``--output`` first (whole or not at all, never over an input), then stdout (``table``, ``yaml``
    or ``json``; ``--output -`` puts YAML on stdout), as every command emits."""
    out_fmt = output_format(fmt, output)
    if output is not None and out_fmt is not None:
        refuse_inputs(output, inputs)
        write_atomic(output, run.chunks(out_fmt))
    if fmt == "table" and output is not None and str(output) == "-":
        fmt = "yaml"
    if fmt == "table":
        # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
        from kvplan.report.console import make_console
        from kvplan.report.render import check_table

        make_console().print(check_table(run.table_report(), verbose=verbose))
    else:
        for piece in run.chunks(fmt):
            echo(piece)
