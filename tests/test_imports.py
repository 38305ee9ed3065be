"""Startup hygiene and the house rules: estimate never imports torch or huggingface_hub for bundled or
local models; torch only under kvplan/verify/; one-way floors, no import cycles;
commands call the library, never the calculator."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, make_config

CHECK = (
    "import sys\n"
    "from kvplan.cli import main\n"
    "sys.argv = ['kvplan', 'estimate', '--model', {model!r}, '--seq-len', '4k', '--format', 'json']\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as exc:\n"
    "    assert exc.code in (0, None), exc.code\n"
    "bad = [m for m in ('torch', 'huggingface_hub', 'matplotlib') if m in sys.modules]\n"
    "assert not bad, bad\n"
)


@pytest.mark.parametrize("kind", ["bundled", "local"])
def test_estimate_imports_no_torch_or_hub(kind: str, tmp_path) -> None:
    model = "meta-llama/Llama-3.1-8B"
    if kind == "local":
        path = tmp_path / "config.json"
        path.write_text(json.dumps(make_config()))
        model = str(path)
    result = subprocess.run([sys.executable, "-c", CHECK.format(model=model)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] > 0


def test_public_api_imports_no_cli_stack() -> None:
    code = "import sys, kvplan; bad = [m for m in ('typer', 'rich', 'yaml', 'huggingface_hub', 'torch') if m in sys.modules]; assert not bad, bad"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_python_dash_m_help() -> None:
    result = subprocess.run([sys.executable, "-m", "kvplan", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "estimate" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "phrase"),
    [(["estimate", "--help"], 0, "--seq-len"), (["estmate"], 2, "estimate"), (["compare", "--help"], 0, "gqa")],
)
def test_console_entry_point(args: list[str], code: int, phrase: str) -> None:
    result = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True)
    assert result.returncode == code, result.stderr
    assert phrase in result.stdout + result.stderr


# ---- the house: where torch lives, module size, one-way floors, no cycles (read with ast) ------------

KVPLAN = REPO_ROOT / "kvplan"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(KVPLAN.rglob("*.py"))}


def layer_of(module: str) -> str:
    """The room a module lives in: ``kvplan.engines.vllm`` -> ``engines``, ``kvplan.calc`` -> ``calc``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kvplan"


