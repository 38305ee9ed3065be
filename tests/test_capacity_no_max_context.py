"""capacity for models whose config names no maximum context, with no --max-model-len (issue 10 audit):
a fixed-state model is answered at any length; an attention model at the longest request that fits."""

from __future__ import annotations

import json

from kvplan.cli import app


def _capacity(runner, *args: str) -> dict:
    result = runner.invoke(app, ["capacity", "--gpu", "H200", "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_attention_model_is_sized_at_the_longest_request_that_fits(runner) -> None:
    report = _capacity(runner, "--model", "bigscience/bloom-560m")
    cap, inputs = report["capacity"], report["inputs"]
    per_token = 2 * 24 * 16 * 64 * 2  # K+V, layers, heads (MHA), head dim, fp16
    tokens = inputs["max_model_len"]
    assert cap["kv_bytes_per_request"] == tokens * per_token
    # the longest: one more vLLM block (16 tokens) would not fit the KV room
    assert tokens * per_token <= cap["kv_bytes_available"] < (tokens + cap["block_size"]) * per_token
    assert cap["max_context_len"] == tokens and cap["max_context_limit"] == "memory"
    assert "no maximum context" in inputs["max_model_len_source"]
    assert any("no length given" in n for n in report["notes"])


def test_state_only_model_answers_at_any_length(runner) -> None:
    plain = _capacity(runner, "--model", "state-spaces/mamba-2.8b-hf")
    long = _capacity(runner, "--model", "state-spaces/mamba-2.8b-hf", "--max-model-len", "1m")
    # the per-request state does not grow: the same bytes and concurrency as at a million tokens
    assert plain["capacity"]["kv_bytes_per_request"] == long["capacity"]["kv_bytes_per_request"] > 0
    assert plain["capacity"]["max_concurrent_requests"] == long["capacity"]["max_concurrent_requests"] > 1
    assert plain["capacity"]["max_context_limit"] == "any length"
    assert any("fixed state per request" in n for n in plain["notes"])
    assert plain["weights"]["source"] == "config"


def test_model_too_big_for_one_gpu_still_answers(runner) -> None:
    report = _capacity(runner, "--model", "zai-org/GLM-4.5")
    assert report["capacity"]["fits"] is False and report["capacity"]["min_num_gpus"] > 1
    assert any("not one token of KV fits" in n for n in report["notes"])
    tp8 = _capacity(runner, "--model", "zai-org/GLM-4.5", "--tp", "8")
    assert tp8["capacity"]["fits"] is True and tp8["inputs"]["max_model_len"] > 4096


def test_a_named_maximum_is_unchanged(runner) -> None:
    report = _capacity(runner, "--model", "meta-llama/Llama-3.1-8B")
    assert report["inputs"]["max_model_len"] == 131072
    assert report["inputs"]["max_model_len_source"].startswith("model maximum context")
