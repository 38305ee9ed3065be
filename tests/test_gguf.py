"""GGUF models: geometry and weights from files written with llama.cpp's own gguf.GGUFWriter.

Each family's GGUF is compared with the config.json of the same model under every engine profile;
weight bytes are checked against ggml block sizes; bad files must give one line and exit 2.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from kvplan.cli import app
from kvplan.gguf.model import GgufModel
from kvplan.gguf.weights import layer_split
from kvplan.modelref import load, resolve

from conftest import FP16, KV
from hubstub import HubStub

ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llama.cpp", "hf-dynamic", "hf-static")
Q = gguf.GGMLQuantizationType


def write_gguf(path: Path, arch: str, kv: dict[str, Any], tensors: list[tuple[str, tuple[int, ...], Any]] = ()) -> Path:
    """A GGUF file: ``kv`` keys (``{arch}`` is filled in) and zero tensors of (name, ggml shape, type)."""
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in kv.items():
        key = key.format(arch=arch)
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, value)
    for name, shape, qtype in tensors or [("token_embd.weight", (64, 4), Q.F16)]:
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        rows = 1
        for dim in shape[1:]:
            rows *= dim
        data = np.zeros((rows, shape[0] // block * type_size), dtype=np.uint8)
        writer.add_tensor(name, data, raw_dtype=qtype)  # byte rows -> ggml shape (shape[0], rows)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---- one model per family: (arch, GGUF keys, the same model's config.json) -------------------------
FAMILIES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "llama-gqa": (
        "llama",
        {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2, "{arch}.attention.key_length": 16,
         "{arch}.attention.value_length": 16},
        {"model_type": "llama", "num_hidden_layers": 4, "max_position_embeddings": 8192, "hidden_size": 128,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16},
    ),
    "gemma3-swa": (
        "gemma3",
        {"{arch}.block_count": 8, "{arch}.context_length": 32768, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 1, "{arch}.attention.key_length": 32,
         "{arch}.attention.value_length": 32, "{arch}.attention.sliding_window": 512},
        {"model_type": "gemma3_text", "num_hidden_layers": 8, "max_position_embeddings": 32768, "hidden_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 512,
         "sliding_window_pattern": 6},
    ),
    "gpt-oss": (
        "gpt-oss",
        {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2, "{arch}.attention.key_length": 16,
         "{arch}.attention.value_length": 16, "{arch}.attention.sliding_window": 128, "{arch}.expert_count": 4,
         "{arch}.expert_used_count": 2},
        {"model_type": "gpt_oss", "num_hidden_layers": 4, "max_position_embeddings": 8192, "hidden_size": 128,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 128,
         "layer_types": ["sliding_attention", "full_attention"] * 2},
    ),
    "deepseek-mla": (
        "deepseek2",
        {"{arch}.block_count": 3, "{arch}.context_length": 16384, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 1, "{arch}.attention.kv_lora_rank": 64,
         "{arch}.rope.dimension_count": 16, "{arch}.attention.key_length": 64 + 16, "{arch}.attention.value_length": 64,
         "{arch}.attention.key_length_mla": 32 + 16, "{arch}.attention.value_length_mla": 32},
        {"model_type": "deepseek_v3", "num_hidden_layers": 3, "max_position_embeddings": 16384, "hidden_size": 128,
         "num_attention_heads": 4, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32},
    ),
    "deepseek-old": (
        "deepseek2",
        {"{arch}.block_count": 3, "{arch}.context_length": 16384, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 4, "{arch}.attention.kv_lora_rank": 64,
         "{arch}.rope.dimension_count": 16, "{arch}.attention.key_length": 32 + 16, "{arch}.attention.value_length": 32},
        # The cache llama.cpp keeps for an old conversion: decompressed K (nope + rope) and V for every head.
        {"model_type": "deepseek_v2", "num_hidden_layers": 3, "max_position_embeddings": 16384, "hidden_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": None, "head_dim": 32 + 16, "v_head_dim": 32},
    ),
    # Gated delta net on 3 of 4 layers (llama.cpp: every full_attention_interval-th layer attends):
    # conv over Q, K (2 groups x state 16) and V (inner 64 = 4 value heads x 16); state 4 x 16 x 16.
    "qwen3next": (
        "qwen3next",
        {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 2, "{arch}.attention.key_length": 32,
         "{arch}.attention.value_length": 32, "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 4 * 16,
         "{arch}.ssm.state_size": 16, "{arch}.ssm.time_step_rank": 4, "{arch}.ssm.group_count": 2,
         "{arch}.full_attention_interval": 4},
        {"model_type": "qwen3_next", "num_hidden_layers": 4, "max_position_embeddings": 8192, "hidden_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "full_attention_interval": 4,
         "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
         "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4},
    ),
    # Short convolutions where head_count_kv is 0 (llama.cpp's lfm2 rule), a window of 3 taps.
    "lfm2": (
        "lfm2",
        {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": [0, 2, 0, 2],
         "{arch}.shortconv.l_cache": 3},
        {"model_type": "lfm2", "num_hidden_layers": 4, "max_position_embeddings": 8192, "hidden_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2, "conv_L_cache": 3,
         "layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    ),
    "nemotron-h": (
        "nemotron_h",
        {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 128,
         "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": [0, 2, 0, 0],
         "{arch}.feed_forward_length": [0, 0, 0, 256], "{arch}.attention.key_length": 16,
         "{arch}.attention.value_length": 16, "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 4 * 16,
         "{arch}.ssm.state_size": 16, "{arch}.ssm.time_step_rank": 4, "{arch}.ssm.group_count": 2},
        {"model_type": "nemotron_h", "num_hidden_layers": 4, "max_position_embeddings": 8192, "hidden_size": 128,
         "hybrid_override_pattern": "M*M-", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16,
         "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 2, "conv_kernel": 4, "ssm_state_size": 16},
    ),
}


def read_gguf(model: str, *, gguf_file: str | None = None) -> GgufModel:
    """The GGUF model ``model`` names, resolved and read as every command reads it."""
    loaded = load(resolve(model, gguf_file=gguf_file))
    assert loaded.gguf is not None, loaded.source
    return loaded.gguf


def run_json(runner, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_gguf_and_config_agree_in_every_engine(family: str, tmp_path: Path, runner) -> None:
    arch, kv, config = FAMILIES[family]
    model = write_gguf(tmp_path / f"{family}.gguf", arch, kv)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({**config, "torch_dtype": "float16"}))
    for engine in ENGINES:
        args = ["estimate", "--engine", engine, "--seq-len", "3000", "--batch", "2"]
        from_gguf = run_json(runner, *args, "--model", str(model))
        from_config = run_json(runner, *args, "--model", str(config_path))
        assert from_gguf["totals"] == from_config["totals"], engine
        assert [(g["kind"], g["count"]) for g in from_gguf["layers"]] == [
            (g["kind"], g["count"]) for g in from_config["layers"]
        ], engine


def test_llama_gqa_bytes_and_provenance(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    geometry = read_gguf(str(write_gguf(tmp_path / "m.gguf", arch, kv))).geometry()
    per_token = sum(s.bytes_per_token(_fp16()) for s in geometry.layers)
    assert per_token == KV * 4 * 2 * 16 * FP16  # K+V, layers, kv heads, head dim, f16
    sources = {p.field: p.source for p in geometry.provenance}
    assert sources["num_kv_heads"] == "gguf: llama.attention.head_count_kv"
    assert sources["max_context_tokens"] == "gguf: llama.context_length"
    assert geometry.max_context_tokens == 8192


def test_gemma3_pattern_is_llama_cpp_rule(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["gemma3-swa"]
    geometry = read_gguf(str(write_gguf(tmp_path / "g.gguf", arch, kv))).geometry()
    assert [s.kind for s in geometry.layers] == ["sliding_window"] * 5 + ["full_attention"] + ["sliding_window"] * 2
    assert geometry.layers[0].window == 512


def test_sliding_pattern_key_wins_as_period_or_per_layer_bools(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["gemma3-swa"]
    by_period = read_gguf(str(write_gguf(tmp_path / "p.gguf", arch, {**kv, "{arch}.attention.sliding_window_pattern": 4})))
    assert [s.kind == "full_attention" for s in by_period.geometry().layers] == [False, False, False, True] * 2
    pattern = [True, False] * 4
    by_layer = read_gguf(str(write_gguf(tmp_path / "b.gguf", arch, {**kv, "{arch}.attention.sliding_window_pattern": pattern})))
    assert [s.kind == "sliding_window" for s in by_layer.geometry().layers] == pattern


def test_deepseek_mla_and_old_conversion_are_told_apart(tmp_path: Path) -> None:
    mla = read_gguf(str(write_gguf(tmp_path / "new.gguf", "deepseek2", FAMILIES["deepseek-mla"][1]))).geometry()
    old = read_gguf(str(write_gguf(tmp_path / "old.gguf", "deepseek2", FAMILIES["deepseek-old"][1]))).geometry()
    assert {s.kind for s in mla.layers} == {"mla"}
    assert mla.layers[0].bytes_per_token(_fp16()) == (64 + 16) * FP16  # kv_lora_rank + rope dims, one latent
    assert {s.kind for s in old.layers} == {"full_attention"}
    assert old.layers[0].bytes_per_token(_fp16()) == 4 * ((32 + 16) + 32) * FP16  # heads x (K nope+rope + V)
    assert any("key_length_mla is absent" in n for n in old.notes)


def test_nemotron_h_layers_from_head_count_kv_and_ffn_arrays(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["nemotron-h"]
    geometry = read_gguf(str(write_gguf(tmp_path / "n.gguf", arch, kv))).geometry()
    assert [s.kind for s in geometry.layers] == ["state", "full_attention", "state", "no_cache"]
    state = geometry.layers[0]
    conv = (4 - 1) * (4 * 16 + 2 * 2 * 16)  # (d_conv - 1) x (d_inner + 2 n_groups d_state)
    ssm = 4 * 16 * 16  # heads x head_dim x d_state
    assert state.state_elements == conv + ssm


def test_nextn_layers_leave_the_main_stack(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["deepseek-mla"]
    geometry = read_gguf(str(write_gguf(tmp_path / "mtp.gguf", arch, {**kv, "{arch}.block_count": 4,
                                                                      "{arch}.nextn_predict_layers": 1}))).geometry()
    assert geometry.num_hidden_layers == len(geometry.layers) == 4 - 1


def test_quantised_weight_bytes_from_block_sizes(tmp_path: Path) -> None:
    hidden, ffn, vocab, layers = 256, 512, 32, 2
    tensors = [("token_embd.weight", (hidden, vocab), Q.Q8_0), ("output.weight", (hidden, vocab), Q.Q6_K),
               ("output_norm.weight", (hidden,), Q.F32)]
    for i in range(layers):
        tensors += [(f"blk.{i}.attn_q.weight", (hidden, hidden), Q.Q4_K), (f"blk.{i}.attn_k.weight", (hidden, 64), Q.Q5_K),
                    (f"blk.{i}.attn_v.weight", (hidden, 64), Q.Q6_K), (f"blk.{i}.ffn_up.weight", (hidden, ffn), Q.IQ4_XS),
                    (f"blk.{i}.ffn_down.weight", (ffn, hidden), Q.MXFP4), (f"blk.{i}.attn_norm.weight", (hidden,), Q.F32),
                    (f"blk.{i}.ffn_gate.weight", (hidden, ffn), Q.BF16)]
    arch, kv, _ = FAMILIES["llama-gqa"]
    model = read_gguf(str(write_gguf(tmp_path / "q.gguf", arch, {**kv, "{arch}.block_count": layers}, tensors)))
    weights = model.weights()
    # bytes per block: Q8_0 34/32, Q6_K 210/256, Q4_K 144/256, Q5_K 176/256, IQ4_XS 136/256, MXFP4 17/32
    embd = hidden * vocab // 32 * 34
    out = hidden * vocab // 256 * 210 + hidden * 4
    per_layer = (hidden * hidden // 256 * 144 + hidden * 64 // 256 * 176 + hidden * 64 // 256 * 210
                 + hidden * ffn // 256 * 136 + ffn * hidden // 32 * 17 + hidden * 4 + hidden * ffn * 2)
    assert weights.total_bytes == embd + out + layers * per_layer
    by_type = {t.type_name: t.total_bytes for t in weights.by_type()}
    assert by_type["Q4_K"] == layers * hidden * hidden // 256 * 144
    split = layer_split(weights, num_devices=2)
    # 2 blocks + the output layer over edges (1/2, 1): block il sits on the first device whose edge
    # exceeds il / 3, so blocks 0 (0) and 1 (1/3) on device 0, the output layer (2/3) on device 1
    assert split.layers_per_device == ((0, 1), ())
    assert split.device_bytes == (layers * per_layer, out)
    assert split.host_bytes == embd
    ratio = layer_split(weights, num_devices=2, tensor_split=[1, 3])  # edges (1/4, 1): block 1 moves to device 1
    assert ratio.device_bytes == (per_layer, per_layer + out)


def test_tied_embeddings_copy_token_embd_to_the_output_device(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    tensors = [("token_embd.weight", (64, 10), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.F16)]
    weights = read_gguf(str(write_gguf(tmp_path / "t.gguf", arch, {**kv, "{arch}.block_count": 1}, tensors))).weights()
    split = layer_split(weights)
    assert split.host_bytes == 64 * 10 * FP16
    assert split.device_bytes == (64 * 64 * FP16 + 64 * 10 * FP16,)


def test_split_shards_metadata_from_first_tensors_from_all(tmp_path: Path) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    folder = tmp_path / "split"
    folder.mkdir()
    write_gguf(folder / "m-00001-of-00002.gguf", arch, {**kv, "split.count": 2},
               [("token_embd.weight", (64, 10), Q.F16)])
    writer = gguf.GGUFWriter(str(folder / "m-00002-of-00002.gguf"), arch)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for ref in (folder, folder / "m-00002-of-00002.gguf"):
        model = read_gguf(str(ref))
        assert model.weights().total_bytes == (64 * 10 + 64 * 64) * FP16
        assert model.geometry().num_hidden_layers == 4


def test_missing_shard_is_named(tmp_path: Path, runner) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    path = write_gguf(tmp_path / "m-00001-of-00003.gguf", arch, kv)
    result = runner.invoke(app, ["estimate", "--model", str(path)])
    assert result.exit_code == 2
    assert "m-00002-of-00003.gguf is missing" in result.output


def test_header_read_is_flat_in_the_data_size(tmp_path: Path) -> None:
    """A 64 MiB tensor costs no more reading than a tiny one: only the header is read."""
    arch, kv, _ = FAMILIES["llama-gqa"]
    small = read_gguf(str(write_gguf(tmp_path / "s.gguf", arch, kv, [("token_embd.weight", (64, 4), Q.F16)])))
    big = read_gguf(str(write_gguf(tmp_path / "b.gguf", arch, kv, [("token_embd.weight", (4096, 8192), Q.F16)])))
    assert big.weights().total_bytes == 4096 * 8192 * FP16
    assert big.header.data_offset == small.header.data_offset
    assert big.bytes_read == 1 << 16  # one first chunk of 64 KiB holds the header; none of the 64 MiB of data


# ---- the Hub: org/repo:TAG and --gguf-file through ranged reads ----------------------------------
def test_hub_tag_reads_only_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arch, kv, _ = FAMILIES["gemma3-swa"]
    tensors = [("token_embd.weight", (1024, 4096), Q.Q8_0)]  # 4.25 MiB of data
    data = write_gguf(tmp_path / "g.gguf", arch, kv, tensors).read_bytes()
    files = {"acme/g-GGUF": {"g-Q8_0.gguf": data, "g-Q4_K_M.gguf": b"x", "mmproj-g-Q8_0.gguf": b"y"}}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with HubStub({}, files=files) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        model = read_gguf("acme/g-GGUF:q8_0")
        assert model.source.location == "acme/g-GGUF/g-Q8_0.gguf"
        assert model.weights().total_bytes == 1024 * 4096 // 32 * 34
        read = sum(end - start + 1 for _name, start, end in hub.ranges)
        assert read <= 1 << 20 < len(data)
        same = read_gguf("acme/g-GGUF", gguf_file="g-Q8_0.gguf")
        assert same.geometry().layers == model.geometry().layers


def test_hub_tag_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner) -> None:
    files = {"acme/g-GGUF": {"g-Q8_0.gguf": b"GGUF", "g-Q4_K_M.gguf": b"GGUF"}}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with HubStub({}, files=files) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        result = runner.invoke(app, ["estimate", "--model", "acme/g-GGUF:IQ2_XS"])
        assert result.exit_code == 2
        assert "no GGUF file whose name contains 'IQ2_XS'" in result.output and "g-Q4_K_M.gguf" in result.output
        result = runner.invoke(app, ["estimate", "--model", "acme/nope:Q4_K_M"])
        assert result.exit_code == 2 and "not found" in result.output


def test_hub_offline_says_so(runner) -> None:
    result = runner.invoke(app, ["estimate", "--model", "acme/g-GGUF:Q4_K_M"])
    assert result.exit_code == 2
    assert "offline mode is on" in result.output


# ---- bad files: one line, exit 2, no huge allocation ----------------------------------------------
def _header(*, version: int = 3, n_tensors: int = 0, n_kv: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _string(text: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if length is None else length) + text


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b"PK\x03\x04not a gguf", "is not a GGUF file"),
        (b"GG", "is not a GGUF file"),
        (_header(version=99), "GGUF version 99 is not supported"),
        (_header()[:10], "ends inside the header"),
        (_header(n_tensors=2**60), "tensor count is 1,152,921,504,606,846,976"),
        (_header(n_kv=2**40), "metadata key/value count"),
        (_header(n_kv=1) + _string(b"general.name") + struct.pack("<I", 8) + _string(b"", 2**40), "length of general.name"),
        (_header(n_kv=1) + _string(b"k") + struct.pack("<II", 9, 4) + struct.pack("<Q", 2**62), "length of k"),
        (_header(n_kv=1) + _string(b"k") + struct.pack("<I", 77) + b"\0" * 8, "unknown value type 77"),
        (_header(n_kv=1) + _string(b"general.architecture") + struct.pack("<I", 8) + _string(b"llama"),
         "required key llama.block_count is missing"),
    ],
)
def test_bad_gguf_is_one_line_exit_2(content: bytes, phrase: str, tmp_path: Path, runner) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    result = runner.invoke(app, ["estimate", "--model", str(path)])
    assert result.exit_code == 2, result.output
    assert phrase in result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("Error: ")


def test_truncated_tensor_data_is_refused(tmp_path: Path, runner) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    data = write_gguf(tmp_path / "full.gguf", arch, kv, [("token_embd.weight", (256, 64), Q.F16)]).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 100])
    result = runner.invoke(app, ["estimate", "--model", str(cut)])
    assert result.exit_code == 2
    assert "past the end of the file" in result.output


@pytest.mark.parametrize(
    ("arch", "kv", "phrase"),
    [
        ("foobar", {}, "general.architecture 'foobar' is not an architecture llama.cpp knows"),
        ("bert", {}, "llama.cpp makes no KV cache for a bert model"),
        ("rwkv7", {}, "kvplan does not read rwkv7 GGUF files yet"),
        ("llama", {"{arch}.attention.head_count_kv": 0}, "llama.attention.head_count_kv is 0 for every layer"),
    ],
)
def test_architectures_without_a_rule_are_refused_by_name(arch: str, kv: dict[str, Any], phrase: str,
                                                          tmp_path: Path, runner) -> None:
    _, llama_kv, _ = FAMILIES["llama-gqa"]
    path = write_gguf(tmp_path / "m.gguf", arch, {**llama_kv, **kv})
    result = runner.invoke(app, ["estimate", "--model", str(path)])
    assert result.exit_code == 2, result.output
    assert phrase in result.output
    assert "Traceback" not in result.output


def test_llama4_chunks_three_of_four_layers_at_8192_tokens(tmp_path: Path) -> None:
    _, kv, _ = FAMILIES["llama-gqa"]
    geometry = read_gguf(str(write_gguf(tmp_path / "l4.gguf", "llama4", kv))).geometry()
    assert [s.kind for s in geometry.layers] == ["chunked_local"] * 3 + ["full_attention"]
    assert {s.window for s in geometry.layers[:3]} == {8192}  # llama.cpp's n_swa for llama4
    no_chunks = read_gguf(str(write_gguf(tmp_path / "l4-none.gguf", "llama4",
                                         {**kv, "{arch}.attention.sliding_window": 0}))).geometry()
    assert {s.kind for s in no_chunks.layers} == {"full_attention"}


def test_gemma3n_layers_with_their_own_kv_are_llama_cpps_twenty(tmp_path: Path) -> None:
    # src/models/gemma3n.cpp: n_layer_kv_from_start = 20 whatever attention.shared_kv_layers says
    _, kv, _ = FAMILIES["llama-gqa"]
    kv = {**kv, "{arch}.attention.sliding_window": 512, "{arch}.attention.shared_kv_layers": 4}
    small = read_gguf(str(write_gguf(tmp_path / "s.gguf", "gemma3n", {**kv, "{arch}.block_count": 10}))).geometry()
    assert "no_cache" not in [s.kind for s in small.layers]  # 10 layers, all under 20: every one holds K/V
    e2b = read_gguf(str(write_gguf(tmp_path / "e.gguf", "gemma3n", {**kv, "{arch}.block_count": 30}))).geometry()
    assert [s.kind for s in e2b.layers].count("no_cache") == 30 - 20


def test_set_is_refused_for_gguf(tmp_path: Path, runner) -> None:
    arch, kv, _ = FAMILIES["llama-gqa"]
    path = write_gguf(tmp_path / "m.gguf", arch, kv)
    result = runner.invoke(app, ["estimate", "--model", str(path), "--set", "num_key_value_heads=1"])
    assert result.exit_code == 2 and "--set" in result.output


def _fp16():
    from kvplan.dtypes import lookup_dtype

    return lookup_dtype("fp16")


def test_deepseek4_gguf_gives_the_caches_its_config_gives(tmp_path: Path, runner) -> None:
    """A deepseek4 GGUF is read by llama.cpp's DeepSeek-V4 rule (src/models/deepseek4.cpp): per block a compression
    ratio (0 window only, 4 compressed-sparse with an indexer key, 128 heavily compressed); its caches are the ones
    the same model's config.json gives, line for line (llama_kv_cache_dsv4)."""
    from conftest import shared_config_path

    config_path = shared_config_path("deepseek-ai__DeepSeek-V4-Flash")
    config = json.loads(config_path.read_text())
    layers, nextn = config["num_hidden_layers"], config["num_nextn_predict_layers"]
    kv = {"{arch}.block_count": layers + nextn, "{arch}.nextn_predict_layers": nextn,
          "{arch}.embedding_length": config["hidden_size"], "{arch}.attention.head_count": config["num_attention_heads"],
          "{arch}.attention.head_count_kv": 1, "{arch}.attention.key_length": config["head_dim"],
          "{arch}.attention.value_length": config["head_dim"], "{arch}.attention.sliding_window": config["sliding_window"],
          "{arch}.attention.indexer.key_length": config["index_head_dim"],
          "{arch}.attention.compress_ratios": config["compress_ratios"][:layers + nextn],
          "{arch}.context_length": 1048576}
    model = write_gguf(tmp_path / "dsv4.gguf", "deepseek4", kv)
    flags = ["capacity", "--engine", "llama.cpp", "-c", "65536", "-np", "2", "--kv-budget", "64GiB"]
    from_gguf = run_json(runner, *flags, "--model", str(model))
    from_config = run_json(runner, *flags, "--model", str(config_path), "--kv-dtype", "f16")
    caches = from_gguf["capacity"]["engine_log"]["llama_caches"]
    assert caches == from_config["capacity"]["engine_log"]["llama_caches"]
    ratios = config["compress_ratios"][:layers]
    by_name = {c["name"]: c for c in caches}
    assert (by_name["csa"]["layers"], by_name["hca"]["layers"]) == (ratios.count(4), ratios.count(128))
    n_ctx_seq = 65536 // 2  # -c over -np: each sequence's stream
    assert by_name["csa"]["k_bytes"] == n_ctx_seq // 4 * 2 * ratios.count(4) * config["head_dim"] * 2  # cells, streams, layers, head, f16
    bad = write_gguf(tmp_path / "bad.gguf", "deepseek4", {**kv, "{arch}.attention.compress_ratios": [0, 8] * 22})
    result = runner.invoke(app, ["estimate", "--model", str(bad)])
    assert result.exit_code == 2 and "llama.cpp's DeepSeek-V4 caches take ratios [0, 4, 128] only" in result.output


