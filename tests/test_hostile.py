"""Hostile input, one regression test per finding of issue 15 (outside the config parsers):
every one ends in a one-line error and exit 2 (never 101), bounded in time and memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvplan.cli import app
from kvplan.limits import MAX_REPORT_NODES, MAX_YAML_NODES

from conftest import REPO_ROOT, make_config

LLAMA = "meta-llama/Llama-3.1-8B"
TINY = make_config(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=256,
                   max_position_embeddings=128)
ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


def one_error_line(result) -> str:
    """The run ended in exit 2 with an `Error:` line (plus at most a hint), no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    return lines[0]


def check_report(runner, tmp_path: Path, name: str, scenarios: list[dict]) -> Path:
    plan = tmp_path / f"{name}-plan.yaml"
    plan.write_text(yaml.safe_dump({"scenarios": scenarios}))
    out = tmp_path / f"{name}.yaml"
    result = runner.invoke(app, ["check", str(plan), "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


# ---- diff --max-increase: a gate that cannot compare fails ------------------------------------------
@pytest.fixture
def chat_report(runner, tmp_path: Path) -> Path:
    return check_report(runner, tmp_path, "old", [{"name": "chat", "model": LLAMA, "seq_len": 1024}])


def _edited(path: Path, edit) -> Path:
    data = yaml.safe_load(path.read_text())
    edit(data)
    out = path.with_name("edited-" + path.name)
    out.write_text(yaml.safe_dump(data))
    return out


def test_diff_gate_fails_when_reports_share_no_scenario(runner, tmp_path, chat_report) -> None:
    other = check_report(runner, tmp_path, "new", [{"name": "rag", "model": LLAMA, "seq_len": 1024}])
    result = runner.invoke(app, ["diff", str(chat_report), str(other), "--max-increase", "10%"])
    assert "share no scenario" in one_error_line(result)
    # Without the gate the diff is still shown: added and removed rows.
    assert runner.invoke(app, ["diff", str(chat_report), str(other), "-f", "json"]).exit_code == 0


@pytest.mark.parametrize(
    ("edit", "phrase"),
    [
        (lambda d: d["scenarios"][0].update(kv_cache_bytes=None), "kv_cache_bytes must be a non-negative integer"),
        (lambda d: d["scenarios"][0].update(kv_cache_bytes=True), "kv_cache_bytes must be a non-negative integer"),
        (lambda d: d["scenarios"][0].update(kv_cache_bytes=float("nan")), "kv_cache_bytes must be a non-negative"),
        (lambda d: d["scenarios"][0].update(kv_cache_bytes=-1), "kv_cache_bytes must be a non-negative integer"),
        (lambda d: d["scenarios"].append(dict(d["scenarios"][0])), "scenario name 'chat' appears twice"),
        (lambda d: d.pop("scenarios"), "'scenarios' must be a list, got NoneType"),
        (lambda d: d.update(scenarios={"chat": 1}), "'scenarios' must be a list, got dict"),
        (lambda d: d.update(scenarios=[["chat"]]), "scenario #1 must be a mapping"),
        (lambda d: d["scenarios"][0].update(inputs=[1]), "inputs must be a mapping"),
    ],
)
def test_diff_refuses_malformed_reports(runner, chat_report, edit, phrase) -> None:
    bad = _edited(chat_report, edit)
    result = runner.invoke(app, ["diff", str(chat_report), str(bad), "--max-increase", "10%"])
    assert phrase in one_error_line(result)


@pytest.mark.parametrize(
    ("edit", "phrase"),
    [
        (lambda d: d.pop("totals"), "'totals' must be a mapping"),
        (lambda d: d.update(totals=[1, 2]), "'totals' must be a mapping, got list"),
        (lambda d: d["totals"].update(kv_cache_bytes=None), "totals.kv_cache_bytes must be a non-negative integer"),
        (lambda d: d.update(model="x"), "'model' must be a mapping"),
    ],
)
def test_diff_refuses_malformed_estimate_reports(runner, tmp_path, edit, phrase) -> None:
    good = tmp_path / "est.yaml"
    assert runner.invoke(app, ["estimate", "-m", LLAMA, "-s", "1k", "--output", str(good)]).exit_code == 0
    result = runner.invoke(app, ["diff", str(good), str(_edited(good, edit))])
    assert phrase in one_error_line(result)


# ---- YAML and JSON bombs, depth, encodings, sizes: plans and reports --------------------------------
@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (ALIAS_BOMB, "expands to more than {nodes} YAML nodes"),
        ("scenarios: &a [*a]\n", "alias *a refers to itself"),
        ("- a\n" * 2_200_000, "expands to more than {nodes} YAML nodes"),  # many plain nodes: counted, never built
        ("scenarios: " + "[" * 20000 + "]" * 20000 + "\n", "nested deeper than 100 levels"),
        ("scenarios:\n- name: x\n  model: llama-2-7b-hf\n  batch: " + "9" * 5000 + "\n",
         "integer with more than 4,300 digits"),
    ],
)
@pytest.mark.parametrize("command", ["check", "diff"])
def test_yaml_bombs_and_depth(runner, tmp_path, text: str, phrase: str, command: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    args = ["check", str(path)] if command == "check" else ["diff", str(path), str(path)]
    # a plan's node limit, or the larger one of reports (what a 10,000-scenario check writes)
    nodes = MAX_YAML_NODES if command == "check" else MAX_REPORT_NODES
    assert phrase.format(nodes=f"{nodes:,}") in one_error_line(runner.invoke(app, args))


def test_alias_bomb_is_bounded_in_memory_and_time(tmp_path) -> None:
    import resource
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 400  # the 342-byte bomb, 9**9 nodes expanded
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "kvplan", "check", str(path)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=60)
    assert result.returncode == 2 and "YAML nodes" in result.stderr
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1024 * 1024  # KiB: under 1 GiB


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        ("scenarios:\n- name: café\n  model: llama-2-7b-hf\n".encode("latin-1"), "is not UTF-8 text"),
        (b"\x00\xff\xfe", "is not UTF-8 text"),
    ],
)
def test_undecodable_plan_and_report(runner, tmp_path, raw: bytes, phrase: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(raw)
    assert phrase in one_error_line(runner.invoke(app, ["check", str(path)]))
    assert phrase in one_error_line(runner.invoke(app, ["diff", str(path), str(path)]))


def test_json_report_depth_and_long_ints(runner, tmp_path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    assert "nested deeper than 100 levels" in one_error_line(runner.invoke(app, ["diff", str(deep), str(deep)]))
    big = tmp_path / "big.json"
    big.write_text('{"command": "check", "n": ' + "7" * 5000 + "}")
    assert "4,300 digits" in one_error_line(runner.invoke(app, ["diff", str(big), str(big)]))


def test_special_files_as_plan(runner, tmp_path) -> None:
    assert "is a directory" in one_error_line(runner.invoke(app, ["check", str(tmp_path)]))
    assert "16 MiB limit" in one_error_line(runner.invoke(app, ["check", "/dev/zero"]))


def test_plan_revision_is_validated(runner, tmp_path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("scenarios:\n- name: x\n  model: acme/tiny\n  revision: ../../../../tmp/evil\n")
    line = one_error_line(runner.invoke(app, ["check", str(plan)]))
    assert "line 4" in line and "revision" in line and "'..'" in line


def test_long_set_integer_and_long_model(runner) -> None:
    line = one_error_line(runner.invoke(app, ["estimate", "-m", "a" * 5000]))
    assert "5,000 characters long" in line
    line = one_error_line(runner.invoke(app, ["estimate", "-m", LLAMA, "--set", "num_key_value_heads=" + "9" * 5000]))
    assert "--set num_key_value_heads: the value is too long or too deeply nested" in line
    line = one_error_line(runner.invoke(app, ["estimate", "-m", LLAMA, "--set", "x=" + "[" * 3000 + "]" * 3000]))
    assert "--set x:" in line
    line = one_error_line(runner.invoke(app, ["estimate", "-m", LLAMA, "-s", "9" * 5000]))
    assert "has more than 30 digits" in line
    line = one_error_line(runner.invoke(app, ["estimate", "-m", LLAMA, "--max-kv-bytes", "9" * 400 + ".5GiB"]))
    assert "has more than 30 digits" in line  # once an OverflowError from float()


# ---- --output: atomic, never over the input, '-' is stdout -------------------------------------------
def test_output_refuses_the_commands_own_input(runner, tmp_path, write_config) -> None:
    config = write_config(TINY)
    before = config.read_text()
    line = one_error_line(runner.invoke(app, ["estimate", "-m", str(config), "--output", str(config)]))
    assert "is the command's own input" in line and config.read_text() == before
    line = one_error_line(runner.invoke(app, ["estimate", "-m", str(config.parent), "--output", str(config)]))
    assert "own input" in line
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"scenarios:\n- name: x\n  model: {config}\n")
    plan_text = plan.read_text()
    assert "own input" in one_error_line(runner.invoke(app, ["check", str(plan), "--output", str(plan)]))
    assert plan.read_text() == plan_text


def test_output_dash_is_stdout(runner, tmp_path) -> None:
    result = runner.invoke(app, ["estimate", "-m", LLAMA, "-s", "1k", "--output", "-"])
    assert result.exit_code == 0 and yaml.safe_load(result.stdout)["command"] == "estimate"
    assert not (Path.cwd() / "-").exists()


def test_output_failure_keeps_the_old_report(runner, tmp_path, monkeypatch) -> None:
    out = tmp_path / "report.yaml"
    out.write_text("old report\n")
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    line = one_error_line(runner.invoke(app, ["estimate", "-m", LLAMA, "-s", "1k", "--output", str(out)]))
    assert "No space left on device; the old file is unchanged" in line
    assert out.read_text() == "old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.yaml"]  # no temporary file left behind
    monkeypatch.setattr(os, "fsync", real_fsync)


def test_concurrent_writers_never_leave_a_torn_report(tmp_path) -> None:
    import threading

    from kvplan.outfile import write_atomic

    out = tmp_path / "report.yaml"
    texts = [f"writer: {i}\n" + "x" * 200_000 + "\n" for i in range(8)]
    for _ in range(5):
        threads = [threading.Thread(target=write_atomic, args=(out, text)) for text in texts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert out.read_text() in texts


# ---- control characters never reach the terminal raw ------------------------------------------------
def test_escape_sequences_are_escaped_in_table_and_notes(runner, tmp_path, write_config) -> None:
    evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
    config = write_config({**TINY, "_name_or_path": "acme/" + evil})
    result = runner.invoke(app, ["estimate", "-m", str(config)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x9b" not in result.output
    assert "\\x1b]0;pwned" in result.stdout
    as_json = runner.invoke(app, ["estimate", "-m", str(config), "-f", "json"])
    assert json.loads(as_json.stdout)["model"]["id"] == "acme/" + evil  # data stays exact


def test_escape_sequences_in_plan_scenario_names(runner, tmp_path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"scenarios": [{"name": "chat\x1b[2J", "model": LLAMA, "seq_len": 1024,
                                                   "max_kv_bytes": 1}]}))
    result = runner.invoke(app, ["check", str(plan)])
    assert result.exit_code == 1
    assert "\x1b" not in result.output and "chat\\x1b[2J" in result.stderr


def test_printable() -> None:
    from kvplan.textsafe import printable

    assert printable("a\x1b[2Jb\tc\nd\x7f\x9b\u202e") == "a\\x1b[2Jb\tc\nd\\x7f\\x9b\\u202e"


# ---- broken pipe and a full stdout -----------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["table", "yaml", "json"])
@pytest.mark.parametrize("command", [["models"], ["check", "examples/kvplan.yaml"]], ids=["models", "check"])
def test_broken_pipe_exits_141_in_every_format(fmt: str, command: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    result = subprocess.run([sys.executable, "-m", "kvplan", *command, "-f", fmt], stdout=write_end, cwd=REPO_ROOT,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            timeout=60)
    os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("fmt", ["table", "json"])
@pytest.mark.parametrize("command", ["models", "check examples/kvplan.yaml", "schema"])
def test_full_or_closed_stdout_is_an_error(fmt: str, command: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    args = command.split() + ([] if command == "schema" else ["-f", fmt])
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "kvplan", *args], stdout=full, cwd=REPO_ROOT,
                                stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    assert result.returncode == 2 and "No space left on device" in result.stderr
    closed = subprocess.run(f"{sys.executable} -m kvplan {' '.join(args)} >&-", shell=True, stderr=subprocess.PIPE,
                            text=True, env=env, timeout=60, cwd=REPO_ROOT)
    assert closed.returncode == 2 and "stdout" in closed.stderr


# ---- upper bounds, said in the error ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["estimate", "-m", LLAMA, "--tp", "4096"], "--tensor-parallel-size 4,096 is past kvplan's limit of 1,024"),
        (["estimate", "-m", LLAMA, "--pp", "2000"], "--pipeline-parallel-size 2,000 is past kvplan's limit of 1,024"),
        (["estimate", "-m", LLAMA, "--beams", "100000"], "--beams 100,000 is past kvplan's limit of 1,024"),
        (["estimate", "-m", LLAMA, "--batch", str(2**24 + 1)], "--batch"),
        (["estimate", "-m", LLAMA, "-s", str(2**41)], "--seq-len"),
        (["compare", "--layers", "1000000000"], "--layers 1,000,000,000 is past kvplan's limit of 16,384"),
        (["compare", "--heads", str(2**21)], "--heads 2,097,152 is past kvplan's limit"),
        (["capacity", "-m", LLAMA, "--gpu", "H100", "--num-gpus", str(2**21)], "--num-gpus 2,097,152 is past"),
    ],
)
def test_upper_bounds(runner, args: list[str], phrase: str) -> None:
    assert phrase in one_error_line(runner.invoke(app, args))


def test_deep_config_is_refused_fast(runner, write_config) -> None:
    import time

    config = write_config({**TINY, "num_hidden_layers": 2**24})
    started = time.monotonic()
    line = one_error_line(runner.invoke(app, ["estimate", "-m", str(config)]))
    assert "layer count 16,777,216 is past kvplan's limit of 16,384" in line
    assert time.monotonic() - started < 5


def test_compare_log_reads_only_a_bounded_regular_file(runner, tmp_path: Path) -> None:
    """--compare-log: a device or a FIFO could be endless or never answer; a huge file is not a start-up log."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.log"
    with open(big, "wb") as handle:
        handle.truncate(64 * 1024**2 + 1)  # one byte past the limit, sparse
    for path, phrase in (("/dev/zero", "not a regular file"), (str(fifo), "not a regular file"),
                         (str(tmp_path), "is a directory"), (str(big), "64 MiB limit")):
        result = runner.invoke(app, ["capacity", "-m", LLAMA, "--kv-budget", "10GiB", "--compare-log", path])
        assert result.exit_code == 2 and phrase in result.output, (path, result.output)
