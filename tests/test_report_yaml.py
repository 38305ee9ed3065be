"""Reports as YAML (``report.to_yaml``): PyYAML's C dumper writes them; the values are the JSON report's,
text comes back exact and control characters are escaped.

tests/reports/*.yaml are reports saved from the CLI (`pytest --update-golden` rewrites them); each is
compared by value, so a layout change of PyYAML's is not a failure and a changed number is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.cli import app
from kvplan.report import to_yaml

REPORTS = Path(__file__).parent / "reports"
ROOT = Path(__file__).resolve().parents[1]

#: name -> CLI arguments of a saved report.
CASES = {
    "estimate_llama8b": ["estimate", "-m", "meta-llama/Llama-3.1-8B", "-s", "8k", "-b", "4"],
    "estimate_gemma2_vllm_tp2": ["estimate", "-m", "google/gemma-2-9b", "-s", "32k", "--engine", "vllm", "--tp", "2"],
    "estimate_deepseek_v3_fp8_pp4": ["estimate", "-m", "deepseek-ai/DeepSeek-V3", "-s", "4k", "--kv-dtype", "fp8",
                                     "--engine", "vllm", "--pp", "4"],
    "capacity_qwen3next_vllm_h200": ["capacity", "-m", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H200", "--tp", "2"],
    "capacity_llama70b_llamacpp": ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--engine", "llama.cpp",
                                   "--max-model-len", "16384"],
    "check_example": ["check", "examples/kvplan.yaml"],
    "check_example_full": ["check", "examples/kvplan.yaml", "--full"],
}

_VERSION = re.compile(r"^kvplan_version: .*$", re.MULTILINE)


def _unversioned(text: str) -> str:
    return _VERSION.sub("kvplan_version: X", text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_report_values(name: str, runner, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, [*CASES[name], "--format", "yaml"])
    assert result.exit_code in (0, 1), result.output
    path = REPORTS / f"{name}.yaml"
    if request.config.getoption("--update-golden"):
        path.write_text(_unversioned(result.stdout), encoding="utf-8")
    assert yaml.safe_load(_unversioned(result.stdout)) == yaml.safe_load(path.read_text(encoding="utf-8"))
    as_json = runner.invoke(app, [*CASES[name], "--format", "json"])
    assert yaml.safe_load(result.stdout) == json.loads(as_json.stdout)  # YAML and JSON: one report


#: Strings that need quoting, escapes or folding: control characters (C0, C1, DEL), bidi overrides, line and
#: paragraph separators, a byte-order mark, tabs, YAML indicators, words read as bools or null, long text.
HOSTILE = ["\x1b]0;pwned\x07\x1b[2J", "a\x9b31m", "\x7f", "right\u202eto-left", "line\u2028sep\u2029par", "\ufeffbom",
           "tab\there", "new\nline", "yes", "null", "~", "- x", "a: b", "#c", "'q'", '"q"', "x" * 130,
           "word " * 40, "é ü × 😀", "", " lead", "trail ", "1e3", "0x1f", "2020-01-01"]


def test_values_come_back_exact() -> None:
    # NOTE: libyaml's dumper; PyYAML's pure-Python one (used only where libyaml is missing) writes a NEL
    # (U+0085) in a double-quoted string as a line break, which reads back as a space.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=120))
    scalars = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
    trees = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                         st.dictionaries(text, kids, max_size=4)), max_leaves=30)

    @settings(max_examples=300, deadline=None)
    @given(tree=st.dictionaries(text, trees, min_size=1))
    def check(tree: dict[str, Any]) -> None:
        assert yaml.safe_load(to_yaml(tree)) == tree

    check()


def test_control_characters_are_escaped() -> None:
    value = "acme/\x1b]0;pwned\x07\x1b[2J\x9b31m\x00\x7f"
    text = to_yaml({"model": {"id": value}, "notes": [value]})
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), text  # escaped: \e, \a, \x9B ...
    assert yaml.safe_load(text) == {"model": {"id": value}, "notes": [value]}


def test_layout_is_block_style_in_report_order() -> None:
    report = {"schema_version": 1, "command": "estimate", "inputs": {"batch": 4, "overrides": {}},
              "layers": [{"kind": "full_attention", "count": 32}], "notes": []}
    assert to_yaml(report) == (
        "schema_version: 1\ncommand: estimate\ninputs:\n  batch: 4\n  overrides: {}\n"
        "layers:\n- kind: full_attention\n  count: 32\nnotes: []\n"
    )
