"""What every command shares: the options (each declared once, as an ``Annotated`` alias) and the output.

Data goes to stdout (a rich table, YAML or JSON), notes to stderr, and ``--output`` writes a copy.
Command modules import this module and the pure core, never each other or :mod:`kvplan.cli.root`.
"""

from __future__ import annotations

import inspect
import shlex
import shutil
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer
from typer.models import OptionInfo

from kvplan.errors import InputError
from kvplan.outfile import refuse_inputs, write_atomic
from kvplan.report import to_json, to_yaml
from kvplan.textsafe import printable


class Format(str, Enum):
    table = "table"
    yaml = "yaml"
    json = "json"


# ---- shared options (declared once) -------------------------------------------------------------
_MODEL_HELP = ("A config.json path (or a folder with one), a bundled model (Hub id or short alias, see `kvplan "
               "models`), any Hugging Face Hub repo id or model page URL, or a GGUF: a .gguf file (any shard of a "
               "split set), a folder of one GGUF model, or org/repo:Q4_K_M as llama.cpp's -hf writes it.")
ModelOpt = Annotated[Optional[str], typer.Option("--model", "-m", help=_MODEL_HELP + " Or give it first, without -m.")]
#: The model given first, without -m: `kvplan capacity Qwen/Qwen3-8B --gpu H100`.
ModelArg = Annotated[Optional[str], typer.Argument(metavar="[MODEL]", show_default=False,
                                                   help="The model, as --model/-m takes it.")]


def one_model(positional: str | None, option: str | None, command: str, flags: Sequence[str] = ()) -> str:
    """The model given first or with --model/-m: one of them, not both and not neither (exit 2); ``flags``: the
    user's other options (:func:`given_flags`), kept in the hint so running it answers the same question."""
    if positional is not None and option is not None and positional != option:
        raise InputError(f"two models given: {positional!r} first and --model {option!r}",
                         f"give one: kvplan {command} {option} ... or kvplan {command} --model {option} ...")
    model = option if option is not None else positional
    if model is None:
        launch = " or --cmd 'vllm serve MODEL ...'" if command in ("capacity", "estimate") else ""
        example = shlex.join(["kvplan", command, "Qwen/Qwen3-8B", *flags])
        raise InputError(f"kvplan {command} needs a model", f"e.g. {example} (or -m PATH, a "
                         f"config.json, a .gguf, a Hub id or URL{launch}; kvplan models lists the bundled ones)")
    return model


def given_flags(command: Callable[..., Any], values: Mapping[str, Any]) -> list[str]:
    """The options of ``command`` whose ``values`` (its locals) differ from their defaults, as the words that give
    them (``--gpu H100``, ``--no-window``), read from each option's typer declaration."""
    hints = typing.get_type_hints(command, include_extras=True)
    words: list[str] = []
    for name, parameter in inspect.signature(command).parameters.items():
        value = values.get(name, parameter.default)
        info = next((m for m in getattr(hints.get(name), "__metadata__", ()) if isinstance(m, OptionInfo)), None)
        if info is None or value is None or value == parameter.default or not isinstance(info.default, str):
            continue
        on, _, off = info.default.partition("/")  # NOTE: "--enable-x/--no-enable-x"
        if isinstance(value, bool):
            words += [on] if value else [off] if off else []
        else:
            words += [on, str(value.value if isinstance(value, Enum) else value)]
    return words


GgufFileOpt = Annotated[
    Optional[str],
    typer.Option("--gguf-file", help="The .gguf file in the --model Hub repo to read (its header only, by "
                 "ranged reads), as transformers' gguf_file: --model org/repo --gguf-file model-Q4_K_M.gguf."),
]
RevisionOpt = Annotated[Optional[str], typer.Option("--revision", help="Hub revision (branch, tag or commit).")]
TokenOpt = Annotated[Optional[str], typer.Option("--token", help="Hub token (default: HF_TOKEN).")]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", min=1, help="Sequences held at once.")]
SeqLenOpt = Annotated[
    Optional[str],
    typer.Option(
        "--seq-len", "-s",
        help="Tokens held per sequence: 4096, 4k (= 4096), 128k, 1M; k = 1024, so 32k = 32,768 (--max-model-len 32k "
        "is 32,000, as vLLM reads it). Default: the model's maximum context.",
    ),
]
#: vLLM's name for --seq-len, a separate option so notes can name the flag the user typed.
MaxModelLenOpt = Annotated[Optional[str], typer.Option("--max-model-len", help="vLLM's name for --seq-len, read as "
                           "vLLM reads it: 32k = 32,000, 32K = 32,768 (--seq-len 32k is 32,768).")]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype", "--kv-cache-dtype",
        help="KV element type (--kv-cache-dtype is vLLM's name; compare takes a list, bf16,fp8): auto (the config's dtype; f16 for llama.cpp), "
        "fp32, fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2, nvfp4, int8/int4/int2 (group scales, see "
        "--quant-group-size), llama.cpp q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (real block bytes).",
    ),
]
#: --kv-dtype with llama.cpp's -ctk/--cache-type-k spelling (estimate and capacity, which also take -ctv).
KvDtypeKOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype", "--kv-cache-dtype",
        help="KV element type (--kv-cache-dtype is vLLM's name; compare takes a list, bf16,fp8): auto (the config's dtype; f16 for llama.cpp), "
        "fp32, fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2, nvfp4, int8/int4/int2 (group scales, see "
        "--quant-group-size), llama.cpp q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (real block bytes): K and V alike.",
    ),
]
CacheTypeKOpt = Annotated[Optional[str], typer.Option("--cache-type-k", "-ctk", help="llama.cpp --cache-type-k: the K "
                          "cache type alone; V stays f16 (llama.cpp's default) unless -ctv. Instead of --kv-dtype.")]


