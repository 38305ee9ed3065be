"""`kvplan capacity`: what fits on a GPU (tokens, concurrency, context, GPUs needed, decode floor)."""

from pathlib import Path
from typing import Annotated

import typer

import kvplan
from kvplan.cli.options import (
    AllowDefaultsOpt,
    BatchOpt,
    BlockSizeOpt,
    CacheTypeKOpt,
    CacheTypeVOpt,
    CmdOpt,
    CpuOffloadGbOpt,
    DpAttentionOpt,
    DpOpt,
    EnforceEagerOpt,
    EngineAutoOpt,
    FlashAttnOpt,
    Format,
    FormatOpt,
    GgufFileOpt,
    KvDtypeKOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelArg,
    ModelOpt,
    NglOpt,
    NkvoOpt,
    NoMlaOpt,
    NoWindowOpt,
    OutputOpt,
    PpOpt,
    PrefixCachingOpt,
    QuantizationOpt,
    RevisionOpt,
    StrictOpt,
    TokenOpt,
    VerboseOpt,
    emit,
    given_flags,
    lazy_table,
    one_model,
)
from kvplan.errors import EXIT_NOT_FIT
from kvplan.outfile import refuse_inputs
from kvplan.report.plot import check_plot_path, write_capacity_plot

GpuOpt = Annotated[str | None, typer.Option("--gpu", "-g", help="A catalog GPU, case-insensitive: H100, H100-80GB, "
                   "h100-sxm, H200, B200, A100-40GB, L40S, RTX4090, MI300X, M2-Ultra ... (kvplan gpus lists them); "
                   "local: this machine's GPU (nvidia-smi, torch.cuda, or rocm-smi; exit 2 when there is none).")]
GpuMemOpt = Annotated[str | None, typer.Option("--gpu-mem", help="Memory of one GPU for anything not in the "
                      "catalog (or to override it): 80GiB, 24G, 23.58GiB.")]
GpuBandwidthOpt = Annotated[str | None, typer.Option("--gpu-bandwidth", help="Memory bandwidth of one GPU, "
                            "e.g. 3.35TB/s (decimal units), for the decode floor.")]
NumGpusOpt = Annotated[int | None, typer.Option("--num-gpus", min=1, help="GPUs available (default: tp x pp); "
                       "with only --num-gpus, tp = num-gpus.")]
MaxModelLenOpt = Annotated[str | None, typer.Option("--max-model-len", help="Tokens per request, "
                           "as vLLM's --max-model-len and read as vLLM reads it: 32k = 32,000, 32K = 32,768 "
                           "(default: the model's maximum context).")]
CapSeqLenOpt = Annotated[str | None, typer.Option("--seq-len", "-s", help="--max-model-len as estimate spells and "
                         "reads it: k = 1024, so 32k = 32,768.")]
UtilOpt = Annotated[float | None, typer.Option("--gpu-memory-utilization", help="vLLM's "
                    "--gpu-memory-utilization (default 0.9): the share of total memory vLLM may use.")]
MemFracOpt = Annotated[float | None, typer.Option("--mem-fraction-static", help="SGLang's --mem-fraction-static "
                       "(default 0.88 on 1 GPU, less with more TP ranks).")]
FreeFracOpt = Annotated[float | None, typer.Option("--free-gpu-memory-fraction", help="TensorRT-LLM's "
                        "KvCacheConfig.free_gpu_memory_fraction (default 0.9 of memory left after weights and warm-up).")]
ReserveOpt = Annotated[str | None, typer.Option("--reserve", help="Memory per GPU kept for activations and "
                       "overhead, replacing kvplan's estimate (e.g. 2GiB).")]
KvBudgetOpt = Annotated[str | None, typer.Option("--kv-budget", help="KV bytes per GPU as the engine logs them "
                        "(vLLM 'Available KV cache memory'), skipping the budget rule: e.g. 3.8125GiB; or one per "
                        "rank, comma-separated (10GiB,9.5GiB): the pool is sized by the rank with the least room.")]
WeightsBytesOpt = Annotated[str | None, typer.Option("--weights-bytes", help="Checkpoint size, overriding the "
                            "count from config.json (e.g. 16GB).")]
WeightsFromOpt = Annotated[str, typer.Option("--weights-from", help="auto (Hub safetensors metadata for Hub models "
                           "when online, else config.json), config, or safetensors.")]
