"""Hugging Face transformers' profiles (transformers 5.25 cache_utils.py, measured): DynamicCache, QuantizedCache, StaticCache."""

from __future__ import annotations

import pytest

from kvplan.adjust import Deployment
from kvplan.api import load_geometry
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.models import parse_config
from tests.conftest import BF16, FP16, FP32, KV
from tests.engine_runs import run


def test_hf_dynamic_sliding_storage_is_w_and_w_minus_1_with_beams() -> None:
    seq, window = 8192, 4096
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=seq).kv_cache_bytes == window * per_token
    beams = run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=seq, beams=2)
    assert beams.kv_cache_bytes == 2 * (window - 1) * per_token


def test_hf_dynamic_peak_adds_one_layers_k_and_the_prefill_view() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", batch=2, seq_len=seq)
    one_k = 2 * seq * 8 * 128 * BF16
    assert est.peak_bytes == est.kv_cache_bytes + one_k
    prefill = run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=8192, prompt_len=6000)
    # NOTE: right after prefill every sliding layer keeps the whole 6000-token prompt alive.
    assert prefill.peak_bytes == 32 * 6000 * KV * 8 * 128 * BF16 + 4096 * 8 * 128 * BF16


def test_hf_dynamic_mamba_state_keeps_a_float32_ssm() -> None:
    seq = 1000
    state = 8192 * 4 * FP16 + 8192 * 16 * FP32  # conv d_inner * d_conv in fp16, ssm d_inner * d_state fp32
    est = run("ai21labs__Jamba-v0.1", "hf-dynamic", batch=2, seq_len=seq)
    assert est.kv_cache_bytes == 2 * (4 * seq * KV * 8 * 128 * FP16 + 28 * state)


def test_hf_quantized_cache_int4_with_residual() -> None:
    seq, prompt, residual, group = 4096, 4000, 128, 64
    t_res = (seq - prompt) % residual  # 96 tokens in full precision
    n = (seq - t_res) * 8 * 128  # quantized values per K (or V) per layer
    per_kv = t_res * 8 * 128 * BF16 + n * 4 // 8 + 2 * (n // group) * BF16
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, kv_dtype="int4", prompt_len=prompt)
    assert est.kv_cache_bytes == 32 * KV * per_kv
    # NOTE: each step dequantizes a whole layer and concatenates: two full-precision copies of one layer.
    assert est.peak_bytes == est.kv_cache_bytes + 2 * seq * KV * 8 * 128 * BF16


def test_hf_quantized_cache_fp8_has_one_scale_per_tensor() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, kv_dtype="fp8")
    assert est.kv_cache_bytes == 32 * KV * (seq * 8 * 128 * 1 + 4)
    # NOTE: update() returns the layer dequantized to bf16; dequantizing V goes through two float32
    # temporaries while the returned K is alive: 2 + 4 + 4 bytes per value of one layer's K/V row.
    assert est.peak_bytes == est.kv_cache_bytes + seq * 8 * 128 * (BF16 + FP32 + FP32)


def test_hf_quantized_cache_refuses_sliding_models() -> None:
    with pytest.raises(InputError, match="only full attention"):
        run("google__gemma-3-12b-it", "hf-dynamic", seq_len=4096, kv_dtype="int4")


def test_hf_static_preallocates_max_cache_len_and_w_for_sliding() -> None:
    per_token = KV * 8 * 256 * BF16
    est = run("google__gemma-3-12b-it", "hf-static", seq_len=100, max_cache_len=2048)
    assert est.kv_cache_bytes == (8 * 2048 + 40 * min(1024, 2048)) * per_token
    assert est.peak_bytes == est.kv_cache_bytes


def test_hf_engines_have_no_blocks() -> None:
    with pytest.raises(InputError, match="not blocks"):
        run("meta-llama__Llama-3.1-8B", "hf-static", seq_len=100, block_size=16)


def test_falcon_40b_hf_caches_the_kv_groups() -> None:
    # NOTE: transformers 5.25's modeling_falcon (new_decoder_architecture) caches the 8 KV groups and repeats them
    # inside attention (repeat_kv); up to 5.24 it cached K/V broadcast to all 128 query heads.
    seq = 2048
    gqa = 60 * seq * KV * 8 * 64 * BF16  # layers, tokens, K+V, kv heads, head dim (8192 // 128), bf16
    for engine in ("vllm", "ideal", "hf-dynamic", "hf-static"):
        est = run("tiiuae__falcon-40b", engine, seq_len=seq)
        assert est.kv_cache_bytes == gqa, engine
        assert est.groups[0].spec.num_kv_heads == 8
    # NOTE: multi_query Falcon-7B caches one head in every engine.
    assert run("tiiuae__falcon-7b", "hf-dynamic", seq_len=seq).kv_cache_bytes == 32 * seq * KV * 1 * 64 * BF16


def test_hf_dynamic_gated_delta_net_state_keeps_conv_window_and_fp32_state() -> None:
    geometry, _ = load_geometry("Qwen/Qwen3-Next-80B-A3B-Instruct")
    est = estimate(geometry, seq_len=16, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    hk, hv, dk, dv, d_conv, fp16, fp32 = 16, 32, 128, 128, 4, 2, 4  # no torch_dtype in the config: 16-bit
    conv = d_conv * (2 * hk * dk + hv * dv) * fp16  # the whole conv window, not d_conv - 1
    ssm = hv * dk * dv * fp32  # the recurrent state is float32 on the CPU path
    assert est.state_bytes == 36 * (conv + ssm)  # 36 gated-delta-net layers


def test_the_report_says_which_conv_state_convention_a_figure_uses() -> None:
    """issue 24: kvplan's default keeps conv_kernel - 1 conv inputs (vLLM, SGLang, llama.cpp); hf-dynamic keeps
    transformers' conv_kernel; each report names its convention."""
    layers, hidden, expand, conv_kernel, state_size, bf16, fp32 = 2, 64, 2, 4, 16, 2, 4
    config = {"model_type": "mamba", "num_hidden_layers": layers, "hidden_size": hidden, "expand": expand,
              "conv_kernel": conv_kernel, "state_size": state_size, "torch_dtype": "bfloat16", "vocab_size": 512}
    geometry = parse_config(config, model_id="mamba")
    inner = expand * hidden
    ideal = estimate(geometry, seq_len=10, kv_dtype="auto")
    hf = estimate(geometry, seq_len=10, kv_dtype="auto", deployment=Deployment(engine="hf-dynamic"))
    assert ideal.kv_cache_bytes == layers * ((conv_kernel - 1) * inner * bf16 + inner * state_size * bf16)
    assert hf.kv_cache_bytes == layers * (conv_kernel * inner * bf16 + inner * state_size * fp32)
    assert any("conv state holds conv_kernel - 1 inputs" in n for n in ideal.notes)
    assert any("conv state holds conv_kernel inputs" in n for n in hf.notes)
