"""Property-based fuzzing of real configs with hostile values (issue 15): a real config from
model_configs/ (and ../shared/hf_configs when present) has one or more of its fields replaced by a wrong
type, a negative, a huge value, a bool, junk nesting, or is removed. Every case ends in exit 0, 1 or 2
with a few stderr lines, never 101; when it succeeds, every size and count printed is non-negative, and
every geometry field the report prints traces (its provenance) to a valid value of the mutated config or
to an architecture default said as such.

Fast by default; ``KVPLAN_FUZZ=long`` runs many more examples (a benchmark run).
"""

from __future__ import annotations

import functools
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

from kvplan.cli import app  # noqa: F401  (imports kvplan.cli.root)

from conftest import REPO_ROOT, SHARED_CONFIGS

_app_for = sys.modules["kvplan.cli.root"]._app_for

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


@functools.cache
def _read_paths(name: str) -> list[tuple[str, ...]]:
    """The config keys the unmutated config's estimate says it read (``config: KEY`` provenance)."""
    import tempfile

    from kvplan.api import estimate

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(json.dumps(CONFIGS[name]))
        try:
            report = estimate(str(path), seq_len=4096).to_dict()
        except Exception:  # a config kvplan refuses as it is: no keys to prefer
            return []
    return [tuple(e["source"].removeprefix("config: ").split(".")) for e in report["provenance"]
            if e["source"].startswith("config: ")]


def _plausible(current: Any) -> st.SearchStrategy[Any]:
    """Another value of the field's own type that could be valid: a different positive integer for a count,
    the other boolean, a scaled float (so the trace test sees fields read with their new values)."""
    if isinstance(current, bool):
        return st.just(not current)
    if isinstance(current, int) and current > 0:
        return st.integers(1, max(2, 2 * current)).filter(lambda v: v != current)
    if isinstance(current, float) and math.isfinite(current) and current > 0:
        return st.sampled_from([current / 2, current * 2])
    return HOSTILE


@st.composite
def mutated_config(draw: st.DrawFn, *, plausible: bool = False) -> tuple[str, dict[str, Any], list[tuple[tuple[str, ...], Any]]]:
    name = draw(st.sampled_from(sorted(CONFIGS)))
    config = json.loads(json.dumps(CONFIGS[name]))
    paths = _fields(config)
    read = _read_paths(name) if plausible else []
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        # NOTE: with plausible values, half the picks are keys the report reads (its provenance), so the trace
        # property sees a touched key read back, not only keys no parser looks at.
        path = draw(st.sampled_from(read) if read and draw(st.booleans()) else st.sampled_from(paths))
        node = config
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        hostile = HOSTILE | st.just(MISSING)
        value = draw(_plausible(node.get(path[-1])) | hostile if plausible else hostile)
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


def _at(config: Any, dotted: str) -> Any:
    """The value at a provenance key (``text_config.num_hidden_layers``), or MISSING; JSON null is missing."""
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return MISSING if node is None else node


