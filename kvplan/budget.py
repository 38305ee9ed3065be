"""The KV budget per GPU: what an engine leaves for the KV cache after weights and activations.

Each engine module owns its rule (``EngineProfile.kv_budget``, citing the engine's
own source: vLLM ``v1/worker/gpu_worker.py``, SGLang ``model_runner.py``, TensorRT-LLM ``_torch/pyexecutor/_util.py``); this module only gathers the request from capacity's inputs:

======== ===============================================================================
ideal    memory - weights - reserve (reserve 0 unless --reserve)
vllm     memory * gpu_memory_utilization (0.9) - weights as loaded - profile-run peak - non-torch memory
sglang   memory * mem_fraction_static - weights (the rest of memory is SGLang's own reserve)
trtllm   (memory - weights - activation peak) * free_gpu_memory_fraction (0.9)
llama.cpp memory - weights - compute buffers (activations of one n_ubatch of 512 tokens)
hf-*     memory - weights - activations of one max_model_len prefill
======== ===============================================================================

``--kv-budget`` replaces all of it with the bytes an engine logs ("Available KV cache memory").
The activation estimate (``engines.base.activation_estimate``) is explicit, not a measurement
(``--reserve`` overrides it). Checked against vllm#10517 (Llama-3.1-8B on an RTX 3090, 20,000 and
29,000 tokens) and vllm#27508 (gpt-oss-120b on an H100 at 0.95 and 1,024 batched tokens).
"""

from __future__ import annotations

from kvplan.adjust import pp_partitions
from kvplan.capacity_types import CapacityInputs
from kvplan.dp import weights_per_gpu
from kvplan.engines import get_engine
from kvplan.engines.base import Budget, BudgetRequest, BudgetTerm, ModelShape, activation_estimate
from kvplan.engines.sglang import sglang_mem_fraction_static
from kvplan.engines.trtllm import TRTLLM_FREE_FRACTION
from kvplan.engines.vllm import VLLM_GPU_MEMORY_UTILIZATION, VLLM_LOGIT_ROWS, VLLM_NON_TORCH_BYTES
from kvplan.errors import InputError
from kvplan.models import WeightsEstimate

__all__ = [
    "TRTLLM_FREE_FRACTION", "VLLM_GPU_MEMORY_UTILIZATION", "VLLM_LOGIT_ROWS", "VLLM_NON_TORCH_BYTES", "Budget",
    "BudgetTerm", "activation_bytes", "budget_uncertainty", "compute_budget", "model_shape", "sglang_mem_fraction_static",
    "stage_budgets",
]


def model_shape(weights: WeightsEstimate, *, tp: int = 1, pp: int = 1, expert_bytes_per_gpu: int | None = None) -> ModelShape:
    """The figures of ``weights`` a budget rule reads."""
    experts = weights.expert_bytes // (tp * pp) if expert_bytes_per_gpu is None else expert_bytes_per_gpu
    return ModelShape(hidden_size=weights.hidden_size, mlp_width=weights.mlp_width, qkv_width=weights.qkv_width,
                      vocab_size=weights.vocab_size, dtype_bytes=weights.dtype_bytes,
                      quant_method=weights.quantisation.method if weights.quantisation else None,
                      expert_bytes_per_gpu=experts, experts_per_token=weights.experts_per_token)


def activation_bytes(weights: WeightsEstimate, *, tokens: int, logit_rows: int, tp: int) -> int:
    """The documented activation-peak estimate for ``tokens`` tokens in one forward pass."""
    return activation_estimate(model_shape(weights), tokens=tokens, logit_rows=logit_rows, tp=tp)


