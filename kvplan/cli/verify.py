"""`kvplan verify`: run a real decode with torch, or the real llama.cpp, and compare its cache with the prediction.

torch and llama_cpp are imported only inside the command (kvplan/verify/), never when this module loads.
"""

import importlib.util
from enum import Enum
from typing import Annotated, Any

import typer

from kvplan.api import load_geometry, normalise_overrides
from kvplan.cli.options import (
    BatchOpt,
    CacheTypeKOpt,
    CacheTypeVOpt,
    Format,
    FormatOpt,
    GgufFileOpt,
    KvDtypeOpt,
    KvUnifiedOpt,
    ModelArg,
    ModelOpt,
    OutputOpt,
    RevisionOpt,
    SetOpt,
    TokenOpt,
    echo_wrapped,
    emit,
    one_model,
)
from kvplan.errors import EXIT_NOT_FIT, InputError
from kvplan.units import parse_size


class Engine(str, Enum):
    kvplan = "kvplan"
    transformers = "transformers"
    llamacpp = "llama.cpp"


class FlashAttn(str, Enum):
    on = "on"
    off = "off"
    auto = "auto"


class Measure(str, Enum):
    log = "log"
    buffers = "buffers"
    tensors = "tensors"


# ---- llama.cpp's own flags (--engine llama.cpp), spelt as llama-server and llama-cli spell them ----------
CtxSizeOpt = Annotated[int, typer.Option("--ctx-size", "-c", min=0, help="--engine llama.cpp: llama.cpp -c, cells over "
                       "all sequences (0: the model's context length).")]
ParallelOpt = Annotated[int, typer.Option("--parallel", "-np", min=1, help="--engine llama.cpp: llama.cpp -np, "
                        "sequences (n_seq_max).")]
FlashAttnOpt = Annotated[FlashAttn, typer.Option("--flash-attn", "-fa", help="--engine llama.cpp: llama.cpp -fa "
                         "(a quantised V cache needs it on; auto turns it on where it can).")]
UbatchOpt = Annotated[int, typer.Option("--ubatch-size", "-ub", min=1, help="--engine llama.cpp: llama.cpp -ub "
                      "(n_ubatch, default 512): the SWA cache's slack.")]
NglOpt = Annotated[int, typer.Option("--n-gpu-layers", "-ngl", help="--engine llama.cpp: llama.cpp -ngl (default 0 "
                   "here: every layer and its cache on the CPU).")]
SwaFullOpt = Annotated[bool, typer.Option("--swa-full", help="--engine llama.cpp: llama.cpp --swa-full (the SWA cache "
                       "as large as the base cache).")]
MeasureOpt = Annotated[Measure, typer.Option("--measure", help="--engine llama.cpp: log (llama.cpp's dry run: its cache "
                       "lines, 0.01 MiB; nothing allocated), buffers (the caches allocated: adds the buffer lines) or "
                       "tensors (and a one-token decode: every cache tensor's bytes, to the byte).")]


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
    "  kvplan verify -m mistralai/Mistral-7B-v0.1 --layers 2 --engine transformers\n\n"
    "  kvplan verify --engine llama.cpp -m model-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0 -fa on\n\n"
    "  kvplan verify --engine llama.cpp -m google/gemma-3-12b-it -c 8192 --measure tensors"
)


