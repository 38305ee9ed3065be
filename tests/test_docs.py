"""The README stays true: cog blocks are current, every bundled model and command is documented,
and the Python API example runs as written."""

from __future__ import annotations

import doctest
import re
import subprocess
import sys

import pytest

from kvplan.cli import app
from kvplan.sources import bundled_ids

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"


def test_cog_blocks_are_current() -> None:
    pytest.importorskip("cogapp")
    result = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "README.md"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, f"README is stale: run `cog -r README.md`\n{result.stdout}{result.stderr}"


def test_every_bundled_model_is_in_readme() -> None:
    text = README.read_text()
    missing = [hub_id for hub_id in bundled_ids() if f"`{hub_id}`" not in text]
    assert not missing


def test_every_command_has_help_and_is_documented() -> None:
    text = README.read_text()
    names = sorted(command.name or command.callback.__name__ for command in app.registered_commands)
    assert {"estimate", "models"} <= set(names)
    for name in names:
        command = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == name)
        assert (command.callback.__doc__ or "").strip(), f"{name} has no help"
        assert f"kvplan {name}" in text, f"`kvplan {name}` is not in the README"


def test_readme_starts_with_two_commands() -> None:
    commands = re.findall(r"```sh\n(.+?)\n```", README.read_text())
    assert commands[0].startswith("python3 -m venv") and "kvplan estimate" in commands[0]
    assert "pytest" in commands[1]
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "python -m pytest" in ci and "python -m pytest" in commands[1]


def test_readme_python_example_runs() -> None:
    block = re.search(r"```python\n(.+?)```", README.read_text(), re.S).group(1)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block, {}, "README", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0
