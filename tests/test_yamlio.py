"""YAML through libyaml (C) and PyYAML (pure Python): the same bytes, and the bytes kvplan wrote before.

tests/reports/*.yaml are reports saved from the CLI (`pytest --update-golden` rewrites them); every
one must come out of the CLI, the C dumper and the pure-Python dumper byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kvplan import yamlio
from kvplan.cli import app

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
}

_VERSION = re.compile(r"^kvplan_version: .*$", re.MULTILINE)


def _unversioned(text: str) -> str:
    return _VERSION.sub("kvplan_version: X", text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_report_bytes(name: str, runner, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, [*CASES[name], "--format", "yaml"])
    assert result.exit_code in (0, 1), result.output
    path = REPORTS / f"{name}.yaml"
    if request.config.getoption("--update-golden"):
        path.write_text(_unversioned(result.stdout), encoding="utf-8")
    saved = path.read_text(encoding="utf-8")
    assert _unversioned(result.stdout) == saved
    data = yaml.safe_load(saved)
    assert yamlio.dump(data, pure=True) == saved
    assert yamlio.dump(data) == saved
    if hasattr(yaml, "CSafeDumper"):
        assert yaml.dump(data, Dumper=yaml.CSafeDumper, **yamlio.DUMP_OPTIONS) == saved


def test_loaders_agree_on_saved_reports() -> None:
    for path in sorted(REPORTS.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert yamlio.load(text) == yaml.load(text, Loader=yaml.SafeLoader)


@pytest.mark.parametrize("text", [
    "tab\tinside " + "x" * 120 + " and more words after the fold",
    "line\nbreak " + "y " * 70,
    "bom\ufeff and a long tail " + "z" * 110 + " end",
])
def test_strings_libyaml_folds_differently_go_through_pure_python(text: str) -> None:
    data = {"notes": [text], "nested": {"reason": text}}
    assert yamlio.dump(data) == yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def test_bad_plan_yaml_keeps_pure_python_error(tmp_path: Path) -> None:
    text = "scenarios:\n  - name: a\n    model: [unclosed\n"
    with pytest.raises(yaml.YAMLError) as pure:
        yaml.load(text, Loader=yaml.SafeLoader)
    with pytest.raises(yaml.YAMLError) as ours:
        yamlio.load(text)
    assert str(ours.value) == str(pure.value)


_WORDS = ["a", "bb", "note:", "x#y", "", "yes", "null", "1.5", "0x1f", "é", "long" * 12, "it's", 'q"q', "- x",
          "a: b", "#c", "~", "2020-01-01", "ü" * 30, "'", "Tab\tx", "new\nline", "-" * 50,
          "On", "NULL", "False", "(x)", "k:", "a #b", "x:y", "× 2", "a,b", "!t", "&a", "*a", "?", "@x", "%p", "ab ",
          "1 × 4,096 tokens", "2020-01-01 10:00:00", "12", "1e3 x", "--tp 2", "--- x", "-- x", "0x1f y", "1: 2", "3 #c"]


def test_block_writer_is_pyyaml_byte_for_byte() -> None:
    """kvplan's block writer (``yamlio._block_lines``, used by ``dump``) against PyYAML's pure-Python
    dumper on generated trees: long plain and single-quoted strings folded at every column, quotes,
    keys that need quoting. A tree it does not write (tabs, line breaks, long double-quoted strings,
    complex keys, shared objects) raises ``_Unsupported`` and ``dump`` hands it to PyYAML."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(["", " ", "  "])), max_size=40).map(
        lambda parts: "".join(w + s for w, s in parts))
    scalars = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
    trees = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                         st.dictionaries(text, kids, max_size=4)), max_leaves=30)

    written = []

    @settings(max_examples=150, deadline=None)
    @given(tree=st.one_of(st.lists(trees, min_size=1), st.dictionaries(text, trees, min_size=1)))
    def check(tree: object) -> None:
        try:
            fast = "".join(yamlio._block_lines(tree))
        except yamlio._Unsupported:
            return
        written.append(tree)
        assert fast == yamlio.dump(tree, pure=True)

    check()
    for word in _WORDS:  # each word alone, as a value and as a key (``_quick_text`` or PyYAML's emitter)
        for tree in ({"k": word}, {word: 1}, [word], {"k": word + " z" * 60}):
            try:
                fast = "".join(yamlio._block_lines(tree))
            except yamlio._Unsupported:
                continue
            assert fast == yamlio.dump(tree, pure=True), tree
    for size in (122, 123):  # PyYAML writes a key of 128 characters or more, its "!!str" tag counted, as "? key"
        tree = {"k" * size: 1}
        try:
            assert "".join(yamlio._block_lines(tree)) == yamlio.dump(tree, pure=True)
        except yamlio._Unsupported:
            assert size == 123
    assert len(written) > 10  # many generated trees are written by the block writer
    shared = {"a": 1}
    with pytest.raises(yamlio._Unsupported):
        yamlio._block_lines({"x": shared, "y": shared})  # PyYAML writes an anchor and an alias
    assert yamlio.dump({"x": shared, "y": shared}) == yamlio.dump({"x": shared, "y": shared}, pure=True)


def test_remembered_leaf_mappings_keep_types_and_indents_apart() -> None:
    """A mapping of str/int/None values is remembered per indent: the same items at another depth, or
    with a bool or float equal to an int (True == 1, 1.0 == 1), are written as PyYAML writes them."""
    leaf = {"batch": 1, "model": "m", "revision": None, "strict": False}
    trees = [{"a": leaf}, {"a": dict(leaf)}, {"x": {"a": dict(leaf)}}, {"a": {**leaf, "batch": True}},
             {"a": {**leaf, "batch": 1.0}}, [dict(leaf)], {"l": [dict(leaf)]}, {"a": dict(leaf)},
             {"a": {**leaf, "strict": 0}}, {"a": {**leaf, "batch": True}}, {"a": {**leaf, "batch": 1}}]
    for tree in trees:
        assert "".join(yamlio._block_lines(tree)) == yamlio.dump(tree, pure=True), tree
    import enum

    class Key(str, enum.Enum):
        BATCH = "batch"

    with pytest.raises(yamlio._Unsupported):  # a str-enum key equal to a remembered one is not taken for it
        yamlio._block_lines({"a": {Key.BATCH: 1, "model": "m", "revision": None, "strict": False}})
