"""The registry of model families: one module per model type, holding its cache layout and its weight count
(or saying why not), found through the static index tools/models_index.py writes, without import cycles."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys

import kvplan.models as models
from kvplan.models.family_index import FAMILY_INDEX
from kvplan.models.registry import MODULE_OF, REGISTRY, WEIGHT_REGISTRY, Registry, family_parsers

from conftest import REPO_ROOT

#: Every module of kvplan.models that lists parsers in PARSERS: the family modules.
FAMILY_MODULES = {
    info.name: module
    for info in sorted(pkgutil.iter_modules(models.__path__), key=lambda m: m.name)
    if hasattr(module := importlib.import_module(f"kvplan.models.{info.name}"), "PARSERS")
}


def claims() -> dict[str, list[str]]:
    """model_type -> the family modules whose parsers claim it (cache layout or weights)."""
    out: dict[str, list[str]] = {}
    for name, module in FAMILY_MODULES.items():
        for model_type in {t for parser in module.PARSERS for t in (*parser.model_types, *parser.weight_types)}:
            out.setdefault(model_type, []).append(name)
    return out


def test_the_index_names_the_module_of_every_claimed_type() -> None:
    assert MODULE_OF == {t: modules[0] for t, modules in claims().items()}, "run python tools/models_index.py"
    assert set(FAMILY_INDEX) == set(FAMILY_MODULES)
    result = subprocess.run([sys.executable, "tools/models_index.py", "--check"], cwd=REPO_ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


def test_each_model_type_lives_in_exactly_one_module() -> None:
    shared = {t: modules for t, modules in claims().items() if len(modules) > 1}
    assert not shared, f"model types claimed by more than one module: {shared}"
    for role in ("model_types", "weight_types"):
        seen: dict[str, str] = {}
        for parser in family_parsers():
            for model_type in getattr(parser, role):
                assert model_type not in seen, f"{model_type} in the {role} of {seen[model_type]} and {parser.__name__}"
                seen[model_type] = parser.__name__


def test_each_module_reads_the_cache_and_counts_the_weights_of_its_types_or_says_why_not() -> None:
    """A type's module defines its cache parser (``model_types``) and its weight counter (``weight_types``), or
    names the type, with the reason, in ``CACHE_NOT_READ`` (the generic rules read it) or
    ``WEIGHTS_NOT_COUNTED``; it never does both for one type."""
    for name, module in FAMILY_MODULES.items():
        cache = {t for parser in module.PARSERS for t in parser.model_types}
        weights = {t for parser in module.PARSERS for t in parser.weight_types}
        not_read = getattr(module, "CACHE_NOT_READ", {})
        not_counted = getattr(module, "WEIGHTS_NOT_COUNTED", {})
        assert all(isinstance(why, str) and why for why in (*not_read.values(), *not_counted.values())), name
        assert not cache & set(not_read), f"{name}: CACHE_NOT_READ names types it reads: {cache & set(not_read)}"
        assert not weights & set(not_counted), f"{name}: WEIGHTS_NOT_COUNTED names types it counts"
        assert set(not_read) <= weights, f"{name}: CACHE_NOT_READ names types it does not count either"
        assert set(not_counted) <= cache, f"{name}: WEIGHTS_NOT_COUNTED names types it does not read either"
        for model_type in cache | weights:
            assert model_type in cache or model_type in not_read, f"{name}: no cache rule for {model_type}, and no why"
            assert model_type in weights or model_type in not_counted, f"{name}: no weight count for {model_type}, and no why"


def test_registry_lookups_equal_the_full_registry() -> None:
    for role, registry in (("model_types", REGISTRY), ("weight_types", WEIGHT_REGISTRY)):
        full = {t: p for p in family_parsers() for t in getattr(p, role)}
        fresh = Registry(role)
        for model_type, parser in full.items():
            assert fresh.get(model_type) is parser
            assert model_type in fresh
        assert fresh.get("no-such-type") is None and "no-such-type" not in fresh
        assert dict(fresh) == full == dict(registry)
    # a type whose module counts its weights but reads no cache is not in the cache registry (and the reverse)
    assert "vit" not in REGISTRY and "vit" in WEIGHT_REGISTRY
    assert "gemma3" in REGISTRY and "gemma3" not in WEIGHT_REGISTRY
    assert models.PARSERS == tuple(p for p in family_parsers() if p.model_types)


def test_one_model_imports_one_family() -> None:
    code = ("import sys; from kvplan.api import load_geometry; load_geometry('meta-llama/Llama-3.1-8B'); "
            "import json; print(json.dumps([m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('kvplan.models.')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out)) & set(FAMILY_INDEX)
    assert loaded == {"llama"}, loaded


# ---- the imports of kvplan/models (read with ast) -----------------------------------------------------------
PACKAGE = REPO_ROOT / "kvplan" / "models"
MODULES = {("kvplan.models" if p.stem == "__init__" else f"kvplan.models.{p.stem}"): p for p in PACKAGE.glob("*.py")}


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that runs (``if TYPE_CHECKING:`` blocks left out), and whether it is at module top."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, top))
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            visit(child, inner)

    visit(tree, True)
    return found


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def test_no_import_cycle_in_kvplan_models_counting_imports_inside_functions() -> None:
    graph = {m: {n for node, _ in _imports(ast.parse(p.read_text())) for n in _names(node) if n in MODULES and n != m}
             for m, p in MODULES.items()}
    cycles: list[str] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, cycles


def test_kvplan_models_imports_kvplan_at_module_top() -> None:
    """Only heavy or optional dependencies wait for first use (huggingface_hub); the family modules load through
    importlib, by name."""
    late = [f"{m}:{node.lineno} imports {', '.join(_names(node))}" for m, p in MODULES.items()
            for node, top in _imports(ast.parse(p.read_text())) if not top and any(
                n.startswith("kvplan") for n in _names(node))]
    assert not late, late


def test_a_type_whose_weights_a_family_counts_is_not_called_unknown(tmp_path) -> None:
    """glm4v_text's weights are counted in glm.py; its cache is plain enough for the generic rules: the note says
    where each comes from, not that kvplan does not know the type. minicpm3 (weights and cache in deepseek.py)
    gets no such note."""
    import json

    import kvplan

    path = tmp_path / "config.json"
    config = {"model_type": "glm4v_text", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
              "num_key_value_heads": 4, "torch_dtype": "bfloat16"}
    path.write_text(json.dumps(config))
    notes = kvplan.estimate(str(path), seq_len="1k").to_dict()["notes"]
    assert "model_type 'glm4v_text': its cache is read with the generic alias rules, its weights by " \
           "kvplan/models/glm.py" in notes
    assert not any("is not one kvplan knows" in n for n in notes)
    path.write_text(json.dumps({**config, "model_type": "minicpm3"}))
    notes = kvplan.estimate(str(path), seq_len="1k").to_dict()["notes"]
    assert not any("generic alias rules" in n or "is not one kvplan knows" in n for n in notes)
