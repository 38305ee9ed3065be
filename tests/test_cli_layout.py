"""The CLI's house rules, read from the source with ast: one module per command, and commands import
kvplan.cli.options and the library (which of it: tests/test_imports.py), never each other, the app module or
(at module level) verify."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[1] / "kvplan" / "cli"
NOT_COMMANDS = {"__init__", "root", "options"}
COMMAND_MODULES = sorted(p.stem for p in CLI.glob("*.py") if p.stem not in NOT_COMMANDS)


def imported_modules(tree: ast.Module, package: str = "kvplan.cli") -> list[tuple[str, bool]]:
    """(dotted module, at module level?) for every import in ``tree``; ``from X import y`` counts as X.y too."""
    top = {id(node) for node in tree.body} | {
        id(child) for node in tree.body if isinstance(node, ast.If) for child in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        at_top = id(node) in top
        if isinstance(node, ast.Import):
            found += [(alias.name, at_top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((base, at_top))
            found += [(f"{base}.{alias.name}", at_top) for alias in node.names]
    return found


def forbidden_imports(source: str) -> list[str]:
    """What a command module may not import: any kvplan.cli module but options; kvplan.verify* at load."""
    bad = []
    for name, at_top in imported_modules(ast.parse(source)):
        if name == "kvplan.cli" or name.startswith("kvplan.cli."):
            if name != "kvplan.cli.options" and not name.startswith("kvplan.cli.options."):
                bad.append(name)
        elif at_top and (name == "kvplan.verify" or name.startswith(("kvplan.verify.", "kvplan.verify_"))):
            bad.append(name)
    return sorted(set(bad))


def test_every_command_module_is_registered_in_order() -> None:
    from kvplan.cli.root import COMMANDS

    assert sorted(COMMANDS) == COMMAND_MODULES
    assert COMMANDS[:2] == ("estimate", "models")


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_command_module_imports_only_options_and_the_core(name: str) -> None:
    assert forbidden_imports((CLI / f"{name}.py").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_command_module_holds_its_command_and_epilog(name: str) -> None:
    tree = ast.parse((CLI / f"{name}.py").read_text(encoding="utf-8"))
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    constants = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    assert name in functions and "EPILOG" in constants


@pytest.mark.parametrize(
    ("source", "bad"),
    [
        ("from kvplan.cli.options import FormatOpt\nfrom kvplan.api import estimate\n", []),
        ("from kvplan.cli.root import cli_errors\n", ["kvplan.cli.root", "kvplan.cli.root.cli_errors"]),
        ("from kvplan.cli import app\n", ["kvplan.cli", "kvplan.cli.app"]),
        ("from kvplan.cli.capacity import resolve_gpu\n", ["kvplan.cli.capacity", "kvplan.cli.capacity.resolve_gpu"]),
        ("from . import estimate\n", ["kvplan.cli", "kvplan.cli.estimate"]),
        ("def f():\n    import kvplan.cli.gpus\n", ["kvplan.cli.gpus"]),
        ("from kvplan.verify_predict import plan_verify\n", ["kvplan.verify_predict", "kvplan.verify_predict.plan_verify"]),
        ("def f():\n    from kvplan.verify_predict import plan_verify\n", []),
    ],
)
def test_the_scan_catches_what_it_should(source: str, bad: list[str]) -> None:
    assert forbidden_imports(source) == bad
