"""Shared fixtures and factories. No test touches the network: the Hub is offline by default."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Real Hugging Face configs beside the project (absent on a user's fresh clone: tests skip).
SHARED_CONFIGS = Path(os.environ.get("KVPLAN_SHARED", REPO_ROOT.parent / "shared")) / "hf_configs"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

# NOTE: K+V, bytes per element; used in expected values written as arithmetic.
KV = 2
FP16 = BF16 = 2
FP32 = 4
FP8 = 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/*.json")


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("hub-cache")))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("KVPLAN_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "120")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def shared_config_path(name: str) -> Path:
    """Path of a real Hub config in ../shared/hf_configs, or skip the test when it is absent."""
    path = SHARED_CONFIGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not present (shared/ is not beside this checkout)")
    return path


def shared_config(name: str) -> dict[str, Any]:
    return json.loads(shared_config_path(name).read_text())


def make_config(**overrides: Any) -> dict[str, Any]:
    """A small Llama-style config; the 32-layer, 32-head, head-dim-128 example model, fp16."""
    config: dict[str, Any] = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "hidden_size": 4096,
        "max_position_embeddings": 4096,
        "torch_dtype": "float16",
    }
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not ...}


@pytest.fixture
def write_config(tmp_path: Path):
    def _write(config: Any, name: str = "config.json") -> Path:
        path = tmp_path / name
        path.write_text(config if isinstance(config, str) else json.dumps(config))
        return path

    return _write
