"""`kvplan verify` says what it will cost before a long CPU run, and shows progress through a pipe."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from kvplan.api import load_geometry
from kvplan.cli import app
from kvplan.verify import cost, decode
from kvplan.verify.predict import plan_verify

OPTIONS = dict(layout="dynamic", batch=1, beams=1, kv_dtype="auto", block_size=16, max_cache_len=None,
               quant_group_size=64, residual_length=128, tp=1)


def qwen_plan(layers: int, prompt: int, gen: int):
    geometry, _source = load_geometry("Qwen/Qwen3-0.6B")
    return plan_verify(geometry, num_layers=layers, prompt_len=prompt, gen_len=gen, **OPTIONS)


def test_the_cost_model_is_layer_steps_and_prefill_work() -> None:
    plan = qwen_plan(2, 4, 10)
    hidden = decode.hidden_size(plan)
    assert hidden == 1024  # 16 query heads x 128, capped at MAX_HIDDEN
    est = cost.estimate_cost(plan, hidden, layer_step_s=0.5, rate_per_s=1e9)
    params = hidden * 16 * 128 + hidden * 8 * (128 + 128) + 16 * 128 * hidden  # q, k and v, o
    attention = (1 + 2 + 3 + 4) * 16 * (128 + 128)  # prompt positions x tokens held, query heads x (K + V dims)
    assert est.multiply_adds == 2 * (params * 4 + attention)  # layers x (params x prompt tokens + attention)
    assert est.layer_steps == 2 * 10  # layers x decode steps (the prefill is the multiply-adds)
    assert est.seconds == pytest.approx(2 * 10 * 0.5 + est.multiply_adds / 1e9)


def test_the_layers_that_fit_a_minute_on_both_sides() -> None:
    def linear(layers: int) -> cost.VerifyCost:
        return cost.VerifyCost(seconds=layers * 7.0, layer_steps=layers, multiply_adds=0, layer_step_s=7.0,
                               rate_per_s=1.0)

    assert cost.largest_layers_within(linear, 28, 60.0) == 8  # 8 x 7 = 56 s fits, 9 x 7 = 63 s does not
    assert cost.largest_layers_within(linear, 5, 60.0) == 5
    assert cost.largest_layers_within(linear, 28, 6.0) == 1  # never fewer than one layer


def test_a_long_run_is_announced_with_a_layers_that_fits(monkeypatch) -> None:
    monkeypatch.setattr(cost, "measure_layer_step", lambda plan: 1.0)  # a slow CPU: 1 s a layer step
    plan = qwen_plan(28, 16, 20)

    def replan(layers: int, **given):
        return plan_verify(plan.geometry, num_layers=layers, **{**OPTIONS, "prompt_len": 16, "gen_len": 20, **given})

    line = cost.foretell(plan, replan)
    assert line is not None and line.startswith("verify: this CPU decode is expected to take about 9 min 2")  # 560 s
    assert "(560 layer steps x 1000 ms, measured now on one layer" in line  # 28 layers x 20 steps
    assert line.endswith("--layers 2 would take under a minute")  # 2 x 20 x 1 s = 40 s; 3 layers: 60 s, not under
    slow = qwen_plan(1, 16, 80)
    line = cost.foretell(slow, lambda layers, **given: plan_verify(slow.geometry, num_layers=layers, **{
        **OPTIONS, "prompt_len": 16, "gen_len": 80, **given}))
    assert line is not None and "even --layers 1 takes about 1 min 20 s" in line
    assert cost.foretell(qwen_plan(1, 16, 8), replan) is None  # a short run is not announced


def test_a_run_past_half_a_minute_is_announced(monkeypatch) -> None:
    # 5 layers x 10 steps = 50 layer steps: at 0.8 s each 40 s (announced: the estimate can be low 2-4x on a
    # shared machine), at 0.5 s each 25 s (not announced)
    plan = qwen_plan(5, 16, 10)

    def replan(layers: int, **given):
        return plan_verify(plan.geometry, num_layers=layers, **{**OPTIONS, "prompt_len": 16, "gen_len": 10, **given})

    monkeypatch.setattr(cost, "measure_layer_step", lambda plan: 0.8)
    line = cost.foretell(plan, replan)
    assert line is not None and "(50 layer steps x 800 ms" in line
    monkeypatch.setattr(cost, "measure_layer_step", lambda plan: 0.5)
    assert cost.foretell(plan, replan) is None


def test_progress_lines_through_a_pipe(capsys) -> None:
    plan = qwen_plan(1, 4, 20)
    now = [0.0]
    advance = decode._progress_lines(plan, every_s=5.0, clock=lambda: now[0])
    for _ in range(21):  # the prefill, then 20 decode steps, 1 s each
        now[0] += 1.0
        advance()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "verify: step 5/21 (dynamic, 1.00 steps/s, about 16 s left)",
        "verify: step 10/21 (dynamic, 1.00 steps/s, about 11 s left)",
        "verify: step 15/21 (dynamic, 1.00 steps/s, about 6 s left)",
        "verify: step 20/21 (dynamic, 1.00 steps/s, about 1 s left)",
    ]


def test_the_cli_announces_and_shows_progress_when_piped(runner, monkeypatch) -> None:
    monkeypatch.setattr(cost, "measure_layer_step", lambda plan: 1.0)
    monkeypatch.setattr(decode, "PROGRESS_EVERY_S", 0.0)
    result = runner.invoke(app, ["verify", "Qwen/Qwen3-0.6B", "--layers", "2", "--prompt-len", "8", "--gen-len", "40",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "verify: this CPU decode is expected to take about 1 min 20 s (80 layer steps x 1000 ms" in result.stderr
    assert "--layers 1 would take under a minute" in result.stderr
    assert "verify: step 1/41 (dynamic" in result.stderr
    assert json.loads(result.stdout)["verify"]["passed"] is True
