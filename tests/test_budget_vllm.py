"""vLLM's profiled KV budget (engine_logs.md sections 1.6-1.7): weights as loaded, the profile run's
peak (dummy forward vs dummy sampler), non-torch memory, per --engine-version; checked against
published start-up logs."""

from __future__ import annotations

import pytest

from kvplan.api import load_geometry
from kvplan.budget import model_shape
from kvplan.capacity_types import CapacityInputs
from kvplan.engines.vllm import (
    VLLM_NON_TORCH_BYTES,
    default_max_num_seqs,
    marlin_mxfp4_extra_bytes,
)
from kvplan.fit import plan_capacity
from kvplan.gpus import custom_gpu, lookup
from kvplan.models import count_weights
from kvplan.sources import load_raw_config
from kvplan.units import GiB, MiB

GPT_OSS = "openai/gpt-oss-120b"
LLAMA8B = "meta-llama/Llama-3.1-8B"
# gpt-oss-120b: 36 layers x 128 experts, expert intermediate 2880, hidden 2880, vocab 201,088
OSS_EXPERTS, OSS_I, OSS_H, OSS_VOCAB = 36 * 128, 2880, 2880, 201_088


def plan(model: str, **inputs: object):
    config, _source, model_id = load_raw_config(model)
    geometry = load_geometry(model).model_geometry
    weights = count_weights(config, model_id=model_id)
    inputs.setdefault("gpu", lookup("H100"))
    return plan_capacity(geometry, weights, CapacityInputs(**inputs))  # type: ignore[arg-type]


def test_marlin_mxfp4_padding_is_the_loaded_size_of_vllm_23278() -> None:
    config, _s, model_id = load_raw_config(GPT_OSS)
    w = count_weights(config, model_id=model_id)
    # gate+up (2I x H) and down (H x I): 4-bit values + one e8m0 scale per 32 (17/32 B per value), bf16 biases
    assert w.expert_bytes == OSS_EXPERTS * (3 * OSS_I * OSS_H * 17 // 32 + (2 * OSS_I + OSS_H) * 2)
    padded = 2944 * 3072  # Mxfp4MoEMethod (Marlin): intermediate to a multiple of 128, hidden to 256
    extra = marlin_mxfp4_extra_bytes(model_shape(w))
    assert extra == w.expert_bytes * padded // (OSS_I * OSS_H) - w.expert_bytes
    # vllm#23278 (vLLM 0.10.1, H100, Marlin): "Model loading took 65.9651 GiB"
    assert abs((w.bytes + extra) / GiB - 65.9651) < 0.1
    config, _s, model_id = load_raw_config(LLAMA8B)
    assert marlin_mxfp4_extra_bytes(model_shape(count_weights(config, model_id=model_id))) == 0  # bf16: unpadded


def test_max_num_seqs_default_follows_get_batch_defaults() -> None:
    assert default_max_num_seqs(int(79.11 * GiB), "H100-SXM-80GB") == 1024
    assert default_max_num_seqs(int(79.15 * GiB), "A100-SXM-80GB") == 256  # A100s keep the small defaults
    assert default_max_num_seqs(int(23.58 * GiB), "RTX-3090") == 256


def test_gpt_oss_120b_on_h100_vllm_27508() -> None:
    """https://github.com/vllm-project/vllm/issues/27508: `vllm serve openai/gpt-oss-120b
    --gpu-memory-utilization 0.95 --max-num-batched-tokens 1024`, one H100, vLLM 0.11.0:
    `Available KV cache memory: 1.71 GiB` (kvplan used to derive 13.86 GiB)."""
    cap = plan(GPT_OSS, engine="vllm", gpu_memory_utilization=0.95, max_num_batched_tokens=1024,
               engine_version="0.11")
    b = cap.budget
    sampler = 19 * 1024 * OSS_VOCAB * 4 // 2  # 9.5 fp32 copies of min(max_num_seqs 1024, 1024) x vocab
    assert b.activation_bytes == sampler  # the sampler's sort is the peak, not the 1,024-token forward
    terms = {t.name: t.bytes for t in b.terms}
    assert terms["dummy sampler"] == sampler and terms["non-torch memory"] == VLLM_NON_TORCH_BYTES == 256 * MiB
    assert b.kv_bytes_per_gpu == (int(lookup("H100").memory_bytes * 0.95) - b.weights_bytes_per_gpu
                                  - terms["weights load padding"] - sampler - VLLM_NON_TORCH_BYTES)
    assert abs(b.kv_bytes_per_gpu / GiB - 1.71) < 0.02
    assert cap.engine_log["lines"][0] == "Available KV cache memory: 1.72 GiB"
    assert any("derived, not measured (up to" in n for n in cap.notes)


def test_gpt_oss_120b_on_h100_vllm_23278_defaults() -> None:
    """https://github.com/vllm-project/vllm/issues/23278 (vLLM 0.10.1, H100, default flags:
    utilization 0.9, max_num_batched_tokens 8192): `Available KV cache memory: -2.14 GiB`."""
    cap = plan(GPT_OSS, engine="vllm", engine_version="0.10.1")
    assert abs(cap.budget.kv_bytes_per_gpu / GiB - -2.14) < 0.15
    assert cap.engine_log["lines"][1].startswith("No available memory for the cache blocks")


@pytest.mark.parametrize(("tokens", "logged"), [(20000, 1952), (29000, 1478)])
def test_llama_8b_rtx_3090_vllm_10517_keeps_its_accuracy(tokens: int, logged: int) -> None:
    """https://github.com/vllm-project/vllm/issues/10517 (V0, RTX 3090 23.58 GiB): 1952 and 1478 blocks.
    The V0 rule is unchanged (within 4 %, as before); the V1 profile run (max_num_seqs 256 on a 3090,
    peak = the 20,000/29,000-token forward, not the sampler) lands within 2 %."""
    for version, tolerance in (("0.6", 0.04), ("0.17", 0.02)):
        cap = plan(LLAMA8B, engine="vllm", gpu=custom_gpu(int(23.58 * GiB), None), max_model_len=tokens,
                   max_num_batched_tokens=tokens, engine_version=version)
        assert abs(cap.num_blocks - logged) / logged < tolerance, (version, cap.num_blocks)
    # From 0.20 vLLM also subtracts its CUDA graph estimate (V0 captured graphs after allocating the KV cache): the
    # default (0.33) budget is lower by exactly kvplan's graph term, 256 x 2 = 512-token forward + 1 MiB per graph
    now = plan(LLAMA8B, engine="vllm", gpu=custom_gpu(int(23.58 * GiB), None), max_model_len=tokens,
               max_num_batched_tokens=tokens)
    graphs = next(t.bytes for t in now.budget.terms if t.name == "CUDA graphs")
    width = 3 * 14336 + (4096 + 2 * 1024) + 2 * 4096  # gate/up/act + q,k,v + residual
    assert graphs == 512 * width * 2 + (51 - 1 + 35 - 1) * 2**20  # PIECEWISE 51 (to 512), FULL 35 (to max_num_seqs 256)


def test_reserve_replaces_every_derived_term() -> None:
    cap = plan(GPT_OSS, engine="vllm", reserve_bytes=GiB, gpu_memory_utilization=0.95)
    assert cap.budget.terms == () and cap.budget.reserve_bytes == GiB
    assert cap.budget.kv_bytes_per_gpu == int(lookup("H100").memory_bytes * 0.95) - cap.budget.weights_bytes_per_gpu - GiB
