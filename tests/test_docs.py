"""The README and the docs stay true: generated parts are current, every command and bundled model is
documented, the examples run as written, and no page speaks private jargon."""

from __future__ import annotations

import doctest
import importlib.util
import re
import subprocess
import sys

import pytest
import typer.main
import yaml

from kvplan.cli import app
from kvplan.sources import bundled_ids

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if not p.name.startswith("_"))
COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def _python_blocks(text: str) -> list[str]:
    """The ```python blocks of a page, less the signatures the API reference shows."""
    blocks = re.findall(r"^```python\n(.+?)^```", text, re.S | re.M)
    return [b for b in blocks if not b.startswith(("def kvplan.", "class kvplan."))]


def test_generated_parts_are_current() -> None:
    """`python docs/generate.py --check`: every cog block's output is what the live CLI prints now."""
    for module in ("cogapp", "gguf", "numpy", "torch"):  # GGUF examples need gguf, verify's needs torch
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    result = subprocess.run([sys.executable, "docs/generate.py", "--check"], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, f"stale docs: run `python docs/generate.py`\n{result.stdout}{result.stderr}"


def test_every_command_has_help_and_a_reference_section() -> None:
    reference = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert {"estimate", "capacity", "compare", "check", "models"} <= set(COMMANDS)
    for name, command in COMMANDS.items():
        assert (command.help or "").strip(), f"kvplan {name} has no help"
        assert f"\n## kvplan {name}\n" in reference, f"`kvplan {name}` is not in docs/reference/cli.md"


def test_every_bundled_model_is_documented() -> None:
    text = (DOCS / "reference" / "models.md").read_text(encoding="utf-8")
    missing = [hub_id for hub_id in bundled_ids() if f"`{hub_id}`" not in text]
    assert not missing


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav: object) -> set[str]:
        if isinstance(nav, str):
            return {nav}
        if isinstance(nav, list):
            return set().union(*(pages(item) for item in nav))
        if isinstance(nav, dict):
            return set().union(*(pages(item) for item in nav.values()))
        return set()

    assert pages(config["nav"]) == {p.relative_to(DOCS).as_posix() for p in PAGES}


def test_readme_is_short_and_starts_with_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    commands = re.findall(r"```sh\n(.+?)\n```", text)
    assert commands[0].startswith("python3 -m venv") and "pip install ." in commands[0]
    assert "kvplan estimate --model meta-llama/" in commands[0]  # a bundled model: works offline
    assert commands[1] == "pip install '.[test]' && python -m pytest"
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\npython -m pytest\n" in ci  # the README's test command is what CI runs


def test_readme_python_example_runs() -> None:
    block = re.search(r"```python\n(.+?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    test = doctest.DocTestParser().get_doctest(block, {}, "README", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0


@pytest.mark.parametrize("page", [p for p in PAGES if _python_blocks(p.read_text(encoding="utf-8"))],
                         ids=lambda p: p.relative_to(DOCS).as_posix())
def test_docs_python_examples_run(page) -> None:
    for block in _python_blocks(page.read_text(encoding="utf-8")):
        exec(compile(block, str(page), "exec"), {})


# The names of notes users do not have, spelled so that this file does not match its own search.
JARGON = re.compile(r"seed[ -]articles?|\bF[A]CTS\b|engine_[l]ogs\.md", re.I)
#: `pip install kvplan` would fetch whatever holds that name on the package index: install from the checkout.
INDEX_INSTALL = re.compile(r"pip install ['\"]?kvplan(?!\s*@)(\[|['\"\s]|$)", re.M)


@pytest.mark.parametrize("path", [README, REPO_ROOT / "pyproject.toml", *PAGES,
                                  *sorted((REPO_ROOT / "kvplan").rglob("*.py")),
                                  *sorted((REPO_ROOT / "kvplan" / "data").glob("*.yaml"))],
                         ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_private_jargon(path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not JARGON.findall(text)
    # NOTE: help texts and hints too: every install line names the checkout
    assert not INDEX_INSTALL.findall(text), "install from the checkout: pip install '.[extra]'"
