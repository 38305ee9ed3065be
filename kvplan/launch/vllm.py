"""vLLM's launch line: ``vllm serve MODEL ...`` or ``python -m vllm.entrypoints.openai.api_server --model ...``.

Flags as ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``) reads them: ``--max-model-len`` through
``human_readable_int_or_auto`` (``32k`` = 32,000, ``32K`` = 32,768, ``auto``/``-1`` = the model's maximum),
``--max-num-batched-tokens`` and ``--kv-cache-memory-bytes`` through ``human_readable_int``
(``vllm/utils/argparse_utils.py``); ``-tp``/``-pp``/``-dp``/``-q`` are its short spellings.
"""

from __future__ import annotations

from kvplan.engine_flags import vllm_human_int
from kvplan.errors import InputError
from kvplan.launch.shell import Flag, Keywords, to_float, to_int

ENGINE = "vllm"


def _max_model_len(value: str | None) -> Keywords:
    text = str(value).strip()
    if text.lower() in ("auto", "-1"):
        return {}  # the model's maximum context: kvplan's default
    return {"max_model_len": text}  # the API reads it as vLLM does (32k = 32,000)


def _kv_bytes(value: str | None) -> Keywords:
    size = vllm_human_int(str(value))
    if size is None or size <= 0:
        raise InputError(f"--cmd: --kv-cache-memory-bytes {value!r} is not a byte count vLLM reads",
                         "e.g. --kv-cache-memory-bytes 8G (2**30 each) or 8000000000")
    return {"kv_budget": size}


FLAGS: tuple[Flag, ...] = (
    Flag(names=("--model",), read=lambda v: {"model": v}),
    Flag(names=("--revision",), read=lambda v: {"revision": v}),
    Flag(names=("--tensor-parallel-size", "-tp"), read=lambda v: {"tp": to_int("--tensor-parallel-size", minimum=1)(v)}),
    Flag(names=("--pipeline-parallel-size", "-pp"),
         read=lambda v: {"pp": to_int("--pipeline-parallel-size", minimum=1)(v)}),
    Flag(names=("--data-parallel-size", "-dp"), read=lambda v: {"dp": to_int("--data-parallel-size", minimum=1)(v)}),
    Flag(names=("--max-model-len",), read=_max_model_len),
    Flag(names=("--gpu-memory-utilization",),
         read=lambda v: {"gpu_memory_utilization": to_float("--gpu-memory-utilization")(v)}),
    Flag(names=("--kv-cache-memory-bytes", "--kv-cache-memory"), read=_kv_bytes),
    Flag(names=("--kv-cache-dtype",), read=lambda v: {"kv_dtype": v}),
    Flag(names=("--block-size",), read=lambda v: {"block_size": to_int("--block-size", minimum=1)(v)}),
    Flag(names=("--max-num-seqs",), read=lambda v: {"max_num_seqs": to_int("--max-num-seqs", minimum=1)(v)}),
    Flag(names=("--max-num-batched-tokens",), read=lambda v: {"max_num_batched_tokens": v}),
    Flag(names=("--dtype",), read=lambda v: {"dtype": v}),
    Flag(names=("--quantization", "-q"), read=lambda v: {"quantization": v}),
    Flag(names=("--cpu-offload-gb",), read=lambda v: {"cpu_offload_gb": to_float("--cpu-offload-gb")(v)}),
    Flag(names=("--enforce-eager",), read=lambda _v: {"enforce_eager": True}, takes_value=False),
    Flag(names=("--enable-prefix-caching",), read=lambda _v: {"enable_prefix_caching": True}, takes_value=False),
    Flag(names=("--no-enable-prefix-caching",), read=lambda _v: {"enable_prefix_caching": False}, takes_value=False),
    Flag(names=("--enable-expert-parallel",), read=lambda _v: {"enable_dp_attention": True}, takes_value=False),
    Flag(names=("--disable-hybrid-kv-cache-manager",), read=lambda _v: {"no_window": True}, takes_value=False),
)

#: vLLM's switches kvplan does not size (their next word is not theirs).
SWITCHES = frozenset({
    "--trust-remote-code", "--disable-log-requests", "--enable-log-requests", "--disable-log-stats",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--async-scheduling", "--enable-auto-tool-choice",
    "--language-model-only", "--disable-custom-all-reduce", "--enable-lora", "--headless", "--enable-sleep-mode",
    "--disable-frontend-multiprocessing", "--enable-prompt-tokens-details", "--enable-force-include-usage",
    "--no-enable-expert-parallel", "--enable-eplb", "--enable-dbo", "--disable-fastapi-docs",
})


def program_words(argv: list[str]) -> list[str] | None:
    """The words after vLLM's program (``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``), or
    None when the line is not vLLM's."""
    name = argv[0].rsplit("/", 1)[-1]
    if name == "vllm" and len(argv) > 1 and argv[1] == "serve":
        return argv[2:]
    if _module(argv) in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
        return argv[3:]
    return None


def _module(argv: list[str]) -> str | None:
    return argv[2] if len(argv) > 2 and argv[0].rsplit("/", 1)[-1].startswith("python") and argv[1] == "-m" else None