def trace_problems(report: dict[str, Any], config: dict[str, Any], changes: list[tuple[tuple[str, ...], Any]]) -> list[str]:
    """Why the report's provenance does not trace to the (mutated) config: each ``config: KEY`` field must name
    a key present in the config with a valid value of the type it was read as, and print that value (a key the
    mutation touched prints the mutated value, not a stale or default one); each ``default of ARCH: KEY`` must
    name a key the config lacks; the model block prints what the provenance says."""
    problems: list[str] = []
    touched = {".".join(path): value for path, value in changes}
    for entry in report["provenance"]:
        field, printed, source = entry["field"], entry["value"], entry["source"]
        if source.startswith("config: "):
            key = source.removeprefix("config: ")
            value = _at(config, key)
            mutated = " (mutated)" if key in touched else ""
            if value is MISSING:
                problems.append(f"{field} from {key}{mutated}, which the config does not have")
            elif isinstance(printed, bool) or isinstance(value, bool):
                if printed != value:
                    problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}")
            elif isinstance(printed, int):
                # read as a number: the config holds that number (an integral float reads as its int); or the field
                # is derived from a structure (a list, an attention-type name) that must then be of that type
                if isinstance(value, (int, float)):
                    if value != printed or printed < 0:
                        problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}")
                elif not isinstance(value, (str, list)) or not value:
                    problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}, not a valid value")
            elif isinstance(printed, str):
                # a string, a float (printed as str) or a summary of a list ("18 sliding, 18 full")
                if isinstance(value, float):
                    if not math.isfinite(value) or str(value) != printed:
                        problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}")
                elif isinstance(value, int) or not isinstance(value, (str, list)) or not value:
                    problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}, not a valid value")
                elif isinstance(value, str) and value != printed and not isinstance(printed, str):
                    problems.append(f"{field} = {printed!r} from {key}{mutated} = {value!r}")
        elif source.startswith("default of "):
            key = source.split(": ", 1)[1]
            if _at(config, key) is not MISSING:
                problems.append(f"{field} from the architecture default of {key}, but the config has "
                                f"{key} = {_at(config, key)!r}" + (" (mutated)" if key in touched else ""))
        elif not source.startswith(("derived: ", "transformers ", "--set ")):
            problems.append(f"{field} from {source!r}: neither a config key nor a default said as such")
    said = {entry["field"]: entry["value"] for entry in report["provenance"]}
    for field, printed in (("num_hidden_layers", report["model"]["num_hidden_layers"]),
                           ("max_context_tokens", report["model"]["max_context_len"])):
        if field in said and said[field] != printed:
            problems.append(f"model block prints {field} = {printed!r}, the provenance {said[field]!r}")
    return problems


def test_trace_catches_a_stale_value_and_a_default_that_hides_a_key() -> None:
    """The checker fails on what it is meant to find (a property that cannot fail proves nothing)."""
    config = {"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048}
    report = {"model": {"num_hidden_layers": 32, "max_context_len": None}, "provenance": [
        {"field": "num_hidden_layers", "value": 32, "source": "config: num_hidden_layers"},
        {"field": "hidden_size", "value": 4096, "source": "default of llama: hidden_size"},
        {"field": "num_attention_heads", "value": 32, "source": "config: num_attention_heads"},
    ]}
    problems = trace_problems(report, config, [(("num_hidden_layers",), 16), (("num_attention_heads",), "<removed>")])
    assert problems == [
        "num_hidden_layers = 32 from num_hidden_layers (mutated) = 16",
        "hidden_size from the architecture default of hidden_size, but the config has hidden_size = 2048",
        "num_attention_heads from num_attention_heads (mutated), which the config does not have",
    ]
    config["num_hidden_layers"] = True
    assert trace_problems(report, config, [])[0] == "num_hidden_layers = 32 from num_hidden_layers = True"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_unmutated_configs_trace(name: str, tmp_path: Path) -> None:
    """Every real config's estimate traces, so a failure in the fuzz below is the mutation's."""
    from kvplan.api import estimate

    path = tmp_path / name  # CONFIGS[name], as the fuzz writes it (a shared config may share a bundled name)
    path.write_text(json.dumps(CONFIGS[name]))
    report = estimate(str(path), seq_len=4096).to_dict()
    assert trace_problems(report, CONFIGS[name], []) == []


@pytest.mark.skipif(not CONFIGS, reason="no configs")
@fuzz
@given(case=mutated_config(plausible=True))
def test_fuzz_printed_fields_trace_to_the_mutated_config(tmp_path_factory: pytest.TempPathFactory, case: Any) -> None:
    """Issue 15: for a mutated config that kvplan answers (exit 0/1), each printed geometry field traces to a
    config value the mutation did not make invalid, or to a default said as such."""
    name, config, changes = case
    path = Path(tmp_path_factory.mktemp("cfg")) / name
    path.write_text(json.dumps(config))
    result = run(["estimate", "-m", str(path), "-s", "4096", "--format", "json"], (name, changes))
    if result.exit_code in (0, 1):
        problems = trace_problems(json.loads(result.stdout), config, changes)
        assert not problems, (name, changes, problems)


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
