"""The kvplan command line: parse flags, call one pure function, render. Nothing more."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kvplan.errors import EXIT_BUG, EXIT_USAGE, InputError, KvplanError

app = typer.Typer(
    name="kvplan",
    help="KV-cache memory planner: size the KV cache of an LLM from its config.json.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Format(str, Enum):
    table = "table"
    yaml = "yaml"
    json = "json"


# ---- shared options (declared once) -------------------------------------------------------------
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model", "-m",
        help="A config.json path (or a folder with one), a bundled model (Hub id or short alias, "
        "see `kvplan models`), or any Hugging Face Hub repo id.",
    ),
]
RevisionOpt = Annotated[Optional[str], typer.Option("--revision", help="Hub revision (branch, tag or commit).")]
TokenOpt = Annotated[Optional[str], typer.Option("--token", help="Hub token (default: HF_TOKEN).")]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", min=1, help="Sequences held at once.")]
SeqLenOpt = Annotated[
    Optional[str],
    typer.Option(
        "--seq-len", "-s",
        help="Tokens held per sequence: 4096, 4k (= 4096), 128k, 1M (k = 1024). "
        "Default: the model's maximum context (vLLM's --max-model-len).",
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        help="KV element type, as vLLM's --kv-cache-dtype: auto (the config's dtype), fp32, fp16, bf16, "
        "fp8 (= fp8_e4m3), fp8_e5m2, int8, q8_0, q4_0 ...",
    ),
]
EncoderLenOpt = Annotated[
    Optional[str],
    typer.Option("--encoder-len", help="Encoder positions for cross-attention (default: from the config)."),
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option("--set", help="Override a config field: --set num_key_value_heads=8 (repeatable; dotted keys nest)."),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table for people; yaml or json for machines.")]
OutputOpt = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", help="Also write the report to FILE (yaml, or json for a .json name or --format json)."),
]


@contextmanager
def cli_errors() -> Iterator[None]:
    """Map domain errors to one clear line on stderr and exit code 2; bugs to 101."""
    try:
        yield
    except KvplanError as exc:
        _error(exc.message, exc.hint)
        raise typer.Exit(EXIT_USAGE) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - the error boundary
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        if type(exc).__module__.startswith("click"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 for the traceback")
        raise typer.Exit(EXIT_BUG) from None


def _error(message: str, hint: str | None) -> None:
    typer.echo(f"Error: {message}", err=True)
    if hint:
        typer.echo(f"Hint: {hint}", err=True)


def emit(report: dict[str, Any], fmt: Format, output: Path | None, table: Any) -> None:
    """Data on stdout (table, yaml or json); notes on stderr; optional file copy."""
    from kvplan.report import to_json, to_yaml

    if output is not None:
        as_json = fmt is Format.json or output.suffix.lower() == ".json"
        try:
            output.write_text(to_json(report) if as_json else to_yaml(report), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write --output {output}: {exc.strerror or exc}", "check the path") from None
    if fmt is Format.json:
        typer.echo(to_json(report), nl=False)
    elif fmt is Format.yaml:
        typer.echo(to_yaml(report), nl=False)
    else:
        from kvplan.render import make_console, notes_text

        make_console().print(table)
        for line in notes_text(report):
            typer.echo(f"note: {line}", err=True)


@app.command(
    epilog="Examples:\n\n"
    "  kvplan estimate --model meta-llama/Llama-3.1-8B --seq-len 32k --batch 4\n\n"
    "  kvplan estimate -m llama-2-7b-hf -s 4096 --kv-dtype fp8 --format yaml\n\n"
    "  kvplan estimate -m ./config.json --set num_key_value_heads=4 --format json",
)
def estimate(
    model: ModelOpt,
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    encoder_len: EncoderLenOpt = None,
    set_: SetOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Size the KV cache of a model, layer group by layer group."""
    with cli_errors():
        from kvplan.api import load_geometry, normalise_overrides
        from kvplan.calc import estimate as run_estimate
        from kvplan.report import estimate_report
        from kvplan.units import parse_tokens

        overrides = normalise_overrides(set_)
        tokens = parse_tokens(seq_len) if seq_len is not None else None
        enc = parse_tokens(encoder_len, what="--encoder-len") if encoder_len is not None else None
        geometry, source = load_geometry(model, revision=revision, token=token, overrides=overrides)
        est = run_estimate(geometry, batch=batch, seq_len=tokens, kv_dtype=kv_dtype, encoder_len=enc)
        report = estimate_report(est, source, overrides=overrides)
        emit(report, fmt, output, _lazy_table("estimate_table", report) if fmt is Format.table else None)


@app.command(epilog="Examples:\n\n  kvplan models\n\n  kvplan models --format json")
def models(fmt: FormatOpt = Format.table) -> None:
    """List the bundled models (they work offline) with a one-line geometry each."""
    with cli_errors():
        from kvplan.catalog import models_report

        report = models_report()
        emit(report, fmt, None, _lazy_table("models_table", report) if fmt is Format.table else None)


def _lazy_table(name: str, report: dict[str, Any]) -> Any:
    from kvplan import render

    return getattr(render, name)(report)


def _register_commands() -> None:
    """Import the command modules so they register with ``app`` (cheap: no heavy imports)."""
    import importlib
    import pkgutil

    import kvplan.commands as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        importlib.import_module(f"kvplan.commands.{info.name}")


_register_commands()


def main() -> None:
    """Console entry point: typer's own exits pass through; anything unexpected is exit 101."""
    try:
        app()
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1")
        sys.exit(EXIT_BUG)
