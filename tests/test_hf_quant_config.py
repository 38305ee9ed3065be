"""NVIDIA ModelOpt exports whose quantisation is said only in hf_quant_config.json (beside config.json, in a folder or
a Hub repo): the weights are counted in its format and ``--kv-dtype auto`` takes its ``kv_cache_quant_algo`` under the
engines that read it (vLLM, SGLang, TensorRT-LLM), with the file and key named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.modelref import load_raw_config

from conftest import make_config
from hubstub import HubStub

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INNER, VOCAB = 2, 1024, 8, 2, 128, 2048, 4096
CONFIG = make_config(num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                     num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=INNER, vocab_size=VOCAB,
                     tie_word_embeddings=False, torch_dtype="bfloat16")
#: hf_quant_config.json as ModelOpt writes it (nvidia/*-NVFP4 repos).
SIDECAR = {"producer": {"name": "modelopt", "version": "0.39.0"},
           "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                            "exclude_modules": ["lm_head"]}}
BF16, FP8 = 2, 1


def nvfp4(i: int, o: int) -> int:
    return i * o // 2 + (i // 16) * o  # 4-bit e2m1 values, one fp8 scale per 16 inputs


#: The weights in the NVFP4 layout: attention and MLP matrices in 4 bits, embeddings, lm_head and norms in bf16.
NVFP4_BYTES = (LAYERS * (nvfp4(HIDDEN, HEADS * HEAD_DIM) + 2 * nvfp4(HIDDEN, KV_HEADS * HEAD_DIM)  # q, k, v
                         + nvfp4(HEADS * HEAD_DIM, HIDDEN)  # o
                         + 2 * nvfp4(HIDDEN, INNER) + nvfp4(INNER, HIDDEN))  # gate, up, down
               + 2 * VOCAB * HIDDEN * BF16 + (2 * LAYERS + 1) * HIDDEN * BF16)  # embed, lm_head; norms


def checkout(tmp_path: Path, config: dict[str, Any] = CONFIG, sidecar: Any = SIDECAR) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "hf_quant_config.json").write_text(json.dumps(sidecar))
    return folder


def run(runner, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_folder_with_hf_quant_config_counts_its_weights_in_that_format(runner, tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    report = run(runner, "capacity", "--model", str(folder), "--gpu", "H100", "--max-model-len", "4096")
    weights = report["weights"]
    assert weights["quantization"] == "modelopt-nvfp4 4-bit, group size 16"
    assert weights["bytes"] == NVFP4_BYTES
    assert any("quantization from hf_quant_config.json (config.json names none)" in n for n in report["notes"])
    # the config.json path itself reads the file beside it too
    same = run(runner, "capacity", "--model", str(folder / "config.json"), "--gpu", "H100", "--max-model-len", "4096")
    assert same["weights"]["bytes"] == NVFP4_BYTES


@pytest.mark.parametrize(("engine", "kv_dtype", "per_value_bytes"),
                         [("vllm", "fp8_e4m3", FP8), ("sglang", "fp8_e4m3", FP8), ("trtllm", "fp8_e4m3", FP8),
                          ("ideal", "fp8_e4m3", FP8), ("hf-dynamic", "bf16", BF16)])
def test_kv_cache_quant_algo_is_kv_dtype_auto_where_the_engine_reads_it(runner, tmp_path: Path, engine: str,
                                                                           kv_dtype: str, per_value_bytes: int) -> None:
    tokens, folder = 4096, checkout(tmp_path)
    report = run(runner, "estimate", "--model", str(folder), "--seq-len", str(tokens), "--engine", engine)
    assert report["inputs"]["kv_dtype"] == kv_dtype
    block = 16 if engine == "vllm" else 32 if engine == "trtllm" else 1  # tokens are whole blocks already
    assert tokens % block == 0
    assert report["totals"]["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD_DIM * tokens * per_value_bytes
    said = "hf_quant_config.json: quantization.kv_cache_quant_algo = FP8 (a KV cache in fp8_e4m3)"
    if per_value_bytes == FP8:
        assert said in report["inputs"]["kv_dtype_source"]
    else:  # transformers has no ModelOpt loader: the model dtype, and a note
        assert any(said in n and "keeps --kv-dtype auto at bf16" in n for n in report["notes"])
    # a --kv-dtype the user names wins
    typed = run(runner, "estimate", "--model", str(folder), "--seq-len", str(tokens),
                "--engine", engine, "--kv-dtype", "bf16")
    assert typed["totals"]["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD_DIM * tokens * BF16


def test_an_nvfp4_kv_cache_is_auto_in_vllm_not_in_sglang(runner, tmp_path: Path) -> None:
    sidecar = {**SIDECAR, "quantization": {**SIDECAR["quantization"], "kv_cache_quant_algo": "NVFP4"}}
    folder = checkout(tmp_path, sidecar=sidecar)
    vllm = run(runner, "estimate", "--model", str(folder), "--seq-len", "4096", "--engine", "vllm")
    assert vllm["inputs"]["kv_dtype"] == "nvfp4"
    sglang = run(runner, "estimate", "--model", str(folder), "--seq-len", "4096", "--engine", "sglang")
    assert sglang["inputs"]["kv_dtype"] == "bf16"  # SGLang's auto takes an FP8 kv_cache_quant_algo only
    assert any("SGLang keeps --kv-dtype auto at bf16" in n for n in sglang["notes"])


def test_config_json_quantization_config_wins_and_other_producers_are_not_read(tmp_path: Path) -> None:
    own = {**CONFIG, "quantization_config": {"quant_method": "fp8"}}
    config, _, _ = load_raw_config(str(checkout(tmp_path / "a", config=own)))
    assert config["quantization_config"] == {"quant_method": "fp8"}
    config, source, _ = load_raw_config(str(checkout(tmp_path / "b", sidecar={"producer": {"name": "other"}})))
    assert "quantization_config" not in config and "is not a ModelOpt export" in source.note
    # a loose config file (not named config.json) does not read a neighbour's file
    loose = tmp_path / "c"
    loose.mkdir()
    (loose / "llama.json").write_text(json.dumps(CONFIG))
    (loose / "hf_quant_config.json").write_text(json.dumps(SIDECAR))
    assert "quantization_config" not in load_raw_config(str(loose / "llama.json"))[0]
    with pytest.raises(ConfigError, match="hf_quant_config.json must hold a JSON object"):
        load_raw_config(str(checkout(tmp_path / "d", sidecar=[1, 2])))


def test_hub_repo_with_hf_quant_config(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"nvidia/tiny-NVFP4": {"hf_quant_config.json": json.dumps(SIDECAR).encode()}}
    with HubStub({"nvidia/tiny-NVFP4": CONFIG, "acme/plain": CONFIG}, files=files) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        config, source, _ = load_raw_config("nvidia/tiny-NVFP4")
        assert config["quantization_config"] == {"quant_method": "modelopt", **SIDECAR["quantization"]}
        assert config["_kvplan"]["quantization_config_file"] == "hf_quant_config.json" and not source.note
        plain, source, _ = load_raw_config("acme/plain")  # no such file in the repo: the config as it is, no note
        assert plain == CONFIG and not source.note
        assert ("HEAD", "/acme/plain/resolve/main/hf_quant_config.json") in hub.requests  # asked, answered 404
    # offline, the Hub cache answers for both (the file, and the repo's lack of it)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_raw_config("nvidia/tiny-NVFP4")[0]["quantization_config"]["quant_algo"] == "NVFP4"
    assert "quantization_config" not in load_raw_config("acme/plain")[0]


def test_config_json_kv_cache_scheme_is_read_the_same_way(runner, write_config) -> None:
    # config.json's ModelOpt form (nvidia/Gemma-4-31B-IT-NVFP4): kv_cache_scheme, an 8-bit float = FP8
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4",
             "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}
    path = write_config({**CONFIG, "quantization_config": quant})
    tokens = 4096
    report = run(runner, "estimate", "--model", str(path), "--seq-len", str(tokens), "--engine", "vllm")
    assert report["inputs"]["kv_dtype"] == "fp8_e4m3"
    assert "config: quantization_config.kv_cache_scheme (8-bit float)" in report["inputs"]["kv_dtype_source"]
    assert report["totals"]["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD_DIM * tokens * FP8
    # another quant method's kv_cache_scheme is not a ModelOpt directive: the model dtype
    other = write_config({**CONFIG, "quantization_config": {**quant, "quant_method": "compressed-tensors",
                                                             "config_groups": {}}}, name="other.json")
    assert run(runner, "estimate", "--model", str(other), "--seq-len", "64")["inputs"]["kv_dtype"] == "bf16"


def test_a_failing_hub_is_not_asked_for_hf_quant_config_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # config.json answered from the Hub cache (the Hub failing): the file beside it is read from the cache too
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", "2")
    files = {"nvidia/tiny-NVFP4": {"hf_quant_config.json": json.dumps(SIDECAR).encode()}}
    with HubStub({"nvidia/tiny-NVFP4": CONFIG}, files=files) as hub:  # warm the cache
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        load_raw_config("nvidia/tiny-NVFP4")
    with HubStub({"nvidia/tiny-NVFP4": CONFIG}, files=files, fault="503") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        config, source, _ = load_raw_config("nvidia/tiny-NVFP4")
        asked = [path for _, path in hub.requests]
    assert "read from the local Hub cache" in source.note
    assert config["quantization_config"]["quant_algo"] == "NVFP4"
    assert not any(path.endswith("hf_quant_config.json") for path in asked), asked
