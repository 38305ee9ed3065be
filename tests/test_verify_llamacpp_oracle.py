"""The llama.cpp oracle (tests/llamacpp_oracle.py): every GGUF architecture kvplan reads, in the real llama.cpp,
across -c, -np, -kvu, -ctk/-ctv, -fa, -ub and --swa-full, compared to the byte.

A model kvplan misses is listed in llamacpp_oracle.MISSES with its cause: its cases (but those it still matches,
its refusals) are strict xfails, so a fix shows up as a failure until the entry goes. docs/llamacpp-oracle.md is the table these runs make
(tools/llamacpp_oracle.py writes it; the last test checks it is current).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

from llamacpp_oracle import (
    CASES,
    CONFIG_MODELS,
    MISSES,
    MODELS,
    CaseOutcome,
    ConfigOutcome,
    TinyModel,
    config_table,
    refused_config_types,
    run_config,
    run_model,
    run_shared_configs,
    table,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "llamacpp-oracle.md"
_OUTCOMES: dict[str, dict[str, CaseOutcome]] = {}
_CONFIGS: dict[str, ConfigOutcome] = {}


@pytest.fixture(scope="session")
def oracle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llamacpp-oracle")


def outcomes(model: TinyModel, folder: Path) -> dict[str, CaseOutcome]:
    """Every case of ``model``, measured once per session (one llama.cpp process per model)."""
    if model.name not in _OUTCOMES:
        _OUTCOMES[model.name] = {o.case: o for o in run_model(model, folder)}
    return _OUTCOMES[model.name]


def _params() -> list[object]:
    params = []
    for model in MODELS:
        for label, _flags in CASES:
            marks = []
            if model.name in MISSES and label not in MISSES[model.name].matching:
                marks.append(pytest.mark.xfail(strict=True, reason=MISSES[model.name].cause))
            params.append(pytest.param(model, label, id=f"{model.name}|{label}", marks=marks))
    return params


@pytest.mark.parametrize(("model", "case"), _params())
def test_kvplan_equals_llama_cpp(model: TinyModel, case: str, oracle_dir: Path) -> None:
    outcome = outcomes(model, oracle_dir)[case]
    assert outcome.passed, outcome.reason


@pytest.mark.parametrize("model", CONFIG_MODELS)
def test_config_model_written_as_gguf_matches(model: str) -> None:
    """A config.json: kvplan writes the GGUF llama.cpp's converter would (architecture, cache geometry)."""
    _CONFIGS[model] = outcome = run_config(model)
    assert outcome.passed, outcome.reason


def test_shared_config_models_written_as_gguf_match() -> None:
    """The real Hub configs of ../shared (skipped where absent) of model_types no bundled model has."""
    found = run_shared_configs()
    if not found:
        pytest.skip("../shared/hf_configs is not beside this checkout")
    assert [o.model for o in found if not o.passed] == []


def test_refused_config_types_name_the_reason() -> None:
    """Bundled model_types kvplan does not write as a llama.cpp GGUF: each says why (the architecture llama.cpp
    reads it as, and the rule kvplan's GGUF reader does not model), and the docs page lists it."""
    page = DOCS.read_text(encoding="utf-8")
    refused = refused_config_types()
    assert {model_type for model_type, _models, _why in refused} == {"minimax_m1", "t5", "whisper"}
    for model_type, models, why in refused:
        assert "does not model" in why and f"| `{model_type}` | {', '.join(models)} |" in page


def test_misses_name_models_of_the_oracle() -> None:
    assert set(MISSES) <= {m.name for m in MODELS}


def test_docs_table_is_current(oracle_dir: Path) -> None:
    found = {model.name: list(outcomes(model, oracle_dir).values()) for model in MODELS}
    configs = [_CONFIGS[m] if m in _CONFIGS else run_config(m) for m in CONFIG_MODELS] + run_shared_configs()
    page = DOCS.read_text(encoding="utf-8")
    for row in [*table(found), *config_table(configs)]:
        assert row in page, f"{DOCS.name} is stale (python tools/llamacpp_oracle.py rewrites it): {row}"
