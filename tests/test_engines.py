"""Engine profiles reproduce what each engine allocates (each engine's source and published logs): the registry, the CLI,
what holds across engines. One file per engine beside it: tests/test_engines_<engine>.py."""

from __future__ import annotations

import json

import pytest

from kvplan.cli import app
from kvplan.engines import ENGINES, get_engine
from kvplan.errors import InputError
from tests.conftest import BF16, KV, shared_config
from tests.engine_runs import run


def test_every_profile_is_registered_and_unknown_names_fail() -> None:
    assert set(ENGINES) == {"ideal", "vllm", "sglang", "trtllm", "llama.cpp", "hf-dynamic", "hf-static"}
    assert get_engine("llamacpp").name == "llama.cpp"
    with pytest.raises(InputError, match="not a known engine"):
        get_engine("ollama")


# ---- CLI -------------------------------------------------------------------------------------------
def test_cli_engine_and_tp_in_json(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-70B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm",
                                 "--tensor-parallel-size", "16", "--kv-cache-dtype", "fp8", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    per_gpu = 80 * 32768 * KV * 1 * 128 * 1
    assert report["totals"]["kv_cache_bytes_per_gpu"] == per_gpu
    assert report["totals"]["kv_cache_bytes"] == 16 * per_gpu
    assert report["inputs"]["engine"] == "vllm" and report["inputs"]["tp"] == 16
    assert [a["name"] for a in report["adjustments"]] == ["engine:vllm", "kv_dtype", "tensor_parallel"]


def test_cli_engine_contradiction_is_exit_2(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-8B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--engine", "llama.cpp", "--kv-dtype", "fp8"])
    assert result.exit_code == 2
    assert "Error: llama.cpp does not support --kv-dtype fp8_e4m3" in result.output
    assert "Hint:" in result.output


def test_peak_per_gpu_is_the_largest_ranks_steady_bytes_plus_the_transient() -> None:
    seq = 4096
    one_k = seq * 8 * 128 * BF16  # the torch.cat copy of one layer's K
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq)
    assert (est.peak_bytes, est.peak_bytes_per_gpu) == (est.kv_cache_bytes + one_k, est.kv_cache_bytes + one_k)
    tp2 = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, tp=2)
    assert tp2.kv_cache_bytes_per_gpu == est.kv_cache_bytes // 2
    assert tp2.peak_bytes_per_gpu == est.kv_cache_bytes // 2 + one_k // 2
    assert tp2.peak_bytes == est.kv_cache_bytes + one_k
    steady = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=2)
    assert steady.peak_bytes_per_gpu == steady.kv_cache_bytes_per_gpu and steady.peak_bytes == steady.kv_cache_bytes


def test_cli_table_under_tp_says_which_numbers_are_per_gpu(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-70B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm", "--tp", "16"],
                           env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "8 (1/GPU)" in out  # model heads, and what one rank keeps
    assert "KV cache per GPU, 1 × 32,768 tokens: 1.25 GiB (the most loaded of 16 GPUs, tp 16 × pp 1)" in out  # 80*32768*2*1*128*2
    assert "KV cache, all 16 GPUs: 20.00 GiB" in out
    flat = " ".join(out.split())  # the line wraps on word boundaries at the width
    assert "replicated: 8 KV heads over 16 tensor-parallel ranks, each rank keeps 1, so 2 copies of each head" in flat
    assert "sizes: all 16 GPUs together" in out
    assert "tensor_parallel: 10.00 GiB -> 20.00 GiB (all GPUs)" in out
    report = json.loads(runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm", "--tp", "16",
                                            "--format", "json"]).stdout)
    layer = report["layers"][0]
    assert (layer["num_kv_heads"], layer["num_kv_heads_per_gpu"]) == (8, 1)
    assert layer["bytes_per_token_per_gpu"] == KV * 1 * 128 * BF16
    assert layer["bytes_per_token"] == 16 * KV * 1 * 128 * BF16  # summed over the 16 ranks
    assert report["totals"]["peak_bytes_per_gpu"] == report["totals"]["kv_cache_bytes_per_gpu"] == 80 * 32768 * 512


def test_cli_no_window_on_a_dense_model_is_exit_0(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-8B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--no-window", "--engine", "vllm"])
    assert result.exit_code == 0, result.output
    bad = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--prompt-len", "5000"])
    assert bad.exit_code == 2
    assert "Error: --prompt-len 5,000 is longer than the sequence length 4,096" in bad.output and "Hint:" in bad.output
