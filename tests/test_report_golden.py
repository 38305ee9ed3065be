"""Golden reports: the whole JSON report for a few real scenarios, reviewed as diffs.

`pytest --update-golden` rewrites tests/golden/*.json; review the diff before committing.
"""

from __future__ import annotations

import json

import pytest

from kvplan.cli import app

from conftest import GOLDEN_DIR

SCENARIOS = {
    "meta-llama__Llama-3.1-8B__8k": ["-m", "meta-llama/Llama-3.1-8B", "-s", "8k"],
    "google__gemma-3-27b-it__128k_b2": ["-m", "google/gemma-3-27b-it", "-s", "128k", "-b", "2"],
    "deepseek-ai__DeepSeek-V3__4k_fp8": ["-m", "deepseek-ai/DeepSeek-V3", "-s", "4k", "--kv-dtype", "fp8"],
    "nvidia__Nemotron-H-56B-Base-8K__default": ["-m", "nvidia/Nemotron-H-56B-Base-8K"],
    "openai__whisper-large-v3__default": ["-m", "openai/whisper-large-v3"],
    "openai__gpt-oss-20b__32k_bf16": ["-m", "openai/gpt-oss-20b", "-s", "32k", "--kv-dtype", "bf16"],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden(name: str, runner, request: pytest.FixtureRequest) -> None:
    result = runner.invoke(app, ["estimate", *SCENARIOS[name], "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    report.pop("kvplan_version")
    path = GOLDEN_DIR / f"{name}.json"
    if request.config.getoption("--update-golden") or not path.exists():
        path.write_text(json.dumps(report, indent=2) + "\n")
    assert report == json.loads(path.read_text())
