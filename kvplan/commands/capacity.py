"""`kvplan capacity`: what fits on a GPU (tokens, concurrency, context, GPUs needed, decode floor)."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli import (
    BatchOpt,
    BlockSizeOpt,
    EngineOpt,
    Format,
    FormatOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    ModelOpt,
    OutputOpt,
    PpOpt,
    RevisionOpt,
    TokenOpt,
    _lazy_table,
    app,
    cli_errors,
    emit,
)

GpuOpt = Annotated[str | None, typer.Option("--gpu", "-g", help="A catalog GPU, case-insensitive: H100, H100-80GB, "
                   "h100-sxm, H200, B200, A100-40GB, L40S, RTX4090, MI300X, M2-Ultra ... (kvplan gpus lists them).")]
GpuMemOpt = Annotated[str | None, typer.Option("--gpu-mem", help="Memory of one GPU for anything not in the "
                      "catalog (or to override it): 80GiB, 24G, 23.58GiB.")]
GpuBandwidthOpt = Annotated[str | None, typer.Option("--gpu-bandwidth", help="Memory bandwidth of one GPU, "
                            "e.g. 3.35TB/s (decimal units), for the decode floor.")]
NumGpusOpt = Annotated[int | None, typer.Option("--num-gpus", min=1, help="GPUs available (default: tp x pp); "
                       "with only --num-gpus, tp = num-gpus.")]
MaxModelLenOpt = Annotated[str | None, typer.Option("--max-model-len", help="Tokens per request, as vLLM's "
                           "--max-model-len (default: the model's maximum context). 4096, 32k, 128k.")]
UtilOpt = Annotated[float | None, typer.Option("--gpu-memory-utilization", help="vLLM's "
                    "--gpu-memory-utilization (default 0.9): the share of total memory vLLM may use.")]
MemFracOpt = Annotated[float | None, typer.Option("--mem-fraction-static", help="SGLang's --mem-fraction-static "
                       "(default 0.88 on 1 GPU, less with more TP ranks).")]
FreeFracOpt = Annotated[float | None, typer.Option("--free-gpu-memory-fraction", help="TensorRT-LLM's "
                        "KvCacheConfig.free_gpu_memory_fraction (default 0.9 of memory left after weights and warm-up).")]
ReserveOpt = Annotated[str | None, typer.Option("--reserve", help="Memory per GPU kept for activations and "
                       "overhead, replacing kvplan's estimate (e.g. 2GiB).")]
KvBudgetOpt = Annotated[str | None, typer.Option("--kv-budget", help="KV bytes per GPU as the engine logs them "
                        "(vLLM 'Available KV cache memory'), skipping the budget rule: e.g. 3.8125GiB.")]
WeightsBytesOpt = Annotated[str | None, typer.Option("--weights-bytes", help="Checkpoint size, overriding the "
                            "count from config.json (e.g. 16GB).")]
WeightsFromOpt = Annotated[str, typer.Option("--weights-from", help="auto (Hub safetensors metadata for Hub models "
                           "when online, else config.json), config, or safetensors.")]
TpOptional = Annotated[int | None, typer.Option("--tensor-parallel-size", "--tp", min=1, help="Tensor-parallel "
                       "GPUs, as vLLM's --tensor-parallel-size (default 1, or --num-gpus / --pp).")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weight dtype, as vLLM's --dtype: auto (the engine's rule: "
                    "vLLM, SGLang, TensorRT-LLM and llama.cpp serve float32 checkpoints in 16 bits, transformers "
                    "keeps them), bfloat16, float16 (half) or float32 (float).")]
RequireFitOpt = Annotated[bool, typer.Option("--require-fit", help="Exit 1 when --batch requests of --max-model-len "
                          "tokens do not fit (0 when they do; 2 for bad input), for CI.")]


@app.command(
    epilog="Examples:\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-8B --gpu H100 --max-model-len 32k\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-8B --engine vllm --kv-budget 3.8125GiB --max-model-len 20000\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-70B --gpu A100-80GB --tp 4 --batch 16 --require-fit\n\n"
    "  kvplan capacity -m openai/gpt-oss-120b --gpu-mem 96GiB --gpu-bandwidth 1.8TB/s --format yaml",
)
def capacity(
    model: ModelOpt,
    gpu: GpuOpt = None,
    gpu_mem: GpuMemOpt = None,
    gpu_bandwidth: GpuBandwidthOpt = None,
    num_gpus: NumGpusOpt = None,
    tp: TpOptional = None,
    pp: PpOpt = 1,
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    dtype: DtypeOpt = "auto",
    max_model_len: MaxModelLenOpt = None,
    batch: BatchOpt = 1,
    gpu_memory_utilization: UtilOpt = None,
    mem_fraction_static: MemFracOpt = None,
    free_gpu_memory_fraction: FreeFracOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    reserve: ReserveOpt = None,
    kv_budget: KvBudgetOpt = None,
    weights_bytes: WeightsBytesOpt = None,
    weights_from: WeightsFromOpt = "auto",
    block_size: BlockSizeOpt = None,
    require_fit: RequireFitOpt = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """What fits on a GPU: KV blocks and tokens, max concurrency and context, GPUs needed, decode floor."""
    with cli_errors():
        from kvplan.arch import parse_config
        from kvplan.capacity import CapacityInputs, capacity_report, plan_capacity
        from kvplan.errors import EXIT_NOT_FIT
        from kvplan.gpus import custom_gpu, lookup, parse_bandwidth
        from kvplan.sources import load_raw_config
        from kvplan.units import parse_size, parse_tokens
        from kvplan.weights import resolve_weights

        gpu_spec = resolve_gpu(gpu, gpu_mem, gpu_bandwidth, lookup, custom_gpu, parse_size, parse_bandwidth)

        def size(text: str | None, what: str) -> int | None:
            return parse_size(text, what=what) if text is not None else None

        config, source, model_id = load_raw_config(model, revision=revision, token=token)
        geometry = parse_config(config, model_id=model_id)
        kv_budget_bytes = size(kv_budget, "--kv-budget")
        weights, weight_notes = resolve_weights(
            config, model_id=model_id, source_kind=source.kind, weights_bytes=size(weights_bytes, "--weights-bytes"),
            weights_from=weights_from, revision=revision, token=token, required=kv_budget_bytes is None,
        )
        inputs = CapacityInputs(
            gpu=gpu_spec, engine=engine, tp=tp if tp is not None else max(1, (num_gpus or 1) // pp),
            pp=pp, num_gpus=num_gpus, kv_dtype=kv_dtype, dtype=dtype,
            max_model_len=parse_tokens(max_model_len, what="--max-model-len") if max_model_len else None,
            batch=batch, block_size=block_size, gpu_memory_utilization=gpu_memory_utilization,
            mem_fraction_static=mem_fraction_static, free_gpu_memory_fraction=free_gpu_memory_fraction,
            max_num_batched_tokens=parse_tokens(max_num_batched_tokens, what="--max-num-batched-tokens")
            if max_num_batched_tokens else None,
            reserve_bytes=size(reserve, "--reserve"), kv_budget_bytes=kv_budget_bytes,
        )
        report = capacity_report(plan_capacity(geometry, weights, inputs), source)
        report["notes"] = report["notes"] + weight_notes  # type: ignore[operator]
        emit(report, fmt, output, _lazy_table("capacity_table", report) if fmt is Format.table else None,
             inputs=(model,))
        if require_fit and not report["capacity"]["fits"]:  # type: ignore[index]
            typer.echo("Does not fit: " + "; ".join(report["suggestions"]), err=True)  # type: ignore[arg-type]
            raise typer.Exit(EXIT_NOT_FIT)


def resolve_gpu(gpu, gpu_mem, gpu_bandwidth, lookup, custom_gpu, parse_size, parse_bandwidth):  # type: ignore[no-untyped-def]
    """--gpu from the catalog, with --gpu-mem / --gpu-bandwidth overriding its figures."""
    import dataclasses

    from kvplan.errors import InputError

    bandwidth = parse_bandwidth(gpu_bandwidth) if gpu_bandwidth is not None else None
    if gpu is not None:
        spec = lookup(gpu)
        if gpu_mem is not None:
            spec = dataclasses.replace(spec, memory_bytes=parse_size(gpu_mem, what="--gpu-mem"), memory_source="--gpu-mem")
        if bandwidth is not None:
            spec = dataclasses.replace(spec, bandwidth_bytes_per_s=bandwidth)
        return spec
    if gpu_mem is None:
        raise InputError("no GPU given", "pass --gpu NAME (kvplan gpus lists them) or --gpu-mem SIZE, e.g. --gpu-mem 80GiB")
    return custom_gpu(parse_size(gpu_mem, what="--gpu-mem"), bandwidth, name=f"custom {gpu_mem}")


@app.command(epilog="Examples:\n\n  kvplan gpus\n\n  kvplan gpus --format json")
def gpus(fmt: FormatOpt = Format.table) -> None:
    """List the GPU catalog: memory and bandwidth of each GPU `--gpu` accepts."""
    with cli_errors():
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
        emit(report, fmt, None, _lazy_table("gpus_table", report) if fmt is Format.table else None)