def compute_budget(
    inputs: CapacityInputs, weights: WeightsEstimate | None, *, tp: int, pp: int, tokens: int,
    stage_weights_bytes: int | None = None, last_stage: bool = True,
) -> Budget:
    """KV bytes per GPU under the engine's budget rule (or ``--kv-budget``). ``stage_weights_bytes``: the weights
    of one GPU of a given pipeline stage (:func:`stage_budgets`) in place of an even share of the stages;
    ``last_stage``: that stage computes the logits and samples."""
    memory = inputs.gpu.memory_bytes if inputs.gpu is not None else None
    engine = get_engine(inputs.engine)
    weights_gpu = weights_per_gpu(weights, inputs, tp=tp, pp=pp) if weights is not None else None
    if weights_gpu is not None and weights is not None and stage_weights_bytes is not None:
        # NOTE: the stage's own tensors in place of the even share (the DP/EP corrections above kept).
        weights_gpu += stage_weights_bytes - weights.bytes_per_gpu(tp=tp, pp=pp)
    if weights_gpu is not None and inputs.cpu_offload_bytes:
        # NOTE: vLLM --cpu-offload-gb (and SGLang's) keeps that much of each GPU's weights in host memory
        # (vllm/model_executor/models/utils.py maybe_offload_to_cpu), never more than the weights.
        weights_gpu -= min(inputs.cpu_offload_bytes, weights_gpu)
    if inputs.kv_budget_bytes is not None:
        return Budget(memory_bytes=memory, usable_bytes=inputs.kv_budget_bytes, weights_bytes_per_gpu=weights_gpu,
                      activation_bytes=0, non_torch_bytes=0, reserve_bytes=0, kv_bytes_per_gpu=inputs.kv_budget_bytes,
                      formula="--kv-budget: KV bytes per GPU as given (what the engine logs as available KV memory)")
    if weights_gpu is None or weights is None:
        raise InputError(
            "the weights' size is unknown, so the KV budget cannot be derived",
            "pass --weights-bytes SIZE, or --kv-budget SIZE (the engine's 'Available KV cache memory')",
        )
    assert memory is not None  # _validate: no GPU only with --kv-budget
    experts = weights.expert_bytes * weights_gpu // weights.bytes if weights.bytes else 0
    request = BudgetRequest(
        memory_bytes=memory, weights_bytes_per_gpu=weights_gpu, shape=model_shape(weights, expert_bytes_per_gpu=experts),
        tp=tp, pp=pp, tokens=tokens, batch=inputs.batch, reserve_bytes=inputs.reserve_bytes,
        gpu_name=inputs.gpu.name if inputs.gpu is not None else None,
        gpu_memory_utilization=inputs.gpu_memory_utilization, mem_fraction_static=inputs.mem_fraction_static,
        free_gpu_memory_fraction=inputs.free_gpu_memory_fraction, max_num_batched_tokens=inputs.max_num_batched_tokens,
        ubatch_size=inputs.ubatch_size, version=inputs.engine_version, max_num_seqs=inputs.max_num_seqs,
        enforce_eager=inputs.enforce_eager, last_stage=last_stage,
    )
    return engine.kv_budget(request)


def stage_budgets(inputs: CapacityInputs, weights: WeightsEstimate | None, *, tp: int, pp: int, tokens: int,
                  num_layers: int) -> tuple[tuple[int, ...], tuple[Budget, ...]] | None:
    """Under pipeline parallelism, (layers per stage, the budget of one GPU of each stage): a stage holds its own
    layers (the engine's ``get_pp_indices``), the first stage the input embeddings, the last the LM head (a tied
    model's too), and only the last computes logits and samples. None with one stage, with ``--kv-budget``, or
    when the weights are only known as a total (an even share is all kvplan can say)."""
    engine = get_engine(inputs.engine)
    if pp < 2 or inputs.kv_budget_bytes is not None or weights is None or engine.splits_layers:
        return None
    layers = tuple(pp_partitions(num_layers, pp, extra_to_last=engine.pp_extra_layers_last))
    stage_bytes = weights.stage_bytes_per_gpu(tp=tp, layers=layers, encoder_every_stage=engine.pp_encoder_every_stage)
    if stage_bytes is None:
        return None
    return layers, tuple(compute_budget(inputs, weights, tp=tp, pp=pp, tokens=tokens, stage_weights_bytes=b,
                                        last_stage=stage == pp - 1) for stage, b in enumerate(stage_bytes))


def budget_uncertainty(engine: str, inputs: CapacityInputs, budget: Budget) -> list[str]:
    """How far a derived budget can be from the engine's (the engine profile says)."""
    if inputs.kv_budget_bytes is not None:
        return []
    return get_engine(engine).budget_uncertainty(budget)
