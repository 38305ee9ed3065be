"""Property-based fuzzing of real configs with hostile values (issue 15): a real config from
model_configs/ (and ../shared/hf_configs when present) has one or more of its fields replaced by a wrong
type, a negative, a huge value, a bool, junk nesting, or is removed. Every case ends in exit 0, 1 or 2
with a few stderr lines, never 101; when it succeeds, every size and count printed is non-negative.

Fast by default; ``KVPLAN_FUZZ=long`` runs many more examples (a benchmark run).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app  # noqa: F401  (imports kvplan.cli.app)

from conftest import REPO_ROOT, SHARED_CONFIGS

_app_for = sys.modules["kvplan.cli.app"]._app_for

_COMMON = {"deadline": None, "derandomize": False,
           "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}
LONG = os.environ.get("KVPLAN_FUZZ") == "long"
fuzz = settings(max_examples=1000 if LONG else 40, **_COMMON)

CONFIG_FILES = sorted((REPO_ROOT / "model_configs").glob("*.json")) + (
    sorted(SHARED_CONFIGS.glob("*.json")) if SHARED_CONFIGS.is_dir() else [])
CONFIGS = {path.name: json.loads(path.read_text()) for path in CONFIG_FILES}
#: Report keys that may be negative by design (a budget after weights; a change between two figures).
SIGNED = frozenset({"kv_bytes_available", "available_kv_bytes", "kv_bytes_per_gpu", "difference", "change",
                    "change_bytes"})
MAX_STDERR_LINES = 6

HOSTILE = (
    st.booleans() | st.integers(-(2**70), -1) | st.sampled_from([0, 10**30, 2**63, 2**24 + 1])
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([2.5, -1.0, 1e308, 0.5])
    | st.text(max_size=8) | st.sampled_from(["four", "auto", "0123", "true", "bfloat16"])
    | st.lists(st.integers(-3, 300) | st.booleans() | st.text(max_size=3), max_size=6)
    | st.dictionaries(st.text(max_size=6), st.integers() | st.none(), max_size=3) | st.just(None)
)
MISSING = object()


def _fields(config: dict[str, Any]) -> list[tuple[str, ...]]:
    """Paths of every field of a config (top level and one level down: text_config, quantization_config...)."""
    paths: list[tuple[str, ...]] = []
    for key, value in config.items():
        paths.append((key,))
        if isinstance(value, dict):
            paths += [(key, inner) for inner in value]
            for inner, leaf in value.items():
                if isinstance(leaf, dict):
                    paths += [(key, inner, k) for k in leaf]
    return paths


@st.composite
def mutated_config(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[tuple[tuple[str, ...], Any]]]:
    name = draw(st.sampled_from(sorted(CONFIGS)))
    config = json.loads(json.dumps(CONFIGS[name]))
    paths = _fields(config)
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        value = draw(HOSTILE | st.just(MISSING))
        node = config
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if value is MISSING:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        changes.append((path, "<removed>" if value is MISSING else value))
    return name, config, changes


def _numbers(value: Any, key: str = "") -> list[tuple[str, float]]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(key, value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(v, str(k))]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v, key)]
    return []


def run(args: list[str], changes: Any) -> Any:
    result = CliRunner().invoke(_app_for(args), args)
    assert result.exit_code in (0, 1, 2), (changes, result.exit_code, result.output[-2000:])
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, (changes, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line and not line.startswith("note: ")]
    assert len(lines) <= MAX_STDERR_LINES, (changes, result.stderr)
    if result.exit_code == 2:
        assert any(line.startswith("Error: ") for line in lines), (changes, result.stderr)
    else:
        report = json.loads(result.stdout)
        bad = [(k, v) for k, v in _numbers(report) if k not in SIGNED and (v < 0 or not math.isfinite(v))]
        assert not bad, (changes, bad[:5])
    return result


@pytest.mark.skipif(not CONFIGS, reason="no configs")
@fuzz
@given(case=mutated_config(), command=st.sampled_from(["estimate", "capacity"]))
def test_fuzz_mutated_real_configs(tmp_path_factory: pytest.TempPathFactory, case: Any, command: str) -> None:
    name, config, changes = case
    path = Path(tmp_path_factory.mktemp("cfg")) / name
    path.write_text(json.dumps(config))
    if command == "estimate":
        args = ["estimate", "-m", str(path), "-s", "4096", "--format", "json"]
    else:
        args = ["capacity", "-m", str(path), "--gpu", "H100-80GB", "--max-model-len", "4096", "--weights-from",
                "config", "--format", "json"]
    run(args, (name, changes))