# ---- llama.cpp's rules the llama.cpp oracle (tests/llamacpp_oracle.py) found -----------------------------
def test_nemotron_h_moe_tells_mlp_layers_by_feed_forward_length(tmp_path: Path) -> None:
    # src/models/nemotron-h.cpp (nemotron_h_moe loads the same way): recurrent when n_head_kv and n_ff are both 0
    _, kv, _ = FAMILIES["nemotron-h"]
    geometry = read_gguf(str(write_gguf(tmp_path / "n.gguf", "nemotron_h_moe", kv))).geometry()
    assert [s.kind for s in geometry.layers] == ["state", "full_attention", "state", "no_cache"]


def test_mistral4_and_hy_v4_cache_the_mla_latent(tmp_path: Path) -> None:
    # llama_model_mistral4 derives from llama_model_deepseek2; hy_v4 requires the MLA keys (src/models/hy-v4.cpp)
    for arch in ("mistral4", "hy_v4"):
        geometry = read_gguf(str(write_gguf(tmp_path / f"{arch}.gguf", arch, FAMILIES["deepseek-mla"][1]))).geometry()
        assert {s.kind for s in geometry.layers} == {"mla"}, arch
        assert geometry.layers[0].bytes_per_token(_fp16()) == (64 + 16) * FP16  # kv_lora_rank + rope dims


