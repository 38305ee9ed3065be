"""Property-based fuzzing of what kvplan reads from outside: raw config files, CLI sizes and counts,
plan files and reports for `kvplan diff`. Every case ends in exit 0, 1 or 2 with at most a few
lines on stderr; never 101 (a bug) and never a traceback.

Fast by default (CI); ``KVPLAN_FUZZ=long`` runs many more examples, for a benchmark run.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app

_app_for = sys.modules["kvplan.cli.root"]._app_for

_COMMON = {"deadline": None, "derandomize": False,
           "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}
settings.register_profile("kvplan-ci", max_examples=25, **_COMMON)
settings.register_profile("kvplan-long", max_examples=1000, **_COMMON)
PROFILE = "kvplan-long" if os.environ.get("KVPLAN_FUZZ") == "long" else "kvplan-ci"
fuzz = settings.get_profile(PROFILE)

MODEL = "meta-llama/Llama-3.1-8B"
#: stderr lines a run may print: the error and its hint, or FAIL / budget lines of a few gates.
MAX_STDERR_LINES = 6


def run(args: list[str]) -> Any:
    # NOTE: _app_for builds only the command run, as `kvplan` itself does: 10x faster per example.
    result = CliRunner().invoke(_app_for(args), args)
    assert result.exit_code in (0, 1, 2), (args[:6], result.exit_code, result.output[-2000:])
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line and not line.startswith("note: ")]
    assert len(lines) <= MAX_STDERR_LINES, result.stderr
    if result.exit_code == 2:  # kvplan's one line, or typer's usage block around its own Error: line
        assert any(line.startswith("Error: ") for line in lines), result.stderr
    return result


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


# ---- raw config files: bytes, encodings, depth, size --------------------------------------------------
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)
TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 256, "max_position_embeddings": 128, "_name_or_path": "acme/tiny"}


@st.composite
def raw_config(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "encoding", "nested", "value", "bigint", "padded"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "encoding":
        text = json.dumps({**TINY, "_name_or_path": draw(st.text(max_size=20))}, ensure_ascii=False)
        encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-32", "latin-1", "cp1252"]))
        return text.encode(encoding, errors="replace")
    if kind == "nested":
        depth = draw(st.integers(1, 30000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        return (opener * depth + "1" + closer * depth).encode()
    if kind == "value":
        return json.dumps(draw(JSON_VALUE)).encode()
    if kind == "bigint":
        digits = draw(st.integers(1, 6000))
        return ('{"model_type": "llama", "num_hidden_layers": ' + "7" * digits + "}").encode()
    return json.dumps({**TINY, "pad": "x" * draw(st.integers(0, 5000))}).encode()


@fuzz
@given(raw=raw_config())
def test_fuzz_raw_config_files(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(raw)
    run(["estimate", "-m", str(path), "-f", "json"])


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", ".", "/"])
def test_special_files_as_config(special: str) -> None:
    result = run(["estimate", "-m", special, "-f", "json"])
    assert result.exit_code == 2


# ---- CLI sizes and counts -----------------------------------------------------------------------------
NUMBER_TEXT = st.one_of(
    st.integers(-10, 10**40).map(str),
    st.sampled_from(["0", "-1", "1e999", "nan", "inf", "1.5", "4k", "1M", "0.5k", "9" * 5000, "", " ", "1_000"]),
    st.text(alphabet="0123456789.kKmMgGiIbB-", min_size=1, max_size=12),
)
COUNT_FLAGS = ["--tp", "--pp", "--beams", "--batch", "--block-size", "--quant-group-size"]
TOKEN_FLAGS = ["--seq-len", "--prompt-len", "--max-num-batched-tokens", "--encoder-len"]
SIZE_FLAGS = ["--max-kv-bytes", "--max-kv-bytes-per-gpu"]


@fuzz
@given(flags=st.lists(st.tuples(st.sampled_from(COUNT_FLAGS + TOKEN_FLAGS + SIZE_FLAGS), NUMBER_TEXT),
                      min_size=1, max_size=4))
def test_fuzz_estimate_sizes_and_counts(flags: list[tuple[str, str]]) -> None:
    args = ["estimate", "-m", MODEL, "-f", "json"]
    for flag, value in flags:
        args += [flag, value]
    run(args)


@fuzz
@given(dims=st.dictionaries(st.sampled_from(["--layers", "--heads", "--head-dim", "--batch"]),
                            st.integers(-5, 10**12).map(str), min_size=1),
       seq=st.sampled_from(["1k", "128k", "1M", "9" * 50]))
def test_fuzz_compare_dims(dims: dict[str, str], seq: str) -> None:
    args = ["compare", "-f", "json", "--seq-len", seq]
    for flag, value in dims.items():
        args += [flag, value]
    run(args)


@fuzz
@given(num_gpus=st.integers(-1, 10**8), tp=st.integers(1, 5000), batch=st.integers(1, 2**30))
def test_fuzz_capacity_counts(num_gpus: int, tp: int, batch: int) -> None:
    run(["capacity", "-m", MODEL, "--gpu", "H100", "--num-gpus", str(num_gpus), "--tp", str(tp),
         "--batch", str(batch), "-f", "json"])


# ---- plan files ---------------------------------------------------------------------------------------
PLAN_VALUE = JSON_LEAF | st.sampled_from(["4k", "32k", "vllm", "fp8", "auto", "40GiB", "../../x", "main", "\x1b[2J"])
PLAN_KEYS = ["batch", "seq_len", "kv_dtype", "engine", "tp", "pp", "beams", "block_size", "max_kv_bytes",
             "revision", "prompt_len", "offload", "no_window", "nope"]


@st.composite
def plan_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["structured", "structured", "raw", "anchors"]))
    if kind == "raw":
        return draw(st.text(max_size=300))
    scenarios = []
    for index in range(draw(st.integers(0, 3))):
        scenario = {"name": draw(st.sampled_from([f"s{index}", "dup", "\x1b]0;x\x07"])), "model": MODEL}
        scenario.update(draw(st.dictionaries(st.sampled_from(PLAN_KEYS), PLAN_VALUE, max_size=3)))
        scenarios.append(scenario)
    data: Any = {"scenarios": scenarios}
    if draw(st.booleans()):
        data["defaults"] = draw(st.dictionaries(st.sampled_from(PLAN_KEYS), PLAN_VALUE, max_size=2))
    if draw(st.booleans()):
        data = draw(JSON_VALUE)
    text = yaml.safe_dump(data, allow_unicode=True)
    if kind == "anchors":
        levels = draw(st.integers(1, 9))
        text = "x: &a0 [1,1,1,1,1,1,1,1,1]\n" + "".join(
            f"x{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]\n" for i in range(1, levels)) + text
    return text


@fuzz
@given(text=plan_text(), encoding=st.sampled_from(["utf-8", "utf-8", "latin-1", "utf-16"]))
def test_fuzz_plan_files(tmp_path: Path, text: str, encoding: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(text.encode(encoding, errors="replace"))
    run(["check", str(path), "-f", "json"])


# ---- reports for diff ---------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=[[], ["--full"]], ids=["compact", "full"])
def base_report(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("diff")
    plan = folder / "plan.yaml"
    plan.write_text(yaml.safe_dump({"scenarios": [{"name": "chat", "model": MODEL, "seq_len": 1024},
                                                  {"name": "rag", "model": MODEL, "seq_len": 4096,
                                                   "max_kv_bytes_per_gpu": "1GiB"}]}))
    result = CliRunner().invoke(app, ["check", str(plan), "-f", "json", *request.param])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, prefix + (index,))
    return found


@fuzz
@given(data=st.data(), suffix=st.sampled_from([".json", ".yaml"]),
       threshold=st.sampled_from([None, "0%", "10%", "1GiB"]))
def test_fuzz_diff_reports(tmp_path: Path, base_report: dict[str, Any], data: st.DataObject, suffix: str,
                           threshold: str | None) -> None:
    report = json.loads(json.dumps(base_report))
    paths = [p for p in _paths(report) if p]
    for _ in range(data.draw(st.integers(0, 3))):
        path = data.draw(st.sampled_from(paths))
        target = report
        try:
            for key in path[:-1]:
                target = target[key]
            if data.draw(st.booleans()) and isinstance(target, dict):
                target.pop(path[-1], None)
            else:
                target[path[-1]] = data.draw(JSON_VALUE | st.just(math.nan))
        except (KeyError, IndexError, TypeError):
            continue
    new = tmp_path / f"new{suffix}"
    text = json.dumps(report) if suffix == ".json" else yaml.safe_dump(report)
    new.write_text(text)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(base_report))
    args = ["diff", str(old), str(new), "-f", "json"] + (["--max-increase", threshold] if threshold else [])
    run(args)
