"""`kvplan estimate --dp` (issue 22): data-parallel replicas share the batch; the busiest holds ceil(B / D)
sequences. Llama-3.1-8B (bundled): 32 layers, 8 KV heads of head dim 128, bf16."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import kvplan
from kvplan.cli import app
from kvplan.limits import MAX_NUM_GPUS

LLAMA = "meta-llama/Llama-3.1-8B"
PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K+V, layers, KV heads, head dim, bf16
TOKENS = 8192


def test_busiest_replica_and_totals_over_replicas() -> None:
    est = kvplan.estimate(LLAMA, seq_len="8k", batch=10, dp=4)
    # 10 sequences over 4 replicas: 2 replicas hold 3, 2 hold 2
    assert est.kv_cache_bytes_per_gpu == 3 * PER_TOKEN * TOKENS
    assert est.kv_cache_bytes == (2 * 3 + 2 * 2) * PER_TOKEN * TOKENS
    assert (est.dp, est.batch, est.num_gpus) == (4, 10, 4)  # one GPU per replica (tp 1 x pp 1)
    report = est.to_dict()
    assert (report["inputs"]["batch"], report["inputs"]["dp"], report["inputs"]["tp"]) == (10, 4, 1)
    assert report["totals"]["kv_cache_bytes"] == 10 * PER_TOKEN * TOKENS
    assert report["totals"]["peak_bytes"] == 10 * PER_TOKEN * TOKENS
    assert report["totals"]["kv_cache_bytes_per_gpu"] == 3 * PER_TOKEN * TOKENS
    assert sum(layer["bytes"] for layer in report["layers"]) == 3 * PER_TOKEN * TOKENS  # the busiest replica's rows
    assert any("4 replicas on 4 GPUs share 10 sequences (2 hold 3, 2 hold 2)" in n for n in report["notes"])


def test_vllm_replicas_each_hold_tp_gpus() -> None:
    est = kvplan.estimate(LLAMA, seq_len="8k", batch=8, dp=2, tp=2, engine="vllm")
    # each replica: 4 sequences, its 8 KV heads split over its own 2 GPUs; 2 x 2 GPUs in all
    assert est.kv_cache_bytes_per_gpu == 4 * PER_TOKEN // 2 * TOKENS
    assert est.kv_cache_bytes == 8 * PER_TOKEN * TOKENS
    assert est.num_gpus == 2 * 2


def test_sglang_dp_attention_splits_the_tp_gpus() -> None:
    est = kvplan.estimate(LLAMA, seq_len="8k", batch=8, dp=2, tp=4, engine="sglang", enable_dp_attention=True)
    # --tp 4 --dp 2 --enable-dp-attention: 4 GPUs, each rank's KV over tp / dp = 2 of them, 4 sequences each
    assert est.kv_cache_bytes_per_gpu == 4 * PER_TOKEN // 2 * TOKENS
    assert est.num_gpus == 4
    report = est.to_dict()
    assert (report["inputs"]["tp"], report["inputs"]["dp"], report["inputs"]["enable_dp_attention"]) == (4, 2, True)
    assert report["totals"]["kv_cache_bytes"] == 8 * PER_TOKEN * TOKENS


def test_sglang_plain_dp_replicas_each_hold_tp_gpus() -> None:
    # SGLang without --enable-dp-attention: the data-parallel controller starts dp schedulers of tp GPUs each
    # (mlcommons' gpt-oss run: --tp-size=1 --data-parallel-size=$dp)
    est = kvplan.estimate(LLAMA, seq_len="8k", batch=8, dp=2, tp=1, engine="sglang")
    assert est.kv_cache_bytes_per_gpu == 4 * PER_TOKEN * TOKENS  # 4 sequences on each replica's one GPU
    assert est.num_gpus == 2 * 1
    assert est.to_dict()["inputs"]["enable_dp_attention"] is False


def test_dp_attention_of_another_engine_changes_nothing_and_says_so() -> None:
    plain = kvplan.estimate(LLAMA, seq_len="8k", batch=8, dp=2, tp=2, engine="vllm")
    ep = kvplan.estimate(LLAMA, seq_len="8k", batch=8, dp=2, tp=2, engine="vllm", enable_dp_attention=True)
    assert ep.kv_cache_bytes_per_gpu == plain.kv_cache_bytes_per_gpu and ep.num_gpus == plain.num_gpus == 2 * 2
    assert any(n.startswith("--enable-dp-attention: vllm's --dp replicas") for n in ep.to_dict()["notes"])


def test_fewer_sequences_than_replicas() -> None:
    est = kvplan.estimate(LLAMA, seq_len="8k", batch=2, dp=4)
    assert est.kv_cache_bytes_per_gpu == 1 * PER_TOKEN * TOKENS
    assert est.kv_cache_bytes == 2 * PER_TOKEN * TOKENS  # two replicas idle


def test_dp_1_is_the_plain_estimate() -> None:
    plain = kvplan.estimate(LLAMA, seq_len="8k", batch=10, engine="vllm", tp=2).to_dict()
    one = kvplan.estimate(LLAMA, seq_len="8k", batch=10, engine="vllm", tp=2, dp=1).to_dict()
    assert one == plain
    assert plain["inputs"]["dp"] == 1
    assert plain["totals"]["kv_cache_bytes"] == 10 * PER_TOKEN * TOKENS


def test_launch_lines_set_dp() -> None:
    vllm = kvplan.estimate(cmd=f"vllm serve {LLAMA} --max-model-len 8192 -dp 4", batch=10)
    assert (vllm.dp, vllm.num_gpus) == (4, 4)
    assert vllm.kv_cache_bytes_per_gpu == 3 * PER_TOKEN * 8192
    sglang = kvplan.estimate(cmd=f"python -m sglang.launch_server --model-path {LLAMA} --tp 4 --dp 2 "
                                 "--enable-dp-attention --context-length 8192", batch=8)
    assert (sglang.dp, sglang.num_gpus) == (2, 4)
    assert sglang.kv_cache_bytes_per_gpu == 4 * PER_TOKEN // 2 * 8192


def _invoke(runner: Any, *args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def test_table_headline_names_the_replicas(runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = _invoke(runner, "estimate", "-m", LLAMA, "-s", "8k", "-b", "10", "--dp", "4")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "KV cache per GPU, busiest of 4 replicas (3 × 8,192 tokens): 3.00 GiB"
    total = 10 * PER_TOKEN * TOKENS
    assert lines[1] == f"KV cache, all 4 replicas, 4 GPUs, 10 sequences: 10.00 GiB ({total:,} bytes)"
    assert max(map(len, lines)) <= 80


@pytest.mark.parametrize(("args", "message"), [
    (("--dp", "0"), "0 is not in the range x>=1"),
    (("--dp", str(MAX_NUM_GPUS.maximum + 1)),
     f"--dp {MAX_NUM_GPUS.maximum + 1:,} is past kvplan's limit of {MAX_NUM_GPUS.maximum:,}"),
    (("--dp", "1024", "--tp", "1024", "--pp", "2", "--engine", "vllm"),
     f"--tp 1024 x --pp 2 x --dp 1024 GPUs {1024 * 2 * 1024:,} is past kvplan's limit"),
    (("--engine", "sglang", "--tp", "4", "--dp", "3", "--enable-dp-attention"),
     "SGLang's DP attention splits the --tp GPUs: --dp 3 must divide --tp 4"),
])
def test_bad_dp_exits_2(runner: Any, args: tuple[str, ...], message: str) -> None:
    result = _invoke(runner, "estimate", "-m", LLAMA, "-s", "8k", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_dp_in_a_plan_without_require_fit_on(runner: Any, tmp_path: Path) -> None:
    plan = tmp_path / "kvplan.yaml"
    need = 3 * PER_TOKEN * TOKENS  # the busiest of 4 replicas holds 3 of 10 sequences
    plan.write_text(yaml.safe_dump({"scenarios": [
        {"name": "dp4", "model": LLAMA, "batch": 10, "seq_len": "8k", "dp": 4, "max_kv_bytes_per_gpu": need}]}))
    result = _invoke(runner, "check", str(plan), "-f", "json", "--full")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["scenarios"]
    assert row["estimate"]["inputs"]["dp"] == 4
    assert row["gates"][0]["actual"] == need
    plan.write_text(plan.read_text().replace(f"max_kv_bytes_per_gpu: {need}", f"max_kv_bytes_per_gpu: {need - 1}"))
    assert _invoke(runner, "check", str(plan)).exit_code == 1
