"""Output people read: every table fits 60, 80 and 120 columns and a pipe with nothing cut, the
answer first, and the habits of the ecosystem (issue 13)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.cells import cell_len

from kvplan.cli import app
from tests.conftest import BF16, FP8, KV, REPO_ROOT

WIDTHS = (60, 80, 120)
GiB = 1024**3

# ---- every table at every width --------------------------------------------------------------------
ESTIMATES = {
    "llama": ["estimate", "-m", "meta-llama/Llama-3.1-8B", "-s", "32k", "-b", "4"],
    "gpt-oss": ["estimate", "-m", "openai/gpt-oss-120b", "-s", "128k"],
    "deepseek-mla-tp8": ["estimate", "-m", "deepseek-ai/DeepSeek-V3", "-s", "32k", "--engine", "vllm", "-tp", "8"],
    "nemotron-h": ["estimate", "-m", "nvidia/Nemotron-H-56B-Base-8K"],
    "whisper-cross": ["estimate", "-m", "openai/whisper-large-v3"],
    "llama70-tp16-peaks": ["estimate", "-m", "meta-llama/Llama-3.1-70B", "-s", "32k", "--engine", "vllm",
                           "--tp", "16", "--offload", "0.25"],
}
TABLES = {
    **ESTIMATES,
    "models": ["models"],
    "models-query": ["models", "gemma"],
    "gpus": ["gpus"],
    "compare": ["compare", "mha", "gqa", "mqa", "mla", "swa:4k", "hybrid:1k:5", "--batch", "8"],
    "compare-sweep": ["compare", "mha", "gqa", "mla", "swa:4k", "hybrid:1k:5", "--sweep-seq", "1k,32k,128k"],
    "compare-model-tp": ["compare", "model", "mha", "gqa", "mla", "--model", "deepseek-ai/DeepSeek-V3", "-s", "32k",
                         "--engine", "vllm", "-tp", "8"],
    "compare-dtypes": ["compare", "model", "gqa", "--model", "meta-llama/Llama-3.1-8B", "--kv-dtype", "bf16,fp8"],
    "capacity": ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--max-model-len", "128K"],
    "capacity-fits": ["capacity", "-m", "openai/gpt-oss-120b", "--gpu", "H200", "-s", "32k", "-b", "8"],
    "capacity-llamacpp": ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "-s", "128k",
                          "--engine", "llama.cpp", "-b", "4"],
    "check": ["check", str(REPO_ROOT / "examples" / "kvplan.yaml")],
}


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} > {width}: {line!r}"
    assert "…" not in text, text


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(TABLES))
def test_table_fits_the_width(runner, monkeypatch, name: str, width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    result = runner.invoke(app, TABLES[name])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()
    assert_fits(result.stdout, width)
    assert_fits(result.stderr, width)  # notes wrap on word boundaries


def _kvplan_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR") and not (k.startswith("_") and k.endswith("_COMPLETE"))}
    return {**env, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", **extra}


@pytest.mark.parametrize("name", ["llama", "deepseek-mla-tp8", "nemotron-h", "models", "compare", "capacity", "check"])
def test_table_fits_80_columns_through_a_pipe(name: str) -> None:
    """No terminal, no COLUMNS (a CI log): rich falls back to 80 columns."""
    result = subprocess.run([sys.executable, "-m", "kvplan", *TABLES[name]], capture_output=True, text=True,
                            env=_kvplan_env(), cwd=REPO_ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert_fits(result.stdout, 80)
    assert max(cell_len(line) for line in result.stdout.splitlines()) > 60  # it used the 80, not less


def _diff_reports(runner, tmp_path: Path) -> tuple[Path, Path]:
    plan = yaml.safe_load((REPO_ROOT / "examples" / "kvplan.yaml").read_text())
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    (tmp_path / "old-plan.yaml").write_text(yaml.safe_dump(plan))
    for scenario in plan["scenarios"]:
        if scenario["name"] == "llama-3.1-70b-vllm-tp4":
            scenario["tp"] = 2  # the same total, twice the bytes on each GPU
            scenario["require_fit_on"]["num_gpus"] = 2
            scenario["max_kv_bytes_per_gpu"] = "24GiB"
    (tmp_path / "new-plan.yaml").write_text(yaml.safe_dump(plan))
    for label, out in (("old", old), ("new", new)):
        result = runner.invoke(app, ["check", str(tmp_path / f"{label}-plan.yaml"), "--output", str(out)])
        assert result.exit_code in (0, 1), result.output
    return old, new


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_table_fits_the_width(runner, tmp_path, monkeypatch, width: int) -> None:
    old, new = _diff_reports(runner, tmp_path)
    monkeypatch.setenv("COLUMNS", str(width))
    result = runner.invoke(app, ["diff", str(old), str(new)])
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout, width)
    assert "llama-3.1-70b-vllm-tp4: tp 4 → 2" in result.stdout


def test_diff_compares_per_gpu_bytes_of_a_per_gpu_budget(runner, tmp_path) -> None:
    old, new = _diff_reports(runner, tmp_path)
    report = json.loads(runner.invoke(app, ["diff", str(old), str(new), "--format", "json"]).stdout)
    rows = {row["name"]: row for row in report["scenarios"]}
    tp4 = rows["llama-3.1-70b-vllm-tp4"]
    total = 80 * 8 * 32768 * KV * 8 * 128 * FP8  # layers, batch, tokens, K+V, kv heads, head dim, fp8
    assert (tp4["old_kv_cache_bytes"], tp4["new_kv_cache_bytes"], tp4["change_bytes"]) == (total, total, 0)
    assert (tp4["old_kv_cache_bytes_per_gpu"], tp4["new_kv_cache_bytes_per_gpu"]) == (total // 4, total // 2)
    assert tp4["change_bytes_per_gpu"] == total // 2 - total // 4
    assert rows["llama-3.1-8b-chat"]["old_kv_cache_bytes_per_gpu"] is None  # only a whole-cache budget
    # the per-GPU growth trips --max-increase although the total did not change
    gate = runner.invoke(app, ["diff", str(old), str(new), "--max-increase", "10%"])
    assert gate.exit_code == 1, gate.output
    assert f"per GPU by {total // 2 - total // 4:,} bytes" in " ".join(gate.stderr.split())
    table = runner.invoke(app, ["diff", str(old), str(new)])
    assert "old/GPU" in table.stdout and "10.00 GiB" in table.stdout and "20.00 GiB" in table.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_verify_table_fits_the_width(runner, monkeypatch, width: int) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("COLUMNS", str(width))
    result = runner.invoke(app, ["verify", "-m", "meta-llama/Llama-3.2-1B", "--layers", "2", "--prompt-len", "8",
                                 "--gen-len", "4", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout, width)
    flat = " ".join(result.stdout.split())
    per_layer = 12 * KV * 8 * 64 * BF16  # prompt + gen tokens, K+V, kv heads, head dim, bf16
    assert flat.startswith("PASS: meta-llama/Llama-3.2-1B, 2 of 16 layers")
    assert f"{per_layer:,} B" in flat and f"{2 * per_layer:,} B" in flat  # units on byte columns
    assert "(median of 3 steps)" in flat  # 4 decode steps, the first a warm-up


# ---- the answer first ------------------------------------------------------------------------------
def _flat(runner, args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_estimate_under_tp_headlines_per_gpu_and_total_and_says_replicated(runner) -> None:
    out = _flat(runner, ESTIMATES["deepseek-mla-tp8"])
    per_gpu = 61 * 32768 * (512 + 64) * BF16  # layers, tokens, latent, bf16: one whole copy per rank
    assert out.startswith(f"KV cache per GPU, 1 × 32,768 tokens: {per_gpu / GiB:.2f} GiB (the most loaded of 8 GPUs")
    assert f"KV cache, all 8 GPUs: {8 * per_gpu / GiB:.2f} GiB ({8 * per_gpu:,} bytes)" in out
    assert "replicated: each of the 8 tensor-parallel ranks keeps the whole MLA latent" in out
    assert "latent 512+64" in out and "576/0" not in out


def test_estimate_shows_effective_bytes_per_token_at_the_length(runner) -> None:
    out = _flat(runner, ESTIMATES["gpt-oss"])
    full = 36 * KV * 8 * 64 * 2  # layers, K+V, kv heads, head dim, fp16
    seq = 128 * 1024
    effective = (18 * seq + 18 * 128) * KV * 8 * 64 * 2 / seq  # full layers hold all, sliding ones their 128
    assert f"per token (all layers): {effective / 1024:.2f} KiB at {seq:,} tokens" in out
    assert f"full-attention rate {full // 1024}.00 KiB" in out
    assert "per tok·layer" in out  # the column says it is per layer


def test_unchanged_adjustments_are_hidden(runner) -> None:
    out = _flat(runner, ["estimate", "-m", "meta-llama/Llama-3.1-8B", "-s", "32k", "--engine", "vllm", "--tp", "2"])
    assert "engine:vllm:" not in out  # 32k is a whole number of 16-token blocks: nothing changed
    assert "tensor_parallel: 4.00 GiB -> 4.00 GiB" not in out and "adjustments:" not in out


def test_models_shows_bytes_per_token_at_max_context(runner) -> None:
    report = json.loads(runner.invoke(app, ["models", "gpt-oss-120b", "--format", "json"]).stdout)
    (row,) = report["models"]
    seq = 131072
    assert row["bytes_per_token_at_max_context"] == round((18 * seq + 18 * 128) * KV * 8 * 64 * 2 / seq)
    assert "@ max ctx" in _flat(runner, ["models", "gpt-oss-120b"])


def test_capacity_says_does_not_fit_one_request_and_explains_gpus(runner) -> None:
    out = _flat(runner, [*TABLES["capacity"], "--verbose"])
    assert "does not fit one request of 131,072 tokens" in out and "0 requests" not in out
    assert "GPUs needed 4 for one 131,072-token request: the smallest tp is 4, × pp 1 = 4 GPUs" in out
    assert "the weights and reserve leave no KV memory per GPU" in out
    short = _flat(runner, TABLES["capacity"])  # the default says the same in fewer words
    assert "not one request of 131,072 tokens" in short and "0 requests" not in short
    assert "GPUs needed 4 for one 131,072-token request" in short
    assert "the weights and reserve leave no KV memory per GPU" in short


def test_llamacpp_capacity_speaks_llamacpp(runner) -> None:
    out = _flat(runner, TABLES["capacity-llamacpp"])
    # Q4_K_M weights (the llama.cpp profile's default) leave 19.05 GiB: 155,648 cells = 4 slots of 38,912 tokens
    assert "try -c 155648 -np 4 (38,912 tokens per slot" in out
    assert "-ctk q8_0 -ctv q8_0 -fa" in out and "--max-model-len" not in out
    note = runner.invoke(app, ["estimate", "-m", "meta-llama/Llama-2-7b-hf", "-s", "4k", "--engine", "llama.cpp",
                               "--kv-dtype", "q8_0"])
    assert "a quantised V cache (q8_0) needs flash attention. llama.cpp's default -fa auto turns it on" in " ".join(
        note.stderr.split())


# ---- habits -----------------------------------------------------------------------------------------
def test_version(runner) -> None:
    from kvplan import __version__

    for flag in ("--version", "-V"):
        result = runner.invoke(app, [flag])
        assert result.exit_code == 0 and result.stdout == f"kvplan {__version__}\n"


def test_shell_completion_script() -> None:
    result = subprocess.run([sys.executable, "-m", "kvplan", "--show-completion", "bash"], capture_output=True,
                            text=True, env=_kvplan_env(SHELL="/bin/bash", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1"), cwd=REPO_ROOT,
                            check=False)  # NOTE: the shell named, not detected from the process tree
    assert result.returncode == 0, result.stderr
    assert "complete" in result.stdout and "COMP_WORDS" in result.stdout


def test_vllm_spellings(runner) -> None:
    def inputs(*args: str) -> dict:
        result = runner.invoke(app, [*args, "--format", "json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["inputs"]

    # vLLM's human_readable_int: upper-case K is 2**10, lower-case k is 10**3 (vllm/utils/argparse_utils.py)
    est = inputs("estimate", "-m", "llama-3.1-70b", "-tp", "4", "-pp", "2", "--max-model-len", "8K")
    assert (est["tp"], est["pp"], est["seq_len"]) == (4, 2, 8 * 1024)
    cmp = inputs("compare", "mha", "gqa", "-tp", "2", "--max-model-len", "8k")
    assert (cmp["tp"], cmp["seq_len"]) == (2, 8 * 1000)
    cap = inputs("capacity", "-m", "llama-3.1-8b", "--gpu", "H100", "--seq-len", "8k", "-tp", "2")
    assert (cap["tp"], cap["max_model_len"]) == (2, 8192)


@pytest.mark.parametrize(("typo", "meant"), [("llama-3.1-8bb", "llama-3.1-8b"),
                                             ("meta-llama/Llama-3.1-8BB", "meta-llama/Llama-3.1-8B"),
                                             ("gpt-oss-120", "gpt-oss-120b")])
def test_model_typo_gets_did_you_mean(runner, typo: str, meant: str) -> None:
    result = runner.invoke(app, ["estimate", "-m", typo])
    assert result.exit_code == 2
    assert f"Hint: did you mean {meant}," in result.stderr or f"Hint: did you mean {meant}?" in result.stderr


def test_models_query_filters(runner) -> None:
    report = json.loads(runner.invoke(app, ["models", "GEMMA-3", "--format", "json"]).stdout)
    assert [row["id"] for row in report["models"]] == [
        "google/gemma-3-12b-it", "google/gemma-3-1b-it", "google/gemma-3-27b-it"]
    result = runner.invoke(app, ["models", "no-such-model-xyz"])
    assert result.exit_code == 2 and "Error: no bundled model matches 'no-such-model-xyz'" in result.stderr


def test_compare_kv_dtypes_in_one_run(runner) -> None:
    result = runner.invoke(app, [*TABLES["compare-dtypes"], "-s", "32k", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    sizes = {v["name"]: (v["kv_dtype"], v["kv_cache_bytes"]) for v in report["variants"]}
    bf16 = 32 * 32768 * KV * 8 * 128 * BF16  # layers, tokens, K+V, kv heads, head dim, bf16
    assert sizes["model@bf16"] == ("bf16", bf16)
    assert sizes["model@fp8"] == ("fp8_e4m3", bf16 // 2)  # the name keeps the user's spelling
    assert [v["ratio_to_mha"] for v in report["variants"]][:2] == [8 / 32, 8 / 32 / 2]  # MHA at bf16, the first
    estimate = runner.invoke(app, ["estimate", "-m", "llama-3.1-8b", "--kv-dtype", "bf16,fp8"])
    assert estimate.exit_code == 2 and "kvplan compare model --model llama-3.1-8b --kv-dtype bf16,fp8" in estimate.stderr


def test_notes_wrap_on_word_boundaries(runner, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    result = runner.invoke(app, [*ESTIMATES["deepseek-mla-tp8"], "--verbose"])  # every note in full
    lines = result.stderr.splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert any(line.startswith("      ") for line in lines)  # a continuation, indented under "note: "
    words = " ".join(result.stderr.split())
    assert "kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 values" in words  # no word broken


# ---- the docs' GitHub Actions job (docs/guides/ci.md), run in a scratch repository ------------------------
def _job_steps() -> list[dict]:
    guide = (REPO_ROOT / "docs" / "guides" / "ci.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(# \.github/workflows/kv-budget\.yml\n.*?)```", guide, re.S)
    assert match, "the GitHub Actions job of docs/guides/ci.md"
    job = yaml.safe_load(match[1])
    return job["jobs"]["kvplan"]["steps"], job.get("env", {})


def test_readme_job_installs_from_a_pinned_repository() -> None:
    steps, env = _job_steps()
    install = next(step["run"] for step in steps if "pip install" in step.get("run", ""))
    assert install.startswith('pip install "kvplan @ $KVPLAN"')
    assert re.fullmatch(r"git\+https://\S+@\S+", env["KVPLAN"])  # a repository pinned to a tag or commit


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def _run_job(tmp_path: Path, base_plan: str | None, head_plan: str) -> list[subprocess.CompletedProcess]:
    """The job's shell steps (all but the install) in a repository whose main has ``base_plan``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("serving\n")
    if base_plan is not None:
        (repo / "kvplan.yaml").write_text(base_plan)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "update-ref", "refs/remotes/origin/main", "main")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "kvplan.yaml").write_text(head_plan)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "head")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kvplan"  # what `pip install` puts on PATH, here this checkout
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kvplan "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = _kvplan_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    steps, _env = _job_steps()
    results = []
    for step in steps:
        script = step.get("run")
        if script is None or "pip install" in script:
            continue
        script = script.replace("${{ github.base_ref }}", "main")
        results.append(subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                                      cwd=repo, env=env, capture_output=True, text=True, check=False))
    return results


