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

APP_SETTINGS: dict[str, Any] = {
    "name": "kvplan",
    "help": "KV-cache memory planner: size the KV cache of an LLM from its config.json.",
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
    # NOTE: plain click output: usage errors end in one `Error: ...` line like kvplan's own errors.
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}

app = typer.Typer(**APP_SETTINGS)


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
        "--kv-dtype", "--kv-cache-dtype",
        help="KV element type (--kv-cache-dtype is vLLM's name): auto (the config's dtype; f16 for llama.cpp), "
        "fp32, fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2, nvfp4, int8/int4/int2 (group scales, see "
        "--quant-group-size), llama.cpp q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (real block bytes).",
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

MaxKvBytesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--max-kv-bytes",
        help="Budget gate: exit 1 when the KV cache (totals.kv_cache_bytes) is larger than this size, "
        "e.g. 40GiB, 40GB or 42949672960. Exactly at the budget passes.",
    ),
]
MaxKvBytesPerGpuOpt = Annotated[
    Optional[str],
    typer.Option(
        "--max-kv-bytes-per-gpu",
        help="Budget gate: exit 1 when the KV cache on the most loaded GPU (totals.kv_cache_bytes_per_gpu, "
        "after --tp/--pp/--offload) is larger than this size, e.g. 20GiB. Exactly at the budget passes.",
    ),
]

# ---- deployment options (issue 3): vLLM's names where the meaning matches ------------------------
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Engine profile: ideal (the formula), vllm, sglang, trtllm, llama.cpp, hf-dynamic, hf-static. "
        "Each reproduces what that engine allocates (README: 'Engine profiles and deployment adjustments').",
    ),
]
TpOpt = Annotated[int, typer.Option("--tensor-parallel-size", "--tp", min=1, help="Tensor-parallel GPUs, as vLLM's "
                  "--tensor-parallel-size: each keeps max(1, H_kv // tp) KV heads; MLA is replicated.")]
PpOpt = Annotated[int, typer.Option("--pipeline-parallel-size", "--pp", min=1, help="Pipeline stages, as vLLM's "
                  "--pipeline-parallel-size: layers split as vLLM get_pp_indices.")]
BlockSizeOpt = Annotated[Optional[int], typer.Option("--block-size", min=1, help="Tokens per KV block, as vLLM's "
                         "--block-size (default: the engine's; vLLM 16, 64 for MLA; TensorRT-LLM 32; SGLang page 1).")]
BeamsOpt = Annotated[int, typer.Option("--beams", min=1, help="Beams per request: B x beams sequences each keep a cache.")]
PromptLenOpt = Annotated[Optional[str], typer.Option("--prompt-len", help="Prompt tokens of each sequence (part of "
                         "--seq-len); used by --share-prefix and the Hugging Face residual/prefill peaks.")]
SharePrefixOpt = Annotated[bool, typer.Option("--share-prefix", help="Keep each prompt's full blocks once per request, "
                           "not per beam (prefix caching). Needs --prompt-len.")]
SharedPrefixTokensOpt = Annotated[Optional[str], typer.Option("--shared-prefix-tokens", help="Tokens of a prefix "
                                  "(system prompt) shared by all sequences; its full blocks are kept once.")]
NoWindowOpt = Annotated[bool, typer.Option("--no-window", help="Account sliding/chunked layers as full attention, as "
                        "vLLM --disable-hybrid-kv-cache-manager and llama.cpp --swa-full do.")]
QuantGroupSizeOpt = Annotated[int, typer.Option("--quant-group-size", min=1, help="Values per scale + zero point of "
                              "int8/int4/int2 KV (transformers q_group_size).")]
ResidualLengthOpt = Annotated[int, typer.Option("--residual-length", min=1, help="Hugging Face QuantizedCache: recent "
                              "tokens kept in full precision (transformers residual_length).")]
OffloadOpt = Annotated[Optional[str], typer.Option("--offload", help="KV kept in CPU memory: a fraction (0.25) of "
                       "every GPU's cache, or layers:N (the first N layers' caches).")]
MaxNumBatchedTokensOpt = Annotated[Optional[str], typer.Option("--max-num-batched-tokens", help="vLLM's "
                                   "--max-num-batched-tokens (default 8192, vllm serve on >= 70 GiB GPUs): sliding "
                                   "and chunked layers hold this much beyond the window.")]
MaxNumSeqsOpt = Annotated[Optional[int], typer.Option("--max-num-seqs", min=1, help="vLLM's --max-num-seqs: warns "
                          "when batch x beams exceeds it.")]
