"""`kvplan recommend`: from a target (C requests of N tokens) to the cheapest deployments and their launch commands."""

from pathlib import Path
from typing import Annotated

import typer

import kvplan
from kvplan.cli.options import (
    Format,
    FormatOpt,
    GgufFileOpt,
    ModelArg,
    ModelOpt,
    OutputOpt,
    RevisionOpt,
    TokenOpt,
    emit,
    one_model,
)

RecMaxModelLenOpt = Annotated[str, typer.Option("--max-model-len", help="Tokens per request, as vLLM's "
                              "--max-model-len (32k = 32,000 as vLLM reads it; 32768).")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, help="Requests of --max-model-len tokens "
                           "held at once.")]
GpuListOpt = Annotated[str, typer.Option("--gpu", "-g", help="Catalog GPUs to try, comma-separated (H100,H200,L40S), "
                       "or all (kvplan gpus lists them).")]
EngineListOpt = Annotated[list[str] | None, typer.Option("--engine", help="Engines to try (repeat or comma-separate): "
                          "vllm, sglang, trtllm, llama.cpp (default: llama.cpp for a GGUF, else vllm).")]
KvDtypeListOpt = Annotated[str | None, typer.Option("--kv-dtype", "--kv-cache-dtype", help="KV dtypes to try, "
                           "comma-separated (default: the model's dtype, and fp8 where the engine takes it).")]
MaxGpusOpt = Annotated[int | None, typer.Option("--max-gpus", min=1, help="The most GPUs a deployment may use "
                       "(default 64).")]
NodesOpt = Annotated[int | None, typer.Option("--nodes", min=1, help="The most nodes (default: as many as --max-gpus "
                     "fills); pipeline stages go across nodes, tensor parallelism within one.")]
GpusPerNodeOpt = Annotated[int | None, typer.Option("--gpus-per-node", min=1, help="GPUs in one node (default 8; "
                           "Apple machines have 1).")]
PricesOpt = Annotated[Path | None, typer.Option("--prices", help="YAML file of GPU name to price per GPU-hour "
                      "(H100: 2.49): rank by cost per hour.")]
MaxItlOpt = Annotated[float | None, typer.Option("--max-itl", min=0, help="Drop deployments whose decode floor (bytes "
                      "one decode step reads / memory bandwidth, a lower bound on inter-token latency) is above MS.")]
TopOpt = Annotated[int | None, typer.Option("--top", min=0, help="Deployments to list (default 10; 0: all).")]

EPILOG = (
    "Examples:\n\n"
    "  kvplan recommend -m meta-llama/Llama-3.1-8B --max-model-len 32k --concurrency 64\n\n"
    "  kvplan recommend -m meta-llama/Llama-3.1-70B --max-model-len 8192 --concurrency 32 --gpu H100,H200,L40S --prices prices.yaml\n\n"
    "  kvplan recommend -m deepseek-ai/DeepSeek-V3 --max-model-len 32k --concurrency 128 --engine sglang --max-itl 50\n\n"
    "  kvplan recommend -m model-Q4_K_M.gguf --max-model-len 8192 --concurrency 4 --engine llama.cpp --gpu RTX-4090,M2-Ultra"
)


def recommend(
    model_arg: ModelArg = None,
    model: ModelOpt = None,
    *,
    max_model_len: RecMaxModelLenOpt,
    concurrency: ConcurrencyOpt = 1,
    gpu: GpuListOpt = "all",
    engine: EngineListOpt = None,
    kv_dtype: KvDtypeListOpt = None,
    max_gpus: MaxGpusOpt = None,
    nodes: NodesOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    prices: PricesOpt = None,
    max_itl: MaxItlOpt = None,
    top: TopOpt = None,
    gguf_file: GgufFileOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """What to run a model on: the cheapest deployments holding --concurrency requests of --max-model-len tokens,
    with each engine's launch command."""
    model = one_model(model_arg, model, "recommend")
    result = kvplan.recommend(
        model, max_model_len=max_model_len, concurrency=concurrency, gpu=gpu, engine=engine, kv_dtype=kv_dtype,
        max_gpus=max_gpus, nodes=nodes, gpus_per_node=gpus_per_node, prices=prices, max_itl=max_itl, top=top,
        revision=revision, token=token, gguf_file=gguf_file,
    )
    report = result.to_dict()
    table = None
    if fmt is Format.table:
        # NOTE: lazy: the recommender behind it costs `kvplan --help` (which builds every command) 22 ms at import.
        from kvplan.report.recommend import recommend_table

        table = recommend_table(report)
    emit(report, fmt, output, table, inputs=(model, prices))
