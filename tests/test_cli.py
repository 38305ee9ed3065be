"""The estimate and models commands as a user runs them: every output format and exit code."""

from __future__ import annotations

import json

import pytest
import yaml

from kvplan.cli import app

from conftest import BF16, FP16, KV, make_config


def run(runner, *args: str):
    return runner.invoke(app, list(args))


def test_estimate_table_seed(runner) -> None:
    result = run(runner, "estimate", "--model", "meta-llama/Llama-2-7b-hf", "--seq-len", "4k")
    assert result.exit_code == 0, result.output
    assert "2,147,483,648" in result.stdout and "2.00 GiB" in result.stdout
    assert "full " in result.stdout  # the table names kinds short; the report keeps full_attention


def test_estimate_issue_example(runner) -> None:
    result = run(runner, "estimate", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "32k", "--batch", "4", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == 4 * 32768 * 32 * KV * 8 * 128 * BF16  # batch, tokens, layers, K+V, heads, dim


def test_json_report_keys(runner) -> None:
    result = run(runner, "estimate", "-m", "llama-3.1-8b", "-s", "8192", "-f", "json")
    report = json.loads(result.stdout)
    for key in ("schema_version", "kvplan_version", "model", "inputs", "layers", "totals", "notes"):
        assert key in report
    assert report["model"]["id"] == "meta-llama/Llama-3.1-8B" and report["model"]["model_type"] == "llama"
    assert report["inputs"] | {"batch": 1, "seq_len": 8192, "kv_dtype": "bf16"} == report["inputs"]
    layer = report["layers"][0]
    assert {k: layer[k] for k in ("kind", "count", "num_kv_heads", "head_dim_k", "head_dim_v", "window", "tokens_held")} == {
        "kind": "full_attention", "count": 32, "num_kv_heads": 8, "head_dim_k": 128, "head_dim_v": 128,
        "window": None, "tokens_held": 8192,
    }
    assert layer["bytes"] == report["totals"]["kv_cache_bytes"] == 1024**3
    sources = {p["field"]: p["source"] for p in report["provenance"]}
    assert sources["num_kv_heads"] == "config: num_key_value_heads"


def test_yaml_is_deterministic_and_matches_json(runner) -> None:
    args = ["estimate", "-m", "google/gemma-3-27b-it", "-s", "128k", "-b", "2"]
    first = run(runner, *args, "--format", "yaml")
    second = run(runner, *args, "--format", "yaml")
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    as_json = json.loads(run(runner, *args, "--format", "json").stdout)
    assert yaml.safe_load(first.stdout) == as_json


def test_default_seq_len_is_model_max(runner) -> None:
    report = json.loads(run(runner, "estimate", "-m", "meta-llama/Llama-2-7b-hf", "-f", "json").stdout)
    assert report["inputs"]["seq_len"] == 4096
    assert "max_position_embeddings" in report["inputs"]["seq_len_source"]


def test_output_file(runner, tmp_path) -> None:
    out = tmp_path / "report.yaml"
    result = run(runner, "estimate", "-m", "llama-2-7b-hf", "-s", "4096", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["totals"]["kv_cache_bytes"] == 2 * 1024**3
    out_json = tmp_path / "report.json"
    run(runner, "estimate", "-m", "llama-2-7b-hf", "-s", "4096", "-o", str(out_json))
    assert json.loads(out_json.read_text())["totals"]["kv_cache_bytes"] == 2 * 1024**3


def test_kv_dtype_fp8_and_set(runner, write_config) -> None:
    path = write_config(make_config())
    result = run(runner, "estimate", "-m", str(path), "-s", "1k", "--kv-dtype", "fp8", "--set", "num_key_value_heads=8", "-f", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == 1024 * 32 * KV * 8 * 128 * 1  # fp8: 1 byte
    assert report["inputs"]["overrides"] == {"num_key_value_heads": 8}


def test_notes_go_to_stderr(runner) -> None:
    result = run(runner, "estimate", "-m", "google/gemma-3-27b-it", "-s", "4k")
    assert "sliding_window_pattern" in result.stderr
    assert "sliding_window_pattern" not in result.stdout


def test_models_lists_bundled(runner) -> None:
    result = run(runner, "models", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in json.loads(result.stdout)["models"]}
    assert rows["meta-llama/Llama-3.1-8B"]["bytes_per_token"] == 32 * KV * 8 * 128 * BF16
    assert rows["meta-llama/Llama-2-7b-hf"]["bytes_per_token"] == 32 * KV * 32 * 128 * FP16
    table = run(runner, "models")
    assert table.exit_code == 0 and "meta-llama/Llama-3.1-8B" in table.stdout


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["-s", "0"], "--seq-len must be a positive number of tokens"),
        (["-s", "-5"], "--seq-len"),
        (["-s", "4q"], "is not a token count"),
        (["-s", "9999999T"], "is not a token count"),
        (["-s", str(2**41)], "absurdly large"),
        (["--kv-dtype", "fp7"], "is not a known KV dtype"),
        (["--set", "novalue"], "is not key=value"),
        (["--set", "num_hidden_layers=0"], "must be positive"),
        (["--set", "num_key_value_heads=3.5"], "must be an integer"),
        (["--encoder-len", "0"], "--encoder-len must be a positive"),
    ],
)
def test_bad_flags_exit_2_one_line(runner, args: list[str], phrase: str) -> None:
    result = run(runner, "estimate", "-m", "meta-llama/Llama-2-7b-hf", *args)
    assert result.exit_code == 2, result.output
    assert phrase in result.stderr
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[0].startswith("Error: ")


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        ("{bad json", "is not valid JSON"),
        ("[1]", "must hold a JSON object"),
        (json.dumps({"model_type": "custom"}), "required field num_hidden_layers is missing"),
        (json.dumps(make_config(num_attention_heads=2**30)), "absurdly large"),
        (json.dumps(make_config(num_hidden_layers=-1)), "must be positive"),
        (json.dumps(make_config(torch_dtype="float3")), "not a known dtype"),
    ],
)
def test_bad_configs_exit_2(runner, write_config, content: str, phrase: str) -> None:
    result = run(runner, "estimate", "-m", str(write_config(content)), "-s", "1k")
    assert result.exit_code == 2, result.output
    assert phrase in result.stderr and "Traceback" not in result.output


