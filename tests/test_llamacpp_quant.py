"""The llama.cpp profile sizes a config.json's weights as the GGUF its users run (issue 13): Q4_K_M by
llama.cpp's per-tensor rule (src/llama-quant.cpp), --weights-quant for other types, a .gguf as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.cli import app
from kvplan.gguf.quantise import GGML_BLOCKS, use_more_bits

ROOT = Path(__file__).resolve().parent.parent
GB = 10**9
# Llama-3.1-8B (config.json): layers, hidden, MLP width, vocab, KV width (8 KV heads x 128)
L, D, FF, V, KV = 32, 4096, 14336, 128256, 8 * 128


def q4k(values: int) -> int:
    return values // 256 * 144  # Q4_K: 256 values in 144 B


def q6k(values: int) -> int:
    return values // 256 * 210  # Q6_K: 256 values in 210 B


def q5_0(values: int) -> int:
    return values // 32 * 22  # Q5_0: 32 values in 22 B


def q8_0(values: int) -> int:
    return values // 32 * 34  # Q8_0: 32 values in 34 B


def llama_8b(engine: str = "llama.cpp", **flags: object) -> dict:
    return kvplan.capacity("meta-llama/Llama-3.1-8B-Instruct", engine=engine, gpu="RTX4090",
                           max_model_len=8192, **flags).to_dict()


def test_use_more_bits_is_llama_cpps_layer_set() -> None:
    # i < n/8, i >= 7n/8, or every third layer between them starting at n/8 + 2
    assert [i for i in range(32) if use_more_bits(i, 32)] == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert sum(use_more_bits(i, 80) for i in range(80)) == 10 + 10 + 20  # 70B: n/8 = 10 first and last, 60 // 3 between


def test_ggml_block_sizes_are_the_gguf_packages() -> None:
    gguf = pytest.importorskip("gguf")
    for name, (block, size) in GGML_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]] == (block, size), name


def test_llama_8b_q4_k_m_is_the_per_tensor_arithmetic() -> None:
    more = sum(use_more_bits(i, L) for i in range(L))  # 16 layers keep attn_v and ffn_down in Q6_K
    per_layer = (q4k(D * D) * 2  # attn_q, attn_output
                 + q4k(D * KV)  # attn_k
                 + q4k(D * FF) * 2  # ffn_gate, ffn_up
                 + 2 * D * 4)  # attn_norm, ffn_norm in F32
    expected = (q4k(V * D)  # token_embd
                + q6k(V * D)  # output
                + L * per_layer
                + more * (q6k(D * KV) + q6k(FF * D)) + (L - more) * (q4k(D * KV) + q4k(FF * D))  # attn_v, ffn_down
                + D * 4)  # output_norm
    report = llama_8b()
    weights = report["weights"]
    assert weights["bytes"] == expected == 4_912_898_048
    # llama.cpp keeps token_embd in host memory: the GPU holds the rest
    assert weights["bytes_per_gpu"] == expected - q4k(V * D)
    assert weights["source"] == "llama.cpp rule" and weights["dtype"] == "Q4_K_M"
    assert weights["checkpoint_dtype"] == "bfloat16"
    assert "weights as Q4_K_M (the common quant) by llama-quant.cpp's rule" in " ".join(report["notes"])


def test_llama_8b_q4_k_m_is_the_published_file_within_1_percent() -> None:
    """bartowski/Meta-Llama-3.1-8B-Instruct-GGUF, Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf: 4.92 GB
    (https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/tree/main; the file adds ~9 MB of
    tokenizer metadata). Its other files: Q5_K_M 5.73 GB, Q6_K 6.6 GB, Q8_0 8.54 GB, bf16 16.1 GB."""
    published = {None: 4.92, "Q5_K_M": 5.73, "Q6_K": 6.6, "Q8_0": 8.54, "BF16": 16.1}
    for quant, size_gb in published.items():
        counted = llama_8b(weights_quant=quant)["weights"]["bytes"]
        assert abs(counted - size_gb * GB) <= 0.01 * size_gb * GB, (quant, counted)


@pytest.mark.parametrize(("quant", "size_gb"), [("Q5_K_M", 39.9 + 10.1), ("Q6_K", 39.9 + 18.0), ("Q8_0", 39.8 + 35.2)])
def test_llama_70b_matches_the_published_split_files(quant: str, size_gb: float) -> None:
    """bartowski/Meta-Llama-3.1-70B-Instruct-GGUF, the two shards of each type (GB as the Hub lists them)."""
    counted = kvplan.capacity("meta-llama/Llama-3.1-70B-Instruct", engine="llama.cpp", gpu="H100",
                              weights_quant=quant).to_dict()["weights"]["bytes"]
    assert abs(counted - size_gb * GB) <= 0.01 * size_gb * GB


def test_q8_0_is_every_matrix_in_q8_0() -> None:
    matrices = 2 * V * D + L * (2 * D * D + 2 * D * KV + 3 * D * FF)  # embeddings, output; q, o, k, v, gate, up, down
    assert llama_8b(weights_quant="q8_0")["weights"]["bytes"] == q8_0(matrices) + (2 * L + 1) * D * 4


def test_tied_embeddings_take_the_output_rule() -> None:
    """No output.weight: llama.cpp quantises token_embd as the output tensor (Q6_K)."""
    parts = {p["name"]: p for p in kvplan.capacity("meta-llama/Llama-3.2-1B-Instruct", engine="llama.cpp",
                                                   gpu="RTX4090").to_dict()["weights"]["parts"]}
    assert "lm_head" not in parts
    assert parts["embed_tokens"]["bytes"] == q6k(128256 * 2048)  # vocab x hidden
    assert parts["embed_tokens"]["storage"] == "gguf Q6_K x1"


def test_eight_experts_keep_attn_v_and_k_in_q8_0() -> None:
    """Mixtral: n_expert == 8 sets attn_v and attn_k to Q8_0 and attn_output to Q5_K (llama-quant.cpp)."""
    parts = {p["name"]: p for p in kvplan.capacity("mistralai/Mixtral-8x7B-v0.1", engine="llama.cpp",
                                                   gpu="H100").to_dict()["weights"]["parts"]}
    layers, hidden, kv = 32, 4096, 8 * 128
    assert parts["attention"]["bytes"] == layers * (q4k(hidden * hidden) + 2 * q8_0(hidden * kv)
                                                     + hidden * hidden // 256 * 176)  # q; k, v; o in Q5_K


def test_rows_that_are_not_whole_blocks_fall_back(tmp_path: Path) -> None:
    """hidden 128: Q4_K -> Q5_0 and Q6_K -> Q8_0 (tensor_type_fallback); ffn_down rows of 256 stay k-quants."""
    config = {"model_type": "llama", "num_hidden_layers": 8, "hidden_size": 128, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 256, "vocab_size": 32,
              "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    parts = {p["name"]: p for p in kvplan.capacity(str(path), engine="llama.cpp", gpu="RTX4090").to_dict()["weights"]["parts"]}
    assert parts["lm_head"]["bytes"] == q8_0(32 * 128)  # output: row 128 is not a Q6_K block -> Q8_0
    assert parts["embed_tokens"]["bytes"] == q5_0(32 * 128)
    more = sum(use_more_bits(i, 8) for i in range(8))  # 4 of 8 layers
    assert parts["mlp"]["bytes"] == 8 * 2 * q5_0(128 * 256) + more * q6k(256 * 128) + (8 - more) * q4k(256 * 128)


def test_a_gguf_keeps_its_own_tensor_types_and_refuses_weights_quant(tmp_path: Path, runner) -> None:
    pytest.importorskip("gguf")
    model = tmp_path / "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    subprocess.run([sys.executable, str(ROOT / "tools" / "gguf_stand_in.py"), str(model)], check=True,
                   capture_output=True)
    from_file = kvplan.capacity(str(model), engine="llama.cpp", gpu="RTX4090", max_model_len=8192).to_dict()
    assert from_file["weights"]["source"] == "gguf"
    # the rule over config.json gives the same tensor bytes, and the same bytes on the GPU, as the file's table
    from_config = llama_8b()["weights"]
    assert (from_file["weights"]["bytes"], from_file["weights"]["bytes_per_gpu"]) == (
        from_config["bytes"], from_config["bytes_per_gpu"])
    result = runner.invoke(app, ["capacity", "-m", str(model), "--engine", "llama.cpp", "--gpu", "RTX4090",
                                 "--weights-quant", "Q8_0"])
    assert result.exit_code == 2 and "is a GGUF" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "vllm", "--weights-quant", "Q4_K_M"], "--weights-quant picks a llama.cpp GGUF type"),
    (["--engine", "llama.cpp", "--weights-quant", "Q3_K_XL"], "is not a llama.cpp file type"),
    (["--engine", "llama.cpp", "--weights-quant", "Q8_0", "--weights-bytes", "8GB"], "both give the weights"),
])
def test_bad_weights_quant_is_exit_2(args: list[str], message: str, runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", "llama-3.1-8b", "--gpu", "RTX4090", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_table_says_q4_k_m_and_the_checkpoint(runner) -> None:
    args = ["capacity", "-m", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "RTX4090"]
    short = runner.invoke(app, args, env={"COLUMNS": "80"})
    row = next(line for line in short.stdout.splitlines() if line.startswith("weights "))
    assert row.split() == "weights 4.30 GiB of 4.58 GiB: 8.03B params, Q4_K_M from bfloat16".split()  # token_embd: host
    result = runner.invoke(app, [*args, "--verbose"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("weights "))
    assert "Q4_K_M (llama.cpp default" in row and "4.58 GiB" in row
    assert "(checkpoint bfloat16)" in " ".join(result.stdout.split())  # the cell may wrap


def test_other_engines_keep_the_checkpoint() -> None:
    weights = llama_8b(engine="vllm")["weights"]
    assert weights["source"] == "config" and weights["dtype"] == "bfloat16" and weights["quantization"] is None
