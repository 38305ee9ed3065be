"""The `kvplan check` report: one compact row per scenario by default, the whole rows with --full,
written scenario by scenario (the same text as the whole report at once), and the run's memo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan import checks
from kvplan.check_stream import run_check
from kvplan.checks import check_report
from kvplan.cli import app
from kvplan.plan import load_plan
from kvplan.report import to_json, to_yaml

from conftest import BF16, KV

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kvplan.yaml"

PLAN = """\
scenarios:
  - name: "tab\\tin a long name that needs double quotes and folds past one hundred columns of yaml text ok"
    model: meta-llama/Llama-3.1-8B
    seq_len: 8k
    max_kv_bytes: 1GiB
  - name: vllm-fit
    model: google/gemma-2-9b
    engine: vllm
    tp: 2
    batch: 8
    seq_len: 32k
    require_fit_on: {gpu: H100, num_gpus: 2}
    min_concurrency: 4
  - name: mla
    model: deepseek-ai/DeepSeek-V2-Lite
    seq_len: 128k
    max_kv_bytes_per_gpu: 1GiB
"""


@pytest.mark.parametrize("full", [False, True], ids=["compact", "full"])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_streamed_report_is_the_whole_report(tmp_path: Path, fmt: str, full: bool) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    plan = load_plan(path)
    whole = check_report(plan, full=full, generated_at="2026-01-01T00:00:00+00:00")
    run = run_check(plan, formats={fmt}, full=full, generated_at="2026-01-01T00:00:00+00:00")
    try:
        streamed = "".join(run.chunks(fmt))
    finally:
        run.close()
    assert streamed == (to_yaml(whole) if fmt == "yaml" else to_json(whole))
    full_rows = check_report(plan, full=True)["scenarios"]
    assert run.failures == [(row["name"], gate["message"]) for row in full_rows for gate in row["gates"]
                            if not gate["passed"]]
    # Llama 8k tokens need exactly 1 GiB (2 * 32 * 8 * 128 * 2 * 8192): passes; the 128k MLA one does not
    assert [row["passed"] for row in whole["scenarios"]] == [True, True, False]
    assert not run.passed and run.header["num_failed"] == 1


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_cli_stdout_and_output_file_are_the_whole_report(runner, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    result = runner.invoke(app, ["check", str(EXAMPLE), "--format", fmt, "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    whole = check_report(load_plan(EXAMPLE))
    expected = to_yaml(whole) if fmt == "yaml" else to_json(whole)
    assert result.stdout == expected
    assert out.read_text() == expected


def test_a_bad_scenario_leaves_no_report(runner, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN + "  - name: bad\n    model: meta-llama/Llama-3.1-8B\n    engine: nope\n")
    out = tmp_path / "report.yaml"
    result = runner.invoke(app, ["check", str(path), "--format", "yaml", "-o", str(out)])
    assert result.exit_code == 2
    assert result.stdout == "" and not out.exists()
    assert "scenario 'bad'" in result.stderr


def _set(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


@pytest.mark.parametrize("plan_path", [EXAMPLE, "PLAN"], ids=["example", "mixed"])
def test_compact_rows_hold_the_full_reports_numbers(runner, tmp_path: Path, plan_path: Any) -> None:
    if plan_path == "PLAN":
        plan_path = tmp_path / "plan.yaml"
        plan_path.write_text(PLAN)
    compact = json.loads(runner.invoke(app, ["check", str(plan_path), "-f", "json"]).stdout)
    full = json.loads(runner.invoke(app, ["check", str(plan_path), "-f", "json", "--full"]).stdout)
    assert {k: v for k, v in compact.items() if k != "scenarios"} == {k: v for k, v in full.items() if k != "scenarios"}
    assert [row["name"] for row in compact["scenarios"]] == [row["name"] for row in full["scenarios"]]
    for row, whole in zip(compact["scenarios"], full["scenarios"]):
        totals = whole["estimate"]["totals"]
        assert row["kv_cache_bytes"] == whole["kv_cache_bytes"] == totals["kv_cache_bytes"]
        assert row["kv_cache_bytes_per_gpu"] == whole["kv_cache_bytes_per_gpu"] == totals["kv_cache_bytes_per_gpu"]
        cap = whole["capacity"]["capacity"] if whole["capacity"] else {"fits": None, "max_concurrent_requests": None}
        assert (row["fits"], row["max_concurrent_requests"]) == (cap["fits"], cap["max_concurrent_requests"])
        assert (row["fits"] is None) is (whole["budgets"]["require_fit_on"] is None)
        assert row["gates"] == [{k: v for k, v in gate.items() if k != "message"} for gate in whole["gates"]]
        assert row["passed"] is whole["passed"]
        assert (row["inputs"], row["budgets"]) == (_set(whole["inputs"]), _set(whole["budgets"]))


def test_compact_report_is_small(runner) -> None:
    """At most 3 KB a scenario in the YAML a CI keeps (the --full rows hold two reports each)."""
    compact = runner.invoke(app, ["check", str(EXAMPLE), "-f", "yaml"]).stdout
    full = runner.invoke(app, ["check", str(EXAMPLE), "-f", "yaml", "--full"]).stdout
    scenarios = len(yaml.safe_load(compact)["scenarios"])
    assert len(compact.encode()) <= 3 * 1024 * scenarios
    assert len(compact.encode()) * 5 < len(full.encode())


def _count_library_calls(monkeypatch) -> dict[str, int]:
    calls: dict[str, int] = {"load_geometry": 0, "estimate": 0, "capacity": 0}
    for name in calls:
        real = getattr(checks, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(checks, name, counted)
    return calls


def test_the_run_loads_each_model_once_and_computes_each_input_once(tmp_path: Path, monkeypatch) -> None:
    calls = _count_library_calls(monkeypatch)
    fit = {"gpu": "H100", "num_gpus": 1}
    scenarios = [
        {"name": "a", "model": "meta-llama/Llama-3.1-8B", "seq_len": 4096, "require_fit_on": fit},
        {"name": "b", "model": "meta-llama/Llama-3.1-8B", "seq_len": 4096, "require_fit_on": fit,
         "max_kv_bytes": "1GiB"},  # the same inputs, another budget
        {"name": "c", "model": "meta-llama/Llama-3.1-8B", "seq_len": 8192},  # the same model, another length
        {"name": "d", "model": "meta-llama/Llama-3.1-8B", "seq_len": 4096, "require_fit_on": {"gpu": "H200"}},
    ]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"scenarios": scenarios}, sort_keys=False))
    report = check_report(load_plan(path))
    assert calls == {"load_geometry": 1, "estimate": 2, "capacity": 2}
    per_token = KV * 32 * 8 * 128 * BF16  # K+V, layers, kv heads, head dim, bf16
    assert [row["kv_cache_bytes"] for row in report["scenarios"]] == [per_token * 4096, per_token * 4096,
                                                                      per_token * 8192, per_token * 4096]
    assert [row["passed"] for row in report["scenarios"]] == [True, True, True, True]  # 512 MiB within 1 GiB


def test_the_runs_memo_keeps_the_latest_answers(tmp_path: Path, monkeypatch) -> None:
    calls = _count_library_calls(monkeypatch)
    monkeypatch.setattr(checks, "MEMO_SIZE", 1)
    scenarios = [{"name": name, "model": "meta-llama/Llama-3.1-8B", "seq_len": seq_len}
                 for name, seq_len in (("a", 4096), ("b", 4096), ("c", 8192), ("d", 4096))]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"scenarios": scenarios}, sort_keys=False))
    check_report(load_plan(path))
    assert calls["estimate"] == 3  # b is a's answer; d asks again, c's took the one place


def test_overrides_of_any_shape_are_remembered(tmp_path: Path) -> None:
    """``set`` values may be lists and mappings (a config's own shapes): the run's memo keys them too."""
    scenarios = [{"name": name, "model": "meta-llama/Llama-3.1-8B", "seq_len": 4096,
                  "set": {"architectures": ["LlamaForCausalLM"], "quantization_config": {"quant_method": "fp8"},
                          "num_key_value_heads": heads}} for name, heads in (("a", 8), ("b", 4), ("c", 8))]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"scenarios": scenarios}, sort_keys=False))
    rows = check_report(load_plan(path))["scenarios"]
    per_head = KV * 32 * 128 * BF16 * 4096  # K+V, layers, head dim, bf16, tokens
    assert [row["kv_cache_bytes"] for row in rows] == [per_head * 8, per_head * 4, per_head * 8]
