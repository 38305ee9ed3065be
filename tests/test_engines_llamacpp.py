"""llama.cpp's profile (src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp, published logs): published numbers, cell padding, SWA cells, states."""

from __future__ import annotations

import pytest

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.models import parse_config
from kvplan.units import MiB, cdiv
from tests.conftest import FP16, FP32, KV, make_config
from tests.engine_runs import run


def test_llama_2_7b_in_llama_cpp_at_4096_is_2048_mib() -> None:
    est = run("meta-llama__Llama-2-7b-hf", "llama.cpp", seq_len=4096)
    assert est.kv_cache_bytes == KV * 4096 * 32 * 32 * 128 * FP16 == 2048 * MiB


@pytest.mark.parametrize(("dtype", "mib"), [("q8_0", 1088), ("q4_0", 576), ("q5_1", 768)])
def test_llama_2_7b_quantized_caches(dtype: str, mib: int) -> None:
    assert run("meta-llama__Llama-2-7b-hf", "llama.cpp", seq_len=4096, kv_dtype=dtype).kv_cache_bytes == mib * MiB


def test_q8_0_on_64_layers_8_kv_heads_8192_cells_is_1088_mib() -> None:
    g = parse_config(make_config(num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8,
                                 hidden_size=8192), model_id="64x8")
    est = estimate(g, seq_len=8192, kv_dtype="q8_0", deployment=Deployment(engine="llama.cpp"))
    k_bytes = 64 * 8192 * (8 * 128 // 32) * 34  # layers, cells, q8_0 blocks per row, bytes per block
    assert k_bytes == 544 * MiB
    assert est.kv_cache_bytes == 2 * k_bytes == 1088 * MiB


def test_llama_cpp_pads_cells_to_256_per_stream() -> None:
    per_cell = 32 * KV * 8 * 128 * FP16  # f16 is llama.cpp's default even for bf16 weights
    one = run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=1000)
    assert one.kv_cache_bytes == 1024 * per_cell
    assert one.kv_dtype.name == "fp16"
    three = run("meta-llama__Llama-3.1-8B", "llama.cpp", batch=3, seq_len=1000)
    # NOTE: n_ctx = pad(3000, 256) = 3072; each of 3 streams gets pad(3072 // 3, 256) = 1024 cells.
    assert three.kv_cache_bytes == 3 * 1024 * per_cell
    unified = run("meta-llama__Llama-3.1-8B", "llama.cpp", batch=3, seq_len=1000, kv_unified=True)
    assert unified.kv_cache_bytes == 3072 * per_cell


def test_llama_cpp_swa_cells_on_gemma_3() -> None:
    seq, window = 32768, 1024
    per_cell = KV * 8 * 256 * FP16
    swa_cells = cdiv(min(seq, window * 1 + 512), 256) * 256  # n_swa * n_seq + n_ubatch, padded: 1536
    est = run("google__gemma-3-12b-it", "llama.cpp", seq_len=seq)
    assert est.kv_cache_bytes == (8 * seq + 40 * swa_cells) * per_cell
    swa_full = run("google__gemma-3-12b-it", "llama.cpp", seq_len=seq, no_window=True)
    assert swa_full.kv_cache_bytes == 48 * seq * per_cell


def test_llama_cpp_recurrent_states_are_float32() -> None:
    seq = 4096
    state = (3 * 8192 + 8192 * 16) * FP32  # Jamba mamba: conv (d_conv - 1) * d_inner + ssm d_inner * d_state
    est = run("ai21labs__Jamba-v0.1", "llama.cpp", batch=2, seq_len=seq)
    assert est.kv_cache_bytes == 2 * (4 * seq * KV * 8 * 128 * FP16 + 28 * state)


def test_llama_cpp_refuses_what_it_cannot_do() -> None:
    with pytest.raises(InputError, match="does not support --kv-dtype fp8_e4m3"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, kv_dtype="fp8")
    with pytest.raises(InputError, match="splits layers"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, tp=2)
    with pytest.raises(InputError, match="no beam search"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, beams=2)


def test_phi3_sliding_window_is_disabled_in_llama_cpp() -> None:
    # src/models/phi3.cpp (llama.cpp @ 0c1e57098, PR #13676): "Phi SWA is currently disabled" - every position
    # is cached although the config says sliding_window 2047; vLLM still honours the window.
    llama = run("microsoft__Phi-3-mini-4k-instruct", "llama.cpp", seq_len=4096)
    assert llama.kv_cache_bytes == KV * 4096 * 32 * 32 * 96 * FP16  # K+V, cells, layers, kv heads, head dim, f16
    assert any("disables phi3's sliding window" in n for n in llama.notes)
    vllm = run("microsoft__Phi-3-mini-4k-instruct", "vllm", seq_len=4096)
    assert all(g.spec.kind == "sliding_window" for g in vllm.groups)
