"""The answer first, short by default: `kvplan capacity` prints at most 20 lines at 80 columns (stdout and the
notes on stderr together), the verdict on the first line; `--verbose` keeps the whole breakdown and every note."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
SHORT_LINES = 20  # issue 22: the capacity answer at 80 columns
VERDICT = re.compile(r"^\d+ × [\d,]+ tokens (fits|does NOT fit): needs ")

#: (arguments, fits) over engines, fits and does not fit, one and several GPUs, hybrid and MLA models.
CASES = {
    "llama8b-vllm-fits": (["-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "32k"], True),
    # NOTE: vLLM's 8-line "To serve at least one request ..." error, clipped to two lines (--verbose: whole)
    "qwen3-32b-vllm-error": (["-m", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len", "32k"], False),
    "llama70b-weights-too-big": (["-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--max-model-len", "128k"], False),
    "qwen3-8b-l40s-batch": (["-m", "Qwen/Qwen3-8B", "--gpu", "L40S", "--max-model-len", "32K", "--batch", "8"], False),
    "gpt-oss-hybrid": (["-m", "openai/gpt-oss-120b", "--gpu", "H200", "-s", "32k", "-b", "8"], True),
    "llama70b-tp4-over": (["-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-b", "8",
                           "--max-model-len", "128k"], False),
    "deepseek-mla-tp8": (["-m", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "-s", "64k"], True),
    "qwen3-32b-sglang": (["-m", "Qwen/Qwen3-32B", "--gpu", "H200", "--engine", "sglang", "-s", "32k", "-b", "6"], True),
    "gemma2-trtllm": (["-m", "google/gemma-2-9b", "--gpu", "H100", "--engine", "trtllm", "-s", "8k", "-b", "32"], False),
    "llama2-llamacpp-4090": (["-m", "meta-llama/Llama-2-7b-hf", "--gpu", "RTX4090", "--engine", "llama.cpp",
                              "-s", "4k", "-b", "4"], True),
    "llama70b-llamacpp-4090": (["-m", "meta-llama/Llama-3.1-70B", "--gpu", "RTX4090", "--engine", "llama.cpp",
                                "-s", "8k"], False),
}


def _lines(result) -> tuple[list[str], list[str]]:
    return result.stdout.splitlines(), result.stderr.splitlines()


@pytest.mark.parametrize("name", list(CASES))
def test_capacity_is_at_most_20_lines_at_80_columns_verdict_first(runner, monkeypatch, name: str) -> None:
    args, fits = CASES[name]
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["capacity", *args])
    assert result.exit_code == 0, result.output
    out, err = _lines(result)
    assert len(out) + len(err) <= SHORT_LINES, "\n".join([*out, *err])
    assert all(len(line.rstrip()) <= 80 for line in out + err), "\n".join(out + err)
    assert VERDICT.match(out[0]), out[0]
    assert ("does NOT fit" not in out[0]) is fits
    flat = " ".join(result.stdout.split())
    for figure in ("weights", "KV budget", "KV per request", "max concurrency", "max context"):
        assert re.search(rf"(^|\n){figure} ", result.stdout), figure
    if not fits:
        assert "try " in flat  # the fixes
    assert "would log:" in flat  # the engine's own lines
    if name == "qwen3-32b-vllm-error":  # the engine's error stays recognisable: its opening words and figures
        assert "To serve at least one request with the model's max seq len (32000), (7.81 GiB KV cache" in flat
    assert "decode floor" not in flat and "KV blocks" not in flat  # the breakdown is --verbose's
    assert err and err[-1].startswith("--verbose: ")  # says what --verbose adds
    _notes_are_short(err)


def _notes_are_short(err: list[str]) -> None:
    """Each note in two lines at most ("note: " then one continuation), three for a note that changes what the
    answer means (--engine ollama, -c over -np, --cmd)."""
    for line in err:
        assert line.startswith(("note: ", "      ", "--verbose: ")) or line.startswith(" "), line
    starts = [i for i, line in enumerate(err) if not line.startswith("      ")] + [len(err)]
    for start, end in itertools.pairwise(starts):
        meaning = err[start].startswith(("note: --engine ollama:", "note: --cmd read as", "note: -c "))
        assert end - start <= (3 if meaning else 2), err[start:end]


@pytest.mark.parametrize("name", ["llama8b-vllm-fits", "qwen3-8b-l40s-batch", "llama70b-llamacpp-4090"])
def test_verbose_keeps_the_whole_breakdown_and_every_note(runner, monkeypatch, name: str) -> None:
    args, _fits = CASES[name]
    monkeypatch.setenv("COLUMNS", "80")
    import json

    report = json.loads(runner.invoke(app, ["capacity", *args, "--format", "json"]).stdout)
    result = runner.invoke(app, ["capacity", *args, "--verbose"])
    assert result.exit_code == 0, result.output
    out, err = _lines(result)
    assert VERDICT.match(out[0]), out[0]
    flat = " ".join(result.stdout.split())
    for phrase in ("GPU memory", "weights per GPU", "reserve", "KV budget per GPU", "KV blocks", "KV tokens",
                   "max concurrency", "max context", "GPUs needed", "decode floor"):
        assert phrase in flat, phrase
    for term in report["budget"]["terms"]:
        assert term["name"] in flat
    notes = " ".join(" ".join(err).split())
    for note in report["notes"]:
        if not note.startswith("WARNING: "):
            assert " ".join(note.split()) in notes, note  # every note, in full
    assert len(out) + len(err) > SHORT_LINES


def test_json_and_yaml_keep_the_schema_whatever_the_verbosity(runner) -> None:
    args = ["capacity", *CASES["qwen3-8b-l40s-batch"][0], "--format", "json"]
    assert runner.invoke(app, args).stdout == runner.invoke(app, [*args, "--verbose"]).stdout


def test_capacity_through_a_pipe_is_short_too() -> None:
    """No terminal and no COLUMNS (a CI log or `| less`): rich and the notes fall back to 80 columns."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    env |= {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "kvplan", "capacity", *CASES["gpt-oss-hybrid"][0]],
                            capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines() + result.stderr.splitlines()
    assert len(lines) <= SHORT_LINES and max(len(line.rstrip()) for line in lines) <= 80, "\n".join(lines)
    assert VERDICT.match(lines[0]), lines[0]


