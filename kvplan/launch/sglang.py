"""SGLang's launch line: ``python -m sglang.launch_server --model-path MODEL ...`` (or ``sglang serve``).

Flags as ``python/sglang/srt/server_args.py`` (``ServerArgs.add_cli_args``) reads them: ``--context-length``
is a plain int (no ``k`` suffix), ``--tp``/``--tp-size``, ``--dp``/``--dp-size``, ``--pp-size``;
``--page-size`` is the KV page in tokens; ``--kv-cache-dtype`` takes ``fp8_e4m3``, ``fp8_e5m2``, ``bf16`` ...
"""

from __future__ import annotations

from kvplan.launch.shell import Flag, to_float, to_int

ENGINE = "sglang"

FLAGS: tuple[Flag, ...] = (
    Flag(names=("--model-path", "--model"), read=lambda v: {"model": v}),
    Flag(names=("--revision",), read=lambda v: {"revision": v}),
    Flag(names=("--tp-size", "--tp", "--tensor-parallel-size"), read=lambda v: {"tp": to_int("--tp", minimum=1)(v)}),
    Flag(names=("--dp-size", "--dp", "--data-parallel-size"), read=lambda v: {"dp": to_int("--dp", minimum=1)(v)}),
    Flag(names=("--pp-size", "--pipeline-parallel-size"), read=lambda v: {"pp": to_int("--pp-size", minimum=1)(v)}),
    Flag(names=("--mem-fraction-static",), read=lambda v: {"mem_fraction_static": to_float("--mem-fraction-static")(v)}),
    Flag(names=("--context-length",), read=lambda v: {"max_model_len": to_int("--context-length", minimum=1)(v)}),
    Flag(names=("--kv-cache-dtype",), read=lambda v: {"kv_dtype": v}),
    Flag(names=("--page-size",), read=lambda v: {"block_size": to_int("--page-size", minimum=1)(v)}),
    Flag(names=("--max-running-requests",),
         read=lambda v: {"max_num_seqs": to_int("--max-running-requests", minimum=1)(v)}),
    Flag(names=("--enable-dp-attention",), read=lambda _v: {"enable_dp_attention": True}, takes_value=False),
    Flag(names=("--swa-full-tokens-ratio",),
         read=lambda v: {"swa_full_tokens_ratio": to_float("--swa-full-tokens-ratio")(v)}),
    Flag(names=("--dtype",), read=lambda v: {"dtype": v}),
    Flag(names=("--quantization",), read=lambda v: {"quantization": v}),
    Flag(names=("--cpu-offload-gb",), read=lambda v: {"cpu_offload_gb": to_float("--cpu-offload-gb")(v)}),
)

#: SGLang's switches kvplan does not size.
SWITCHES = frozenset({
    "--trust-remote-code", "--enable-metrics", "--disable-radix-cache", "--enable-torch-compile",
    "--disable-cuda-graph", "--enable-mixed-chunk", "--skip-server-warmup", "--log-requests",
    "--enable-ep-moe", "--disable-overlap-schedule", "--enable-cache-report", "--enable-deterministic-inference",
    "--disable-custom-all-reduce", "--enable-hierarchical-cache", "--is-embedding", "--skip-tokenizer-init",
})


def program_words(argv: list[str]) -> list[str] | None:
    name = argv[0].rsplit("/", 1)[-1]
    if name == "sglang" and len(argv) > 1 and argv[1] == "serve":
        return argv[2:]
    if len(argv) > 2 and name.startswith("python") and argv[1] == "-m" and argv[2] == "sglang.launch_server":
        return argv[3:]
    return None