EncoderLenOpt = Annotated[
    Optional[str],
    typer.Option("--encoder-len", help="Encoder positions for cross-attention (default: from the config); "
                 "k = 1024: 1.5k = 1,536."),
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option("--set", help="Override a config field: --set num_key_value_heads=8 (repeatable; dotted keys nest)."),
]
StrictOpt = Annotated[bool, typer.Option(
    "--strict", help="Refuse a config whose core geometry (layers, heads, hidden size, KV heads, head dim) would come "
    "from architecture defaults rather than the config (exit 2).")]
AllowDefaultsOpt = Annotated[bool, typer.Option(
    "--allow-defaults", help="Size a config whose layer count, heads or hidden size are missing, from the "
    "architecture's defaults (without it such a config is refused, exit 2); the answer's first line warns.")]
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

VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="The whole table: every figure behind the answer "
                       "and every note in full (the default prints the answer and the figures that decide it).")]

# ---- deployment options: vLLM's names where the meaning matches ------------------------
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Engine profile: ideal (the formula), vllm, sglang, trtllm, llama.cpp, hf-dynamic, hf-static. "
        "Each reproduces what that engine allocates (docs: concepts/engines).",
    ),
]
TpOpt = Annotated[int, typer.Option("--tensor-parallel-size", "--tp", "-tp", min=1, help="Tensor-parallel GPUs, as "
                  "vLLM's --tensor-parallel-size/-tp: each keeps max(1, H_kv // tp) KV heads; MLA is replicated.")]
PpOpt = Annotated[int, typer.Option("--pipeline-parallel-size", "--pp", "-pp", min=1, help="Pipeline stages, as vLLM's "
                  "--pipeline-parallel-size/-pp: layers split as vLLM get_pp_indices.")]
DpOpt = Annotated[int, typer.Option("--data-parallel-size", "--dp", "-dp", min=1, help="Data-parallel replicas, as "
                  "vLLM's --data-parallel-size/-dp and SGLang's --dp (each tp x pp GPUs; with --enable-dp-attention SGLang's "
                  "ranks split the --tp GPUs); "
                  "capacity answers per replica, estimate shares --batch over them.")]
DpAttentionOpt = Annotated[bool, typer.Option("--enable-dp-attention", help="SGLang --enable-dp-attention (attention "
                           "tp = tp / dp: the --dp ranks split the --tp GPUs), vLLM DP with --enable-expert-parallel, TensorRT-LLM "
                           "enable_attention_dp: one MLA latent per request instead of one per TP rank.")]
BlockSizeOpt = Annotated[Optional[int], typer.Option("--block-size", min=1, help="Tokens per KV block, as vLLM's "
                         "--block-size (default: the engine's; vLLM 16, 64 for MLA; TensorRT-LLM 32; SGLang page 1).")]
BeamsOpt = Annotated[int, typer.Option("--beams", min=1, help="Beams per request: B x beams sequences each keep a cache.")]
PromptLenOpt = Annotated[Optional[str], typer.Option("--prompt-len", help="Prompt tokens of each sequence (part of "
                         "--seq-len; k = 1024: 2k = 2,048); used by --share-prefix and the Hugging Face "
                         "residual/prefill peaks.")]
SharePrefixOpt = Annotated[bool, typer.Option("--share-prefix", help="Keep each prompt's full blocks once per request, "
                           "not per beam (prefix caching). Needs --prompt-len.")]
SharedPrefixTokensOpt = Annotated[Optional[str], typer.Option("--shared-prefix-tokens", help="Tokens of a prefix "
                                  "(system prompt) shared by all sequences (k = 1024: 2k = 2,048); its full blocks "
                                  "are kept once.")]