def test_check_says_the_verdict_first(runner) -> None:
    result = runner.invoke(app, ["check", str(REPO_ROOT / "examples" / "kvplan.yaml")], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[0] == "9 scenario(s), all within budget"
    assert len(out) == 3 + 9  # the verdict, the header and its rule, one row per scenario
    verbose = runner.invoke(app, ["check", str(REPO_ROOT / "examples" / "kvplan.yaml"), "--verbose"],
                            env={"COLUMNS": "80"})
    assert verbose.stdout.splitlines()[0] == out[0] and "KV ≤ 16.00 GiB" in verbose.stdout  # each budget


@pytest.mark.parametrize("command", [["estimate", "-m", "google/gemma-3-27b-it", "-s", "32k", "-b", "4", "--engine",
                                      "vllm", "--tp", "2"],
                                     ["compare", "-m", "meta-llama/Llama-3.1-8B", "-s", "32k"]])
def test_estimate_and_compare_say_each_note_in_two_lines_at_most(runner, command: list[str]) -> None:
    result = runner.invoke(app, command, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    err = result.stderr.splitlines()
    continued = [i for i, line in enumerate(err) if line.startswith("      ")]
    assert all(err[i - 1].startswith("note: ") for i in continued), err
    assert len(result.stdout.splitlines()) + len(err) <= SHORT_LINES
    verbose = runner.invoke(app, [*command, "--verbose"], env={"COLUMNS": "80"})
    assert len(verbose.stderr.splitlines()) >= len(err)


@pytest.fixture(scope="module")
def gguf_8b(tmp_path_factory) -> Path:
    """A sparse stand-in of Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf (its header and tensor table, no data)."""
    pytest.importorskip("gguf")
    model = tmp_path_factory.mktemp("gguf") / "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "gguf_stand_in.py"), str(model)], check=True,
                   capture_output=True)
    return model


@pytest.mark.parametrize(("args", "meaning"), [
    (["--engine", "ollama"], "note: --engine ollama: Ollama runs llama.cpp"),
    (["--engine", "llama.cpp", "-c", "4096", "-np", "3"], "note: -c 4096 is not divisible by -np 3"),
    (["--cmd", "llama-server -m {model} -c 8192 --mlock --port 8080 -t 8"], "note: --cmd read as llama.cpp"),
])
def test_a_note_that_changes_the_answer_shows_by_default_and_the_gguf_dtype_once(
        runner, monkeypatch, gguf_8b: Path, args: list[str], meaning: str) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(gguf_8b.parent)  # NOTE: the file as people name it, beside them
    args = [arg.format(model=gguf_8b.name) for arg in args]
    model = [] if args[0] == "--cmd" else ["-m", gguf_8b.name]
    result = runner.invoke(app, ["capacity", *model, "--gpu", "RTX4090", *args])
    assert result.exit_code == 0, result.output
    out, err = _lines(result)
    assert len(out) + len(err) <= SHORT_LINES, "\n".join([*out, *err])
    assert all(len(line.rstrip()) <= 80 for line in out + err), "\n".join(out + err)
    assert any(line.startswith(meaning) for line in err), err  # first among the notes, not only under --verbose
    _notes_are_short(err)
    flat = " ".join(result.stderr.split())
    if args[0] == "--cmd":  # the flags kvplan did not size are named
        assert "not sized (no effect on memory in kvplan): --mlock, --port, -t" in flat
    # the GGUF's K/V dtype (no torch dtype: llama.cpp's f16 default) said once, short view and --verbose
    assert flat.count("no torch dtype") == 1, flat
    verbose = runner.invoke(app, ["capacity", *model, "--gpu", "RTX4090", *args, "--verbose"])
    assert " ".join(verbose.stderr.split()).count("no torch dtype") == 1, verbose.stderr
