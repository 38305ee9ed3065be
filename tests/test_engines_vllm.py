"""vLLM's profile (vllm v1/kv_cache_interface.py, v1/core/kv_cache_utils.py): blocks, sliding windows, MLA, hybrid Mamba pages, TP."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.units import cdiv
from tests.conftest import BF16, FP16, KV
from tests.engine_runs import run


def test_vllm_full_attention_rounds_to_blocks_of_16() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20000).kv_cache_bytes == cdiv(20000, 16) * 16 * per_token
    assert run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20001).kv_cache_bytes == 1251 * 16 * per_token


def test_vllm_sliding_window_holds_w_minus_1_plus_batched_tokens_plus_a_block() -> None:
    seq, window = 32768, 4096
    per_token = 32 * KV * 8 * 128 * BF16
    default = run("mistralai__Mistral-7B-v0.1", "vllm", seq_len=seq)
    assert default.kv_cache_bytes == (cdiv(min(window - 1 + 8192, seq), 16) + 1) * 16 * per_token
    small = run("mistralai__Mistral-7B-v0.1", "vllm", seq_len=seq, max_num_batched_tokens=2048)
    assert small.kv_cache_bytes == (cdiv(window - 1 + 2048, 16) + 1) * 16 * per_token


def test_vllm_gpt_oss_20b_sliding_and_full_layers() -> None:
    seq = 32768
    per_layer_token = KV * 8 * 64 * FP16  # the config names no dtype: 16-bit
    sliding_tokens = (cdiv(min(128 - 1 + 8192, seq), 16) + 1) * 16
    est = run("openai__gpt-oss-20b", "vllm", seq_len=seq)
    assert est.kv_cache_bytes == (12 * sliding_tokens + 12 * seq) * per_layer_token


def test_vllm_deepseek_v3_tp8_uses_blocks_of_64_and_replicates() -> None:
    seq = 5000
    per_rank = 61 * cdiv(seq, 64) * 64 * (512 + 64) * BF16
    est = run("deepseek-ai__DeepSeek-V3", "vllm", seq_len=seq, tp=8)
    assert est.kv_cache_bytes_per_gpu == per_rank
    assert est.kv_cache_bytes == 8 * per_rank


def test_vllm_llama_3_1_70b_tp16() -> None:
    seq = 32000
    per_rank = 80 * cdiv(seq, 16) * 16 * KV * 1 * 128 * BF16
    est = run("meta-llama__Llama-3.1-70B", "vllm", seq_len=seq, tp=16)
    assert (est.kv_cache_bytes_per_gpu, est.kv_cache_bytes) == (per_rank, 16 * per_rank)


def test_vllm_hybrid_mamba_pages_set_the_attention_block() -> None:
    seq = 4096
    attn_token = KV * 8 * 128 * FP16  # Jamba names no dtype: fp16
    mamba_page = (3 * 8192 + 8192 * 16) * FP16  # 311,296 B
    block = 16 * cdiv(mamba_page, 16 * attn_token)  # 80 tokens
    est = run("ai21labs__Jamba-v0.1", "vllm", seq_len=seq)
    assert block == 80
    assert est.kv_cache_bytes == 4 * cdiv(seq, block) * block * attn_token + 28 * block * attn_token
    assert any("padded from 311,296 to 327,680" in note for note in est.notes)


def test_vllm_whisper_cross_attention_in_blocks() -> None:
    per_token = 32 * KV * 20 * 64 * FP16
    est = run("openai__whisper-large-v3", "vllm", seq_len=448)
    assert est.kv_cache_bytes == (448 + cdiv(1500, 16) * 16) * per_token


def test_vllm_int8_per_token_head_scales() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, kv_dtype="int8")
    assert est.kv_cache_bytes == seq * 32 * KV * 8 * (128 + 4)  # int8 values + float32 scale per head


def test_vllm_contradictions() -> None:
    with pytest.raises(InputError, match="does not support --block-size 12"):
        run("meta-llama__Llama-3.1-8B", "vllm", seq_len=4096, block_size=12)
    with pytest.raises(InputError, match="q8_0"):
        run("meta-llama__Llama-3.1-8B", "vllm", seq_len=4096, kv_dtype="q8_0")
    est = run("meta-llama__Llama-3.1-8B", "vllm", batch=8, seq_len=4096, max_num_seqs=4)
    assert any("--max-num-seqs 4" in note for note in est.notes)
    mla = run("deepseek-ai__DeepSeek-V3", "vllm", seq_len=4096, block_size=16)
    assert any("force block size 64" in note for note in mla.notes)


@pytest.mark.parametrize(("tp", "ok"), [(1, True), (2, True), (8, True), (16, True), (3, False), (12, False), (32, True)])
def test_vllm_refuses_tp_sizes_that_do_not_divide_the_kv_heads(tp: int, ok: bool) -> None:
    seq = 4096
    if ok:
        est = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)
        assert est.kv_cache_bytes_per_gpu == 32 * seq * KV * max(1, 8 // tp) * 128 * BF16
    else:
        with pytest.raises(InputError, match=f"vLLM cannot split 8 KV heads over --tensor-parallel-size {tp}"):
            run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("tp", "ok"), [(8, True), (16, True), (32, True), (24, False), (64, False)])
def test_tp_must_divide_the_query_heads(engine: str, tp: int, ok: bool) -> None:
    """Llama-3.1-8B: 32 query heads, 8 KV heads; tp 24 replicates the KV heads evenly (24 % 8 == 0) but leaves
    32 query heads uneven, which vLLM (verify_with_parallel_config) and SGLang (LlamaAttention) refuse."""
    if ok:
        est = run("meta-llama__Llama-3.1-8B", engine, seq_len=4096, tp=tp)
        assert est.kv_cache_bytes_per_gpu > 0
    else:
        with pytest.raises(InputError, match=f"cannot split 32 query heads over --tensor-parallel-size {tp}"):
            run("meta-llama__Llama-3.1-8B", engine, seq_len=4096, tp=tp)
