"""Startup hygiene: estimate never imports torch or huggingface_hub for bundled or local models."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import make_config

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
