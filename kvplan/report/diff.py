"""`kvplan diff`: what changed per scenario between two reports (check or estimate), and a gate.

Pure: reports in (already loaded dicts), a diff report out. A `check` report contributes one
entry per scenario, from its compact rows or its ``--full`` rows alike (both carry the name, the
inputs and budgets, and the KV bytes in all and per GPU); an `estimate` report one entry named
after its model id.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from kvplan import __version__
from kvplan.errors import InputError
from kvplan.limits import MAX_REPORT_BYTES, MAX_REPORT_NODES
from kvplan.report import SCHEMA_VERSION
from kvplan.safeload import load_json, load_yaml, read_bounded_text
from kvplan.units import MAX_SIZE_BYTES, parse_size, shown_int

DIFFABLE = ("check", "estimate")
#: Report schema versions diff reads: 1 is the one before compact check rows (its check rows are the
#: ``--full`` rows of 2; its estimate reports are 2's), so a report kept from an older kvplan still diffs.
READABLE_SCHEMA_VERSIONS = (1, SCHEMA_VERSION)


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
    """Read a YAML or JSON report written by `kvplan check` or `kvplan estimate` (bounded, then its
    shape checked: every field the diff reads is present and of the right type)."""
    import yaml  # NOTE: ~20 ms to import; only diff reads YAML reports

    hint = "pass files written by `kvplan check --output` or `kvplan estimate --format yaml`"
    # NOTE: the report limits, which `kvplan check` never exceeds: diff reads whatever kvplan wrote.
    text = read_bounded_text(path, label=f"report {path}", what="report", max_bytes=MAX_REPORT_BYTES)
    try:
        data = load_json(text, label=str(path), hint=hint) if path.suffix.lower() == ".json" else load_yaml(
            text, label=str(path), max_nodes=MAX_REPORT_NODES)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not a YAML/JSON report: {str(exc).splitlines()[0]}", hint) from None
    command = data.get("command") if isinstance(data, dict) else None
    if command not in DIFFABLE:
        raise InputError(
            f"{path}: not a kvplan check or estimate report (command: {command!r})",
            "pass files written by `kvplan check --output FILE` or `kvplan estimate --format yaml`",
        )
    version = data.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        raise InputError(
            f"{path}: report schema_version {version!r}, this kvplan reads "
            f"{' and '.join(map(str, READABLE_SCHEMA_VERSIONS))}",
            "regenerate the report with this kvplan version",
        )
    _check_shape(data, str(path))
    return data


def _kv_bytes_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE_BYTES


def _check_shape(report: dict[str, Any], label: str) -> None:
    """Every field :func:`_entries` reads, present and typed; duplicate scenario names refused."""
    hint = "regenerate the report with `kvplan check --output` or `kvplan estimate --format yaml`"

    def need_mapping(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InputError(f"{label}: {where} must be a mapping, got {type(value).__name__}", hint)
        return value

    def need_bytes(value: Any, where: str) -> None:
        if not _kv_bytes_ok(value):
            got = shown_int(value) if isinstance(value, int) else repr(value)[:100]
            raise InputError(f"{label}: {where} must be a non-negative integer up to 2**64 (16 EiB), got {got}", hint)

    if report["command"] == "check":
        scenarios = report.get("scenarios")
        if not isinstance(scenarios, list):
            raise InputError(f"{label}: 'scenarios' must be a list, got {type(scenarios).__name__}", hint)
        seen: set[str] = set()
        for index, row in enumerate(scenarios):
            row = need_mapping(row, f"scenario #{index + 1}")
            name = row.get("name")
            if not isinstance(name, str):
                raise InputError(f"{label}: scenario #{index + 1} has no name (got {name!r})", hint)
            if name in seen:
                raise InputError(f"{label}: scenario name {name!r} appears twice; the diff cannot tell them apart",
                                 "give every scenario a unique name")
            seen.add(name)
            need_bytes(row.get("kv_cache_bytes"), f"scenario {name!r} kv_cache_bytes")
            need_mapping(row.get("inputs"), f"scenario {name!r} inputs")
            need_mapping(row.get("budgets"), f"scenario {name!r} budgets")
        return
    totals = need_mapping(report.get("totals"), "'totals'")
    need_bytes(totals.get("kv_cache_bytes"), "totals.kv_cache_bytes")
    need_mapping(report.get("inputs"), "'inputs'")
    model = need_mapping(report.get("model"), "'model'")
    if not isinstance(model.get("id"), str):
        raise InputError(f"{label}: model.id must be a string, got {model.get('id')!r}", hint)


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
    entries: dict[str, int] = {}
    for s in report["scenarios"]:
        budgets = s["budgets"]
        if budgets.get("max_kv_bytes_per_gpu") is None and budgets.get("require_fit_on") is None:
            continue
        value = s.get("kv_cache_bytes_per_gpu")
        if not _kv_bytes_ok(value):
            raise InputError(f"scenario {s['name']!r}: kv_cache_bytes_per_gpu must be a non-negative integer, got "
                             f"{value!r}", "regenerate the report with `kvplan check --output`")
        entries[s["name"]] = value
    return entries


def _names(entries: dict[str, Any]) -> str:
    names = [repr(name) for name in list(entries)[:3]]
    return ", ".join(names) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "") if names else "none"


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
    if max_increase is not None and not any(name in new_entries for name in old_entries):
        raise InputError(
            f"--max-increase {max_increase.text}: {old_label} and {new_label} share no scenario, so nothing "
            f"can be compared (old: {_names(old_entries)}; new: {_names(new_entries)})",
            "diff reports of the same plan, or of the same model for estimate reports",
        )
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
