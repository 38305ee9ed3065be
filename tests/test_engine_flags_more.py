"""Engine flags as users type them (issue 12, the rest): vLLM's token-count suffixes, llama.cpp's -ctk/-ctv,
--swa-full and -kvu, DeepSeek without MLA, and vLLM's CUDA-graph term in the derived budget.

Sources are cited at each test; line numbers drift between versions, so functions are named."""

from __future__ import annotations

import json

import pytest

from kvplan.cli import app
from kvplan.engine_flags import vllm_human_int, vllm_tokens
from kvplan.errors import InputError


def _json(runner, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ---- 6. token-count suffixes: vLLM's human_readable_int ----------------------------------------
# vllm/utils/argparse_utils.py::human_readable_int (vLLM 0.33; arg_utils.py in 0.10.1.1):
# re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])"), lower-case decimal (int(float(n) * 1000**i)),
# upper-case binary (int(n) * 1024**i, decimals refused).
@pytest.mark.parametrize(("text", "tokens"), [
    ("32k", 32 * 1000), ("32K", 32 * 1024), ("25.6k", 25600), ("1m", 1000**2), ("1M", 1024**2),
    ("131072", 131072),
])
def test_vllm_reads_suffixes_decimal_lower_binary_upper(text: str, tokens: int) -> None:
    assert vllm_human_int(text) == tokens
    assert vllm_tokens(text, "--max-model-len")[0] == tokens


def test_vllm_refuses_decimals_with_binary_suffixes() -> None:
    assert vllm_human_int("1.5K") is None
    with pytest.raises(InputError, match="vLLM refuses decimals with binary suffixes like K"):
        vllm_tokens("1.5K", "--max-model-len")


def test_a_plain_integer_needs_no_note() -> None:
    assert vllm_tokens("32000", "--max-model-len") == (32000, None)


def test_max_model_len_follows_vllm_and_says_so_in_every_command(runner) -> None:
    cap = _json(runner, "capacity", "-m", "meta-llama/Llama-3.1-8B", "--kv-budget", "10GiB", "--max-model-len", "32k")
    assert cap["inputs"]["max_model_len"] == 32 * 1000
    assert any(n.startswith("--max-model-len 32k = 32,000 tokens, as vLLM reads it") and "32K would be 32,768" in n
               for n in cap["notes"])
    est = _json(runner, "estimate", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "32K")
    assert est["inputs"]["seq_len"] == 32 * 1024
    assert est["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 32 * 1024  # K+V, layers, kv heads, dim, bf16
    assert any(n.startswith("--max-model-len 32K = 32,768 tokens, as vLLM reads it") for n in est["notes"])
    # kvplan's own --seq-len keeps k = 1024 and says nothing about vLLM
    own = _json(runner, "capacity", "-m", "meta-llama/Llama-3.1-8B", "--kv-budget", "10GiB", "--seq-len", "32k")
    assert own["inputs"]["max_model_len"] == 32 * 1024
    assert not any("vLLM reads it" in n for n in own["notes"])


def test_max_num_batched_tokens_follows_vllm(runner) -> None:
    # gpt-oss sliding layers (W = 128, vLLM block 16) hold cdiv(min(W - 1 + mnbt, T), 16) + 1 blocks
    # (SlidingWindowSpec.max_memory_usage_bytes): mnbt 2k = 2,000 -> cdiv(2127, 16) + 1 = 134 blocks; 2K -> 138
    def sliding_tokens(mnbt: str) -> int:
        est = _json(runner, "estimate", "-m", "openai/gpt-oss-120b", "--engine", "vllm", "--seq-len", "32k",
                    "--max-num-batched-tokens", mnbt)
        assert any(n.startswith(f"--max-num-batched-tokens {mnbt} = ") for n in est["notes"])
        return next(g["tokens_held"] for g in est["layers"] if g["kind"] == "sliding_window")

    assert sliding_tokens("2k") == (-(-(128 - 1 + 2000) // 16) + 1) * 16
    assert sliding_tokens("2K") == (-(-(128 - 1 + 2048) // 16) + 1) * 16
