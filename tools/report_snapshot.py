"""Save or check the reports kvplan writes for every bundled model (and ../shared/hf_configs).

    python tools/report_snapshot.py save DIR     # before a refactor
    python tools/report_snapshot.py check DIR    # after: every report equal value for value, same exit code

Reports are compared as JSON values (``kvplan_version`` aside), so a change of layout is not a difference
and a change of any number is. ``schema_version`` is compared apart: a bump (a report's shape changed on
purpose) is said once, and the values are compared without it.

Runs in-process through typer's CliRunner: estimate and capacity (vllm and llama.cpp on an H200)
per model, and `check` over a plan of mixed scenarios.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["COLUMNS"] = "120"

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "hf_configs"


def _models() -> list[str]:
    from kvplan.sources import bundled_ids

    models = sorted(bundled_ids())
    if SHARED.is_dir():
        models += [os.path.relpath(p, ROOT) for p in sorted(SHARED.glob("*.json"))]
    return models


def _cases() -> list[tuple[str, list[str]]]:
    cases = []
    for m in _models():
        short = "shared__" + Path(m).stem if m.endswith(".json") else m.replace("/", "__")
        cases.append((f"estimate__{short}", ["estimate", "--model", m, "--seq-len", "8k", "--format", "json"]))
        cases.append((f"estimate_vllm_tp2__{short}",
                      ["estimate", "--model", m, "--seq-len", "32k", "--batch", "4", "--engine", "vllm", "--tp", "2",
                       "--format", "json"]))
        cases.append((f"capacity_vllm__{short}", ["capacity", "--model", m, "--gpu", "H200", "--format", "json"]))
        cases.append((f"capacity_llamacpp__{short}",
                      ["capacity", "--model", m, "--gpu", "H100", "--engine", "llama.cpp", "--max-model-len", "16k",
                       "--format", "json"]))
    # NOTE: --full: every scenario's whole estimate and capacity report (the default report is one compact row each)
    cases.append(("check__example", ["check", "examples/kvplan.yaml", "--format", "json", "--full"]))
    return cases


def _run(args: list[str]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout


def _value(out: str) -> object:
    """The report as a JSON value without the version stamp (the text itself when it is not JSON)."""
    try:
        report = json.loads(out)
    except ValueError:
        return out
    if isinstance(report, dict):
        report.pop("kvplan_version", None)
    return report


def _schema_versions(value: object) -> set[object]:
    """Every ``schema_version`` in a report (a check report's --full rows hold their own)."""
    if isinstance(value, dict):
        return set().union(*(_schema_versions(v) for k, v in value.items() if k != "schema_version"),
                           {value["schema_version"]} if "schema_version" in value else set())
    if isinstance(value, list):
        return set().union(*map(_schema_versions, value))
    return set()


def _unversioned(value: object) -> object:
    """``value`` without its ``schema_version`` keys."""
    if isinstance(value, dict):
        return {k: _unversioned(v) for k, v in value.items() if k != "schema_version"}
    if isinstance(value, list):
        return [_unversioned(v) for v in value]
    return value


def main() -> int:
    mode, folder = sys.argv[1], Path(sys.argv[2]).resolve()
    os.chdir(ROOT)
    folder.mkdir(parents=True, exist_ok=True)
    bad = 0
    bumps: set[tuple[object, object]] = set()
    for name, args in _cases():
        code, out = _run(args)
        record = {"exit": code, "report": _value(out)}
        path = folder / f"{name}.json"
        if mode == "save":
            path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
            continue
        saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        if saved is not None and _schema_versions(saved) != _schema_versions(record):
            bumps.add((tuple(sorted(map(str, _schema_versions(saved)))), tuple(sorted(map(str, _schema_versions(record))))))
        if saved is None or _unversioned(saved) != _unversioned(record):
            bad += 1
            print(f"DIFFERS: {name}")
    for before, after in sorted(bumps):
        print(f"note: schema_version {', '.join(before)} -> {', '.join(after)} (compared without it)")
    n = len(_cases())
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.json")))).hexdigest()[:12]
    print(f"{mode}: {n} reports, {bad} differ (snapshot {digest})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
