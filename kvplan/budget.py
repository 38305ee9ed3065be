"""The KV budget per GPU: what an engine leaves for the KV cache after weights and activations.

The KV budget per GPU follows each engine's own rule (FACTS b.1, b.3, b.5, b.6):

======== ===============================================================================
ideal    memory - weights - reserve (reserve 0 unless --reserve)
vllm     memory * gpu_memory_utilization (0.9) - weights - activation peak - non-torch memory
sglang   memory * mem_fraction_static - weights (the rest of memory is SGLang's own reserve)
trtllm   (memory - weights - activation peak) * free_gpu_memory_fraction (0.9)
llama.cpp memory - weights - compute buffers (activations of one n_ubatch of 512 tokens)
hf-*     memory - weights - activations of one max_model_len prefill
======== ===============================================================================

``--kv-budget`` replaces all of it with the bytes an engine logs ("Available KV cache memory").

The activation peak is an explicit estimate, not a measurement (``--reserve`` overrides it)::

    tokens * (3 * mlp_width + qkv_width + 2 * hidden) / tp * act_bytes      # MLP gate/up/act, q/k/v, residual
  + logit_rows * vocab / tp * 4                                             # fp32 logits of the sampler warm-up
  + 256 MiB non-torch memory (cuBLAS workspaces, NCCL, CUDA graphs)         # vLLM only

with ``tokens`` = vLLM's ``--max-num-batched-tokens`` (the profile run) and ``logit_rows`` = 256
(vLLM's ``max_num_seqs``). Checked against vllm#10517 (Llama-3.1-8B on an RTX 3090, V0 profile
over 20,000 and 29,000 tokens): it lands within 0.1 GiB of the logged non-KV memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.dp import weights_per_gpu
from kvplan.engines import LLAMA_CPP_UBATCH, VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, get_engine
from kvplan.errors import InputError
from kvplan.units import MiB

if TYPE_CHECKING:
    from kvplan.capacity import CapacityInputs
    from kvplan.models import WeightsEstimate

#: vLLM ``--gpu-memory-utilization`` default.
VLLM_GPU_MEMORY_UTILIZATION = 0.9
#: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` default.
TRTLLM_FREE_FRACTION = 0.9
#: Non-torch memory vLLM subtracts (cuBLAS workspaces, NCCL buffers, CUDA graph pool): kvplan's estimate.
VLLM_NON_TORCH_BYTES = 256 * MiB
#: vLLM's sampler warm-up computes logits for ``max_num_seqs`` (default 256) rows in float32.
VLLM_LOGIT_ROWS = 256

def sglang_mem_fraction_static(tp: int) -> float:
    """SGLang's classic default ``--mem-fraction-static`` by TP size (server_args, 0.4 era).

    Newer releases derive it from GPU memory and chunked-prefill size; pass the flag to match yours.
    """
    if tp >= 16:
        return 0.79
    if tp >= 8:
        return 0.81
    if tp >= 4:
        return 0.85
    if tp >= 2:
        return 0.87
    return 0.88



@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    memory_bytes: int | None
    usable_bytes: int
    """The part of memory the engine lets itself use (memory x fraction)."""
    weights_bytes_per_gpu: int | None
    activation_bytes: int
    non_torch_bytes: int
    reserve_bytes: int
    """activation + non-torch, or --reserve."""
    kv_bytes_per_gpu: int
    formula: str



def activation_bytes(weights: WeightsEstimate, *, tokens: int, logit_rows: int, tp: int) -> int:
    """The documented activation-peak estimate for ``tokens`` tokens in one forward pass (see module doc)."""
    width = 3 * weights.mlp_width + weights.qkv_width + 2 * weights.hidden_size
    act = tokens * width * weights.dtype_bytes // tp
    logits = logit_rows * weights.vocab_size * 4 // tp
    return act + logits


def compute_budget(
    inputs: CapacityInputs, weights: WeightsEstimate | None, *, tp: int, pp: int, tokens: int
) -> Budget:
    """KV bytes per GPU under the engine's budget rule (or ``--kv-budget``)."""
    memory = inputs.gpu.memory_bytes if inputs.gpu is not None else None
    engine = get_engine(inputs.engine).name
    weights_gpu = weights_per_gpu(weights, inputs, tp=tp, pp=pp) if weights is not None else None
    if inputs.kv_budget_bytes is not None:
        return Budget(memory_bytes=memory, usable_bytes=inputs.kv_budget_bytes, weights_bytes_per_gpu=weights_gpu,
                      activation_bytes=0, non_torch_bytes=0, reserve_bytes=0, kv_bytes_per_gpu=inputs.kv_budget_bytes,
                      formula="--kv-budget: KV bytes per GPU as given (what the engine logs as available KV memory)")
    if weights_gpu is None:
        raise InputError(
            "the weights' size is unknown, so the KV budget cannot be derived",
            "pass --weights-bytes SIZE, or --kv-budget SIZE (the engine's 'Available KV cache memory')",
        )
    assert memory is not None  # _validate: no GPU only with --kv-budget
    act = non_torch = 0
    if inputs.reserve_bytes is None and weights is not None:
        if engine == "vllm":
            mnbt = inputs.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
            act = activation_bytes(weights, tokens=mnbt, logit_rows=VLLM_LOGIT_ROWS, tp=tp)
            non_torch = VLLM_NON_TORCH_BYTES
        elif engine == "trtllm":
            mnbt = inputs.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
            act = activation_bytes(weights, tokens=mnbt, logit_rows=inputs.batch, tp=tp)
        elif engine == "llama.cpp":
            act = activation_bytes(weights, tokens=LLAMA_CPP_UBATCH, logit_rows=LLAMA_CPP_UBATCH, tp=1)
        elif engine in ("hf-dynamic", "hf-static"):
            act = activation_bytes(weights, tokens=tokens, logit_rows=1, tp=tp)
    reserve = inputs.reserve_bytes if inputs.reserve_bytes is not None else act + non_torch
    if engine == "vllm":
        util = inputs.gpu_memory_utilization or VLLM_GPU_MEMORY_UTILIZATION
        usable = int(memory * util)
        kv = usable - weights_gpu - reserve
        formula = f"memory x gpu_memory_utilization {util:g} - weights - activation peak - non-torch memory"
    elif engine == "sglang":
        fraction = inputs.mem_fraction_static or sglang_mem_fraction_static(tp)
        usable = int(memory * fraction)
        kv = usable - weights_gpu - (inputs.reserve_bytes or 0)
        formula = f"memory x mem_fraction_static {fraction:g} - weights"
    elif engine == "trtllm":
        fraction = inputs.free_gpu_memory_fraction or TRTLLM_FREE_FRACTION
        usable = memory
        free = memory - weights_gpu - reserve
        kv = int(free * fraction) if free > 0 else free
        formula = f"(memory - weights - activation peak) x free_gpu_memory_fraction {fraction:g}"
    else:
        usable = memory
        kv = memory - weights_gpu - reserve
        formula = "memory - weights - " + ("reserve" if engine == "ideal" else "activation peak")
    return Budget(memory_bytes=memory, usable_bytes=usable, weights_bytes_per_gpu=weights_gpu, activation_bytes=act,
                  non_torch_bytes=non_torch, reserve_bytes=reserve, kv_bytes_per_gpu=kv, formula=formula)


def budget_uncertainty(engine: str, inputs: CapacityInputs, budget: Budget) -> list[str]:
    """How far a derived budget can be from the engine's (engine_logs.md sections 1.6-1.7)."""
    if inputs.kv_budget_bytes is not None or engine != "vllm":
        return []
    return [
        "the vLLM KV budget is derived, not measured: weights as loaded depend on the kernel (gpt-oss-120b's MXFP4 "
        "experts load as 64.4-66.0 GiB through Marlin on an H100, vllm#23278 and #33155, against ~61 GiB counted), "
        "the profile run's activation peak (MoE workspaces, sampler logits of min(max_num_seqs, "
        "max_num_batched_tokens) x vocab in fp32) and, from vLLM 0.21, the CUDA graph estimate are subtracted too: "
        "expect several GiB either way on large MoE models (vllm#27508 logged 1.71 GiB where kvplan derives "
        "far more). Pass --kv-budget with the logged 'Available KV cache memory' for exact blocks"
    ]
