"""The plots' layout, measured on the drawn figure (matplotlib's own bounding boxes, in pixels): the legend
lies outside the axes, so it covers no line and no label; the line-end labels do not touch each other; all of
it stays on the 1280 x 720 picture. Real numbers: each plot is drawn from the command's own result."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from typer.testing import CliRunner

import kvplan.report.plot as plot
from kvplan.cli import app
from kvplan.report.plot import _spread


def _drawn(monkeypatch, tmp_path, args: list[str]) -> dict[str, Any]:
    """What the command hands to write_plot (the series and options of the real result)."""
    drawn: dict[str, Any] = {}
    monkeypatch.setattr(plot, "write_plot", lambda path, xs, series, **kw: drawn.update(xs=xs, series=series, kw=kw))
    result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 0, result.output
    return drawn


def _boxes(drawn: dict[str, Any]) -> dict[str, Any]:
    figure = plot.draw_plot(drawn["xs"], drawn["series"], **drawn["kw"])
    FigureCanvasAgg(figure)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (axes,) = figure.axes
    (legend,) = figure.legends
    return {
        "figure": figure.bbox, "axes": axes.get_window_extent(renderer),
        "xlabel": axes.xaxis.label.get_window_extent(renderer),
        "legend": legend.get_window_extent(renderer),
        "labels": {text.get_text(): text.get_window_extent(renderer) for text in axes.texts},
    }


CASES = {
    # issue 22: the mqa and swa:4096 end labels touched (their lines end at the same 2 GiB)
    "compare-ends-together": ["compare", "mha", "gqa", "mqa", "swa:4096"],
    # the legend covered the GPU-memory line at the top left
    "compare-gpu-mem": ["compare", "-m", "meta-llama/Llama-3.1-8B", "mha", "gqa", "mqa", "swa:4096",
                        "--gpu-mem", "80GiB"],
    "compare-many": ["compare", "mha", "gqa", "gqa:16", "gqa:4", "mqa", "mla", "swa:4096", "swa:1024",
                     "hybrid:4096:5"],
    # the legend covered the requested-length line at the lower right
    "capacity": ["capacity", "-m", "Qwen/Qwen3-8B", "--gpu", "L40S", "--max-model-len", "32K", "--batch", "8"],
    "capacity-batch-1": ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--engine", "llama.cpp"],
}


@pytest.mark.parametrize("name", list(CASES))
def test_legend_covers_nothing_and_labels_do_not_touch(monkeypatch, tmp_path, name: str) -> None:
    drawn = _drawn(monkeypatch, tmp_path, CASES[name])
    boxes = _boxes(drawn)
    labels = boxes["labels"]
    assert set(labels) == set(drawn["series"])  # one end label per line
    legend = boxes["legend"]
    assert not legend.overlaps(boxes["axes"]), (legend, boxes["axes"])  # no line is under it
    assert not legend.overlaps(boxes["xlabel"])
    assert legend.y1 <= boxes["xlabel"].y0  # below the axes, under the x label
    for text, box in labels.items():
        assert not legend.overlaps(box), text
        assert boxes["figure"].x0 <= box.x0 and box.x1 <= boxes["figure"].x1, text  # on the picture
        assert boxes["figure"].y0 <= box.y0 and box.y1 <= boxes["figure"].y1, text
    for (a, box_a), (b, box_b) in combinations(labels.items(), 2):
        assert not box_a.overlaps(box_b), (a, box_a, b, box_b)
    assert legend.x0 >= boxes["figure"].x0 and legend.x1 <= boxes["figure"].x1 and legend.y0 >= boxes["figure"].y0


def test_labels_that_meet_are_spread_by_the_gap_and_kept_above_the_floor() -> None:
    assert _spread([5.0, 5.0, 5.0], gap=0.5) == [5.0, 4.5, 4.0]  # pushed down one gap each
    assert _spread([5.0, 1.0], gap=0.5) == [5.0, 1.0]  # far apart: where the lines end
    # the lowest would fall under the floor 4.2: the stack is pushed back up from there
    assert _spread([5.0, 4.9, 4.3], gap=0.5, low=4.2) == [5.2, 4.7, 4.2]


def test_compare_gpu_mem_with_weights_that_do_not_fit_draws_no_card_line(monkeypatch, tmp_path) -> None:
    """Llama-3.1-70B's bf16 weights (131.42 GiB) exceed an 80 GiB card: the card is not KV room, so no
    dashed line is drawn; the title says the weights do not fit."""
    drawn = _drawn(monkeypatch, tmp_path, ["compare", "-m", "meta-llama/Llama-3.1-70B", "mha", "gqa",
                                           "--gpu-mem", "80GiB"])
    kw = drawn["kw"]
    assert kw["gpu_mem_bytes"] is None and kw["room_bytes"] is None and kw["room_label"] is None
    assert kw["title"].endswith("\nweights 131.42 GiB per GPU exceed the 80.00 GiB GPU (--gpu-mem): no KV room")
    figure = plot.draw_plot(drawn["xs"], drawn["series"], **kw)
    (axes,) = figure.axes
    assert [line.get_linestyle() for line in axes.lines].count("--") == 0  # no horizontal budget line
    with_room = _drawn(monkeypatch, tmp_path, ["compare", "-m", "meta-llama/Llama-3.1-70B", "mha", "gqa",
                                               "--gpu-mem", "200GiB"])["kw"]
    assert with_room["room_bytes"] == 200 * 2**30 - 2 * 70_553_706_496  # the card less bf16 x the parameters
