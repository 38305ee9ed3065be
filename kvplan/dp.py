"""Data-parallel attention: which tensor-parallel width the KV cache is split over, and its notes.

- SGLang ``--tp T --dp D --enable-dp-attention``: T GPUs in all; attention runs ``attn_tp = T // D``
  wide (``layers/dp_attention.py::compute_dp_attention_world_info``), every DP rank has its own
  token pool and logs its own ``KV Cache is allocated`` line.
- vLLM ``--data-parallel-size D --enable-expert-parallel`` (usually ``--tensor-parallel-size 1``): D
  engine cores of ``tp`` GPUs each, each with its own KV cache; the MoE experts are split over all
  ``D * tp`` GPUs.
- TensorRT-LLM ``enable_attention_dp: true``: the KV heads are computed for ``tp = 1``.

An MLA latent is one "head": with plain tensor parallelism every rank keeps the same latent for
every request (``get_num_kv_heads`` is 1 for MLA), so ``tp`` GPUs hold ``tp`` copies.
"""

from __future__ import annotations

from kvplan.capacity_types import CapacityInputs
from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.models import WeightsEstimate
from kvplan.specs import MLASpec
from kvplan.units import cdiv


def attention_tp(inputs: CapacityInputs, tp: int) -> int:
    """The tensor-parallel width one KV cache is split over (the engine profile's ``attention_tp``)."""
    if inputs.dp < 1:
        raise InputError(f"--data-parallel-size must be at least 1, got {inputs.dp}", "e.g. --dp 8")
    if not inputs.enable_dp_attention:
        return tp
    return get_engine(inputs.engine).attention_tp(tp, inputs.dp)


def weights_per_gpu(weights: WeightsEstimate, inputs: CapacityInputs, *, tp: int, pp: int) -> int:
    """Weight bytes on the busiest GPU; vLLM DP + EP splits the experts over ``dp * tp`` GPUs."""
    base = weights.bytes_per_gpu(tp=tp, pp=pp)
    if inputs.enable_dp_attention and inputs.dp > 1 and get_engine(inputs.engine).dp_splits_experts and weights.num_experts:
        return base - cdiv(weights.expert_bytes, tp * pp) + cdiv(weights.expert_bytes, tp * inputs.dp * pp)
    attn_tp = attention_tp(inputs, tp)
    if weights.device_split is None and attn_tp < tp:
        # SGLang DP attention: each DP rank's attention runs over tp / dp GPUs, so its projections are split
        # over attn_tp only (the MLP and experts stay split over tp)
        return base - cdiv(weights.attention_bytes, tp * pp) + cdiv(weights.attention_bytes, attn_tp * pp)
    return base


def dp_notes(geometry: ModelGeometry, inputs: CapacityInputs, tp: int) -> list[str]:
    """Say where DP ranks change the reading, and which flag removes replicated MLA copies."""
    notes: list[str] = []
    engine = get_engine(inputs.engine)
    attn_tp = attention_tp(inputs, tp)
    has_mla = any(isinstance(s, MLASpec) for s in geometry.layers)
    if has_mla and attn_tp > 1:
        notes.append(
            f"MLA: the latent is one head, so each of the {attn_tp} tensor-parallel ranks keeps the same latent "
            f"for every request ({attn_tp} copies). One copy per request: SGLang --tp {attn_tp} --dp {attn_tp} "
            f"--enable-dp-attention; vLLM --data-parallel-size {attn_tp} --enable-expert-parallel "
            f"--tensor-parallel-size 1; TensorRT-LLM enable_attention_dp: true"
        )
    if inputs.dp > 1:
        gpus = tp if engine.dp_splits_tp(inputs.enable_dp_attention) else tp * inputs.dp
        notes.append(
            f"data parallel: {inputs.dp} ranks on {gpus} GPUs, each with its own KV pool (and its own log lines); "
            f"tokens and concurrency are per rank, the deployment holds {inputs.dp}x"
        )
    if inputs.enable_dp_attention and engine.dp_within_tp:
        notes.append(f"SGLang DP attention: attention tp = tp / dp = {tp} / {inputs.dp} = {attn_tp}; the attention "
                     f"weights are split over {attn_tp} GPU(s) per DP rank, the MLP and experts over --tp {tp}")
    return notes