def test_hy_v4_with_an_indexer_is_refused(tmp_path: Path, runner) -> None:
    path = write_gguf(tmp_path / "h.gguf", "hy_v4", {**FAMILIES["deepseek-mla"][1], "{arch}.attention.indexer.top_k": 64})
    result = runner.invoke(app, ["estimate", "--model", str(path)])
    assert result.exit_code == 2, result.output
    assert "llama_kv_cache_dsa" in result.output


def test_graniteswitch_caches_its_router_layer(tmp_path: Path) -> None:
    # src/models/granite-switch.cpp: router_layer = n_layer with n_head_kv 1, one more layer in the KV cache
    _, kv, _ = FAMILIES["llama-gqa"]
    geometry = read_gguf(str(write_gguf(tmp_path / "g.gguf", "graniteswitch", kv))).geometry()
    assert geometry.num_hidden_layers == 4
    assert [s.num_kv_heads for s in geometry.layers] == [2, 2, 2, 2, 1]
    per_token = sum(s.bytes_per_token(_fp16()) for s in geometry.layers)
    assert per_token == KV * (4 * 2 + 1) * 16 * FP16  # K+V, (layers x kv heads + the router's head), head dim, f16


def test_layer_without_kv_heads_is_a_zero_byte_cache_layer(tmp_path: Path, runner) -> None:
    # llama_kv_cache gives every layer tensors (has_kv): Deci's head_count_kv 0 layer counts, with 0 bytes
    _, kv, _ = FAMILIES["llama-gqa"]
    path = write_gguf(tmp_path / "d.gguf", "deci", {**kv, "{arch}.attention.head_count_kv": [2, 0, 4, 1]})
    geometry = read_gguf(str(path)).geometry()
    assert [s.num_kv_heads for s in geometry.layers] == [2, 0, 4, 1]
    per_token = sum(s.bytes_per_token(_fp16()) for s in geometry.layers)
    assert per_token == KV * (2 + 0 + 4 + 1) * 16 * FP16  # K+V, kv heads of the four layers, head dim, f16
    log = run_json(runner, "capacity", "--model", str(path), "-c", "4096", "--kv-budget", "1GiB")
    assert "4 layers" in log["capacity"]["engine_log"]["lines"][-1]


