"""The code stays lint-clean (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(REPO_ROOT / ".venv" / "bin"))
    if ruff is None:
        try:
            import ruff as _ruff  # noqa: F401
        except ImportError:
            pytest.skip("ruff is not installed (pip install '.[test]')")
        ruff = None
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    result = subprocess.run([*cmd, "check", "kvplan", "tests", "benchmarks", "docs"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
