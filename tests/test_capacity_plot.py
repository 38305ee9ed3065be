"""`kvplan capacity --plot` (issue 13): the KV cache per GPU against context, under the KV budget left after
weights, the requested length marked, the x range to the model's maximum, legible in a README."""

from __future__ import annotations

import struct
import sys

import pytest

import kvplan
from kvplan.cli import app
from kvplan.fit import kv_per_gpu_curve
from kvplan.report.plot import context_axis

GiB = 1024**3


@pytest.mark.parametrize(("model", "engine", "gpu", "batch"), [
    ("meta-llama/Llama-3.1-8B", "llama.cpp", "RTX4090", 2),  # cells padded to 256
    ("google/gemma-3-27b-it", "vllm", "H100", 4),  # block pool, hybrid allocator (sliding + full)
    ("meta-llama/Llama-3.1-8B", "sglang", "L40S", 3),
])
def test_the_curve_crosses_the_budget_at_the_max_context(model: str, engine: str, gpu: str, batch: int) -> None:
    """What the plot draws agrees with the report: `batch` requests of max_context_len fit under the KV budget
    per GPU, one more token does not (unless the model's maximum stopped the search)."""
    result = kvplan.capacity(model, engine=engine, gpu=gpu, batch=batch, max_model_len=8192)
    cap = result.capacity
    longest, budget = cap.max_context_len, cap.budget.kv_bytes_per_gpu
    at, after = kv_per_gpu_curve(cap, [longest, longest + 1], batch=batch)
    assert at <= budget
    if cap.max_context_limit == "memory":
        assert after > budget


def test_context_axis_spans_the_model_and_holds_the_requested_length() -> None:
    xs = context_axis(32768, 131072)
    assert (xs[0], xs[-1]) == (512, 131072) and 32768 in xs and xs == sorted(set(xs))
    assert context_axis(200_000, 131072)[-1] == 200_000  # a longer request than the model's maximum is drawn
    assert context_axis(100, 4096)[0] == 100


def test_capacity_plot_is_a_1280_px_png(runner, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "capacity.png"
    result = runner.invoke(app, ["capacity", "-m", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "RTX4090",
                                 "--max-model-len", "32768", "--batch", "2", "--plot", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    width, height = struct.unpack(">II", data[16:24])  # the PNG IHDR chunk
    assert (width, height) == (1280, 720)
    assert f"wrote {path}" in result.stderr


def test_capacity_plot_draws_what_the_report_says(monkeypatch, tmp_path) -> None:
    """The lines (batch first, as they end top to bottom), the budget line with the max context, the mark."""
    from typer.testing import CliRunner

    import kvplan.report.plot as plot

    drawn: dict[str, object] = {}
    monkeypatch.setattr(plot, "write_plot", lambda path, xs, series, **kw: drawn.update(xs=xs, series=series, **kw))
    result = CliRunner().invoke(app, ["capacity", "-m", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "RTX4090",
                                      "--max-model-len", "32768", "--batch", "2", "--plot", str(tmp_path / "c.png"),
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    report = json.loads(result.stdout)
    assert drawn["xs"][-1] == 131072 and drawn["mark_tokens"] == 32768  # type: ignore[index]
    assert list(drawn["series"]) == ["KV of 2 requests", "KV of 1 request"]  # type: ignore[arg-type]
    at_32k = drawn["series"]["KV of 2 requests"][drawn["xs"].index(32768)]  # type: ignore[index,union-attr]
    assert at_32k == report["capacity"]["kv_bytes_needed"] == 2 * 32768 * 32 * 2 * 8 * 128 * 2  # B x T x layers x K+V x kv heads x head dim x f16
    assert drawn["room_bytes"] == report["budget"]["kv_bytes_per_gpu"]
    assert f"max context at batch 2: {report['capacity']['max_context_len']:,}" in drawn["room_label"]  # type: ignore[operator]


@pytest.mark.parametrize(("args", "message"), [
    (["--plot", "cap.pdf"], "must end in .png or .svg"),
])
def test_capacity_plot_bad_path_is_exit_2(args: list[str], message: str, runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", "llama-3.1-8b", "--gpu", "H100", *args])
    assert result.exit_code == 2 and message in result.output


def test_capacity_plot_without_matplotlib_says_how_to_install(runner, tmp_path, monkeypatch) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.ticker"):
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib.figure` now raises ImportError
    path = tmp_path / "cap.png"
    result = runner.invoke(app, ["capacity", "-m", "llama-3.1-8b", "--gpu", "H100", "--plot", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == ["Error: --plot needs matplotlib, which is not installed",
                                          "Hint: pip install '.[plot]' in the kvplan checkout (or: pip install matplotlib)"]
    assert not path.exists() and result.stdout == ""


def test_no_room_is_said_in_the_title(monkeypatch, tmp_path) -> None:
    from typer.testing import CliRunner

    import kvplan.report.plot as plot

    drawn: dict[str, object] = {}
    monkeypatch.setattr(plot, "write_plot", lambda path, xs, series, **kw: drawn.update(**kw))
    result = CliRunner().invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                                      "--plot", str(tmp_path / "c.png")])
    assert result.exit_code == 0, result.output
    assert drawn["room_bytes"] is None and "no KV room" in drawn["title"]  # type: ignore[operator]