NoWindowOpt = Annotated[bool, typer.Option("--no-window", "--swa-full", help="Account sliding/chunked layers as full "
                        "attention, as vLLM --disable-hybrid-kv-cache-manager and llama.cpp --swa-full (its spelling "
                        "here too: the SWA cache gets as many cells as the base cache) do.")]
PrefixCachingOpt = Annotated[Optional[bool], typer.Option(
    "--enable-prefix-caching/--no-enable-prefix-caching", show_default=False,
    help="vLLM's --enable-prefix-caching (default: the --engine-version's, on for hybrid models from 0.28): with it "
         "each recurrent-state (Mamba, GDN) layer holds one more page per request (mamba_cache_mode align).")]
QuantGroupSizeOpt = Annotated[int, typer.Option("--quant-group-size", min=1, help="Values per scale + zero point of "
                              "int8/int4/int2 KV (transformers q_group_size).")]
ResidualLengthOpt = Annotated[int, typer.Option("--residual-length", min=1, help="Hugging Face QuantizedCache: recent "
                              "tokens kept in full precision (transformers residual_length).")]
OffloadOpt = Annotated[Optional[str], typer.Option("--offload", help="KV kept in CPU memory: a fraction (0.25) of "
                       "every GPU's cache, or layers:N (the first N layers' caches).")]
MaxNumBatchedTokensOpt = Annotated[Optional[str], typer.Option("--max-num-batched-tokens", help="vLLM's "
                                   "--max-num-batched-tokens (default 8192, vllm serve on >= 70 GiB GPUs), read as "
                                   "vLLM reads it (8k = 8,000, 8K = 8,192): sliding and chunked layers hold this "
                                   "much beyond the window.")]
MaxNumSeqsOpt = Annotated[Optional[int], typer.Option("--max-num-seqs", min=1, help="vLLM's --max-num-seqs: warns "
                          "when batch x beams exceeds it.")]
UbatchSizeOpt = Annotated[Optional[int], typer.Option("--ubatch-size", min=1, help="llama.cpp --ubatch-size "
                          "(n_ubatch, default 512): SWA cache slack.")]
NoMlaOpt = Annotated[bool, typer.Option("--no-mla", help="DeepSeek-style MLA models served with MLA off: per-head K "
                     "(qk_nope + qk_rope) and V (v_head_dim) as vLLM with VLLM_MLA_DISABLE=1 (V padded to K), an old "
                     "llama.cpp conversion without MLA, or transformers before 5.15 cache them.")]
CacheTypeVOpt = Annotated[Optional[str], typer.Option("--cache-type-v", "-ctv", help="llama.cpp --cache-type-v: the "
                          "V cache type when it differs from K (-ctk/--kv-dtype): f16, bf16, f32, q8_0, q4_0, q4_1, "
                          "q5_0, q5_1, iq4_nl. A quantised V needs flash attention (llama.cpp's -fa auto turns it on).")]
KvUnifiedOpt = Annotated[bool, typer.Option("--kv-unified", "-kvu", help="llama.cpp --kv-unified: one cell pool for all "
                         "sequences.")]
SwaRatioOpt = Annotated[Optional[float], typer.Option("--swa-full-tokens-ratio", help="SGLang's "
                        "--swa-full-tokens-ratio (default 0.8): SWA pool size over full pool size.")]
MaxCacheLenOpt = Annotated[Optional[str], typer.Option("--max-cache-len", help="hf-static max_cache_len: tokens "
                           "preallocated per sequence (default --seq-len; k = 1024: 4k = 4,096).")]

# ---- a pasted launch line, and the engines' own flags beside it (kvplan.launch) ----------------------------
CmdOpt = Annotated[Optional[str], typer.Option("--cmd", help="The engine's whole launch line, quoted: 'vllm serve "
                   "MODEL ...', 'python -m sglang.launch_server --model-path MODEL ...', 'llama-server -m F.gguf ...' "
                   "(or llama-cli), 'trtllm-serve MODEL ...'. The engine, the model and every flag that changes "
                   "memory are read as that engine reads them; the rest is named in a note. A kvplan option the "
                   "line also sets must agree with it (exit 2).")]
#: --model, optional: --cmd names the model too.
ModelOrCmdOpt = Annotated[Optional[str], ModelOpt.__metadata__[0]]
#: --engine, default from the model: llama.cpp for a GGUF.
EngineAutoOpt = Annotated[Optional[str], typer.Option("--engine", help="Engine profile: ideal (the formula), vllm, "
                          "sglang, trtllm, llama.cpp (ollama is read as llama.cpp), hf-dynamic, hf-static. Default: "
                          "llama.cpp for a GGUF model, else vllm (capacity) or ideal (estimate). Each reproduces what "
                          "that engine allocates (docs: concepts/engines).")]
