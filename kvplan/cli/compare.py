"""`kvplan compare mha gqa mqa`: attention layouts side by side at one model size."""

from pathlib import Path
from typing import Annotated, Optional

import typer

import kvplan
from kvplan.cli.options import (
    AllowDefaultsOpt,
    BatchOpt,
    BlockSizeOpt,
    EngineOpt,
    Format,
    FormatOpt,
    GgufFileOpt,
    KvDtypeOpt,
    MaxModelLenOpt,
    ModelOpt,
    OutputOpt,
    PpOpt,
    RevisionOpt,
    SeqLenOpt,
    StrictOpt,
    TokenOpt,
    TpOpt,
    VerboseOpt,
    emit,
    lazy_table,
)
from kvplan.outfile import refuse_inputs
from kvplan.report.plot import check_plot_path, write_compare_plot

DIMS = "Base dims (instead of --model)"


def _dim(flag: str, help_text: str) -> typer.models.OptionInfo:
    return typer.Option(flag, min=1, help=help_text, rich_help_panel=DIMS)


EPILOG = (
    "Examples:\n\n"
    "  kvplan compare mha gqa mqa\n\n"
    "  kvplan compare mha gqa:8 mqa mla swa:4096 hybrid:1024:5 --seq-len 32k --batch 8\n\n"
    "  kvplan compare model mha gqa mla --model deepseek-ai/DeepSeek-V3 --seq-len 32k --format yaml\n\n"
    "  kvplan compare mha gqa swa:4k --layers 80 --heads 64 --head-dim 128 --sweep-seq 1k,4k,32k,128k\n\n"
    "  kvplan compare mha gqa mqa mla swa:4k --plot kv.png --gpu-mem 80GiB\n\n"
    "  kvplan compare mha gqa mqa mla --model meta-llama/Llama-3.1-70B -s 32k --engine vllm --tp 8\n\n"
    "Variants: mha, gqa (8 KV heads) or gqa:N, mqa, mla (512+64) or mla:RANK+ROPE, swa:W (every layer "
    "windowed), hybrid:W:R (R local layers per global one, as Gemma 3), model (the --model as configured)."
)


def compare(
    variants: Annotated[
        Optional[list[str]],
        typer.Argument(help="Attention layouts to size (default: mha gqa mqa, plus model with --model); a model may come first, instead of --model: kvplan compare Qwen/Qwen3-8B mha gqa.", show_default=False),
    ] = None,
    model: Annotated[Optional[str], ModelOpt.__metadata__[0]] = None,
    gguf_file: GgufFileOpt = None,
    layers: Annotated[Optional[int], _dim("--layers", "Attention layers (default 32: the 32-layer, 32-head, head-dim-128 example model).")] = None,
    heads: Annotated[Optional[int], _dim("--heads", "Query heads (default 32).")] = None,
    head_dim: Annotated[Optional[int], _dim("--head-dim", "Head dim (default 128).")] = None,
    hidden_size: Annotated[Optional[int], _dim("--hidden-size", "Hidden size; head dim = hidden size / --heads.")] = None,
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "ideal",
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    block_size: BlockSizeOpt = None,
    sweep_seq: Annotated[
        Optional[str],
        typer.Option("--sweep-seq", help="Also size every variant at these lengths: 1k,4k,32k,128k (one column each; k = 1024, 32k = 32,768)."),
    ] = None,
    plot: Annotated[
        Optional[Path],
        typer.Option(
            "--plot",
            help="Draw KV memory against context length to FILE (.png or .svg; needs the plot extra: pip install '.[plot]' in the kvplan checkout).",
        ),
    ] = None,
    gpu_mem: Annotated[
        Optional[str], typer.Option("--gpu-mem", help="Draw a GPU's memory as a line on --plot, e.g. 80GiB.")
    ] = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
    allow_defaults: AllowDefaultsOpt = False,
) -> None:
    """Compare attention layouts (MHA, GQA, MQA, MLA, sliding windows) at one model size: KV bytes and decode reads."""
    if plot is not None:
        check_plot_path(plot)
    variants, model = kvplan.api.model_first(variants or [], model)
    if plot is not None:
        refuse_inputs(plot, (model,), flag="--plot")
    result = kvplan.compare(
        variants or (), model=model, layers=layers, heads=heads, head_dim=head_dim, hidden_size=hidden_size,
        batch=batch, seq_len=seq_len, max_model_len=max_model_len, kv_dtype=kv_dtype, engine=engine, tp=tp, pp=pp,
        block_size=block_size, sweep_seq=sweep_seq, gpu_mem=gpu_mem, plot=plot, revision=revision, token=token,
        gguf_file=gguf_file, strict=strict, allow_defaults=allow_defaults,
    )
    report = result.to_dict()
    if plot is not None:
        write_compare_plot(plot, result, report)
    emit(report, fmt, output, lazy_table("compare_table", report) if fmt is Format.table else None, inputs=(model,),
         verbose=verbose)
    if plot is not None:
        typer.echo(f"wrote {plot}", err=True)