WeightsQuantOpt = Annotated[str | None, typer.Option("--weights-quant", help="llama.cpp: the GGUF type the weights "
                            "are sized as, by llama.cpp's per-tensor rule (llama-quant.cpp): Q4_K_M (default, the "
                            "common llama.cpp quant), Q5_K_M, Q6_K, Q8_0, F16, BF16. A .gguf --model keeps its own.")]
TpOptional = Annotated[int | None, typer.Option("--tensor-parallel-size", "--tp", "-tp", min=1, help="Tensor-parallel "
                       "GPUs, as vLLM's --tensor-parallel-size (default 1, or --num-gpus / --pp).")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weight dtype, as vLLM's --dtype: auto (the engine's rule: "
                    "vLLM, SGLang, TensorRT-LLM and llama.cpp serve float32 checkpoints in 16 bits, transformers "
                    "keeps them), bfloat16, float16 (half) or float32 (float).")]
EngineVersionOpt = Annotated[str | None, typer.Option("--engine-version", help="The engine release whose log lines "
                            "engine_log prints (and vLLM's budget and prefix-caching defaults): vLLM 0.6 (V0), 0.7-v1 "
                            "(0.7 with VLLM_USE_V1=1), 0.11 (0.10-0.20 token formula), 0.33 (default); SGLang 0.5.23 "
                            "(default), older omit dtype; TensorRT-LLM 0.8 (Allocate N bytes lines).")]
KvuOpt = Annotated[bool, typer.Option("--kv-unified", "-kvu", help="llama.cpp -kvu: one cell pool for all slots "
                   "(llama-server's default with -np auto).")]
UbatchOpt = Annotated[int | None, typer.Option("--ubatch-size", "-ub", min=1, help="llama.cpp --ubatch-size "
                      "(n_ubatch, default 512): the SWA cache's slack.")]
TensorSplitOpt = Annotated[str | None, typer.Option("--tensor-split", "-ts", help="llama.cpp --tensor-split: layer "
                           "proportions per device, e.g. 3,1 (per-device KV buffer lines).")]
CtxSizeOpt = Annotated[str | None, typer.Option("--ctx-size", "-c", help="llama.cpp -c: cells over all slots; "
                       "with -np N, each slot gets ctx-size / N tokens (sets --max-model-len and --batch). An integer, as "
                       "llama.cpp reads it (it reads -c 32k as 32).")]
ParallelOpt = Annotated[int | None, typer.Option("--parallel", "-np", min=1, help="llama.cpp -np: slots "
                        "(sequences); with -c sets --batch.")]
CompareLogOpt = Annotated[Path | None, typer.Option("--compare-log", help="A pasted start-up log of vLLM, SGLang, "
                          "llama.cpp or TensorRT-LLM: put each KV figure it logs beside kvplan's, with the difference "
                          "and a likely cause. Without --gpu/--kv-budget, vLLM's logged 'Available KV cache memory' "
                          "is the budget.")]
CapacityPlotOpt = Annotated[Path | None, typer.Option("--plot", help="Draw the KV cache per GPU against context "
                            "length, with the KV budget left after weights, to FILE (.png or .svg; needs the "
                            "plot extra: pip install '.[plot]' in the kvplan checkout).")]
RequireFitOpt = Annotated[bool, typer.Option("--require-fit", help="Exit 1 when --batch requests of --max-model-len "
                          "tokens do not fit (0 when they do; 2 for bad input), for CI.")]


EPILOG = (
    "Examples:\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-8B --gpu H100 --max-model-len 32k\n\n"
    "  kvplan capacity Qwen/Qwen3-8B --gpu local\n\n"
    "  kvplan capacity --gpu H100 --cmd 'vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k -tp 2'\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-8B --engine vllm --kv-budget 3.8125GiB --max-model-len 20000\n\n"
    "  kvplan capacity -m openai/gpt-oss-120b --kv-budget 5779095552 --engine-version 0.11\n\n"
    "  kvplan capacity -m openai/gpt-oss-120b --compare-log vllm-startup.log\n\n"
    "  kvplan capacity -m meta-llama/Llama-3.1-70B --gpu A100-80GB --tp 4 --batch 16 --require-fit\n\n"
    "  kvplan capacity -m openai/gpt-oss-120b --gpu-mem 96GiB --gpu-bandwidth 1.8TB/s --format yaml"
)


