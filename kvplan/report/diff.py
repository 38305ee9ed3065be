"""`kvplan diff`: what changed per scenario between two reports (check or estimate), and a gate.

Pure: reports in (already loaded dicts), a diff report out. A `check` report contributes one
entry per scenario; an `estimate` report one entry named after its model id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from kvplan import __version__
from kvplan.errors import InputError
from kvplan.report import SCHEMA_VERSION
from kvplan.units import parse_size

DIFFABLE = ("check", "estimate")


@dataclass(frozen=True, kw_only=True, slots=True)
class Threshold:
    """``--max-increase``: a percentage of the old bytes (``10%``) or a size (``1GiB``)."""

    text: str
    percent: Fraction | None = None
    limit_bytes: int | None = None

    def exceeded(self, old_bytes: int | None, new_bytes: int | None) -> bool:
        """True when the growth is strictly past the threshold (exactly at it passes)."""
        if old_bytes is None or new_bytes is None:
            return False
        change = new_bytes - old_bytes
        if change <= 0:
            return False
        if self.percent is not None:
            return change * 100 > self.percent * old_bytes
        assert self.limit_bytes is not None
        return change > self.limit_bytes


def parse_threshold(text: str) -> Threshold:
    raw = text.strip()
    if raw.endswith("%"):
        try:
            percent = Fraction(raw[:-1].strip())
        except (ValueError, ZeroDivisionError):
            percent = Fraction(-1)
        if percent < 0:
            raise InputError(f"--max-increase {text!r} is not a percentage", "e.g. --max-increase 10% or 2.5%")
        return Threshold(text=raw, percent=percent)
    return Threshold(text=raw, limit_bytes=parse_size(raw, what="--max-increase"))


def load_report(path: Path) -> dict[str, Any]:
    """Read a YAML or JSON report written by `kvplan check` or `kvplan estimate`."""
    import yaml

    from kvplan import yamlio

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read report {path}: {exc.strerror or exc}", "check the path") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yamlio.load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: not a YAML/JSON report: {str(exc).splitlines()[0]}",
                         "pass files written by `kvplan check --output` or `kvplan estimate --format yaml`") from None
    command = data.get("command") if isinstance(data, dict) else None
    if command not in DIFFABLE:
        raise InputError(
            f"{path}: not a kvplan check or estimate report (command: {command!r})",
            "pass files written by `kvplan check --output FILE` or `kvplan estimate --format yaml`",
        )
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"{path}: report schema_version {data.get('schema_version')!r}, this kvplan reads {SCHEMA_VERSION}",
            "regenerate the report with this kvplan version",
        )
    return data


def _entries(report: dict[str, Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    """name -> (kv_cache_bytes, inputs and budgets)."""
    if report["command"] == "check":  # budgets count as inputs: a PR that raises one should show it
        return {s["name"]: (s["kv_cache_bytes"], {**s["inputs"], **s["budgets"]}) for s in report["scenarios"]}
    inputs = {k: v for k, v in report["inputs"].items() if not k.endswith("_source")}
    model_id = report["model"]["id"]
    return {model_id: (report["totals"]["kv_cache_bytes"], {"model": model_id, **inputs})}


def _per_gpu_entries(report: dict[str, Any]) -> dict[str, int]:
    """name -> KV bytes on the most loaded GPU, for the scenarios that hold a per-GPU budget."""
    if report["command"] != "check":
        return {}
    return {
        s["name"]: s["estimate"]["totals"]["kv_cache_bytes_per_gpu"] for s in report["scenarios"]
        if (s.get("budgets") or {}).get("max_kv_bytes_per_gpu") is not None
        or (s.get("budgets") or {}).get("require_fit_on") is not None
    }


def _changed_inputs(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(old) + [k for k in new if k not in old]
    return [{"field": k, "old": old.get(k), "new": new.get(k)} for k in keys if old.get(k) != new.get(k)]


def diff_report(
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    old_label: str,
    new_label: str,
    max_increase: Threshold | None = None,
) -> dict[str, Any]:
    old_entries, new_entries = _entries(old), _entries(new)
    old_gpu, new_gpu = _per_gpu_entries(old), _per_gpu_entries(new)
    names = list(old_entries) + [n for n in new_entries if n not in old_entries]
    rows = []
    for name in names:
        old_bytes, old_inputs = old_entries.get(name, (None, {}))
        new_bytes, new_inputs = new_entries.get(name, (None, {}))
        changed = _changed_inputs(old_inputs, new_inputs) if name in old_entries and name in new_entries else []
        if name not in new_entries:
            status = "removed"
        elif name not in old_entries:
            status = "added"
        else:
            status = "changed" if changed or old_bytes != new_bytes else "unchanged"
        both = old_bytes is not None and new_bytes is not None
        old_gpu_bytes, new_gpu_bytes = old_gpu.get(name), new_gpu.get(name)
        both_gpu = old_gpu_bytes is not None and new_gpu_bytes is not None
        over = max_increase is not None and (
            max_increase.exceeded(old_bytes, new_bytes) or max_increase.exceeded(old_gpu_bytes, new_gpu_bytes)
        )
        rows.append({
            "name": name,
            "status": status,
            "old_kv_cache_bytes": old_bytes,
            "new_kv_cache_bytes": new_bytes,
            "change_bytes": new_bytes - old_bytes if both else None,  # type: ignore[operator]
            "ratio": round(new_bytes / old_bytes, 6) if both and old_bytes else None,  # type: ignore[operator]
            "old_kv_cache_bytes_per_gpu": old_gpu_bytes,
            "new_kv_cache_bytes_per_gpu": new_gpu_bytes,
            "change_bytes_per_gpu": new_gpu_bytes - old_gpu_bytes if both_gpu else None,  # type: ignore[operator]
            "inputs_changed": changed,
            "over_threshold": over,
        })
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "diff",
        "old": old_label,
        "new": new_label,
        "max_increase": max_increase.text if max_increase else None,
        "passed": not any(row["over_threshold"] for row in rows),
        "scenarios": rows,
    }
