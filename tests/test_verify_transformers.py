"""`kvplan verify --engine transformers`: the real Hugging Face model (random weights, tiny widths),
generate(), its cache measured against kvplan's hf-dynamic / hf-static engine profiles."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from kvplan.cli import app
from kvplan.errors import EXIT_USAGE

from conftest import BF16, FP16, KV

FP32 = 4
# Tiny widths over real configs: what the cache holds depends on heads, head dims, windows and states only.
TINY = ["--set", "hidden_size=64", "--set", "num_attention_heads=4", "--set", "num_key_value_heads=2",
        "--set", "head_dim=16"]
MISTRAL = ["-m", "mistralai/Mistral-7B-v0.1", *TINY, "--set", "sliding_window=8"]  # bf16, every layer slides


def cross_check(runner, *args: str, code: int = 0) -> dict:
    result = runner.invoke(app, ["verify", "--engine", "transformers", "--no-progress", "--format", "json", *args])
    assert result.exit_code == code, result.output
    report = json.loads(result.stdout)
    assert report["verify"]["engine"] == "transformers"
    assert report["verify"]["transformers_version"] == transformers.__version__
    return report


@pytest.mark.parametrize(
    ("flags", "tokens", "rows"),
    [
        ([], 8, 1),  # T = 12 + 4 > W: W - 1 kept tokens, a view of the W-token concatenation (transformers cache_utils.py)
        (["--beams", "2"], 8 - 1, 2),  # the beam reorder compacts the view to W - 1
        (["--layout", "static", "--max-cache-len", "30"], 8, 1),  # StaticSlidingWindowLayer: min(W, M) (h.6)
        (["--prompt-len", "4", "--gen-len", "2"], 4 + 2, 1),  # T < W: every token
    ],
)
def test_sliding_window_storage(runner, flags: list[str], tokens: int, rows: int) -> None:
    report = cross_check(runner, *MISTRAL, "--layers", "2", "--prompt-len", "12", "--gen-len", "4", *flags)
    verify = report["verify"]
    assert verify["measured_bytes"] == verify["predicted_bytes"] == rows * 2 * KV * 2 * 16 * tokens * BF16
    assert verify["match"] is True
    assert [layer["measured_bytes"] for layer in report["layers"]] == [layer["predicted_bytes"] for layer in report["layers"]]
    assert any("--layers 2" in note for note in report["notes"])


def test_hybrid_mamba_state_is_fp32_with_the_whole_conv_window(runner) -> None:
    # Jamba: layers 0-3 Mamba, layer 4 attention; fp16 (no config dtype). d_inner = 2 * 64.
    report = cross_check(runner, "-m", "ai21labs/Jamba-v0.1", *TINY, "--layers", "5", "--prompt-len", "6",
                         "--gen-len", "2")
    d_inner, d_conv, d_state, tokens = 2 * 64, 4, 16, 6 + 2
    state = d_conv * d_inner * FP16 + d_inner * d_state * FP32
    assert [layer["measured_bytes"] for layer in report["layers"]] == [state] * 4 + [KV * 2 * 16 * tokens * FP16]
    assert report["verify"]["match"] is True


def test_mla_caches_the_latent(runner) -> None:
    report = cross_check(runner, "-m", "deepseek-ai/DeepSeek-V2-Lite", "--layers", "2", "--prompt-len", "6",
                         "--gen-len", "2", "--set", "hidden_size=64", "--set", "num_attention_heads=4",
                         "--set", "kv_lora_rank=32", "--set", "qk_rope_head_dim=16", "--set", "qk_nope_head_dim=16",
                         "--set", "v_head_dim=16")
    # transformers >= 5.15: [B, 1, T, kv_lora_rank] and [B, 1, T, qk_rope_head_dim] per layer (modeling_deepseek_v3.py)
    assert report["verify"]["measured_bytes"] == 2 * (32 + 16) * (6 + 2) * BF16
    assert report["verify"]["match"] is True


def test_falcon_new_decoder_architecture_caches_the_kv_groups(runner) -> None:
    report = cross_check(runner, "-m", "tiiuae/falcon-40b", "--layers", "2", "--prompt-len", "6", "--gen-len", "2",
                         "--set", "hidden_size=64", "--set", "num_attention_heads=8", "--set", "num_kv_heads=2")
    # transformers 5.25 caches the 2 KV groups of 64 / 8 = 8 values (modeling_falcon.py repeats them in attention); bf16
    assert report["verify"]["measured_bytes"] == 2 * KV * 2 * 8 * (6 + 2) * BF16
    assert report["verify"]["match"] is True


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--layout", "paged"], "not the paged layout"),
        (["--tp", "2"], "has no --tp"),
        (["--kv-dtype", "fp8"], "caches in the model dtype"),
        (["--gen-len", "0", "--prompt-len", "12"], "--gen-len 1 or more"),
    ],
)
def test_refused_combinations(runner, flags: list[str], message: str) -> None:
    result = runner.invoke(app, ["verify", "--engine", "transformers", *MISTRAL, "--layers", "1", *flags])
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in result.output and "Traceback" not in result.output


def test_unknown_architecture_is_a_clear_error(runner) -> None:
    result = runner.invoke(app, ["verify", "--engine", "transformers", "-m", "THUDM/chatglm3-6b", "--layers", "1"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert "cannot build THUDM/chatglm3-6b" in result.output
    assert "drop --engine transformers" in result.output


def test_without_transformers_says_how_to_install(runner, monkeypatch) -> None:
    import importlib.util

    import kvplan.cli.verify as command

    real = importlib.util.find_spec
    monkeypatch.setattr(command.importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    result = runner.invoke(app, ["verify", "--engine", "transformers", *MISTRAL, "--layers", "1"])
    assert result.exit_code == EXIT_USAGE
    assert "pip install '.[transformers]' in the kvplan checkout" in result.output
