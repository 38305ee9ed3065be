"""`kvplan verify`: real decodes with torch on tiny shapes, measured against the prediction."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from kvplan.cli import app
from kvplan.errors import EXIT_NOT_FIT, EXIT_USAGE
from kvplan.units import MiB

from conftest import BF16, FP16, KV

GQA = "meta-llama/Llama-3.2-1B"  # 8 KV heads x 64, bf16
MLA = "deepseek-ai/DeepSeek-V2-Lite"  # latent 512 + rope 64, bf16
SLIDING = "openai/gpt-oss-20b"  # layer 0 slides (W 128), layer 1 full; fp16 (no config dtype)
HYBRID = "ai21labs/Jamba-v0.1"  # layers 0-3 Mamba, layer 4 attention; fp16


def run_verify(runner, *args: str, code: int = 0) -> dict:
    result = runner.invoke(app, ["verify", "--no-progress", "--format", "json", *args])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


CASES = {
    # model, flags, seq tokens
    "gqa": (GQA, ["--layers", "2", "--batch", "2", "--prompt-len", "12", "--gen-len", "5"]),
    "mla": (MLA, ["--layers", "2", "--prompt-len", "12", "--gen-len", "5"]),
    # prompt 130 > W 128: the window wraps in every layout
    "sliding": (SLIDING, ["--layers", "2", "--prompt-len", "130", "--gen-len", "6"]),
    "hybrid": (HYBRID, ["--layers", "5", "--prompt-len", "12", "--gen-len", "5"]),
}


@pytest.mark.parametrize("layout", ["dynamic", "static", "paged", "sliding", "quantized"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_layout_matches_to_the_byte(runner, case: str, layout: str) -> None:
    model, flags = CASES[case]
    extra = ["--kv-dtype", "int4", "--residual-length", "4"] if layout == "quantized" else []
    if layout == "quantized" and case == "sliding":
        # like Hugging Face QuantizedCache, windowed layers are refused with a clear error
        result = runner.invoke(app, ["verify", "--no-progress", "-m", model, "--layout", layout, *flags, *extra])
        assert result.exit_code == EXIT_USAGE
        assert "full-attention and MLA layers only" in result.output
        return
    report = run_verify(runner, "-m", model, "--layout", layout, *flags, *extra)
    verify = report["verify"]
    assert verify["match"] is True, report["layers"]
    assert verify["measured_bytes"] == verify["predicted_bytes"] > 0
    assert [layer["measured_bytes"] for layer in report["layers"]] == [layer["predicted_bytes"] for layer in report["layers"]]
    assert report["inputs"]["layers"] < report["inputs"]["layers_total"]
    assert any("--layers" in note for note in report["notes"])
    assert verify["device"] == "cpu" and verify["allocated"]["measured"] is None
    assert verify["bandwidth_fraction"] is None
    if layout == "paged":
        for layer in report["layers"]:
            assert layer["peak_blocks_per_seq"] == layer["blocks_per_seq"]


def test_measured_numbers_as_arithmetic(runner) -> None:
    report = run_verify(runner, "-m", GQA, "--layers", "2", "--batch", "2", "--beams", "2", "--prompt-len", "12",
                        "--gen-len", "5")
    rows, layers, heads, dim, tokens = 2 * 2, 2, 8, 64, 12 + 5
    assert report["verify"]["measured_bytes"] == rows * layers * KV * heads * dim * tokens * BF16
    sliding = run_verify(runner, "-m", SLIDING, "--layers", "2", "--prompt-len", "130", "--gen-len", "6")
    window, per_token = 128, KV * 8 * 64 * FP16
    # the sliding layer keeps W - 1 tokens as a view of the W-token concatenation: W of storage (transformers cache_utils.py)
    assert [layer["measured_bytes"] for layer in sliding["layers"]] == [window * per_token, 136 * per_token]
    beams = run_verify(runner, "-m", SLIDING, "--layers", "1", "--beams", "2", "--prompt-len", "130", "--gen-len", "2")
    assert beams["verify"]["measured_bytes"] == 2 * (window - 1) * per_token  # the beam reorder compacts the view
    prefill = run_verify(runner, "-m", SLIDING, "--layers", "1", "--prompt-len", "130", "--gen-len", "0")
    assert prefill["verify"]["measured_bytes"] == 130 * per_token  # the view keeps the whole prompt alive


def test_fp8_cache(runner) -> None:
    report = run_verify(runner, "-m", GQA, "--layers", "1", "--prompt-len", "8", "--gen-len", "2", "--kv-dtype", "fp8",
                        "--layout", "static")
    assert report["verify"]["measured_bytes"] == 1 * KV * 8 * 64 * 10 * 1  # one byte per value


def test_chunked_local_attention_and_state_layers(runner) -> None:
    chunked = run_verify(runner, "-m", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "--layers", "4", "--layout", "paged",
                         "--prompt-len", "40", "--gen-len", "10", "--set", "attention_chunk_size=16")
    assert chunked["verify"]["match"] is True
    assert [layer["kind"] for layer in chunked["layers"]] == ["chunked_local"] * 3 + ["full_attention"]


def test_tp2_over_gloo(runner) -> None:
    report = run_verify(runner, "-m", GQA, "--layers", "2", "--tp", "2", "--prompt-len", "8", "--gen-len", "3")
    verify = report["verify"]
    assert verify["distributed_backend"] == "gloo"
    per_rank = 2 * KV * (8 // 2) * 64 * 11 * BF16  # layers * K+V * heads per rank * head_dim * tokens * bf16
    assert [r["measured_bytes"] for r in verify["ranks"]] == [per_rank, per_rank]
    assert all(r["match"] for r in verify["ranks"])


def test_refuses_rather_than_oom(runner) -> None:
    # static slots: 16 layers x 200,000 slots x 2 x 8 x 64 x bf16 = 6.5 GB of cache, refused under 8 GiB
    # with a --layers that fits; nothing is allocated.
    args = ["verify", "--no-progress", "-m", GQA, "--layout", "static", "--max-cache-len", "200000",
            "--prompt-len", "8", "--gen-len", "2"]
    result = runner.invoke(app, [*args, "--max-memory", "8GiB"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert "Error: the decode needs about" in result.output
    assert "(6,553,600,000 of cache per rank)" in result.output  # 16 * 200000 * 2 * 8 * 64 * 2
    hinted = int(result.output.split("Hint: try --layers ")[1].split()[0])
    assert 1 <= hinted < 16
    assert "Traceback" not in result.output
    tiny = runner.invoke(app, [*args, "--max-memory", "1MiB"])
    assert tiny.exit_code == EXIT_USAGE and "no layer count fits" in tiny.output


def test_mismatch_exits_1(runner, monkeypatch) -> None:
    import kvplan.verify.decode as verify_module

    original = verify_module.storage_bytes
    monkeypatch.setattr(verify_module, "storage_bytes", lambda tensors, seen: original(tensors, seen) + 2)
    report = run_verify(runner, "-m", GQA, "--layers", "1", "--prompt-len", "4", "--gen-len", "1", code=EXIT_NOT_FIT)
    assert report["verify"]["match"] is False
    assert report["verify"]["measured_bytes"] == report["verify"]["predicted_bytes"] + 2


def test_gpu_flag_without_cuda(runner) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = runner.invoke(app, ["verify", "-m", GQA, "--layers", "1", "--gpu"])
    assert result.exit_code == EXIT_USAGE
    assert "Error: --gpu asks for CUDA" in result.output


def test_table_output(runner) -> None:
    result = runner.invoke(app, ["verify", "--no-progress", "-m", GQA, "--layers", "2", "--prompt-len", "8", "--gen-len", "2"])
    assert result.exit_code == 0, result.output
    assert "PASS: meta-llama/Llama-3.2-1B, 2 of 16 layers" in result.stdout
    assert "dynamic layout on cpu" in result.stdout
    assert "match" in result.stdout and "40,960" in result.stdout  # 2 layers' 20,480 each


def test_without_torch_says_how_to_install(runner, monkeypatch) -> None:
    import importlib.util

    import kvplan.cli.verify as command

    real = importlib.util.find_spec
    monkeypatch.setattr(command.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    result = runner.invoke(app, ["verify", "-m", GQA])
    assert result.exit_code == EXIT_USAGE
    assert "pip install '.[verify]' in the kvplan checkout" in result.output


def test_cli_import_does_not_import_torch() -> None:
    code = "import sys, kvplan.cli; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# ---- CUDA ------------------------------------------------------------------------------------------

gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@gpu
@needs_cuda
@pytest.mark.parametrize("layout", ["static", "paged", "sliding", "dynamic"])
def test_cuda_allocator_prediction(runner, layout: str) -> None:
    report = run_verify(runner, "-m", GQA, "--gpu", "--layers", "4", "--layout", layout, "--batch", "4",
                        "--prompt-len", "256", "--gen-len", "16")
    verify = report["verify"]
    assert verify["match"] is True
    assert verify["passed"] is True, verify
    allocated, reserved = verify["allocated"], verify["reserved"]
    if layout == "dynamic":
        # re-allocated every step: a reused large block may keep its unsplit tail (<= 1 MiB per tensor, CUDACachingAllocator.cpp)
        assert 0 <= allocated["measured"] - allocated["predicted"] <= 4 * KV * MiB
    else:
        assert allocated["measured"] == allocated["predicted"]  # byte-exact on an H200
        assert reserved["measured"] == reserved["predicted"]
    assert verify["step_seconds"] > 0


@gpu
@needs_cuda
def test_cuda_llama2_static_4096_is_2_gib(runner) -> None:
    # PyTorch's caching allocator: 64 tensors of 1 x 32 heads x 4096 x 128 x fp16 = 32 MiB each -> 2 GiB allocated = reserved.
    report = run_verify(runner, "-m", "meta-llama/Llama-2-7b-hf", "--gpu", "--layout", "static", "--prompt-len", "4095",
                        "--gen-len", "1")
    two_gib = 64 * 1 * 32 * 4096 * 128 * FP16
    slot_positions = 32 * 4096 * 8  # one int64 per ring slot per layer, 32 KiB each: the small pool
    assert report["verify"]["predicted_bytes"] == two_gib
    assert report["verify"]["allocated"]["predicted"] == report["verify"]["allocated"]["measured"] == two_gib + slot_positions
    assert report["verify"]["reserved"]["predicted"] == report["verify"]["reserved"]["measured"] == two_gib + 2 * MiB


def test_report_validates_against_the_schema(runner) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from kvplan.report.schema import report_schema

    validator = jsonschema.Draft202012Validator(report_schema())
    for args in (["-m", GQA, "--layers", "1", "--prompt-len", "4", "--gen-len", "1", "--layout", "paged"],
                 ["-m", HYBRID, "--layers", "5", "--prompt-len", "4", "--gen-len", "1", "--layout", "quantized",
                  "--kv-dtype", "int8"]):
        report = run_verify(runner, *args)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(report)]
        assert not errors, errors[:5]


def test_yaml_output_and_bad_bandwidth(runner) -> None:
    yaml = pytest.importorskip("yaml")
    args = ["verify", "--no-progress", "-m", GQA, "--layers", "1", "--prompt-len", "4", "--gen-len", "1"]
    result = runner.invoke(app, [*args, "--format", "yaml"])
    assert result.exit_code == 0, result.output
    report = yaml.safe_load(result.stdout)
    assert report["verify"]["torch_version"] == str(torch.__version__)
    assert report["verify"]["measured_bytes"] == 1 * KV * 8 * 64 * (4 + 1) * BF16
    for bad in ("0", "-5"):
        result = runner.invoke(app, [*args, "--bandwidth", bad])
        assert result.exit_code == EXIT_USAGE and "--bandwidth must be a positive" in result.output
