"""The Python API: the reach of the commands, their reports from ``to_dict()``, one parse per model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.adjust import Deployment, Offload
from kvplan.api import clear_cache
from kvplan.calc import KvSizer
from kvplan.calc import estimate as calc_estimate
from kvplan.cli import app
from kvplan.report import to_json

ROOT = Path(__file__).resolve().parents[1]

#: (CLI flags, the same as API keywords) for `kvplan estimate`.
ESTIMATES = [
    (["-m", "meta-llama/Llama-3.1-8B", "-s", "32k", "-b", "8", "--engine", "vllm", "--tp", "2"],
     {"model": "meta-llama/Llama-3.1-8B", "seq_len": "32k", "batch": 8, "engine": "vllm", "tp": 2}),
    (["-m", "google/gemma-2-9b", "-s", "16k", "--engine", "sglang", "--block-size", "16", "--kv-dtype", "fp8"],
     {"model": "google/gemma-2-9b", "seq_len": "16k", "engine": "sglang", "block_size": 16, "kv_dtype": "fp8"}),
    (["-m", "deepseek-ai/DeepSeek-V3", "-s", "4k", "--engine", "vllm", "--pp", "4", "--kv-dtype", "fp8"],
     {"model": "deepseek-ai/DeepSeek-V3", "seq_len": 4096, "engine": "vllm", "pp": 4, "kv_dtype": "fp8"}),
    (["-m", "ai21labs/Jamba-v0.1", "-s", "8k", "-b", "2", "--engine", "hf-dynamic", "--beams", "2",
      "--prompt-len", "1k"],
     {"model": "ai21labs/Jamba-v0.1", "seq_len": "8k", "batch": 2, "engine": "hf-dynamic", "beams": 2,
      "prompt_len": "1k"}),
    (["-m", "openai/whisper-large-v3", "-s", "448", "--encoder-len", "1500", "--offload", "0.25"],
     {"model": "openai/whisper-large-v3", "seq_len": 448, "encoder_len": 1500, "offload": 0.25}),
    (["-m", "meta-llama/Llama-3.1-8B", "-s", "4k", "--set", "num_key_value_heads=4", "--engine", "llama.cpp",
      "--kv-dtype", "q8_0"],
     {"model": "meta-llama/Llama-3.1-8B", "seq_len": "4k", "overrides": ["num_key_value_heads=4"],
      "engine": "llama.cpp", "kv_dtype": "q8_0"}),
    # vLLM's spellings read as vLLM reads them (8k = 8,000), with the CLI's notes; llama.cpp's -ctk; --strict
    (["-m", "google/gemma-3-12b-it", "--max-model-len", "32k", "--engine", "vllm", "--max-num-batched-tokens", "8k"],
     {"model": "google/gemma-3-12b-it", "max_model_len": "32k", "engine": "vllm", "max_num_batched_tokens": "8k"}),
    (["-m", "meta-llama/Llama-3.1-8B", "-s", "8k", "--engine", "llama.cpp", "-ctk", "q8_0", "--strict"],
     {"model": "meta-llama/Llama-3.1-8B", "seq_len": "8k", "engine": "llama.cpp", "cache_type_k": "q8_0",
      "strict": True}),
]

#: (CLI flags, API keywords) for `kvplan capacity`.
CAPACITIES = [
    (["-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "32k", "--batch", "16"],
     {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": "32k", "batch": 16}),
    (["-m", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H200", "--tp", "2"],
     {"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpu": "H200", "tp": 2}),
    (["-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--engine", "llama.cpp", "--max-model-len", "16k"],
     {"model": "meta-llama/Llama-3.1-70B", "gpu": "H100", "engine": "llama.cpp", "max_model_len": "16k"}),
    (["-m", "google/gemma-2-9b", "--gpu-mem", "24GiB", "--gpu-bandwidth", "1TB/s", "--engine", "trtllm",
      "--kv-budget", "6GiB", "--max-model-len", "8k", "--batch", "4"],
     {"model": "google/gemma-2-9b", "gpu_mem": "24GiB", "gpu_bandwidth": "1TB/s", "engine": "trtllm",
      "kv_budget": "6GiB", "max_model_len": "8k", "batch": 4}),
    (["-m", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "A100-80GB", "--num-gpus", "2", "--engine", "sglang",
      "--kv-dtype", "fp8", "--max-model-len", "128k", "--batch", "64"],
     {"model": "deepseek-ai/DeepSeek-V2-Lite", "gpu": "A100-80GB", "num_gpus": 2, "engine": "sglang",
      "kv_dtype": "fp8", "max_model_len": "128k", "batch": 64}),
    (["-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "llama.cpp", "--seq-len", "32k", "-ctk", "q8_0",
      "--strict"],
     {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "engine": "llama.cpp", "seq_len": "32k", "cache_type_k": "q8_0",
      "strict": True}),
]


@pytest.mark.parametrize(("flags", "kwargs"), ESTIMATES, ids=lambda v: v["model"] if isinstance(v, dict) else "")
def test_estimate_to_dict_is_the_cli_report(runner, flags: list[str], kwargs: dict) -> None:
    result = runner.invoke(app, ["estimate", *flags, "--format", "json"])
    assert result.exit_code == 0, result.output
    model = kwargs.pop("model")
    by_id = kvplan.estimate(model, **kwargs)
    assert to_json(by_id.to_dict()) == result.stdout
    if "overrides" not in kwargs:  # and on a loaded geometry, as a sweep would call it
        geometry = kvplan.load_geometry(model)
        assert to_json(kvplan.estimate(geometry, **kwargs).to_dict()) == result.stdout


@pytest.mark.parametrize(("flags", "kwargs"), CAPACITIES, ids=lambda v: v["model"] if isinstance(v, dict) else "")
def test_capacity_to_dict_is_the_cli_report(runner, flags: list[str], kwargs: dict) -> None:
    result = runner.invoke(app, ["capacity", *flags, "--format", "json"])
    assert result.exit_code == 0, result.output
    model = kwargs.pop("model")
    assert to_json(kvplan.capacity(model, **kwargs).to_dict()) == result.stdout
    assert to_json(kvplan.capacity(kvplan.load_geometry(model), **kwargs).to_dict()) == result.stdout


#: (CLI arguments, API keywords) for `kvplan compare`.
COMPARES = [
    (["mha", "gqa", "mqa", "--batch", "8"], {"variants": ["mha", "gqa", "mqa"], "batch": 8}),
    (["model", "mha", "gqa", "mla", "--model", "deepseek-ai/DeepSeek-V2-Lite", "--max-model-len", "32k",
      "--kv-dtype", "bf16,fp8", "--sweep-seq", "1k,4k"],
     {"variants": ["model", "mha", "gqa", "mla"], "model": "deepseek-ai/DeepSeek-V2-Lite", "max_model_len": "32k",
      "kv_dtype": "bf16,fp8", "sweep_seq": "1k,4k"}),
    (["mha", "gqa:4", "swa:4k", "--layers", "40", "--heads", "40", "--head-dim", "128", "-s", "16k", "--engine", "vllm",
      "--tp", "2", "--gpu-mem", "80GiB"],
     {"variants": ["mha", "gqa:4", "swa:4k"], "layers": 40, "heads": 40, "head_dim": 128, "seq_len": "16k",
      "engine": "vllm", "tp": 2, "gpu_mem": "80GiB"}),
]


@pytest.mark.parametrize(("args", "kwargs"), COMPARES)
def test_compare_to_dict_is_the_cli_report(runner, args: list[str], kwargs: dict) -> None:
    result = runner.invoke(app, ["compare", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert to_json(kvplan.compare(**kwargs).to_dict()) == result.stdout
    if "model" in kwargs:  # and on a loaded geometry
        kwargs["model"] = kvplan.load_geometry(kwargs["model"])
        assert to_json(kvplan.compare(**kwargs).to_dict()) == result.stdout


def test_capacity_with_an_engine_log_is_the_cli_report(runner, tmp_path: Path) -> None:
    """--compare-log reads the budget the log states (no --gpu) and puts the log's figures beside kvplan's."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO [gpu_worker.py:298] Available KV cache memory: 3.81 GiB\n"
                   "INFO [kv_cache_utils.py:864] GPU KV cache size: 31,216 tokens\n")
    result = runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "20000",
                                 "--compare-log", str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = kvplan.capacity("meta-llama/Llama-3.1-8B", max_model_len=20000, compare_log=log).to_dict()
    assert to_json(report) == result.stdout
    # the log's 3.81 GiB is the budget: 3.81 GiB // (16-token blocks of 32 layers x 8 KV heads x 128 x 2 (K+V) x bf16)
    block_bytes = 16 * 32 * 8 * 128 * 2 * 2
    assert report["capacity"]["num_blocks"] == int(3.81 * 2**30) // block_bytes
    assert report["log_comparison"]["rows"] and any(note.startswith("KV budget read from the log") for note in report["notes"])