NglOpt = Annotated[Optional[int], typer.Option("--n-gpu-layers", "-ngl", min=0, help="llama.cpp -ngl N: the last N "
                   "of the layers + output layer on the GPU, the rest (weights and KV) in host memory, as llama.cpp "
                   "places them (default: all).")]
FlashAttnOpt = Annotated[Optional[str], typer.Option("--flash-attn", "-fa", help="llama.cpp -fa on|off|auto (default "
                         "auto): off refuses a quantised V cache, as llama.cpp does.")]
NkvoOpt = Annotated[bool, typer.Option("--no-kv-offload", "-nkvo", help="llama.cpp -nkvo: the KV cache in host "
                    "memory, none on the GPU.")]
EnforceEagerOpt = Annotated[bool, typer.Option("--enforce-eager", help="vLLM --enforce-eager: no CUDA graphs, so "
                            "none of their memory is taken from the KV budget (vLLM 0.20 on reserves it).")]
QuantizationOpt = Annotated[Optional[str], typer.Option("--quantization", help="vLLM/SGLang --quantization: fp8 "
                            "quantises a 16-bit checkpoint's linear weights on load; other methods must be the "
                            "checkpoint's own (its quantization_config).")]
CpuOffloadGbOpt = Annotated[Optional[float], typer.Option("--cpu-offload-gb", min=0, help="vLLM/SGLang "
                            "--cpu-offload-gb: GiB of each GPU's weights kept in host memory.")]
CtxSizeOpt = Annotated[Optional[str], typer.Option("--ctx-size", "-c", help="llama.cpp -c: cells over all slots "
                       "(an integer, as llama.cpp's std::stoi reads it); with -np N each slot gets ctx-size / N "
                       "tokens, rounded as llama.cpp rounds it when N does not divide it.")]
ParallelOpt = Annotated[Optional[int], typer.Option("--parallel", "-np", min=1, help="llama.cpp -np: slots "
                        "(sequences); with -c sets --batch.")]


class writing_stdout:
    """Writes to stdout: a full disk or a closed stdout is a one-line error (exit 2), a broken pipe exits 141."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc is None:
            if sys.stdout is None:  # started with stdout closed (>&-): nothing was written
                raise InputError("cannot write the report to stdout: it is closed", "use --output FILE")
            return False
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # stdout on a full disk, or closed
            raise InputError(f"cannot write the report to stdout: {exc.strerror or exc}",
                             "check where stdout goes (a full disk?), or use --output FILE") from None
        return False


def emit(
    report: dict[str, Any], fmt: Format, output: Path | None, table: Any, *, inputs: tuple[Any, ...] = (),
    verbose: bool | None = None,
) -> None:
    """Data on stdout (table, yaml or json); notes on stderr; optional file copy (``-``: stdout).

    ``inputs`` are the command's input files: --output may not name one of them. ``verbose`` False (a command's
    default where it has --verbose): each note in two lines at most, as many as fit in 20 lines with the table."""
    to_stdout = output is not None and str(output) == "-"
    if output is not None and not to_stdout:
        refuse_inputs(output, inputs)
        as_json = fmt is Format.json or output.suffix.lower() == ".json"
        write_atomic(output, to_json(report) if as_json else to_yaml(report))
    with writing_stdout():
        if fmt is Format.json:
            typer.echo(to_json(report), nl=False)
        elif fmt is Format.yaml or to_stdout:
            typer.echo(to_yaml(report), nl=False)
        else:
            # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
            from kvplan.report.console import make_console, print_counted
            from kvplan.report.render import notes_text, short_notes

            console = make_console()
            if verbose is False:
                used = print_counted(console, table)
                for line in short_notes(report, width=shutil.get_terminal_size((80, 24)).columns, used=used):
                    typer.echo(line, err=True)
                return
            console.print(table)
            for line in notes_text(report):
                echo_wrapped(line, prefix="note: ")


def echo_wrapped(text: str, *, prefix: str = "") -> None:
    """``prefix + text`` on stderr, wrapped on word boundaries at the terminal width (COLUMNS, else 80)."""
    width = max(shutil.get_terminal_size((80, 24)).columns, 20)
    typer.echo(textwrap.fill(prefix + printable(text), width=width, subsequent_indent=" " * min(len(prefix), 8),
                             break_long_words=False, break_on_hyphens=False), err=True)


def lazy_table(name: str, report: dict[str, Any], **options: Any) -> Any:
    """``kvplan.report.render.<name>(report, **options)``, importing rich only when a table is asked for."""
    # NOTE: lazy: rich (about 20 ms at import) for a table only: YAML, JSON and `kvplan --help` do without it.
    from kvplan.report import render

    return getattr(render, name)(report, **options)