PLAN = "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    batch: {batch}\n    seq_len: 4096\n"


def test_readme_job_passes_the_pull_request_that_adds_the_plan(tmp_path) -> None:
    check, compare = _run_job(tmp_path, None, PLAN.format(batch=4))
    assert check.returncode == 0, check.stderr
    assert compare.returncode == 0, compare.stderr
    assert "origin/main has no kvplan.yaml yet" in compare.stdout


def test_readme_job_fails_a_pull_request_that_grows_the_cache(tmp_path) -> None:
    check, compare = _run_job(tmp_path, PLAN.format(batch=4), PLAN.format(batch=5))
    assert check.returncode == 0, check.stderr
    assert compare.returncode == 1, compare.stdout + compare.stderr  # +25% past --max-increase 10%
    assert "FAIL chat" in compare.stderr


def test_readme_job_passes_an_unchanged_plan(tmp_path) -> None:
    check, compare = _run_job(tmp_path, PLAN.format(batch=4), PLAN.format(batch=4))
    assert (check.returncode, compare.returncode) == (0, 0), compare.stdout + compare.stderr


def test_plot_is_legible_in_a_readme(runner, tmp_path) -> None:
    """1280 x 720 px, and with --model the line is the KV room after the weights, not the whole card."""
    pytest.importorskip("matplotlib")
    import struct

    path = tmp_path / "kv.png"
    result = runner.invoke(app, ["compare", "model", "mha", "gqa", "--model", "openai/gpt-oss-20b", "-s", "32k",
                                 "--plot", str(path), "--gpu-mem", "80GiB"])
    assert result.exit_code == 0, result.output
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the PNG IHDR chunk
    assert (width, height) == (1280, 720)
    from kvplan.api import load_geometry
    from kvplan.layouts import base_from_model, compare, plot_label, plot_series

    geometry, _source = load_geometry("openai/gpt-oss-20b")
    comparison = compare(base_from_model(geometry), ["model"], seq_len=32768)
    xs, series = plot_series(comparison)
    assert xs[-1] == geometry.max_context_tokens  # the x range stops at the model's maximum
    assert plot_label(comparison.variants[0]) == "model (window 128)" and list(series) == ["model (window 128)"]