def test_estimate_numbers_and_attributes_read_through() -> None:
    geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B")
    est = kvplan.estimate(geometry, seq_len="32k", batch=8, engine="vllm", tp=2)
    # K+V x 32 layers x 8 KV heads / 2 ranks x 128 head dim x 2 bytes x 32768 tokens x 8 sequences
    assert est.kv_cache_bytes_per_gpu == 2 * 32 * (8 // 2) * 128 * 2 * 32768 * 8
    assert est.kv_cache_bytes == 2 * est.kv_cache_bytes_per_gpu
    assert est.to_dict()["inputs"]["tp"] == 2
    assert geometry.num_hidden_layers == 32  # ModelGeometry attributes read through
    model_geometry, source = geometry  # the older (geometry, source) pair still unpacks
    assert model_geometry is geometry.model_geometry and source.kind == "bundled"


def test_capacity_answers_read_through() -> None:
    cap = kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", max_model_len="32k", batch=16)
    report = cap.to_dict()["capacity"]
    assert (cap.fits, cap.max_concurrent_requests, cap.max_context_len) == (
        report["fits"], report["max_concurrent_requests"], report["max_context_len"])


def test_models_are_parsed_once(tmp_path: Path) -> None:
    clear_cache()
    first = kvplan.load_geometry("meta-llama/Llama-3.1-8B")
    assert kvplan.load_geometry("llama-3.1-8b") is first  # an alias of the same bundled file
    with_set = kvplan.load_geometry("meta-llama/Llama-3.1-8B", overrides={"num_key_value_heads": 4})
    assert with_set is not first and with_set.layers[0].num_kv_heads == 4
    assert kvplan.load_geometry("meta-llama/Llama-3.1-8B", overrides=["num_key_value_heads=4"]) is with_set
    config = json.loads((ROOT / "model_configs" / "meta-llama__Llama-3.1-8B.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert kvplan.load_geometry(str(path)) is kvplan.load_geometry(str(path))
    before = kvplan.load_geometry(str(path))
    path.write_text(json.dumps({**config, "num_key_value_heads": 2, "padding": "x" * 10}))
    assert kvplan.load_geometry(str(path)).layers[0].num_kv_heads == 2  # a changed file is read again
    assert before.layers[0].num_kv_heads == 8


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "google/gemma-2-9b", "Qwen/Qwen3-Next-80B-A3B-Instruct",
                                   "deepseek-ai/DeepSeek-V2-Lite", "openai/whisper-large-v3", "ai21labs/Jamba-v0.1",
                                   "meta-llama/Llama-4-Scout-17B-16E-Instruct"])
@pytest.mark.parametrize(("engine", "tp", "pp"), [("ideal", 1, 1), ("vllm", 2, 2), ("sglang", 1, 1), ("trtllm", 4, 1),
                                                  ("llama.cpp", 1, 2), ("hf-static", 1, 1)])
def test_kv_sizer_equals_the_estimate(model: str, engine: str, tp: int, pp: int) -> None:
    geometry = kvplan.load_geometry(model).model_geometry
    dep = Deployment(engine=engine, tp=tp, pp=pp)
    sizer = KvSizer(geometry, deployment=dep)
    for batch, tokens in [(1, 1), (1, 4097), (3, 32768), (17, 1000), (64, 131072)]:
        est = calc_estimate(geometry, batch=batch, seq_len=tokens, deployment=dep)
        priced = sizer.price(batch, tokens)
        assert priced.per_gpu_bytes == est.kv_cache_bytes_per_gpu
        assert priced.groups == est.groups


#: Deployments whose adjustment walk takes every step: windows off, engines and their knobs, blocks, dtypes,
#: V type, beams, prefix sharing, TP, PP, offload.
WALKS = [Deployment(), Deployment(engine="vllm", tp=2, pp=2, block_size=32), Deployment(engine="sglang", tp=4),
         Deployment(engine="hf-dynamic", beams=3, prompt_len=1000), Deployment(engine="llama.cpp", pp=2,
                                                                              cache_type_v="q8_0"),
         Deployment(engine="vllm", share_prefix=True, prompt_len=512, beams=2, no_window=True),
         Deployment(engine="trtllm", shared_prefix_tokens=2048, tp=2), Deployment(pp=2, offload=Offload(fraction=0.25)),
         Deployment(engine="llama.cpp", offload=Offload(layers=8))]


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "google/gemma-2-9b", "ai21labs/Jamba-v0.1",
                                   "deepseek-ai/DeepSeek-V2-Lite", "openai/whisper-large-v3"])
