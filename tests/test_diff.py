"""`kvplan diff OLD NEW`: per-scenario change, the inputs that changed, and the --max-increase gate."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.cli import app
from kvplan.report.diff import parse_threshold

from conftest import BF16, KV

LLAMA = "meta-llama/Llama-3.1-8B"
LLAMA_PER_TOKEN = KV * 32 * 8 * 128 * BF16  # K+V * layers * kv_heads * head_size * bf16
SEQ = 4096


def check_report(runner, tmp_path: Path, name: str, scenarios: list[dict[str, Any]]) -> Path:
    plan = tmp_path / f"{name}-plan.yaml"
    plan.write_text(yaml.safe_dump({"scenarios": scenarios}, sort_keys=False))
    out = tmp_path / f"{name}.yaml"
    result = runner.invoke(app, ["check", str(plan), "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


def chat(batch: int, **extra: Any) -> dict[str, Any]:
    return {"name": "chat", "model": LLAMA, "batch": batch, "seq_len": SEQ, **extra}


@pytest.fixture
def before_after(runner, tmp_path):
    """chat: batch 4 -> 5 (+25%); rag: unchanged; old-only and new-only scenarios."""
    rag = {"name": "rag", "model": "Qwen/Qwen3-8B", "seq_len": "32k"}
    old = check_report(runner, tmp_path, "old", [chat(4), rag, {"name": "gone", "model": LLAMA, "seq_len": 1024}])
    new = check_report(runner, tmp_path, "new", [chat(5, max_kv_bytes="4GiB"), rag, {"name": "fresh", "model": LLAMA, "seq_len": 1024}])
    return old, new


def test_diff_reports_bytes_ratio_and_changed_inputs(runner, before_after):
    old, new = before_after
    result = runner.invoke(app, ["diff", str(old), str(new), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {row["name"]: row for row in report["scenarios"]}
    assert list(rows) == ["chat", "rag", "gone", "fresh"]
    chat_row = rows["chat"]
    assert chat_row["status"] == "changed"
    assert chat_row["old_kv_cache_bytes"] == LLAMA_PER_TOKEN * SEQ * 4
    assert chat_row["new_kv_cache_bytes"] == LLAMA_PER_TOKEN * SEQ * 5
    assert chat_row["change_bytes"] == LLAMA_PER_TOKEN * SEQ * 1
    assert chat_row["ratio"] == 5 / 4
    assert chat_row["inputs_changed"] == [
        {"field": "batch", "old": 4, "new": 5},
        {"field": "max_kv_bytes", "old": None, "new": 4 * 1024**3},  # budgets show too
    ]
    assert (rows["rag"]["status"], rows["rag"]["change_bytes"], rows["rag"]["inputs_changed"]) == ("unchanged", 0, [])
    assert (rows["gone"]["status"], rows["gone"]["new_kv_cache_bytes"], rows["gone"]["ratio"]) == ("removed", None, None)
    assert (rows["fresh"]["status"], rows["fresh"]["old_kv_cache_bytes"]) == ("added", None)
    assert report["passed"] is True and report["max_increase"] is None


def test_diff_table(runner, before_after):
    old, new = before_after
    result = runner.invoke(app, ["diff", str(old), str(new)])
    assert result.exit_code == 0, result.output
    assert "+512.00 MiB" in result.stdout  # 131072 B/token * 4096 tokens * 1 more sequence
    assert "1.250×" in result.stdout
    assert "chat: batch 4 → 5" in result.stdout
    assert "chat: max_kv_bytes unset → 4.00 GiB" in result.stdout  # sizes in human units in the table only
    assert "4294967296" not in result.stdout


def test_model_change_is_reported(runner, tmp_path, monkeypatch):
    # Llama-3.1-8B (8 KV heads) -> Llama-2-7b (32 KV heads, fp16): 4x the bytes per token.
    old = check_report(runner, tmp_path, "old", [chat(4)])
    new = check_report(runner, tmp_path, "new", [chat(4, model="meta-llama/Llama-2-7b-hf")])
    result = runner.invoke(app, ["diff", str(old), str(new), "-f", "json", "--max-increase", "300%"])
    assert result.exit_code == 0, result.output  # +300% exactly
    (row,) = json.loads(result.stdout)["scenarios"]
    assert row["new_kv_cache_bytes"] == KV * 32 * 32 * 128 * 2 * SEQ * 4  # K+V * layers * kv heads * dim * fp16
    assert (row["status"], row["ratio"]) == ("changed", 4.0)
    assert row["inputs_changed"] == [{"field": "model", "old": LLAMA, "new": "meta-llama/Llama-2-7b-hf"}]
    assert runner.invoke(app, ["diff", str(old), str(new), "--max-increase", "299.99%"]).exit_code == 1
    monkeypatch.setenv("COLUMNS", "200")
    table = runner.invoke(app, ["diff", str(old), str(new)])
    assert f"model {LLAMA} → meta-llama/Llama-2-7b-hf" in table.stdout


@pytest.mark.parametrize(("threshold", "code"), [
    ("25%", 0),                                   # +25% exactly: passes
    ("24.99%", 1),
    (str(LLAMA_PER_TOKEN * SEQ * 1), 0),          # the growth in bytes exactly
    (str(LLAMA_PER_TOKEN * SEQ * 1 - 1), 1),      # one byte under the growth
    ("512MiB", 0),
    ("1GiB", 0),
])
def test_max_increase_boundary(runner, before_after, threshold, code):
    old, new = before_after
    result = runner.invoke(app, ["diff", str(old), str(new), "--max-increase", threshold, "-f", "json"])
    assert result.exit_code == code, result.output
    report = json.loads(result.stdout)
    assert report["passed"] is (code == 0)
    assert report["max_increase"] == threshold
    over = [row["name"] for row in report["scenarios"] if row["over_threshold"]]
    assert over == ([] if code == 0 else ["chat"])
    if code:
        assert f"FAIL chat: KV cache grew by {LLAMA_PER_TOKEN * SEQ:,} bytes" in result.stderr


def test_shrinking_never_trips_the_gate(runner, before_after):
    old, new = before_after
    result = runner.invoke(app, ["diff", str(new), str(old), "--max-increase", "0%", "-f", "json"])
    assert result.exit_code == 0, result.output
    chat_row = json.loads(result.stdout)["scenarios"][0]
    assert chat_row["change_bytes"] == -LLAMA_PER_TOKEN * SEQ


def test_diff_of_estimate_reports(runner, tmp_path):
    paths = []
    for name, dtype in (("old.json", "bf16"), ("new.json", "fp8")):
        result = runner.invoke(app, ["estimate", "-m", LLAMA, "-s", str(SEQ), "--kv-dtype", dtype, "-o", str(tmp_path / name), "-f", "json"])
        assert result.exit_code == 0, result.output
        paths.append(str(tmp_path / name))
    result = runner.invoke(app, ["diff", *paths, "-f", "json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["scenarios"]
    assert row["name"] == LLAMA
    assert row["ratio"] == 0.5  # fp8 is half of bf16
    assert [c["field"] for c in row["inputs_changed"]] == ["kv_dtype"]


def test_compact_and_full_reports_diff_alike(runner, tmp_path, before_after):
    """A compact report (the default), a --full one and one of schema version 1 (whose check rows are the
    --full rows) of the same plan: nothing changed, whichever pair is diffed."""
    old, new = before_after
    plan = tmp_path / "new-plan.yaml"
    full = tmp_path / "new-full.yaml"
    assert runner.invoke(app, ["check", str(plan), "--full", "--output", str(full)]).exit_code == 0
    version_1 = tmp_path / "new-v1.json"
    version_1.write_text(json.dumps({**yaml.safe_load(full.read_text()), "schema_version": 1}))
    for pair in ((new, full), (full, new), (version_1, new)):
        report = json.loads(runner.invoke(app, ["diff", *map(str, pair), "-f", "json", "--max-increase", "0%"]).stdout)
        assert {row["status"] for row in report["scenarios"]} == {"unchanged"}, pair
        assert report["passed"] is True
    compact = json.loads(runner.invoke(app, ["diff", str(old), str(new), "-f", "json"]).stdout)
    mixed = json.loads(runner.invoke(app, ["diff", str(old), str(full), "-f", "json"]).stdout)
    assert mixed["scenarios"] == compact["scenarios"]


def test_identical_reports(runner, before_after):
    old, _ = before_after
    report = json.loads(runner.invoke(app, ["diff", str(old), str(old), "-f", "json"]).stdout)
    assert {row["status"] for row in report["scenarios"]} == {"unchanged"}


@pytest.mark.parametrize(("content", "message"), [
    ("command: models\nschema_version: 1\n", "not a kvplan check or estimate report (command: 'models')"),
    ("- a list\n", "not a kvplan check or estimate report"),
    ("command: check\nschema_version: 99\n", "report schema_version 99, this kvplan reads 1 and 2"),
    ("command: check\nschema_version: true\n", "report schema_version True"),
    ("a: [\n", "not a YAML/JSON report"),
])
def test_bad_report_is_exit_2(runner, tmp_path, before_after, content, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    result = runner.invoke(app, ["diff", str(before_after[0]), str(bad)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr


@pytest.mark.parametrize("threshold", ["ten percent", "-5%", "x%"])
def test_bad_threshold_is_exit_2(runner, before_after, threshold):
    result = runner.invoke(app, ["diff", *map(str, before_after), "--max-increase", threshold])
    assert result.exit_code == 2, result.output
    assert "--max-increase" in result.stderr


def test_threshold_parsing():
    assert parse_threshold("12.5%").percent == Fraction(25, 2)
    assert parse_threshold("1GiB").limit_bytes == 1024**3
    assert parse_threshold("10%").exceeded(1000, 1100) is False  # exactly +10%
    assert parse_threshold("10%").exceeded(1000, 1101) is True
    assert parse_threshold("10%").exceeded(0, 1) is True  # from nothing, any growth is past a percentage