def test_plot_room_line_says_when_weights_leave_no_room() -> None:
    """Llama-3.1-70B's bf16 weights exceed an 80 GiB card: the label says there is no KV room (not "KV room 0 B",
    and the plot draws no line: the card is not KV room); a card with room gets "KV room" = card - weights."""
    import kvplan
    from kvplan.units import format_bytes

    small, label = kvplan.compare(model="meta-llama/Llama-3.1-70B", gpu_mem=80 * GiB).kv_room()
    weights = 80 * GiB - small
    assert small < 0 and label == (f"weights {format_bytes(weights)} per GPU exceed the {format_bytes(80 * GiB)} GPU "
                                   "(--gpu-mem): no KV room")
    big, big_label = kvplan.compare(model="meta-llama/Llama-3.1-70B", gpu_mem=200 * GiB).kv_room()
    assert big == 200 * GiB - weights and big_label.startswith(f"KV room {format_bytes(big)} = GPU ")


@pytest.mark.parametrize("flag", ["--seq-len", "--max-model-len"])
def test_notes_name_the_length_flag_the_user_typed(runner, flag: str) -> None:
    other = "--max-model-len" if flag == "--seq-len" else "--seq-len"
    for args in (["estimate", "-m", "llama-3.1-8b"], ["compare", "gqa", "--model", "llama-3.1-8b"],
                 ["capacity", "-m", "llama-3.1-8b", "--gpu", "H100"]):
        result = runner.invoke(app, [*args, flag, "128k", "--format", "json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        source = report["inputs"].get("seq_len_source") or report["inputs"]["max_model_len_source"]
        assert source == flag, args
        assert not any(other in note for note in report["notes"] if not note.startswith(flag)), (args, report["notes"])
        # --seq-len is kvplan's (k = 1024); --max-model-len is vLLM's name, read as vLLM does (k = 1000), with a note
        length = report["inputs"].get("seq_len") or report["inputs"]["max_model_len"]
        said = [note for note in report["notes"] if note.startswith(f"{flag} 128k = ")]
        if flag == "--seq-len":
            assert (length, said) == (128 * 1024, []), args
        else:
            assert length == 128 * 1000, args
            assert said == [f"--max-model-len 128k = {128 * 1000:,} tokens, as vLLM reads it (k = 1000, K = 1024; "
                            f"128K would be {128 * 1024:,}); kvplan's --seq-len reads k as 1024"], args


def test_seq_len_and_max_model_len_that_disagree_are_refused(runner) -> None:
    for args in (["estimate", "-m", "llama-3.1-8b"], ["capacity", "-m", "llama-3.1-8b", "--gpu", "H100"]):
        result = runner.invoke(app, [*args, "--seq-len", "8k", "--max-model-len", "16k"])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("Error: --seq-len 8k (8,192) and --max-model-len 16k (16,000, as vLLM reads it) "
                                        "disagree")
        # the same text is two numbers: kvplan's k is 1024, vLLM's lower-case k 1000
        differ = runner.invoke(app, [*args, "--seq-len", "16k", "--max-model-len", "16k"])
        assert differ.exit_code == 2 and "(16,384) and --max-model-len 16k (16,000" in differ.stderr, differ.output
        same = runner.invoke(app, [*args, "--seq-len", "16k", "--max-model-len", "16K", "--format", "json"])
        assert same.exit_code == 0, same.output
        inputs = json.loads(same.stdout)["inputs"]
        assert inputs.get("seq_len", inputs.get("max_model_len")) == 16 * 1024


def test_compare_help_shows_the_plot_extra_without_a_backslash(runner, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["compare", "--help"])
    assert result.exit_code == 0 and "pip install '.[plot]' in the kvplan checkout" in " ".join(result.stdout.split())
    assert "\\[" not in result.stdout


def test_uneven_tp_split_is_called_padding_not_replication(runner) -> None:
    heads, tp = 8, 3  # Llama-3.1-8B's KV heads over 3 ranks: each keeps ceil(8/3) = 3, 9 slots
    out = _flat(runner, ["estimate", "-m", "llama-3.1-8b", "-s", "8k", "-tp", str(tp)])
    per_gpu = -(-heads // tp)
    assert (f"padded: {heads} KV heads do not split evenly over {tp} tensor-parallel ranks, each rank keeps "
            f"{per_gpu} ({heads}/{tp} rounded up), {per_gpu * tp} head slots for {heads} heads") in out
    assert "replicated" not in out and "1 copies" not in out
    out16 = _flat(runner, ["estimate", "-m", "llama-3.1-8b", "-s", "8k", "-tp", "16"])
    assert f"each rank keeps 1, so {16 // heads} copies of each head" in out16


def test_capacity_table_says_no_kv_budget_instead_of_a_negative_size(runner, monkeypatch) -> None:
    args = ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "-s", "8k"]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    budget = json.loads(result.stdout)["budget"]
    short = budget["weights_bytes_per_gpu"] + budget["reserve_bytes"] - budget["usable_bytes"]  # weights + reserve - usable
    assert short > 0 and budget["kv_bytes_per_gpu"] == -short  # the report keeps the signed figure
    from kvplan.units import format_bytes

    monkeypatch.setenv("COLUMNS", "200")
    out = _flat(runner, [*args, "--verbose"])
    assert f"KV budget per GPU none weights and reserve exceed the budget by {format_bytes(short)}" in out
    assert f"KV budget per GPU -{format_bytes(short)}" not in out  # (vLLM's own log line, quoted, keeps it)
    out = _flat(runner, args)
    assert f"KV budget none weights and reserve exceed the budget by {format_bytes(short)}" in out
    assert f"KV budget -{format_bytes(short)}" not in out


@pytest.mark.parametrize(("dtypes", "why"), [("bf16,,fp8", "has an empty item"), ("bf16,bf16", "names a dtype twice")])
def test_compare_refuses_a_kv_dtype_list_with_a_gap_or_a_repeat(runner, dtypes: str, why: str) -> None:
    result = runner.invoke(app, ["compare", "mha", "gqa", "--kv-dtype", dtypes])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"Error: --kv-dtype {dtypes} {why}"


def test_a_missing_torch_dtype_is_said_once(runner) -> None:
    """gpt-oss-120b's config names no torch_dtype: one line says so (the kv_dtype source), not two."""
    result = runner.invoke(app, ["estimate", "-m", "openai/gpt-oss-120b", "-s", "128k"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stderr.split())
    assert flat.count("no torch_dtype") == 1 and "so fp16 (2 bytes" in flat


def test_error_and_hint_wrap_on_words_at_a_terminal_and_stay_one_line_in_a_log(runner) -> None:
    from kvplan.cli.root import error_text

    message = "meta-llama/Llama-3.1-8BB is not bundled, not in the Hub cache, and the Hub cannot be reached"
    hint = "did you mean meta-llama/Llama-3.1-8B, meta-llama/Llama-3.1-70B? (kvplan models lists them)"
    wrapped = error_text(message, hint, 60).splitlines()
    assert len(wrapped) > 2 and wrapped[0].startswith("Error: ") and all(len(line) <= 60 for line in wrapped)
    hint_at = next(i for i, line in enumerate(wrapped) if line.startswith("Hint: "))
    assert all(line.startswith(" " * 7) for line in wrapped[1:hint_at])  # under the message, not column 0
    assert all(line.startswith(" " * 6) for line in wrapped[hint_at + 1:])
    assert " ".join(" ".join(wrapped).split()) == f"Error: {message} Hint: {hint}"  # words whole, none lost
    assert error_text(message, hint) == f"Error: {message}\nHint: {hint}"
    result = runner.invoke(app, ["estimate", "-m", "llama-3.1-8bb"])  # not a terminal: one line each
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 2, result.stderr


def test_models_says_which_columns_a_narrow_terminal_hides(runner, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    out = _flat(runner, ["models"])
    match = re.search(r"not shown at this width: type, layers, dtype \(COLUMNS=(\d+) shows them, or --format yaml\)",
                      out)
    assert match, out[-400:]
    monkeypatch.setenv("COLUMNS", match.group(1))  # the width named shows every column, and no such line
    wide = runner.invoke(app, ["models"]).stdout
    assert "not shown" not in wide and all(h in wide.splitlines()[1] for h in ("type", "layers", "dtype"))
    monkeypatch.setenv("COLUMNS", "80")  # all models at 80: one per block, the type there too
    assert "  llama; 32× full; KV heads × dim 8 × 128" in runner.invoke(app, ["models"]).stdout


@pytest.mark.parametrize(("flags", "batch", "per_slot"), [
    (["-c", "8192", "-np", "2"], 2, 8192 // 2),  # -c cells over -np slots: the tokens of each slot
    (["-c", "4096", "-np", "3"], 3, 1536),  # GGML_PAD(4096 / 3, 256): llama.cpp pads each slot to 256 cells
])
def test_the_compare_hint_of_a_gguf_keeps_ctx_size_and_parallel(runner, tmp_path: Path, monkeypatch,
                                                                flags: list[str], batch: int, per_slot: int) -> None:
    """llama.cpp's -c/-np, which compare does not take, become --batch slots and --seq-len tokens per slot."""
    import shlex

    pytest.importorskip("gguf")
    model = tmp_path / "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "gguf_stand_in.py"), str(model)], check=True,
                   capture_output=True)
    monkeypatch.chdir(tmp_path)
    args = ["estimate", "-m", model.name, *flags, "--kv-dtype", "f16,q8_0"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    hint = refused.stderr.split("compare them in one run: ", 1)[1].strip()
    assert f"--batch {batch} --seq-len {per_slot} " in hint, hint
    compared = runner.invoke(app, [*shlex.split(hint)[1:], "--format", "json"])
    assert compared.exit_code == 0, compared.output
    sizes = {v["name"]: v["kv_cache_bytes"] for v in json.loads(compared.stdout)["variants"]}
    f16 = 32 * batch * per_slot * KV * 8 * 128 * 2  # layers, slots, tokens per slot, K+V, kv heads, head dim, f16
    assert sizes["model@f16"] == f16
    assert sizes["model@q8_0"] == f16 // 2 // 32 * 34  # q8_0: 34 bytes per 32 values
    for dtype in ("f16", "q8_0"):  # estimate sizes each the same
        one = json.loads(runner.invoke(app, [*args[:-1], dtype, "--format", "json"]).stdout)
        assert one["totals"]["kv_cache_bytes"] == sizes[f"model@{dtype}"]


def test_the_no_model_hint_keeps_the_users_flags(runner) -> None:
    import shlex

    refused = runner.invoke(app, ["capacity", "--gpu", "H100", "-s", "8k", "-b", "4", "--engine", "sglang"])
    assert refused.exit_code == 2
    hint = refused.stderr.split("e.g. ", 1)[1].split(" (or ", 1)[0]
    assert hint == "kvplan capacity Qwen/Qwen3-8B --gpu H100 --engine sglang --seq-len 8k --batch 4"
    answered = runner.invoke(app, [*shlex.split(hint)[1:], "--format", "json"])
    assert answered.exit_code == 0, answered.output
    report = json.loads(answered.stdout)
    assert (report["inputs"]["gpu"], report["inputs"]["engine"], report["inputs"]["batch"],
            report["inputs"]["max_model_len"]) == ("H100-SXM-80GB", "sglang", 4, 8 * 1024)


def test_the_compare_hint_keeps_the_users_flags(runner) -> None:
    """Running the hint answers the same question: batch 4 x 8k tokens at each dtype, as estimate sizes them."""
    import shlex

    args = ["estimate", "-m", "Qwen/Qwen3-32B", "-s", "8k", "-b", "4", "--engine", "vllm", "--kv-dtype", "bf16,fp8"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    hint = refused.stderr.split("compare them in one run: ", 1)[1].strip()
    assert hint == ("kvplan compare model --model Qwen/Qwen3-32B --batch 4 --seq-len 8k --kv-dtype bf16,fp8 "
                    "--engine vllm")
    compared = runner.invoke(app, [*shlex.split(hint)[1:], "--format", "json"])
    assert compared.exit_code == 0, compared.output
    report = json.loads(compared.stdout)
    assert (report["inputs"]["batch"], report["inputs"]["seq_len"]) == (4, 8 * 1024)
    bf16 = 64 * 4 * 8192 * KV * 8 * 128 * BF16  # layers, batch, tokens, K+V, kv heads, head dim, bf16
    sizes = {v["name"]: v["kv_cache_bytes"] for v in report["variants"]}
    assert sizes["model@bf16"] == bf16 and sizes["model@fp8"] == bf16 // 2
    for dtype in ("bf16", "fp8"):
        one = json.loads(runner.invoke(app, [*args[:-1], dtype, "--format", "json"]).stdout)
        assert one["totals"]["kv_cache_bytes"] == sizes[f"model@{dtype}"]
    beams = runner.invoke(app, [*args, "--beams", "2"])
    assert beams.stderr.rstrip().endswith("--engine vllm (compare takes no --beams: it sizes without them)")


@pytest.mark.parametrize(("flag", "tokens"), [("--seq-len", 32 * 1024), ("--max-model-len", 32 * 1000)])
def test_the_headline_shows_the_tokens_counted(runner, flag: str, tokens: int) -> None:
    """One reading of k, said where it matters: --seq-len 32k = 32,768; --max-model-len 32k = 32,000 (vLLM's)."""
    out = runner.invoke(app, ["estimate", "-m", "Qwen/Qwen3-8B", flag, "32k"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    kv = 36 * tokens * KV * 8 * 128 * BF16  # layers, tokens, K+V, kv heads, head dim, bf16
    assert out.stdout.splitlines()[0].startswith(f"KV cache of 1 × {tokens:,} tokens: {kv / GiB:.2f} GiB ({kv:,} bytes)")
    compare = runner.invoke(app, ["compare", "mha", flag, "32k"], env={"COLUMNS": "80"})
    assert compare.stdout.startswith(f"KV cache of 1 × {tokens:,} tokens by attention layout")
    cap = runner.invoke(app, ["capacity", "-m", "Qwen/Qwen3-8B", "--gpu", "H100", flag, "32k"], env={"COLUMNS": "80"})
    assert cap.stdout.startswith(f"1 × {tokens:,} tokens fits")


@pytest.mark.parametrize("command", ["estimate", "capacity", "compare"])
def test_every_length_help_says_what_32k_is(runner, command: str) -> None:
    text = " ".join(runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).stdout.split())
    assert "32k = 32,768" in text and "32k = 32,000" in text