def verify(
    model_arg: ModelArg = None,
    model: ModelOpt = None,
    gguf_file: GgufFileOpt = None,
    layout: Annotated[Layout, typer.Option("--layout", help="Cache layout of the decode.")] = Layout.dynamic,
    layers: Annotated[
        int | None,
        typer.Option("--layers", min=1, help="Decode only the first N layers; the prediction covers the same N."),
    ] = None,
    batch: BatchOpt = 1,
    beams: Annotated[int, typer.Option("--beams", min=1, help="Beams per sequence: batch x beams rows.")] = 1,
    prompt_len: Annotated[int, typer.Option("--prompt-len", min=1, help="Prompt tokens of the prefill (an integer: 4096, not 4k).")] = 32,
    gen_len: Annotated[int, typer.Option("--gen-len", min=0, help="Decode steps after the prefill (an integer).")] = 8,
    kv_dtype: KvDtypeOpt = "auto",
    block_size: Annotated[
        int, typer.Option("--block-size", min=1, help="Tokens per block of the paged layout (vLLM's --block-size).")
    ] = 16,
    max_cache_len: Annotated[
        int | None,
        typer.Option("--max-cache-len", min=1, help="Slots of static/sliding caches (default prompt + gen; an integer)."),
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
                     "(pip install '.[transformers]' in the kvplan checkout). llama.cpp: create the context with the "
                     "real llama.cpp and compare every cache it makes with the llama.cpp profile "
                     "(pip install '.[llamacpp]' in the kvplan checkout)."),
    ] = Engine.kvplan,
    ctx_size: CtxSizeOpt = 0,
    parallel: ParallelOpt = 1,
    cache_type_k: CacheTypeKOpt = None,
    cache_type_v: CacheTypeVOpt = None,
    flash_attn: FlashAttnOpt = FlashAttn.auto,
    kv_unified: KvUnifiedOpt = False,
    ubatch_size: UbatchOpt = 512,
    n_gpu_layers: NglOpt = 0,
    swa_full: SwaFullOpt = False,
    measure: MeasureOpt = Measure.log,
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
    """Run a real decode with torch (or create the context with the real llama.cpp) and compare its cache bytes
    (and, on CUDA, the allocator) with the prediction.

    Exit code 1 when a measurement misses its tolerance.
    """
    model = one_model(model_arg, model, "verify")
    llama_flags = {"-c": ctx_size != 0, "-np": parallel != 1, "-ctk": cache_type_k is not None,
                   "-ctv": cache_type_v is not None, "-fa": flash_attn is not FlashAttn.auto, "-kvu": kv_unified,
                   "-ub": ubatch_size != 512, "-ngl": n_gpu_layers != 0, "--swa-full": swa_full,
                   "--measure": measure is not Measure.log}
    torch_flags = {"--layout": layout is not Layout.dynamic, "--layers": layers is not None, "--batch": batch != 1,
                   "--beams": beams != 1, "--tp": tp != 1, "--gpu": gpu}
    if engine is not Engine.llamacpp and any(llama_flags.values()):
        given = ", ".join(flag for flag, set_ in llama_flags.items() if set_)
        raise InputError(f"{given}: llama.cpp's flags, for --engine llama.cpp", "add --engine llama.cpp")
    if engine is Engine.llamacpp and any(torch_flags.values()):
        given = ", ".join(flag for flag, set_ in torch_flags.items() if set_)
        raise InputError(f"{given}: flags of the torch decode, not of --engine llama.cpp",
                         "llama.cpp takes -c (cells), -np (sequences), -ctk/-ctv, -fa, -kvu, -ub, -ngl, --swa-full")
    if engine is Engine.llamacpp:
        # NOTE: lazy: nothing outside kvplan/verify imports it at module level (torch; tests/test_imports.py).
        from kvplan.verify.llamacpp import make_flags, verify_llamacpp

        flags = make_flags(
            ctx_size=ctx_size, parallel=parallel, cache_type_k=cache_type_k or (kv_dtype if kv_dtype != "auto" else "f16"),
            cache_type_v=cache_type_v or (kv_dtype if kv_dtype != "auto" else None), flash_attn=flash_attn.value,
            kv_unified=kv_unified, ubatch_size=ubatch_size, n_gpu_layers=n_gpu_layers, swa_full=swa_full)
        report = verify_llamacpp(model, flags, measure=measure.value, revision=revision, token=token,
                                 gguf_file=gguf_file, overrides=set_)
        table = None
        if fmt is Format.table:
            # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
            from kvplan.report.render_llamacpp import verify_llamacpp_table

            table = verify_llamacpp_table(report)
        emit(report, fmt, output, table, inputs=(model,))
        if not report["verify"]["passed"]:
            raise typer.Exit(EXIT_NOT_FIT)
        return
    if importlib.util.find_spec("torch") is None:
        raise InputError("kvplan verify needs torch, which is not installed",
                         "pip install '.[verify]' in the kvplan checkout (or: pip install torch)")
    # NOTE: lazy: nothing outside kvplan/verify imports it at module level (torch; tests/test_imports.py).
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
            "--engine kvplan decodes the GGUF's layer geometry with torch, --engine llama.cpp runs llama.cpp on the "
            "file; for transformers pass the original model's config.json or Hub id",
        )
    options: dict[str, Any] = {
        "layout": layout.value, "batch": batch, "beams": beams, "prompt_len": prompt_len, "gen_len": gen_len,
        "kv_dtype": kv_dtype, "block_size": block_size, "max_cache_len": max_cache_len,
        "quant_group_size": quant_group_size, "residual_length": residual_length, "tp": tp,
    }
    plan = plan_verify(geometry, num_layers=layers, **options)
    limit = parse_size(max_memory, what="--max-memory") if max_memory is not None else None
    if bandwidth is not None and not bandwidth > 0:
        raise InputError(f"--bandwidth must be a positive number of GB/s, got {bandwidth:g}", "e.g. --bandwidth 4800")
    if engine is Engine.transformers:
        # NOTE: lazy: nothing outside kvplan/verify imports it at module level (torch; tests/test_imports.py).
        from kvplan.verify.hf import cross_check

        measurement = cross_check(plan, model, revision=revision, token=token, overrides=overrides, gpu=gpu,
                                  seed=seed, progress=progress, max_memory=limit)
    else:
        # NOTE: lazy: nothing outside kvplan/verify imports it at module level (torch; tests/test_imports.py).
        from kvplan.verify.decode import run_verify

        if not gpu:
            # NOTE: lazy: nothing outside kvplan/verify imports it at module level (torch; tests/test_imports.py).
            from kvplan.verify.cost import foretell

            warning = foretell(plan, lambda n, **given: plan_verify(geometry, num_layers=n, **{**options, **given}))
            if warning is not None:
                echo_wrapped(warning)
        measurement = run_verify(
            plan, gpu=gpu, seed=seed, progress=progress, max_memory=limit,
            bandwidth=int(bandwidth * 1e9) if bandwidth else None,
            replan=lambda n: plan_verify(geometry, num_layers=n, **options),
        )
    gguf_note = ("GGUF: kvplan's own torch decode over the layer specs read from the file's metadata; llama.cpp "
                 "itself is not run (kvplan verify --engine llama.cpp runs it)")
    report = verify_report(plan, measurement, source, overrides=overrides, notes=(gguf_note,) if is_gguf else ())
    table = None
    if fmt is Format.table:
        # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
        from kvplan.report.render import verify_table

        table = verify_table(report)
    emit(report, fmt, output, table, inputs=(model,))
    if not report["verify"]["passed"]:
        raise typer.Exit(EXIT_NOT_FIT)