UbatchSizeOpt = Annotated[Optional[int], typer.Option("--ubatch-size", min=1, help="llama.cpp --ubatch-size "
                          "(n_ubatch, default 512): SWA cache slack.")]
KvUnifiedOpt = Annotated[bool, typer.Option("--kv-unified", help="llama.cpp --kv-unified: one cell pool for all "
                         "sequences.")]
SwaRatioOpt = Annotated[Optional[float], typer.Option("--swa-full-tokens-ratio", help="SGLang's "
                        "--swa-full-tokens-ratio (default 0.8): SWA pool size over full pool size.")]
MaxCacheLenOpt = Annotated[Optional[str], typer.Option("--max-cache-len", help="hf-static max_cache_len: tokens "
                           "preallocated per sequence (default --seq-len).")]


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
    except BrokenPipeError:
        _quiet_broken_pipe()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except Exception as exc:
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        if type(exc).__module__.startswith("click"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 for the traceback")
        raise typer.Exit(EXIT_BUG) from None


#: The reader of stdout went away (``kvplan ... | head``): exit as a shell does on SIGPIPE.
EXIT_BROKEN_PIPE = 141


def _quiet_broken_pipe() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _error(message: str, hint: str | None) -> None:
    from kvplan.textsafe import printable

    typer.echo(f"Error: {printable(message)}", err=True)
    if hint:
        typer.echo(f"Hint: {printable(hint)}", err=True)


def _raise_broken_pipe() -> None:
    """rich's Console exits 1 on a broken pipe; kvplan exits 141 in every format."""
    raise BrokenPipeError


def emit(
    report: dict[str, Any], fmt: Format, output: Path | None, table: Any, *, inputs: tuple[Any, ...] = ()
) -> None:
    """Data on stdout (table, yaml or json); notes on stderr; optional file copy (``-``: stdout).

    ``inputs`` are the command's input files: --output may not name one of them."""
    from kvplan.report import to_json, to_yaml

    to_stdout = output is not None and str(output) == "-"
    if output is not None and not to_stdout:
        from kvplan.outfile import refuse_inputs, write_atomic

        refuse_inputs(output, inputs)
        as_json = fmt is Format.json or output.suffix.lower() == ".json"
        write_atomic(output, to_json(report) if as_json else to_yaml(report))
    try:
        if fmt is Format.json:
            typer.echo(to_json(report), nl=False)
        elif fmt is Format.yaml or to_stdout:
            typer.echo(to_yaml(report), nl=False)
        else:
            from kvplan.render import make_console, notes_text
            from kvplan.textsafe import printable

            console = make_console()
            console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
            console.print(table)
            for line in notes_text(report):
                typer.echo(f"note: {printable(line)}", err=True)
    except BrokenPipeError:
        raise
    except OSError as exc:  # stdout on a full disk, or closed
        raise InputError(f"cannot write the report to stdout: {exc.strerror or exc}",
                         "check where stdout goes (a full disk?), or use --output FILE") from None
    if sys.stdout is None:  # started with stdout closed (>&-): nothing was written
        raise InputError("cannot write the report to stdout: it is closed", "use --output FILE")


@app.command(
    epilog="Examples:\n\n"
    "  kvplan estimate --model meta-llama/Llama-3.1-8B --seq-len 32k --batch 4\n\n"
    "  kvplan estimate -m llama-2-7b-hf -s 4096 --kv-dtype fp8 --format yaml\n\n"
    "  kvplan estimate -m ./config.json --set num_key_value_heads=4 --format json\n\n"
    "  kvplan estimate -m meta-llama/Llama-3.1-70B -s 32k --engine vllm --tp 16\n\n"
    "  kvplan estimate -m llama-2-7b-hf -s 4096 --engine llama.cpp --kv-dtype q8_0",
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
    max_kv_bytes: MaxKvBytesOpt = None,
    max_kv_bytes_per_gpu: MaxKvBytesPerGpuOpt = None,
    engine: EngineOpt = "ideal",
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    block_size: BlockSizeOpt = None,
    beams: BeamsOpt = 1,
    prompt_len: PromptLenOpt = None,
    share_prefix: SharePrefixOpt = False,
    shared_prefix_tokens: SharedPrefixTokensOpt = None,
    no_window: NoWindowOpt = False,
    quant_group_size: QuantGroupSizeOpt = 64,
    residual_length: ResidualLengthOpt = 128,
    offload: OffloadOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    ubatch_size: UbatchSizeOpt = None,
    kv_unified: KvUnifiedOpt = False,
    swa_full_tokens_ratio: SwaRatioOpt = None,
    max_cache_len: MaxCacheLenOpt = None,
) -> None:
    """Size the KV cache of a model, layer group by layer group."""
    with cli_errors():
        from kvplan.units import parse_size

        budget_bytes = parse_size(max_kv_bytes, what="--max-kv-bytes") if max_kv_bytes is not None else None
        gpu_budget_bytes = (
            parse_size(max_kv_bytes_per_gpu, what="--max-kv-bytes-per-gpu") if max_kv_bytes_per_gpu is not None else None
        )
        from kvplan.api import load_geometry, normalise_overrides
        from kvplan.calc import estimate as run_estimate
        from kvplan.report import estimate_report
        from kvplan.units import parse_tokens

        overrides = normalise_overrides(set_)
        tokens = parse_tokens(seq_len) if seq_len is not None else None
        enc = parse_tokens(encoder_len, what="--encoder-len") if encoder_len is not None else None
        geometry, source = load_geometry(model, revision=revision, token=token, overrides=overrides)
        from kvplan.adjust import deployment_from_flags

        deployment = deployment_from_flags(
            engine=engine, tp=tp, pp=pp, block_size=block_size, beams=beams, prompt_len=prompt_len,
            share_prefix=share_prefix, shared_prefix_tokens=shared_prefix_tokens, no_window=no_window,
            quant_group_size=quant_group_size, residual_length=residual_length, offload=offload,
            max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, ubatch_size=ubatch_size,
            kv_unified=kv_unified, swa_full_tokens_ratio=swa_full_tokens_ratio, max_cache_len=max_cache_len,
        )
        est = run_estimate(
            geometry, batch=batch, seq_len=tokens, kv_dtype=kv_dtype, encoder_len=enc, deployment=deployment
        )
        report = estimate_report(est, source, overrides=overrides)
        emit(report, fmt, output, _lazy_table("estimate_table", report) if fmt is Format.table else None,
             inputs=(model,))
        _budget_gate(report, budget_bytes, gpu_budget_bytes)


def _budget_gate(report: dict[str, Any], budget_bytes: int | None, gpu_budget_bytes: int | None = None) -> None:
    """--max-kv-bytes / --max-kv-bytes-per-gpu: needed vs budget on stderr, exit 1 when over either."""
    if budget_bytes is None and gpu_budget_bytes is None:
        return
    from kvplan.checks import bytes_gate, kv_bytes_per_gpu
    from kvplan.errors import EXIT_NOT_FIT

    gates = []
    if budget_bytes is not None:
        gates.append(bytes_gate("--max-kv-bytes", actual_bytes=report["totals"]["kv_cache_bytes"], limit_bytes=budget_bytes))
    if gpu_budget_bytes is not None:
        gates.append(bytes_gate("--max-kv-bytes-per-gpu", actual_bytes=kv_bytes_per_gpu(report),
                                limit_bytes=gpu_budget_bytes, what="KV cache per GPU"))
    failed = [gate for gate in gates if not gate.passed]
    for gate in failed:
        typer.echo(f"Budget exceeded: {gate.message}", err=True)
    if failed:
        raise typer.Exit(EXIT_NOT_FIT)


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


def _app_for(argv: list[str]) -> typer.Typer:
    """``app``, or, when argv names one command, an app holding only that command.

    NOTE: typer builds the parameters of every registered command before it runs one; building only
    the requested one keeps `kvplan estimate` start-up short. Help and errors are the same.
    """
    if not argv or argv[0].startswith("-"):
        return app
    chosen = [c for c in app.registered_commands if (c.name or c.callback.__name__.replace("_", "-")) == argv[0]]
    if len(chosen) != 1:
        return app
    single = typer.Typer(**APP_SETTINGS)
    single.registered_commands.append(chosen[0])
    single.callback()(_root)  # keeps `kvplan COMMAND ...` a group, as with the full app
    return single


def _root() -> None:
    """KV-cache memory planner: size the KV cache of an LLM from its config.json."""


def main() -> None:
    """Console entry point: typer's own exits pass through; anything unexpected is exit 101."""
    try:
        _app_for(sys.argv[1:])()
    except SystemExit:
        raise
    except BrokenPipeError:
        _quiet_broken_pipe()
        sys.exit(EXIT_BROKEN_PIPE)
    except Exception as exc:
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc}", "this is a kvplan bug; rerun with KVPLAN_DEBUG=1")
        sys.exit(EXIT_BUG)