def test_batch_must_be_positive(runner) -> None:
    result = run(runner, "estimate", "-m", "llama-2-7b-hf", "-b", "0")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_unknown_model_offline(runner) -> None:
    result = run(runner, "estimate", "-m", "acme/not-a-model")
    assert result.exit_code == 2
    assert "offline mode" in result.stderr and "kvplan models" in result.stderr


def test_no_max_context_needs_seq_len(runner) -> None:
    result = run(runner, "estimate", "-m", "bigscience/bloom-560m")
    assert result.exit_code == 2 and "pass --seq-len" in result.stderr
    assert run(runner, "estimate", "-m", "bigscience/bloom-560m", "-s", "2k").exit_code == 0


def test_unexpected_exception_is_exit_101(runner, monkeypatch) -> None:
    import kvplan.api

    def boom(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(kvplan.api, "calc_estimate", boom)
    result = run(runner, "estimate", "-m", "llama-2-7b-hf")
    assert result.exit_code == 101
    assert "internal error" in result.stderr and "KVPLAN_DEBUG" in result.stderr


def test_help_has_examples(runner) -> None:
    result = run(runner, "estimate", "--help")
    assert result.exit_code == 0 and "Examples" in result.stdout and "--seq-len" in result.stdout


def test_engine_serves_float32_checkpoint_in_16_bits(runner) -> None:
    # gemma-2-9b's config says float32: the ideal formula keeps it, vLLM serves and caches bf16.
    ideal = json.loads(run(runner, "estimate", "-m", "google/gemma-2-9b", "-s", "8k", "-f", "json").stdout)
    vllm = json.loads(run(runner, "estimate", "-m", "google/gemma-2-9b", "-s", "8k", "--engine", "vllm", "-f", "json").stdout)
    layers, kv_heads, head_dim, fp32, bf16 = 21, 8, 256, 4, 2  # 21 sliding (W 4096) + 21 full layers
    assert ideal["inputs"]["kv_dtype"] == "fp32"
    assert ideal["totals"]["kv_cache_bytes"] == layers * (4096 + 8192) * KV * kv_heads * head_dim * fp32
    assert vllm["inputs"]["kv_dtype"] == "bf16" and "served dtype" in vllm["inputs"]["kv_dtype_source"]
    block, max_batched = 16, 8192  # vLLM block size, max_num_batched_tokens
    full_blocks = 8192 // block
    sliding_blocks = -(-min(4096 - 1 + max_batched, 8192) // block) + 1  # cdiv(min(W - 1 + M, T), bs) + 1
    assert vllm["totals"]["kv_cache_bytes"] == layers * (full_blocks + sliding_blocks) * block * KV * kv_heads * head_dim * bf16


@pytest.mark.parametrize("args", [["-b", "0"], ["--tp", "0"], ["--format", "xml"], ["--no-such-flag"]])
def test_usage_errors_end_in_one_error_line(runner, args: list[str]) -> None:
    result = run(runner, "estimate", "-m", "llama-2-7b-hf", *args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error: ") and "╭" not in result.output


# ---- the model given first, without -m ----------------------------------------------------------
@pytest.mark.parametrize("command", [["estimate", "-s", "4k"], ["capacity", "--gpu", "H100", "-s", "4k"],
                                     ["compare", "mha", "-s", "4k"]])
def test_the_model_may_come_first_without_m(runner, command: list[str]) -> None:
    first = runner.invoke(app, [command[0], "Qwen/Qwen3-8B", *command[1:], "--format", "json"])
    flagged = runner.invoke(app, [command[0], "-m", "Qwen/Qwen3-8B", *command[1:], "--format", "json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == json.loads(flagged.stdout)
    if command[0] == "estimate":
        assert json.loads(first.stdout)["totals"]["kv_cache_bytes"] == 36 * 4096 * 2 * 8 * 128 * 2  # layers, tokens,
        # K+V, kv heads, head dim, bf16


def test_a_hub_url_first_is_the_repo_id(runner) -> None:
    result = runner.invoke(app, ["estimate", "https://huggingface.co/Qwen/Qwen3-8B", "-s", "4k", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"]["id"] == "Qwen/Qwen3-8B"


@pytest.mark.parametrize("command", ["estimate", "capacity", "verify"])
def test_no_model_or_two_models_is_exit_2(runner, command: str) -> None:
    none = runner.invoke(app, [command])
    assert none.exit_code == 2 and f"Error: kvplan {command} needs a model" in none.stderr
    assert f"e.g. kvplan {command} Qwen/Qwen3-8B" in none.stderr
    two = runner.invoke(app, [command, "Qwen/Qwen3-8B", "-m", "Qwen/Qwen3-4B"])
    assert two.exit_code == 2 and "two models given: 'Qwen/Qwen3-8B' first and --model 'Qwen/Qwen3-4B'" in two.stderr


def test_compare_keeps_a_misspelt_variant_a_variant(runner) -> None:
    result = runner.invoke(app, ["compare", "gqaa"])
    assert result.exit_code == 2 and "unknown variant 'gqaa' (did you mean 'gqa'?)" in result.stderr