def imported_modules(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Absolute names ``node`` imports; ``from pkg import sub`` names the submodule when there is one."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]):
    """Import statements that run when the module loads (``if TYPE_CHECKING:`` blocks excluded)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level(block)


def imports_of(module: str, *, module_level: bool) -> set[str]:
    """kvplan modules (and outside packages) ``module`` imports: at load time, or anywhere in it (inside
    functions and ``if TYPE_CHECKING:`` blocks too). A family module loaded by ``importlib`` is not an import."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    nodes = _module_level(tree.body) if module_level else (
        n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
    found: set[str] = set()
    for node in nodes:
        found.update(name for name in imported_modules(module, node) if name != module)
    return found


def _dynamic_import(node: ast.AST) -> list[str]:
    """``importlib.import_module("x")`` or ``__import__("x")``: the name, else nothing."""
    if not isinstance(node, ast.Call) or not node.args:
        return []
    func, first = node.func, node.args[0]
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return [first.value]
    return []


def test_torch_is_imported_only_under_kvplan_verify() -> None:
    offenders = []
    for module, path in MODULES.items():
        if layer_of(module) == "verify":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = imported_modules(module, node) if isinstance(node, (ast.Import, ast.ImportFrom)) else _dynamic_import(node)
            offenders += [f"{path.relative_to(REPO_ROOT)}:{node.lineno} imports {name}"  # type: ignore[attr-defined]
                          for name in names if name == "torch" or name.startswith("torch.")]
    assert not offenders, offenders
    # the pure side of verify (the plan and the report) loads without torch
    code = "import sys, kvplan.verify.predict, kvplan.verify.report; assert 'torch' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


#: What each low room may import from kvplan (anywhere in the module, lazy imports included).
FLOORS = {
    "version": {"version"},
    "errors": {"errors", "units", "dtypes"},
    "units": {"errors", "units", "dtypes"},
    "dtypes": {"errors", "units", "dtypes"},
    "specs": {"errors", "units", "dtypes", "specs", "geometry"},
    "geometry": {"errors", "units", "dtypes", "specs", "geometry"},
    "engines": {"errors", "units", "dtypes", "specs", "geometry", "adjust", "engines"},
}


@pytest.mark.parametrize("room", sorted(FLOORS))
def test_the_floors_import_only_what_is_below_them(room: str) -> None:
    members = [m for m in MODULES if layer_of(m) == room]
    assert members, f"no kvplan module in {room}"
    upward = sorted(f"{m} imports {name}" for m in members for name in imports_of(m, module_level=False)
                    if name in MODULES and layer_of(name) not in FLOORS[room])
    assert not upward, upward


def test_only_the_cli_imports_the_cli_and_nothing_loads_verify_at_import() -> None:
    cli_rooms = {"cli", "commands", "__main__"}
    bad = []
    for module in MODULES:
        for name in imports_of(module, module_level=True):
            if name not in MODULES:
                continue
            if layer_of(name) in cli_rooms and layer_of(module) not in cli_rooms:
                bad.append(f"{module} imports {name} at module level")
            if layer_of(name) == "verify" and layer_of(module) != "verify":
                bad.append(f"{module} imports {name} at module level (import it inside the function)")
    assert not bad, bad


def import_cycles() -> list[list[str]]:
    """The strongly connected groups of two or more kvplan modules, counting every import anywhere in a module."""
    graph = {m: sorted(n for n in imports_of(m, module_level=False) if n in MODULES) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in graph:
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycles_among_kvplan_modules() -> None:
    cycles = [" <-> ".join(group) for group in import_cycles()]
    assert not cycles, cycles


#: What a command (kvplan/cli/*) may import from kvplan: the public library (``kvplan``, ``kvplan.api``), the
#: report package (building and rendering reports), the floor (errors, units, version; textsafe and outfile for
#: what reaches a terminal or a file), its own package, and the libraries of the commands that are not estimate,
#: capacity or compare: the check runner, the bundled models' and the GPUs' catalogs, verify. Never the
#: calculator, the capacity search, specs, engines or models.
CLI_MAY_IMPORT = ("kvplan.api", "kvplan.report", "kvplan.cli",
                  "kvplan.errors", "kvplan.units", "kvplan.version", "kvplan.textsafe", "kvplan.outfile",
                  "kvplan.checks", "kvplan.check_stream", "kvplan.plan", "kvplan.catalog", "kvplan.gpus",
                  "kvplan.verify")


def test_no_module_shares_a_name_with_the_public_api() -> None:
    """``kvplan.capacity`` is the function: a submodule of the same name would replace it on the package once
    imported (the module would have to be made callable to hide that)."""
    import kvplan
    import kvplan.cli

    clashes = [name for name in kvplan.__all__ if f"kvplan.{name}" in MODULES]
    clashes += [name for name in kvplan.cli.__all__ if f"kvplan.cli.{name}" in MODULES]
    assert not clashes, clashes
    assert kvplan.capacity is kvplan.api.capacity and kvplan.compare is kvplan.api.compare


def _cli_may_import(name: str) -> bool:
    return name == "kvplan" or any(name == allowed or name.startswith(allowed + ".") for allowed in CLI_MAY_IMPORT)


def test_commands_reach_the_library_only_through_its_public_api() -> None:
    reached = sorted(f"{module} imports {name}" for module in MODULES if layer_of(module) == "cli"
                     for name in imports_of(module, module_level=False)
                     if name.split(".")[0] == "kvplan" and not _cli_may_import(name))
    assert not reached, reached
    # the scan sees what it should
    assert not _cli_may_import("kvplan.calc") and not _cli_may_import("kvplan.fit")
    assert not _cli_may_import("kvplan.models.llama") and not _cli_may_import("kvplan.engine_flags")
    assert _cli_may_import("kvplan") and _cli_may_import("kvplan.report.render")