def capacity(
    model_arg: ModelArg = None,
    model: ModelOpt = None,
    cmd: CmdOpt = None,
    gguf_file: GgufFileOpt = None,
    gpu: GpuOpt = None,
    gpu_mem: GpuMemOpt = None,
    gpu_bandwidth: GpuBandwidthOpt = None,
    num_gpus: NumGpusOpt = None,
    tp: TpOptional = None,
    pp: PpOpt = 1,
    engine: EngineAutoOpt = None,
    kv_dtype: KvDtypeKOpt = "auto",
    dtype: DtypeOpt = "auto",
    max_model_len: MaxModelLenOpt = None,
    seq_len: CapSeqLenOpt = None,
    batch: BatchOpt = 1,
    gpu_memory_utilization: UtilOpt = None,
    mem_fraction_static: MemFracOpt = None,
    free_gpu_memory_fraction: FreeFracOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    reserve: ReserveOpt = None,
    kv_budget: KvBudgetOpt = None,
    weights_bytes: WeightsBytesOpt = None,
    weights_from: WeightsFromOpt = "auto",
    weights_quant: WeightsQuantOpt = None,
    block_size: BlockSizeOpt = None,
    require_fit: RequireFitOpt = False,
    engine_version: EngineVersionOpt = None,
    dp: DpOpt = 1,
    enable_dp_attention: DpAttentionOpt = False,
    kv_unified: KvuOpt = False,
    cache_type_k: CacheTypeKOpt = None,
    cache_type_v: CacheTypeVOpt = None,
    no_window: NoWindowOpt = False,
    enable_prefix_caching: PrefixCachingOpt = None,
    no_mla: NoMlaOpt = False,
    ubatch_size: UbatchOpt = None,
    tensor_split: TensorSplitOpt = None,
    ctx_size: CtxSizeOpt = None,
    parallel: ParallelOpt = None,
    n_gpu_layers: NglOpt = None,
    flash_attn: FlashAttnOpt = None,
    no_kv_offload: NkvoOpt = False,
    enforce_eager: EnforceEagerOpt = False,
    quantization: QuantizationOpt = None,
    cpu_offload_gb: CpuOffloadGbOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    compare_log: CompareLogOpt = None,
    plot: CapacityPlotOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
    allow_defaults: AllowDefaultsOpt = False,
) -> None:
    """What fits on a GPU: KV blocks and tokens, max concurrency and context, GPUs needed, decode floor."""
    # NOTE: with --cmd the launch line names the model; a model given beside it must be the same one.
    flags = () if model_arg or model or cmd else given_flags(capacity, locals())  # NOTE: a hint keeps them
    model = one_model(model_arg, model, "capacity", flags) if cmd is None or model_arg or model else None
    if plot is not None:
        check_plot_path(plot)  # before any work
        refuse_inputs(plot, (model, compare_log), flag="--plot")
    result = kvplan.capacity(
        model, gpu=gpu, gpu_mem=gpu_mem, gpu_bandwidth=gpu_bandwidth, num_gpus=num_gpus, tp=tp, pp=pp, engine=engine,
        kv_dtype=kv_dtype, dtype=dtype, max_model_len=max_model_len, seq_len=seq_len, batch=batch,
        gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
        free_gpu_memory_fraction=free_gpu_memory_fraction, max_num_batched_tokens=max_num_batched_tokens,
        reserve=reserve, kv_budget=kv_budget, weights_bytes=weights_bytes, weights_from=weights_from,
        weights_quant=weights_quant, block_size=block_size, engine_version=engine_version, dp=dp,
        enable_dp_attention=enable_dp_attention, kv_unified=kv_unified, ubatch_size=ubatch_size,
        tensor_split=tensor_split, ctx_size=ctx_size, parallel=parallel, compare_log=compare_log, revision=revision,
        token=token, gguf_file=gguf_file, cache_type_k=cache_type_k, cache_type_v=cache_type_v, no_window=no_window,
        no_mla=no_mla, strict=strict, allow_defaults=allow_defaults, n_gpu_layers=n_gpu_layers, flash_attn=flash_attn, no_kv_offload=no_kv_offload,
        enforce_eager=enforce_eager, quantization=quantization, cpu_offload_gb=cpu_offload_gb,
        max_num_seqs=max_num_seqs, cmd=cmd, enable_prefix_caching=enable_prefix_caching,
    )
    report = result.to_dict()
    if plot is not None:
        write_capacity_plot(plot, result, report)
    emit(report, fmt, output, lazy_table("capacity_table", report, verbose=verbose) if fmt is Format.table else None,
         inputs=(model, compare_log), verbose=verbose)
    if plot is not None:
        typer.echo(f"wrote {plot}", err=True)
    if require_fit and not report["capacity"]["fits"]:
        typer.echo("Does not fit: " + "; ".join(report["suggestions"]), err=True)
        raise typer.Exit(EXIT_NOT_FIT)