def test_the_adjustment_walk_on_demand_equals_the_eager_one(model: str) -> None:
    """kvplan.estimate prices the bytes and walks the adjustments when they are read: the same walk, step
    by step, as calc.estimate makes with adjustments on."""
    from kvplan.calc import with_adjustments
    from kvplan.errors import InputError

    geometry = kvplan.load_geometry(model).model_geometry
    compared = offloaded = 0
    for dep in WALKS:
        for kv_dtype in ("auto", "fp8"):
            try:
                eager = calc_estimate(geometry, batch=3, seq_len=20000, kv_dtype=kv_dtype, deployment=dep)
            except InputError:
                continue  # a knob this engine or model refuses
            lazy = calc_estimate(geometry, batch=3, seq_len=20000, kv_dtype=kv_dtype, deployment=dep, adjustments=False)
            assert lazy.adjustments == () and lazy.kv_cache_bytes == eager.kv_cache_bytes
            assert with_adjustments(lazy) == eager
            compared += bool(eager.adjustments)
            offloaded += any(a.name == "offload" for a in eager.adjustments)
    assert compared >= 8 and offloaded >= 2
    result = kvplan.estimate(geometry, seq_len=20000, batch=3, engine="vllm", tp=2, kv_dtype="fp8")
    assert result.priced.adjustments == () and [a.name for a in result.adjustments] == [
        "engine:vllm", "kv_dtype", "tensor_parallel"]
    assert result.to_dict()["adjustments"][-1]["after_bytes"] == result.kv_cache_bytes


