"""The static model_type -> family module index of ``kvplan.models`` (start-up imports only the family it
needs) names exactly what every family module's ``PARSERS`` claim."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import kvplan.models as models


def _claims(attribute: str) -> dict[str, str]:
    """model_type -> the family module whose PARSERS claim it, from every module."""
    out: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(models.__path__), key=lambda m: m.name):
        if info.name in models.GENERIC_MODULES:
            continue
        for parser in importlib.import_module(f"kvplan.models.{info.name}").PARSERS:
            for model_type in getattr(parser, attribute):
                assert model_type not in out, f"{model_type} claimed by {out[model_type]} and {info.name}"
                out[model_type] = info.name
    return out


def _index(index: dict[str, str]) -> dict[str, str]:
    return {t: module for module, types in index.items() for t in types.split()}


def test_cache_index_is_complete_and_in_step() -> None:
    assert _index(models._CACHE_INDEX) == _claims("model_types"), "run python tools/models_index.py"


def test_weight_index_is_complete_and_in_step() -> None:
    assert _index(models._WEIGHT_INDEX) == _claims("weight_types"), "run python tools/models_index.py"


def test_registry_lookups_equal_the_full_registry() -> None:
    full = models._registry(models._family_parsers(), "model_types")
    fresh = models._LazyRegistry(models._CACHE_INDEX, "model_types")
    for model_type, parser in full.items():
        assert fresh.get(model_type) is parser
        assert model_type in fresh
    assert fresh.get("no-such-type") is None and "no-such-type" not in fresh
    assert dict(fresh) == full
    assert models.PARSERS == tuple(p for p in models._family_parsers() if p.model_types)


def test_one_model_imports_one_family() -> None:
    code = ("import sys; from kvplan.api import load_geometry; load_geometry('meta-llama/Llama-3.1-8B'); "
            "import json; print(json.dumps([m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('kvplan.models.')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out)) - models.GENERIC_MODULES
    assert loaded == {"llama"}, loaded
