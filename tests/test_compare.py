"""`kvplan compare`: attention layouts side by side, as arithmetic over named factors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from kvplan.cli import app
from kvplan.errors import ConfigError, InputError
from kvplan.layouts import base_from_dims, base_from_model, compare, parse_variant, variant_geometry

from conftest import BF16, FP8, FP16, KV

GiB, MiB = 1024**3, 1024**2
# NOTE: the example model (no --model or dims): 32 layers, 32 query heads of dim 128, fp16, 4096 tokens.
LAYERS, HEADS, DIM, TOKENS = 32, 32, 128, 4096


def run(runner, *args: str):
    return runner.invoke(app, ["compare", *args])


def report_of(runner, *args: str) -> dict:
    result = run(runner, *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_name(report: dict) -> dict[str, dict]:
    return {v["name"]: v for v in report["variants"]}


# ---- the seed table ----------------------------------------------------------------------------------
def test_seed_table_exactly(runner) -> None:
    report = report_of(runner, "mha", "gqa", "mqa")
    rows = by_name(report)
    assert list(rows) == ["mha", "gqa:8", "mqa"]
    assert rows["mha"]["kv_cache_bytes"] == TOKENS * LAYERS * KV * 32 * DIM * FP16 == 2 * GiB
    assert rows["gqa:8"]["kv_cache_bytes"] == TOKENS * LAYERS * KV * 8 * DIM * FP16 == 512 * MiB
    assert rows["mqa"]["kv_cache_bytes"] == TOKENS * LAYERS * KV * 1 * DIM * FP16 == 64 * MiB
    assert [rows[n]["ratio_to_mha"] for n in rows] == [1.0, 8 / 32, 1 / 32]
    assert [rows[n]["num_kv_heads"] for n in rows] == [32, 8, 1]
    expected_inputs = {"seq_len": TOKENS, "batch": 1, "kv_dtype": "fp16", "num_attention_layers": LAYERS}
    assert report["inputs"] | expected_inputs == report["inputs"]
    assert any("the example model, 32 layers x 32 heads x head dim 128" in note for note in report["notes"])
    assert any("memory only" in note for note in report["notes"])


def test_seed_batch_8_is_16_gib(runner) -> None:
    rows = by_name(report_of(runner, "mha", "gqa", "mqa", "--batch", "8"))
    assert rows["mha"]["kv_cache_bytes"] == 8 * TOKENS * LAYERS * KV * 32 * DIM * FP16 == 16 * GiB
    assert rows["mqa"]["kv_cache_bytes"] == 8 * TOKENS * LAYERS * KV * 1 * DIM * FP16 == 512 * MiB


def test_default_variants_and_decode_read(runner) -> None:
    report = report_of(runner, "--seq-len", "8k", "--batch", "2")
    rows = by_name(report)
    assert list(rows) == ["mha", "gqa:8", "mqa"]
    # a decode step reads every token each layer holds, for every sequence of the batch
    assert rows["gqa:8"]["decode_read_bytes_per_step"] == 2 * 8192 * LAYERS * KV * 8 * DIM * FP16


def test_table_key_phrases(runner) -> None:
    result = run(runner, "mha", "gqa", "mqa", "--batch", "8")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for phrase in ("16.00 GiB", "4.00 GiB", "512.00 MiB", "0.25", "0.03125", "█" * 12):
        assert phrase in out, phrase
    assert "note: compare sizes memory only" in result.stderr and "memory only" not in out  # said once


def test_sweep_table_has_one_column_per_length(runner) -> None:
    result = run(runner, "mha", "swa:4k", "--sweep-seq", "1k,32k,128k")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "variant" in line)
    assert [col for col in ("@1k", "@4k", "@32k", "@128k") if col in header] == ["@1k", "@4k", "@32k", "@128k"]
    swa_row = next(line for line in result.stdout.splitlines() if "swa:4096" in line)
    assert swa_row.count("2 GiB") == 3  # 4k, 32k and 128k: flat once the window is full


def test_yaml_matches_json_and_output_file(runner, tmp_path) -> None:
    args = ["mha", "gqa:4", "mla", "swa:1k", "--sweep-seq", "1k,4k"]
    as_yaml = run(runner, *args, "--format", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.output
    as_json = report_of(runner, *args)
    assert yaml.safe_load(as_yaml.stdout) == as_json
    out = tmp_path / "cmp.json"
    assert run(runner, *args, "--output", str(out)).exit_code == 0
    assert json.loads(out.read_text())["variants"] == as_json["variants"]
    for key in ("schema_version", "kvplan_version", "command", "model", "inputs", "mha_kv_cache_bytes", "variants", "notes"):
        assert key in as_json
    assert as_json["command"] == "compare"


def test_report_matches_schema(runner) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = pytest.importorskip("kvplan.report.schema")
    gemma = ["-m", "google/gemma-3-27b-it", "-s", "8k", "model", "hybrid:1k:5", "mla", "--sweep-seq", "1k,32k"]
    served = ["-m", "openai/whisper-large-v3", "--engine", "vllm", "--tp", "2", "--block-size", "32", "--sweep-seq", "1k"]
    for args in (["mha", "gqa", "mqa"], gemma, served):
        jsonschema.validate(report_of(runner, *args), schema.report_schema())


# ---- MLA and windows ---------------------------------------------------------------------------------
def test_mla_variants() -> None:
    comparison = compare(base_from_dims(), ["mla", "mla:256+32"])
    default, small = comparison.variants
    assert default.kv_cache_bytes == TOKENS * LAYERS * (512 + 64) * FP16  # one latent row, no K/V pair
    assert small.kv_cache_bytes == TOKENS * LAYERS * (256 + 32) * FP16
    assert default.ratio_to_mha == (512 + 64) / (KV * 32 * DIM)


def test_swa_is_flat_past_the_window(runner) -> None:
    rows = by_name(report_of(runner, "swa:1k", "--sweep-seq", "512,1k,32k"))
    per_token = LAYERS * KV * 32 * DIM * FP16
    assert rows["swa:1024"]["kv_cache_bytes"] == 1024 * per_token  # 4096 tokens, window 1024
    assert [p["kv_cache_bytes"] for p in rows["swa:1024"]["sweep"]] == [512 * per_token, 1024 * per_token, 1024 * per_token]
    assert [p["ratio_to_mha"] for p in rows["swa:1024"]["sweep"]] == [1.0, 1.0, 1024 / 32768]
    assert rows["swa:1024"]["window"] == 1024 and rows["swa:1024"]["num_kv_heads"] == 32


def test_hybrid_gemma3_pattern() -> None:
    base = base_from_dims()
    variant = parse_variant("hybrid:1024:5", base)
    kinds = [spec.kind for spec in variant_geometry(base, variant).layers]
    # layers 5, 11, 17, 23, 29 are global: 27 local + 5 global
    assert [i for i, kind in enumerate(kinds) if kind == "full_attention"] == [5, 11, 17, 23, 29]
    (result,) = compare(base, ["hybrid:1024:5"]).variants
    per_layer_token = KV * 32 * DIM * FP16
    assert result.kv_cache_bytes == (27 * 1024 + 5 * TOKENS) * per_layer_token


def test_window_at_least_seq_len_is_noted() -> None:
    comparison = compare(base_from_dims(), ["swa:8k"])
    assert comparison.variants[0].ratio_to_mha == 1.0
    assert any("saves nothing" in note for note in comparison.notes)


def test_direct_dims_and_hidden_size(runner) -> None:
    dims = ["--layers", "80", "--heads", "64", "--hidden-size", "8192"]
    report = report_of(runner, "mha", "gqa", *dims, "-s", "1k", "--kv-dtype", "fp8")
    assert report["inputs"]["head_dim_k"] == 8192 // 64
    assert by_name(report)["gqa:8"]["kv_cache_bytes"] == 1024 * 80 * KV * 8 * 128 * FP8
    assert report["model"]["source"] == "dims"


# ---- --model bases -----------------------------------------------------------------------------------
def test_llama31_8b_base(runner) -> None:
    report = report_of(runner, "-m", "meta-llama/Llama-3.1-8B", "-s", "8k", "model", "mha", "gqa", "mqa")
    rows = by_name(report)
    assert rows["model"]["kv_cache_bytes"] == rows["gqa:8"]["kv_cache_bytes"] == 8192 * 32 * KV * 8 * 128 * BF16 == GiB
    assert rows["mha"]["kv_cache_bytes"] == 8192 * 32 * KV * 32 * 128 * BF16 == 4 * GiB
    assert rows["model"]["ratio_to_mha"] == 0.25
    assert report["model"]["id"] == "meta-llama/Llama-3.1-8B" and report["model"]["source"] == "bundled"


def test_llama31_8b_default_seq_len_is_model_max(runner) -> None:
    report = report_of(runner, "-m", "meta-llama/Llama-3.1-8B")
    assert report["inputs"]["seq_len"] == 131072
    assert list(by_name(report)) == ["model", "mha", "gqa:8", "mqa"]


def test_deepseek_v3_base(runner) -> None:
    rows = by_name(report_of(runner, "-m", "deepseek-ai/DeepSeek-V3", "-s", "4k", "model", "mla", "mha", "gqa:16"))
    layers, heads = 61, 128
    latent = TOKENS * layers * (512 + 64) * BF16
    # MHA replaced by MLA: K heads of qk_nope + qk_rope = 128 + 64, V heads of v_head_dim = 128
    mha = TOKENS * layers * heads * ((128 + 64) + 128) * BF16
    assert rows["model"]["kv_cache_bytes"] == rows["mla:512+64"]["kv_cache_bytes"] == latent
    assert rows["mha"]["kv_cache_bytes"] == mha
    assert rows["gqa:16"]["kv_cache_bytes"] == TOKENS * layers * 16 * ((128 + 64) + 128) * BF16
    assert rows["model"]["ratio_to_mha"] == latent / mha
    assert rows["model"]["kv_lora_rank"] == 512 and rows["model"]["head_dim_k"] is None


def test_gemma3_model_equals_hybrid(runner) -> None:
    rows = by_name(report_of(runner, "-m", "google/gemma-3-27b-it", "-s", "32k", "model", "hybrid:1024:5"))
    assert rows["model"]["kv_cache_bytes"] == rows["hybrid:1024:5"]["kv_cache_bytes"]
    assert rows["model"]["kv_cache_bytes"] == (52 * 1024 + 10 * 32768) * KV * 16 * 128 * BF16


def test_state_layers_are_kept() -> None:
    from kvplan.api import load_geometry

    base = base_from_model(load_geometry("ai21labs/Jamba-v0.1").model_geometry)
    mha, mqa = compare(base, ["mha", "mqa"], seq_len=4096).variants
    assert base.num_attention_layers == 4  # 28 Mamba layers keep their state in every variant
    assert mha.kv_cache_bytes - mqa.kv_cache_bytes == 4096 * 4 * KV * (32 - 1) * 128 * BF16


def test_pure_state_model_is_rejected() -> None:
    from kvplan.api import load_geometry

    with pytest.raises(ConfigError, match="no attention layers"):
        base_from_model(load_geometry("state-spaces/mamba-2.8b-hf").model_geometry)


# ---- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["gqa:5"], "do not divide the 32 query heads"),
        (["gqa:64"], "64 KV heads is more than the 32 query heads"),
        (["gqa:0"], "is not a positive integer"),
        (["gqa:x"], "is not a positive integer"),
        (["gqa:"], "empty argument"),
        (["gpa"], "did you mean 'gqa'"),
        (["mha:4"], "takes no argument"),
        (["mla:512"], "expected mla:RANK+ROPE"),
        (["swa"], "a window is needed"),
        (["swa:0"], "must be a positive number of tokens"),
        (["hybrid:1k"], "expected hybrid:W:R"),
        (["hybrid:1k:0"], "is not a positive integer"),
        (["model"], "needs a --model"),
        (["-m", "llama-3.1-8b", "--layers", "4"], "not both"),
        (["--head-dim", "64", "--hidden-size", "4096"], "not both"),
        (["--hidden-size", "4000", "--heads", "48"], "not divisible"),
        (["-m", "deepseek-ai/DeepSeek-V3", "swa:4k"], "no sliding-window MLA"),
        (["-m", "state-spaces/mamba-2.8b-hf"], "no attention layers"),
        (["--sweep-seq", "1k,,4k"], "empty entry"),
        (["--plot", "kv.pdf"], "must end in .png or .svg"),
        (["--gpu-mem", "eighty"], "is not a size"),
        (["--layers", "0"], "--layers"),
    ],
)
def test_bad_input_exits_2(runner, args: list[str], phrase: str) -> None:
    result = run(runner, *args)
    assert result.exit_code == 2, result.output
    assert phrase in result.stderr
    assert "Traceback" not in result.output


def test_gqa_error_lists_divisors() -> None:
    with pytest.raises(InputError) as info:
        parse_variant("gqa:3", base_from_dims(heads=20))
    assert info.value.hint == "use gqa:N with N dividing 20: 1, 2, 4, 5, 10, 20"


# ---- plot --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_written(runner, tmp_path, suffix: str) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / f"kv.{suffix}"
    report = report_of(runner, "mha", "gqa", "mla", "swa:4k", "--plot", str(path), "--gpu-mem", "80GiB")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in data
    assert report["inputs"]["gpu_mem_bytes"] == 80 * GiB and report["inputs"]["plot"] == str(path)


def test_plot_without_matplotlib_says_how_to_install(runner, tmp_path, monkeypatch) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.ticker"):
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib.figure` now raises ImportError
    path = tmp_path / "kv.png"
    result = run(runner, "mha", "gqa", "--plot", str(path))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "Error: --plot needs matplotlib, which is not installed",
        "Hint: pip install '.[plot]' in the kvplan checkout (or: pip install matplotlib)",
    ]
    assert not path.exists() and result.stdout == ""


def test_compare_imports_no_matplotlib_without_plot() -> None:
    code = (
        "import sys\n"
        "from kvplan.cli import main\n"
        "sys.argv = ['kvplan', 'compare', 'mha', 'gqa', '-m', 'llama-3.1-8b', '-f', 'json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "bad = [m for m in ('torch', 'huggingface_hub', 'matplotlib') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_help_has_examples(runner) -> None:
    result = run(runner, "--help")
    assert result.exit_code == 0 and "Examples" in result.stdout and "hybrid:W:R" in result.stdout


# ---- every kind of base: defaults that work, layers kept as configured, deployment flags -------------
def test_plain_gqa_falls_back_to_a_divisor_on_whisper(runner) -> None:
    # Whisper large-v3: 32 decoder layers, 20 heads of dim 64, fp16, 448 tokens; 32 cross-attention
    # layers over 1,500 encoder positions keep their 20 heads in every variant.
    report = report_of(runner, "-m", "openai/whisper-large-v3")  # no variants: model mha gqa mqa
    variants = by_name(report)
    assert list(variants) == ["model", "mha", "gqa:5", "mqa"]  # 8 does not divide 20: the largest divisor below 8
    cross = 32 * 1500 * KV * 20 * 64 * FP16  # layers * encoder positions * K+V * heads * head dim * fp16
    assert variants["gqa:5"]["kv_cache_bytes"] == 32 * 448 * KV * 5 * 64 * FP16 + cross
    assert variants["mha"]["kv_cache_bytes"] == variants["model"]["kv_cache_bytes"] == 32 * 448 * KV * 20 * 64 * FP16 + cross
    assert variants["mqa"]["kv_cache_bytes"] == 32 * 448 * KV * 1 * 64 * FP16 + cross
    notes = " ".join(report["notes"])
    assert "plain gqa uses 5" in notes
    assert "32 cross-attention layers keep the model's layout in every variant" in notes


@pytest.mark.parametrize(("heads", "expected"), [(32, 8), (20, 5), (12, 6), (14, 7), (25, 5), (8, 8), (4, 4), (1, 1)])
def test_plain_gqa_kv_heads(heads: int, expected: int) -> None:
    assert parse_variant("gqa", base_from_dims(heads=heads)).num_kv_heads == expected


@pytest.mark.parametrize(("heads", "tp", "expected"), [(20, 1, 5), (20, 2, 4), (20, 4, 4), (12, 4, 4), (32, 16, 8)])
def test_plain_gqa_splits_over_tp(heads: int, tp: int, expected: int) -> None:
    # vLLM needs the KV heads and --tp to divide one another: 5 heads cannot go on 2 ranks.
    assert parse_variant("gqa", base_from_dims(heads=heads), tp=tp).num_kv_heads == expected


def test_explicit_gqa_8_on_whisper_is_still_rejected(runner) -> None:
    result = run(runner, "-m", "openai/whisper-large-v3", "gqa:8")
    assert result.exit_code == 2, result.output
    assert "Error: gqa:8: 8 KV heads do not divide the 20 query heads" in result.stderr


def test_state_layers_are_named_as_kept(runner) -> None:
    report = report_of(runner, "-m", "ai21labs/Jamba-v0.1", "mha", "-s", "4k")
    assert any("28 state layers keep the model's layout" in note for note in report["notes"])
    assert not any("keep the model's layout" in note for note in report_of(runner, "mha")["notes"])


def test_hybrid_without_a_global_layer_is_noted() -> None:
    base = base_from_dims(layers=4)
    comparison = compare(base, ["hybrid:1k:5"], seq_len=8192)
    assert comparison.variants[0].kv_cache_bytes == 4 * 1024 * KV * HEADS * DIM * FP16  # all 4 layers local
    assert any("every attention layer is local" in note for note in comparison.notes)


def test_engine_and_tp_replicate_mqa_and_mla(runner) -> None:
    # Llama-3.1-70B: 80 layers, 64 query heads of dim 128, bf16, on vLLM with 8 tensor-parallel GPUs.
    # MQA's single KV head and MLA's latent are replicated on all 8 ranks; GQA's 8 heads split 1 per rank.
    tokens, tp = 32768, 8
    report = report_of(runner, "-m", "meta-llama/Llama-3.1-70B", "mha", "gqa", "mqa", "mla", "-s", "32k",
                       "--engine", "vllm", "--tp", str(tp))
    variants = by_name(report)
    assert (report["inputs"]["engine"], report["inputs"]["tp"], report["inputs"]["pp"]) == ("vllm", tp, 1)
    per_rank_head = 80 * tokens * KV * 1 * 128 * BF16  # one KV head per rank
    assert variants["mha"]["kv_cache_bytes_per_gpu"] == 80 * tokens * KV * (64 // tp) * 128 * BF16
    assert variants["gqa:8"]["kv_cache_bytes_per_gpu"] == variants["mqa"]["kv_cache_bytes_per_gpu"] == per_rank_head
    assert variants["gqa:8"]["kv_cache_bytes"] == variants["mqa"]["kv_cache_bytes"] == per_rank_head * tp
    assert variants["mla:512+64"]["kv_cache_bytes_per_gpu"] == 80 * tokens * (512 + 64) * BF16
    assert variants["mla:512+64"]["kv_cache_bytes"] == 80 * tokens * (512 + 64) * BF16 * tp
    assert variants["mqa"]["ratio_to_mha"] == 1 / 8  # replicated: no better than gqa:8 under tp 8
    table = run(runner, "-m", "meta-llama/Llama-3.1-70B", "mha", "mqa", "-s", "32k", "--engine", "vllm", "--tp", "8")
    assert "per GPU" in table.stdout and "engine vllm; tp 8 × pp 1" in table.stdout


def test_ideal_single_gpu_has_no_per_gpu_column(runner) -> None:
    result = run(runner)
    assert result.exit_code == 0, result.output
    assert "per GPU" not in result.stdout
    report = report_of(runner)
    assert all(v["kv_cache_bytes_per_gpu"] == v["kv_cache_bytes"] for v in report["variants"])
    assert (report["inputs"]["engine"], report["inputs"]["tp"], report["inputs"]["block_size"]) == ("ideal", 1, None)


def test_engine_block_rounding_applies_to_every_variant(runner) -> None:
    # vLLM pages of 16 tokens: 1000 tokens hold 63 blocks = 1008 token slots per layer.
    report = report_of(runner, "mha", "mqa", "-s", "1000", "--engine", "vllm")
    assert by_name(report)["mqa"]["kv_cache_bytes"] == LAYERS * 1008 * KV * 1 * DIM * FP16


def test_deployment_error_names_the_variant(runner) -> None:
    result = run(runner, "-m", "openai/whisper-large-v3", "mha", "gqa:5", "--engine", "vllm", "--tp", "4")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: variant gqa:5: vLLM cannot split 5 KV heads")


def test_plot_series_is_per_gpu_under_tp() -> None:
    from kvplan.adjust import deployment_from_flags
    from kvplan.layouts import plot_series

    base = base_from_dims()
    comparison = compare(base, ["mha", "mqa"], deployment=deployment_from_flags(engine="vllm", tp=8))
    xs, series = plot_series(comparison)
    at = xs.index(TOKENS)
    # the line a --gpu-mem is drawn against: one rank's share (MHA: 32 / 8 heads; MQA: its one head, replicated)
    assert series["mha"][at] == LAYERS * TOKENS * KV * (HEADS // 8) * DIM * FP16
    assert series["mqa"][at] == LAYERS * TOKENS * KV * 1 * DIM * FP16