def test_estimate_refuses_a_bool_batch() -> None:
    """True == 1 in Python, but --batch True is a mistake, never one sequence."""
    from kvplan.errors import InputError

    geometry = kvplan.load_geometry("meta-llama/Llama-3.1-8B").model_geometry
    for adjustments in (True, False):
        with pytest.raises(InputError, match="--batch must be a positive integer"):
            calc_estimate(geometry, batch=True, seq_len=4096, adjustments=adjustments)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="--batch must be a positive integer"):
        KvSizer(geometry).price(True, 4096)  # type: ignore[arg-type]


def test_import_kvplan_stays_light() -> None:
    code = ("import sys, kvplan; kvplan.estimate(kvplan.load_geometry('meta-llama/Llama-3.1-8B'), seq_len=8, "
            "engine='vllm').to_dict(); bad = [m for m in ('typer', 'rich', 'huggingface_hub', 'torch', 'click') "
            "if m in sys.modules]; assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_strict_refuses_architecture_defaults_as_the_commands_do(tmp_path: Path) -> None:
    """``strict=True``: a config whose core geometry comes from the architecture's defaults is refused with the
    CLI's error; one that names it all passes."""
    from kvplan.errors import KvplanError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama"}))
    for call in (lambda: kvplan.estimate(str(path), seq_len=8, strict=True),
                 lambda: kvplan.capacity(str(path), gpu="H100", max_model_len=8, strict=True)):
        with pytest.raises(KvplanError, match="--strict: the config does not give num_hidden_layers"):
            call()
    assert kvplan.estimate("meta-llama/Llama-3.1-8B", seq_len=8, strict=True).kv_cache_bytes == (
        2 * 32 * 8 * 128 * 2 * 8)  # K+V, layers, KV heads, head dim, bf16, tokens
