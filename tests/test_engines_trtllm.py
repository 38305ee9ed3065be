"""TensorRT-LLM's profile (TensorRT-LLM llmapi/llm_args.py, _torch/pyexecutor/_util.py): blocks of 32, windows, cdiv heads per rank."""

from __future__ import annotations

from kvplan.units import cdiv
from tests.conftest import BF16, FP16, KV
from tests.engine_runs import run


def test_trtllm_blocks_of_32_and_windows() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("meta-llama__Llama-3.1-8B", "trtllm", seq_len=1000).kv_cache_bytes == 32 * 32 * per_token
    seq = 4000
    est = run("openai__gpt-oss-20b", "trtllm", seq_len=seq)
    assert est.kv_cache_bytes == (12 * 128 + 12 * cdiv(seq, 32) * 32) * KV * 8 * 64 * FP16


def test_trtllm_gives_each_rank_cdiv_heads() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "trtllm", seq_len=seq, tp=3)
    assert est.kv_cache_bytes_per_gpu == seq * 32 * KV * 3 * 128 * BF16  # cdiv(8, 3) = 3 heads
