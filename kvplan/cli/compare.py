"""`kvplan compare mha gqa mqa`: attention layouts side by side at one model size."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import (
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
    emit,
    respell_length,
    typed_tokens,
)

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
        typer.Argument(help="Attention layouts to size (default: mha gqa mqa, plus model with --model).", show_default=False),
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
        typer.Option("--sweep-seq", help="Also size every variant at these lengths: 1k,4k,32k,128k (one column each)."),
    ] = None,
    plot: Annotated[
        Optional[Path],
        typer.Option(
            "--plot",
            help="Draw KV memory against context length to FILE (.png or .svg; needs the kvplan[plot] extra).",
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
) -> None:
    """Compare attention layouts (MHA, GQA, MQA, MLA, sliding windows) at one model size: KV bytes and decode reads."""
    from kvplan.compare import base_from_dims, base_from_model, compare_report, parse_seq_list, plot_series
    from kvplan.compare import compare as run_compare
    from kvplan.errors import InputError
    from kvplan.units import parse_size

    dims = {"layers": layers, "heads": heads, "head_dim": head_dim, "hidden_size": hidden_size}
    if model is not None and any(v is not None for v in dims.values()):
        raise InputError("pass --model or --layers/--heads/--head-dim/--hidden-size, not both",
                         "drop --model to size bare dims, or drop the dims to use the model's own")
    if plot is not None:
        from kvplan.report.plot import check_plot_path

        check_plot_path(plot)
    gpu_mem_bytes = parse_size(gpu_mem, what="--gpu-mem") if gpu_mem is not None else None
    sweep = parse_seq_list(sweep_seq) if sweep_seq is not None else ()
    tokens, length_flag, len_note = typed_tokens(seq_len, max_model_len)
    source = None
    if model is not None:
        from kvplan.api import load_geometry

        geometry, source = load_geometry(model, revision=revision, token=token, gguf_file=gguf_file)
        if strict:
            from kvplan.models import require_config_geometry

            require_config_geometry(geometry)
        base = base_from_model(geometry)
    else:
        base = base_from_dims(**dims)
    from kvplan.adjust import deployment_from_flags

    deployment = deployment_from_flags(engine=engine, tp=tp, pp=pp, block_size=block_size)
    comparison = run_compare(base, variants or (), batch=batch, seq_len=tokens, kv_dtype=kv_dtype,
                             sweep_seq_lens=sweep, deployment=deployment)
    report = compare_report(comparison, source, gpu_mem_bytes=gpu_mem_bytes, plot=str(plot) if plot else None)
    respell_length(report, length_flag)
    if len_note:
        report["notes"].append(len_note)
    if gpu_mem_bytes is not None and plot is None:
        report["notes"].append("--gpu-mem only draws a line on --plot; it does not change the sizes")
    if plot is not None:
        from kvplan.report.plot import write_plot

        xs, series = plot_series(comparison)
        title = f"KV cache of {report['model']['id']}, batch {batch}, {report['inputs']['kv_dtype']}"
        per_gpu = tp * pp > 1
        if per_gpu:
            title += f", {engine} tp {tp} × pp {pp}"
        room_bytes, room_label = None, None
        if gpu_mem_bytes is not None and model is not None:
            room_bytes, room_label = _kv_room(model, gpu_mem_bytes, tp=tp, pp=pp, revision=revision, token=token,
                                              gguf_file=gguf_file, engine=engine)
        write_plot(plot, xs, series, title=title, gpu_mem_bytes=gpu_mem_bytes,
                   ylabel="KV cache per GPU (the most loaded one)" if per_gpu else "KV cache (batch total)",
                   mark_tokens=comparison.seq_len, room_bytes=room_bytes, room_label=room_label)
    table = None
    if fmt is Format.table:
        from kvplan.report.render import compare_table

        table = compare_table(report)
    emit(report, fmt, output, table, inputs=(model,))
    if plot is not None:
        typer.echo(f"wrote {plot}", err=True)


def _kv_room(model: str, gpu_mem_bytes: int, *, tp: int, pp: int, revision: str | None,
             token: str | None, gguf_file: str | None = None, engine: str = "ideal") -> tuple[int | None, str | None]:
    """--gpu-mem less the model's weights per GPU (counted from config.json, or a GGUF's tensor table):
    the room the KV cache has."""
    from kvplan.api import load_geometry, model_weights
    from kvplan.units import format_bytes

    loaded = load_geometry(model, revision=revision, token=token, gguf_file=gguf_file)
    weights, _notes = model_weights(loaded, engine=engine, weights_from="config", revision=revision, token=token,
                                    required=False)
    if weights is None or not weights.counted:
        return None, None
    per_gpu = weights.bytes_per_gpu(tp=tp, pp=pp)
    room = gpu_mem_bytes - per_gpu
    if room <= 0:
        # NOTE: no room to draw (log axis): the line stays at the card, and its label says so.
        return room, (f"GPU {format_bytes(gpu_mem_bytes)}: no KV room, weights {format_bytes(per_gpu)} "
                      f"per GPU exceed it")
    return room, (f"KV room {format_bytes(room)} = GPU {format_bytes(gpu_mem_bytes)} "
                  f"- weights {format_bytes(per_gpu)} per GPU")
