"""`kvplan verify`: run a real decode with torch and compare its cache with the prediction.

torch is imported only inside the command (kvplan/verify/), never when this module loads.
"""

import importlib.util
from enum import Enum
from typing import Annotated

import typer

from kvplan.cli.options import (
    BatchOpt,
    Format,
    FormatOpt,
    GgufFileOpt,
    KvDtypeOpt,
    ModelOpt,
    OutputOpt,
    RevisionOpt,
    SetOpt,
    TokenOpt,
    emit,
)
from kvplan.errors import EXIT_NOT_FIT, InputError


class Engine(str, Enum):
    kvplan = "kvplan"
    transformers = "transformers"


class Layout(str, Enum):
    dynamic = "dynamic"
    static = "static"
    paged = "paged"
    sliding = "sliding"
    quantized = "quantized"


EPILOG = (
    "Examples:\n\n"
    "  kvplan verify -m meta-llama/Llama-3.2-1B --layers 2 --prompt-len 32 --gen-len 8\n\n"
    "  kvplan verify -m openai/gpt-oss-20b --layers 2 --layout paged --block-size 16 --format yaml\n\n"
    "  kvplan verify -m Qwen/Qwen3-0.6B --layers 4 --layout quantized --kv-dtype int4\n\n"
    "  kvplan verify -m meta-llama/Llama-3.1-8B --layout static --prompt-len 4096 --gpu --tp 2\n\n"
    "  kvplan verify -m mistralai/Mistral-7B-v0.1 --layers 2 --engine transformers"
)


def verify(
    model: ModelOpt,
    gguf_file: GgufFileOpt = None,
    layout: Annotated[Layout, typer.Option("--layout", help="Cache layout of the decode.")] = Layout.dynamic,
    layers: Annotated[
        int | None,
        typer.Option("--layers", min=1, help="Decode only the first N layers; the prediction covers the same N."),
    ] = None,
    batch: BatchOpt = 1,
    beams: Annotated[int, typer.Option("--beams", min=1, help="Beams per sequence: batch x beams rows.")] = 1,
    prompt_len: Annotated[int, typer.Option("--prompt-len", min=1, help="Prompt tokens of the prefill.")] = 32,
    gen_len: Annotated[int, typer.Option("--gen-len", min=0, help="Decode steps after the prefill.")] = 8,
    kv_dtype: KvDtypeOpt = "auto",
    block_size: Annotated[
        int, typer.Option("--block-size", min=1, help="Tokens per block of the paged layout (vLLM's --block-size).")
    ] = 16,
    max_cache_len: Annotated[
        int | None,
        typer.Option("--max-cache-len", min=1, help="Slots of static/sliding caches (default prompt + gen)."),
    ] = None,
    quant_group_size: Annotated[
        int, typer.Option("--quant-group-size", min=1, help="Values per scale/zero group (quantized layout).")
    ] = 64,
    residual_length: Annotated[
        int, typer.Option("--residual-length", min=1, help="Full-precision recent tokens (quantized layout).")
    ] = 128,
    tp: Annotated[
        int,
        typer.Option("--tensor-parallel-size", "--tp", "-tp", min=1,
                     help="Ranks of torch.distributed (gloo on the CPU, nccl with --gpu), as vLLM's -tp."),
    ] = 1,
    engine: Annotated[
        Engine,
        typer.Option("--engine", help="kvplan: kvplan's own decode. transformers: build the Hugging Face model "
                     "(random weights), generate() and measure its cache against the hf-dynamic/hf-static profile "
                     "(the transformers extra: pip install '.[transformers]' in the kvplan checkout)."),
    ] = Engine.kvplan,
    gpu: Annotated[bool, typer.Option("--gpu", help="Decode on CUDA and measure the caching allocator.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights and inputs.")] = 0,
    max_memory: Annotated[
        str | None, typer.Option("--max-memory", help="Never plan to use more than this, e.g. 2GiB.")
    ] = None,
    bandwidth: Annotated[
        float | None, typer.Option("--bandwidth", help="GPU memory bandwidth in GB/s (default: known GPUs).")
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")] = True,
    set_: SetOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Run a real decode with torch and compare its cache bytes (and, on CUDA, the allocator) with the prediction.

    Exit code 1 when a measurement misses its tolerance.
    """
    if importlib.util.find_spec("torch") is None:
        raise InputError("kvplan verify needs torch, which is not installed",
                         "pip install '.[verify]' in the kvplan checkout (or: pip install torch)")
    from kvplan.api import load_geometry, normalise_overrides
    from kvplan.units import parse_size
    from kvplan.verify.predict import plan_verify
    from kvplan.verify.report import verify_report

    if engine is Engine.transformers and importlib.util.find_spec("transformers") is None:
        raise InputError("--engine transformers needs the transformers package, which is not installed",
                         "pip install '.[transformers]' in the kvplan checkout (or: pip install transformers)")
    overrides = normalise_overrides(set_)
    geometry, source = load_geometry(model, revision=revision, token=token, overrides=overrides, gguf_file=gguf_file)
    is_gguf = source.kind in ("gguf", "hub-gguf")
    if is_gguf and engine is Engine.transformers:
        raise InputError(
            f"--engine transformers builds the model from a config.json, and --model {model} is a GGUF file",
            "--engine kvplan decodes the GGUF's layer geometry with torch; for transformers pass the original "
            "model's config.json or Hub id (running llama.cpp itself is not supported: it would take a llama.cpp "
            "binary and parsing its llama_kv_cache log lines)",
        )
    options = {
        "layout": layout.value, "batch": batch, "beams": beams, "prompt_len": prompt_len, "gen_len": gen_len,
        "kv_dtype": kv_dtype, "block_size": block_size, "max_cache_len": max_cache_len,
        "quant_group_size": quant_group_size, "residual_length": residual_length, "tp": tp,
    }
    plan = plan_verify(geometry, num_layers=layers, **options)
    limit = parse_size(max_memory, what="--max-memory") if max_memory is not None else None
    if bandwidth is not None and not bandwidth > 0:
        raise InputError(f"--bandwidth must be a positive number of GB/s, got {bandwidth:g}", "e.g. --bandwidth 4800")
    if engine is Engine.transformers:
        from kvplan.verify.hf import cross_check

        measurement = cross_check(plan, model, revision=revision, token=token, overrides=overrides, gpu=gpu,
                                  seed=seed, progress=progress, max_memory=limit)
    else:
        from kvplan.verify.decode import run_verify

        measurement = run_verify(
            plan, gpu=gpu, seed=seed, progress=progress, max_memory=limit,
            bandwidth=int(bandwidth * 1e9) if bandwidth else None,
            replan=lambda n: plan_verify(geometry, num_layers=n, **options),
        )
    report = verify_report(plan, measurement, source, overrides=overrides)
    if is_gguf:
        report["notes"].append(  # type: ignore[union-attr]
            "GGUF: kvplan's own torch decode over the layer specs read from the file's metadata; llama.cpp itself "
            "is not run (compare its start-up log with kvplan capacity --engine llama.cpp --compare-log)")
    table = None
    if fmt is Format.table:
        from kvplan.report.render import verify_table

        table = verify_table(report)
    emit(report, fmt, output, table, inputs=(model,))
    if not report["verify"]["passed"]:
        raise typer.Exit(EXIT_NOT_FIT)

