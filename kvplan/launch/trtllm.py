"""TensorRT-LLM's launch line: ``trtllm-serve MODEL ...`` (or ``trtllm-serve serve MODEL``).

Flags as ``tensorrt_llm/commands/serve.py`` (click options, underscores) reads them: ``--tp_size``,
``--pp_size``, ``--max_seq_len``, ``--max_batch_size`` (the requests scheduled at once: read as the batch to
size), ``--max_num_tokens``, ``--kv_cache_free_gpu_memory_fraction`` (KvCacheConfig.free_gpu_memory_fraction) and
``--kv_cache_dtype`` (auto, fp8, nvfp4: KvCacheConfig.dtype, added to trtllm-serve by NVIDIA/TensorRT-LLM#11487).
"""

from __future__ import annotations

from kvplan.launch.shell import Flag, to_float, to_int

ENGINE = "trtllm"

FLAGS: tuple[Flag, ...] = (
    Flag(names=("--tp_size",), read=lambda v: {"tp": to_int("--tp_size", minimum=1)(v)}),
    Flag(names=("--pp_size",), read=lambda v: {"pp": to_int("--pp_size", minimum=1)(v)}),
    Flag(names=("--max_seq_len",), read=lambda v: {"max_model_len": to_int("--max_seq_len", minimum=1)(v)}),
    Flag(names=("--max_batch_size",), read=lambda v: {"batch": to_int("--max_batch_size", minimum=1)(v)}),
    Flag(names=("--max_num_tokens",), read=lambda v: {"max_num_batched_tokens": to_int("--max_num_tokens", minimum=1)(v)}),
    Flag(names=("--kv_cache_free_gpu_memory_fraction",),
         read=lambda v: {"free_gpu_memory_fraction": to_float("--kv_cache_free_gpu_memory_fraction")(v)}),
    Flag(names=("--kv_cache_dtype",), read=lambda v: {"kv_dtype": v}),
)

SWITCHES = frozenset({"--trust_remote_code", "--disable_overlap_scheduler"})


def program_words(argv: list[str]) -> list[str] | None:
    if argv[0].rsplit("/", 1)[-1] != "trtllm-serve":
        return None
    words = argv[1:]
    return words[1:] if words and words[0] == "serve" else words