def test_fa_off_pads_every_v_row_to_the_widest(tmp_path: Path, runner) -> None:
    # src/llama-kv-cache.cpp TAG_V_CACHE_VARIABLE: V stored transposed, n_embd_v_gqa_max() values per cell
    _, kv, _ = FAMILIES["llama-gqa"]
    path = write_gguf(tmp_path / "o.gguf", "openelm", {**kv, "{arch}.attention.head_count_kv": [1, 2, 2, 4]})
    args = ["estimate", "--model", str(path), "-c", "4096"]
    auto = run_json(runner, *args)
    off = run_json(runner, *args, "-fa", "off")
    assert auto["totals"]["kv_cache_bytes"] == 4096 * (1 + 2 + 2 + 4) * 16 * FP16 * KV  # cells, kv heads, head, f16, K+V
    assert off["totals"]["kv_cache_bytes"] == 4096 * ((1 + 2 + 2 + 4) + 4 * 4) * 16 * FP16  # K own, V 4 heads x 4 layers
    assert any("padded to the widest, 64" in n for n in off["notes"])
    assert off["inputs"] == auto["inputs"]


def test_dense_first_period_from_the_file(tmp_path: Path) -> None:
    # load_swa_pattern(ml, 4, dense_first): a file's sliding_window_pattern keeps the full layer first
    _, kv, _ = FAMILIES["llama-gqa"]
    kv = {**kv, "{arch}.attention.sliding_window": 256}
    default = read_gguf(str(write_gguf(tmp_path / "l.gguf", "laguna", kv))).geometry()
    assert [s.kind == "full_attention" for s in default.layers] == [True, False, False, False]
    by_key = read_gguf(str(write_gguf(tmp_path / "k.gguf", "laguna", {**kv, "{arch}.attention.sliding_window_pattern": 2})))
    assert [s.kind == "full_attention" for s in by_key.geometry().layers] == [True, False, True, False]
