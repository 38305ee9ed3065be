"""`kvplan check` writes its report scenario by scenario: the same bytes as the whole report at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.check_stream import run_check
from kvplan.checks import check_report
from kvplan.cli import app
from kvplan.plan import load_plan
from kvplan.report import to_json, to_yaml

ROOT = Path(__file__).resolve().parents[1]

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


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_streamed_report_is_the_whole_report(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    plan = load_plan(path)
    whole = check_report(plan, generated_at="2026-01-01T00:00:00+00:00")
    run = run_check(plan, formats={fmt}, generated_at="2026-01-01T00:00:00+00:00")
    try:
        streamed = "".join(run.chunks(fmt))
    finally:
        run.close()
    assert streamed == (to_yaml(whole) if fmt == "yaml" else to_json(whole))
    assert run.failures == [(row["name"], gate["message"]) for row in whole["scenarios"] for gate in row["gates"]
                            if not gate["passed"]]
    # Llama 8k tokens need exactly 1 GiB (2 * 32 * 8 * 128 * 2 * 8192): passes; the 128k MLA one does not
    assert [row["passed"] for row in whole["scenarios"]] == [True, True, False]
    assert not run.passed and run.header["num_failed"] == 1


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_cli_stdout_and_output_file_are_the_whole_report(runner, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    result = runner.invoke(app, ["check", str(ROOT / "examples" / "kvplan.yaml"), "--format", fmt, "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    whole = check_report(load_plan(ROOT / "examples" / "kvplan.yaml"))
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
