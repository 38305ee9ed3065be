"""GGUF models in every command that takes a model: estimate, capacity, compare, check, verify.

Files are written with llama.cpp's gguf.GGUFWriter (tests/test_gguf.py's writer). Capacity's weights
come from the tensor table: the expected bytes are products of ggml block sizes; per device under
llama.cpp's layer split with token_embd in host memory.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any

import pytest

gguf = pytest.importorskip("gguf")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gguf import FAMILIES, Q, write_gguf

from kvplan.cli import app

from hubstub import HubStub

MIB = 1 << 20
UBATCH = 512  # llama.cpp's default n_ubatch: the activation estimate's tokens (kvplan/budget.py)

# A quantised llama: hidden 256, ffn 512, vocab 32, 8 heads of 16 (2 KV heads), 4 blocks.
HIDDEN, FFN, VOCAB, LAYERS, HEADS, KV_HEADS, HEAD = 256, 512, 32, 4, 8, 2, 16
# ggml blocks: (values per block, bytes per block)
Q8_0, Q6_K, Q4_K, Q5_K, IQ4_XS, MXFP4 = (32, 34), (256, 210), (256, 144), (256, 176), (256, 136), (32, 17)


def qbytes(values: int, block: tuple[int, int]) -> int:
    return values // block[0] * block[1]


EMBD_BYTES = qbytes(HIDDEN * VOCAB, Q8_0)
OUTPUT_BYTES = qbytes(HIDDEN * VOCAB, Q6_K) + HIDDEN * 4  # output (Q6_K) + output_norm (F32)
BLOCK_BYTES = (qbytes(HIDDEN * HEADS * HEAD, Q4_K) + qbytes(HIDDEN * KV_HEADS * HEAD, Q5_K)
               + qbytes(HIDDEN * KV_HEADS * HEAD, Q6_K) + qbytes(HEADS * HEAD * HIDDEN, Q8_0)
               + qbytes(HIDDEN * FFN, IQ4_XS) + qbytes(FFN * HIDDEN, MXFP4) + HIDDEN * FFN * 2  # ffn_gate BF16
               + HIDDEN * 4)  # attn_norm F32


def write_quantised(path: Path, **extra: Any) -> Path:
    tensors = [("token_embd.weight", (HIDDEN, VOCAB), Q.Q8_0), ("output.weight", (HIDDEN, VOCAB), Q.Q6_K),
               ("output_norm.weight", (HIDDEN,), Q.F32)]
    for i in range(LAYERS):
        tensors += [(f"blk.{i}.attn_q.weight", (HIDDEN, HEADS * HEAD), Q.Q4_K),
                    (f"blk.{i}.attn_k.weight", (HIDDEN, KV_HEADS * HEAD), Q.Q5_K),
                    (f"blk.{i}.attn_v.weight", (HIDDEN, KV_HEADS * HEAD), Q.Q6_K),
                    (f"blk.{i}.attn_output.weight", (HEADS * HEAD, HIDDEN), Q.Q8_0),
                    (f"blk.{i}.ffn_up.weight", (HIDDEN, FFN), Q.IQ4_XS), (f"blk.{i}.ffn_down.weight", (FFN, HIDDEN), Q.MXFP4),
                    (f"blk.{i}.ffn_gate.weight", (HIDDEN, FFN), Q.BF16), (f"blk.{i}.attn_norm.weight", (HIDDEN,), Q.F32)]
    kv = {"{arch}.block_count": LAYERS, "{arch}.context_length": 8192, "{arch}.embedding_length": HIDDEN,
          "{arch}.feed_forward_length": FFN, "{arch}.attention.head_count": HEADS,
          "{arch}.attention.head_count_kv": KV_HEADS, "{arch}.attention.key_length": HEAD,
          "{arch}.attention.value_length": HEAD, "general.file_type": 15, **extra}
    return write_gguf(path, "llama", kv, tensors)


def invoke(runner, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def activation_bytes() -> int:
    """budget.activation_bytes for llama.cpp: n_ubatch tokens x (3 mlp + qkv + 2 hidden) x 2 B + logits in f32."""
    qkv = HEADS * HEAD + KV_HEADS * (HEAD + HEAD)
    return UBATCH * (3 * FFN + qkv + 2 * HIDDEN) * 2 + UBATCH * VOCAB * 4


# ---- capacity: weights from the tensor table ------------------------------------------------------
def test_capacity_one_gpu_takes_every_block_and_the_output_layer(tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m-Q4_K_M.gguf")
    report = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", str(model), "--gpu-mem", "64MiB")
    weights, budget = report["weights"], report["budget"]
    assert weights["source"] == "gguf"
    assert weights["dtype"] == "Q4_K_M"  # general.file_type 15
    assert weights["bytes"] == EMBD_BYTES + OUTPUT_BYTES + LAYERS * BLOCK_BYTES
    assert budget["weights_bytes_per_gpu"] == OUTPUT_BYTES + LAYERS * BLOCK_BYTES  # token_embd stays on the host
    assert budget["activation_bytes"] == activation_bytes()
    assert budget["kv_bytes_per_gpu"] == 64 * MIB - (OUTPUT_BYTES + LAYERS * BLOCK_BYTES) - activation_bytes()
    assert report["model"]["source"] == "gguf" and report["model"]["location"] == str(model)
    parts = {p["name"]: p for p in weights["parts"]}
    assert parts["embed_tokens"]["bytes"] == EMBD_BYTES and parts["embed_tokens"]["storage"] == "gguf Q8_0 x1"
    assert parts["attention"]["parameters"] == LAYERS * (2 * HIDDEN * HEADS * HEAD + 2 * HIDDEN * KV_HEADS * HEAD)
    assert any("token_embd stays in host memory" in n and f"{EMBD_BYTES:,} B" in n for n in report["notes"])
    assert any("weights from the GGUF tensor table (general.file_type Q4_K_M)" in n for n in report["notes"])


@pytest.mark.parametrize(
    ("split", "first_blocks"),
    [
        # 4 blocks + the output layer = 5 slots; block il sits on the first device whose cumulative
        # share exceeds il / 5. Even: edges (1/2, 1) -> blocks 0-2 (0, 1/5, 2/5) on device 0.
        (None, 3),
        # -ts 1,3: edges (1/4, 1) -> blocks 0-1 (0, 1/5) on device 0.
        ("1,3", 2),
        # -ts 3,1: edges (3/4, 1) -> blocks 0-3 (up to 3/5) on device 0, only the output layer on device 1.
        ("3,1", 4),
    ],
)
def test_capacity_splits_layers_over_two_devices(split: str | None, first_blocks: int, tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m.gguf")
    args = ["capacity", "--engine", "llama.cpp", "--model", str(model), "--gpu-mem", "64MiB", "--pp", "2"]
    report = invoke(runner, *args, *(["--tensor-split", split] if split else []))
    devices = (first_blocks * BLOCK_BYTES, (LAYERS - first_blocks) * BLOCK_BYTES + OUTPUT_BYTES)
    assert report["budget"]["weights_bytes_per_gpu"] == max(devices)  # the busiest device
    assert report["weights"]["bytes"] == EMBD_BYTES + sum(devices)


def test_capacity_on_a_24gb_card_needs_only_the_file_and_the_gpu(tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m.gguf")
    report = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", str(model), "--gpu", "RTX4090")
    assert report["capacity"]["fits"] is True
    assert report["capacity"]["max_context_len"] == 8192  # the file's llama.context_length
    assert report["budget"]["weights_bytes_per_gpu"] == OUTPUT_BYTES + LAYERS * BLOCK_BYTES


def test_capacity_other_engines_keep_token_embd_on_the_gpu(tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m.gguf")
    report = invoke(runner, "capacity", "--engine", "vllm", "--model", str(model), "--gpu-mem", "64MiB")
    assert report["budget"]["weights_bytes_per_gpu"] == EMBD_BYTES + OUTPUT_BYTES + LAYERS * BLOCK_BYTES


def test_capacity_gguf_refuses_safetensors_and_ignores_dtype(tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m.gguf")
    result = runner.invoke(app, ["capacity", "--model", str(model), "--gpu", "H100", "--weights-from", "safetensors"])
    assert result.exit_code == 2 and result.output.startswith("Error: ") and "is a GGUF" in result.output
    report = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", str(model), "--gpu-mem", "64MiB",
                    "--dtype", "float32")
    assert report["budget"]["weights_bytes_per_gpu"] == OUTPUT_BYTES + LAYERS * BLOCK_BYTES
    assert any("--dtype float32 ignored" in n for n in report["notes"])


def test_capacity_weights_bytes_beats_the_tensor_table(tmp_path: Path, runner) -> None:
    model = write_quantised(tmp_path / "m.gguf")
    report = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", str(model), "--gpu-mem", "64MiB",
                    "--weights-bytes", "1000000")
    assert report["weights"]["source"] == "--weights-bytes" and report["budget"]["weights_bytes_per_gpu"] == 1000000


def test_config_json_under_llama_cpp_says_the_weights_are_a_q4_k_m_gguf(tmp_path: Path, runner) -> None:
    """The llama.cpp profile sizes a config.json as the Q4_K_M GGUF its users run, and says so (issue 13)."""
    _arch, _kv, config = FAMILIES["llama-gqa"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "torch_dtype": "bfloat16", "vocab_size": 32, "intermediate_size": 256}))
    report = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", str(path), "--gpu", "RTX4090")
    weights = report["weights"]
    assert weights["source"] == "llama.cpp rule" and weights["dtype"] == "Q4_K_M"
    assert weights["checkpoint_dtype"] == "bfloat16" and weights["quantization"].startswith("Q4_K_M (llama.cpp default")
    assert any("pass --weights-quant" in n and "the .gguf file" in n for n in report["notes"])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_capacity_kv_agrees_with_config_json(family: str, tmp_path: Path, runner) -> None:
    """Same KV pool, tokens and concurrency from the GGUF and the config.json under a fixed KV budget."""
    arch, kv, config = FAMILIES[family]
    model = write_gguf(tmp_path / f"{family}.gguf", arch, kv)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({**config, "torch_dtype": "float16"}))
    for engine in ("ideal", "vllm", "sglang", "trtllm", "llama.cpp"):
        args = ["capacity", "--engine", engine, "--kv-budget", "64MiB", "--max-model-len", "3000", "--batch", "2"]
        from_gguf = invoke(runner, *args, "--model", str(model))
        from_config = invoke(runner, *args, "--model", str(config_path))
        assert from_gguf["capacity"] == from_config["capacity"], engine
        assert from_gguf["capacity"]["engine_log"] == from_config["capacity"]["engine_log"], engine


def test_capacity_reads_a_folder_of_split_shards(tmp_path: Path, runner) -> None:
    """Metadata from the first shard, tensors from every shard: the split set weighs what one file does."""
    whole = write_quantised(tmp_path / "whole.gguf")
    folder = tmp_path / "split"
    folder.mkdir()
    write_quantised(folder / "m-00001-of-00002.gguf", **{"split.count": 2})
    write_gguf(folder / "m-00002-of-00002.gguf", "llama", {"split.count": 2},
               [("blk.0.ffn_extra.weight", (256, 2), Q.Q8_0)])
    args = ["capacity", "--engine", "llama.cpp", "--gpu-mem", "64MiB"]
    one = invoke(runner, *args, "--model", str(whole))
    split = invoke(runner, *args, "--model", str(folder))
    extra = qbytes(256 * 2, Q8_0)  # the second shard's tensor sits in block 0
    assert split["weights"]["bytes"] == one["weights"]["bytes"] + extra
    assert split["budget"]["weights_bytes_per_gpu"] == one["budget"]["weights_bytes_per_gpu"] + extra


# ---- every command --------------------------------------------------------------------------------
def test_compare_reads_a_gguf(tmp_path: Path, runner) -> None:
    arch, kv, config = FAMILIES["gemma3-swa"]
    model = write_gguf(tmp_path / "g.gguf", arch, kv)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({**config, "torch_dtype": "float16"}))
    from_gguf = invoke(runner, "compare", "gqa", "model", "--model", str(model), "-s", "4k")
    from_config = invoke(runner, "compare", "gqa", "model", "--model", str(config_path), "-s", "4k")
    assert from_gguf["model"]["source"] == "gguf"
    assert [v["kv_cache_bytes"] for v in from_gguf["variants"]] == [v["kv_cache_bytes"] for v in from_config["variants"]]


def test_check_plan_with_gguf_paths(tmp_path: Path, runner) -> None:
    write_quantised(tmp_path / "m.gguf")
    plan = tmp_path / "plan.yaml"
    plan.write_text("scenarios:\n  - name: q\n    model: ./m.gguf\n    engine: llama.cpp\n    seq_len: 4k\n"
                    "    require_fit_on: {gpu: RTX4090, num_gpus: 1}\n")
    report = invoke(runner, "check", str(plan))
    row = report["scenarios"][0]
    assert row["passed"] is True
    assert row["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD * 2 * 4096  # K+V, layers, kv heads, head, f16, tokens


def test_gguf_file_option_on_the_hub_in_every_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner) -> None:
    data = write_quantised(tmp_path / "m.gguf").read_bytes()
    files = {"acme/m-GGUF": {"m-Q4_K_M.gguf": data}}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    plan = tmp_path / "plan.yaml"
    plan.write_text("scenarios:\n  - name: hub\n    model: acme/m-GGUF\n    gguf_file: m-Q4_K_M.gguf\n    seq_len: 4k\n")
    kv_bytes = 2 * LAYERS * KV_HEADS * HEAD * 2 * 4096  # K+V, layers, kv heads, head, f16, tokens
    with HubStub({}, files=files) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub_args = ["--model", "acme/m-GGUF", "--gguf-file", "m-Q4_K_M.gguf"]
        est = invoke(runner, "estimate", *hub_args, "-s", "4k")
        assert est["totals"]["kv_cache_bytes"] == kv_bytes
        assert est["model"]["source"] == "hub-gguf" and est["model"]["location"] == "acme/m-GGUF/m-Q4_K_M.gguf"
        cap = invoke(runner, "capacity", "--engine", "llama.cpp", *hub_args, "--gpu-mem", "64MiB")
        assert cap["budget"]["weights_bytes_per_gpu"] == OUTPUT_BYTES + LAYERS * BLOCK_BYTES
        tag = invoke(runner, "capacity", "--engine", "llama.cpp", "--model", "acme/m-GGUF:Q4_K_M", "--gpu-mem", "64MiB")
        assert tag["budget"] == cap["budget"]
        cmp = invoke(runner, "compare", "model", *hub_args, "-s", "4k")
        assert cmp["variants"][0]["kv_cache_bytes"] == kv_bytes
        chk = invoke(runner, "check", str(plan))
        assert chk["scenarios"][0]["kv_cache_bytes"] == kv_bytes


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="verify needs torch")
def test_verify_decodes_the_gguf_geometry_and_refuses_transformers(tmp_path: Path, runner) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    model = write_gguf(tmp_path / "m.gguf", arch, kv)
    report = invoke(runner, "verify", "--model", str(model), "--no-progress", "--layers", "2")
    assert report["verify"]["passed"] is True
    assert any("llama.cpp itself is not run" in n for n in report["notes"])
    result = runner.invoke(app, ["verify", "--model", str(model), "--engine", "transformers"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: --engine transformers builds the model from a config.json")
    assert "Traceback" not in result.output


# ---- bad files in every command: one line, exit 2 -------------------------------------------------
BAD = {
    "magic": b"PK\x03\x04not a gguf",
    "version": b"GGUF" + struct.pack("<IQQ", 99, 0, 0),
    "cut": b"GGUF" + struct.pack("<IQQ", 3, 0, 0)[:6],
    "counts": b"GGUF" + struct.pack("<IQQ", 3, 2**60, 0),
}


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("command", ["capacity", "compare", "check"])
def test_bad_gguf_in_every_command_is_one_line(command: str, bad: str, tmp_path: Path, runner) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(BAD[bad])
    if command == "capacity":
        args = ["capacity", "--engine", "llama.cpp", "--model", str(path), "--gpu", "RTX4090"]
    elif command == "compare":
        args = ["compare", "model", "--model", str(path)]
    else:
        plan = tmp_path / "plan.yaml"
        plan.write_text("scenarios:\n  - name: bad\n    model: ./bad.gguf\n")
        args = ["check", str(plan)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ") and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("Error: ")]) == 1


# ---- fuzz: any header ends in exit 0, 1 or 2, never 101 -------------------------------------------
VALUE_TYPES = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 255])


def _kv_entry(key: bytes, vtype: int, payload: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + payload


@st.composite
def gguf_headers(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from([1, 2, 3, 4]))
    entries = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from([b"general.architecture", b"llama.block_count", b"llama.attention.head_count",
                                    b"llama.attention.head_count_kv", b"llama.embedding_length", b"general.file_type",
                                    b"llama.context_length", b"k"]))
        payload = draw(st.one_of(
            st.binary(max_size=24),
            st.builds(lambda s: struct.pack("<Q", len(s)) + s, st.sampled_from([b"llama", b"gemma3", b"", b"x" * 40])),
            st.integers(0, 2**32 - 1).map(lambda v: struct.pack("<I", v)),
            st.integers(0, 2**64 - 1).map(lambda v: struct.pack("<Q", v)),
        ))
        entries.append(_kv_entry(key, draw(VALUE_TYPES), payload))
    n_kv = draw(st.one_of(st.just(len(entries)), st.integers(0, 2**64 - 1)))
    n_tensors = draw(st.one_of(st.integers(0, 3), st.integers(0, 2**64 - 1)))
    tail = draw(st.binary(max_size=64))
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + b"".join(entries) + tail


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=gguf_headers(), command=st.sampled_from(["estimate", "capacity"]))
def test_fuzzed_gguf_headers_never_crash(content: bytes, command: str, tmp_path: Path, runner) -> None:
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(content)
    args = [command, "--model", str(path)] + (["--engine", "llama.cpp", "--gpu", "RTX4090"] if command == "capacity" else [])
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output, content)
    assert "Traceback" not in result.output
