"""The launch command of a recommended deployment, in each engine's own flags, with the memory settings the
capacity answer assumed (so the command, pasted into `kvplan capacity --cmd`, gives the same numbers).

- vLLM: ``vllm serve`` (vllm/engine/arg_utils.py: --tensor-parallel-size, --pipeline-parallel-size,
  --max-model-len, --kv-cache-dtype, --gpu-memory-utilization).
- SGLang: ``python -m sglang.launch_server`` (sglang/srt/server_args.py: --tp, --pp-size, --dp,
  --enable-dp-attention, --context-length, --kv-cache-dtype fp8_e4m3, --mem-fraction-static).
- llama.cpp: ``llama-server`` (tools/server/README.md: -c is the context of all slots together, -np the
  slots, -ctk/-ctv the cache types, -ngl the layers offloaded, -ts the layer proportions per device).
- TensorRT-LLM: ``trtllm-serve`` (--tp_size, --pp_size, --max_seq_len, --max_batch_size,
  --kv_cache_free_gpu_memory_fraction, --kv_cache_dtype: the last added by NVIDIA/TensorRT-LLM#11487; older
  releases set it in an --extra_llm_api_options YAML).
Lengths are plain integers (vLLM reads ``32k`` as 32,000, kvplan as 32,768).
"""

from __future__ import annotations

import shlex

from kvplan.capacity_types import Capacity
from kvplan.engines.llamacpp import GGML_TYPE_NAMES
from kvplan.engines.sglang import sglang_mem_fraction_static
from kvplan.engines.trtllm import TRTLLM_FREE_FRACTION
from kvplan.engines.vllm import VLLM_GPU_MEMORY_UTILIZATION, default_max_num_seqs

#: llama.cpp -ngl for "every layer" (more than any model has; llama-server clamps it).
ALL_LAYERS = 999


def launch_command(cap: Capacity, *, model: str, concurrency: int, dp: int = 1) -> tuple[str, tuple[str, ...]]:
    """(command line, notes) that starts ``cap``'s deployment: ``model`` as the engine loads it (a Hub id, a
    path, a .gguf file), ``concurrency`` requests of ``cap.max_model_len`` tokens, ``dp`` SGLang DP-attention
    ranks."""
    i = cap.inputs
    tokens = cap.max_model_len
    fp8 = cap.kv_dtype_name.startswith("fp8")
    notes: list[str] = []
    engine = cap.deployment.engine
    if engine == "vllm":
        util = i.gpu_memory_utilization or VLLM_GPU_MEMORY_UTILIZATION
        args = ["vllm", "serve", model, "--tensor-parallel-size", str(i.tp), "--pipeline-parallel-size", str(i.pp),
                "--max-model-len", str(tokens), "--kv-cache-dtype", "fp8" if fp8 else "auto",
                "--gpu-memory-utilization", f"{util:g}"]
        if i.pp > 1:
            notes.append(f"vLLM across {i.pp} nodes: start a Ray cluster over them first, then run the command on "
                         "the head node (docs: distributed serving)")
        if i.gpu is not None and concurrency > (seqs := default_max_num_seqs(i.gpu.memory_bytes, i.gpu.name)):
            notes.append(f"vLLM schedules at most --max-num-seqs requests at once ({seqs} by default on "
                         f"{i.gpu.name}): the pool holds {concurrency}, but add --max-num-seqs {concurrency} to run "
                         "them together (its sampler warm-up then takes a little more memory than sized here)")
    elif engine == "sglang":
        fraction = i.mem_fraction_static or sglang_mem_fraction_static(i.tp)
        args = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp", str(i.tp)]
        if i.pp > 1:
            args += ["--pp-size", str(i.pp)]
        if dp > 1:
            args += ["--dp", str(dp), "--enable-dp-attention"]
        args += ["--context-length", str(tokens), "--mem-fraction-static", f"{fraction:g}"]
        if fp8:
            args += ["--kv-cache-dtype", "fp8_e4m3"]
        if i.pp > 1:
            notes.append(f"SGLang across {i.pp} nodes: add --nnodes {i.pp} --node-rank R --dist-init-addr HOST:PORT "
                         "on each node")
    elif engine == "llama.cpp":
        cache = GGML_TYPE_NAMES.get(cap.kv_dtype_name, cap.kv_dtype_name)
        args = ["llama-server", "-m", model, "-c", str(tokens * concurrency), "-np", str(concurrency),
                "-ctk", cache, "-ctv", cache, "-ngl", str(ALL_LAYERS)]
        if i.pp > 1:  # layers split evenly over the first pp devices (-ts proportions; devices left out get none)
            args += ["-ts", ",".join("1" * i.pp)]
    elif engine == "trtllm":
        fraction = i.free_gpu_memory_fraction or TRTLLM_FREE_FRACTION
        args = ["trtllm-serve", model, "--tp_size", str(i.tp), "--pp_size", str(i.pp), "--max_seq_len", str(tokens),
                "--max_batch_size", str(concurrency), "--kv_cache_free_gpu_memory_fraction", f"{fraction:g}"]
        if fp8:
            args += ["--kv_cache_dtype", "fp8"]
            notes.append("--kv_cache_dtype is trtllm-serve's flag since NVIDIA/TensorRT-LLM#11487 (March 2026); on "
                         "an older release drop it and pass --extra_llm_api_options FILE.yaml holding "
                         "'kv_cache_config: {dtype: fp8}'")
    else:
        return "", (f"no launch command for --engine {engine}",)
    return shlex.join(args), tuple(notes)
