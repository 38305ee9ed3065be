"""What a CPU `kvplan verify` run will cost, said before it starts: a model of its cost, measured on this machine.

seconds = decode layer steps x (one layer step, measured) + prefill multiply-adds / (matmul rate, measured), where a
layer step is one decoded layer's forward pass for one new token, and the prefill's work is parameters x prompt
tokens for the projections plus each prompt position against the tokens its layer holds. Both rates are measured
just before the run: the layer step by decoding one layer of the same model for a few steps at the run's middle
context (so it carries the attention and cache copies of an average step), the matmul rate by a short probe.

NOTE: calibrated on kvplan's development machine (2 x86-64 cores shared with other jobs, torch 2.13 CPU), with
Qwen/Qwen3-0.6B: the per-layer-step term dominates there (python and thread start-up per small op, 0.1-0.2 s a
layer step under load); the estimate is a rate measured now, so a busy machine gives a longer one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kvplan.verify.predict import LayerPlan, VerifyPlan

#: The --layers advice keeps a run under this.
LONG_RUN_S = 60.0
#: A run expected to take longer than this is announced: half of LONG_RUN_S, as the estimate can be low by a
#: factor of 2-4 on a machine shared with other jobs (Qwen3-0.6B, 576 tokens: 40 s foretold, 2 min taken).
ANNOUNCE_S = 30.0
#: A first guess at one layer step before the probe (a quiet modern CPU); only decides whether to probe.
GUESS_LAYER_STEP_S = 2e-3


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyCost:
    seconds: float
    layer_steps: int
    multiply_adds: int
    layer_step_s: float
    """Seconds of one layer's forward pass at a short context, measured (or the guess)."""
    rate_per_s: float
    """Multiply-adds per second of the float32 matmul probe, measured on this machine."""


def _projection_params(layer: LayerPlan, hidden: int) -> int:
    hq, heads, dk, dv = layer.num_query_heads, layer.num_kv_heads, layer.head_size, layer.head_size_v
    if layer.kind == "mla":
        return hidden * hq * (dk + dv) + hidden * (dk + dv) + hq * dk * hidden
    return hidden * hq * dk + hidden * heads * (dk + dv) + hq * dv * hidden


def prefill_multiply_adds(plan: VerifyPlan, hidden: int) -> int:
    """Multiply-adds of the prefill: projections (parameters x prompt tokens) and attention (each prompt position
    against the tokens its layer holds), for every row."""
    rows, prompt = plan.rows, plan.prompt_tokens
    work = 0
    for layer in plan.layers:
        if layer.kind in ("no_cache", "state"):
            continue
        held = layer.window or layer.chunk or prompt
        width = layer.num_query_heads * (layer.head_size + layer.head_size_v)
        attention = sum(min(t, held) for t in range(1, prompt + 1))  # query t sees min(t, window) tokens
        work += rows * (_projection_params(layer, hidden) * prompt + attention * width)
    return work


def probe_context(plan: VerifyPlan) -> int:
    """The prompt of the one-layer probe: the decode's middle context, so a measured step costs what an average
    step of the run costs (its attention and cache copy grow with the tokens held)."""
    return max(1, min(plan.prompt_tokens + plan.gen_tokens // 2, 4096))


def probe_rate(hidden: int, *, seconds: float = 0.05) -> float:
    """Multiply-adds per second of a float32 [256, hidden] @ [hidden, hidden] matmul, timed for ``seconds``."""
    import torch

    a, b = torch.randn(256, hidden), torch.randn(hidden, hidden)
    done, begin = 0, time.perf_counter()
    while True:
        _ = a @ b
        done += 1
        elapsed = time.perf_counter() - begin
        if elapsed >= seconds:
            return done * 256 * hidden * hidden / elapsed


def _cached(plan: VerifyPlan) -> int:
    return sum(1 for layer in plan.layers if layer.kind not in ("no_cache", "state"))


def layer_steps(plan: VerifyPlan) -> int:
    """Forward passes of one layer: every cached layer once in the prefill and once per decode step."""
    return _cached(plan) * (1 + plan.gen_tokens)


def estimate_cost(plan: VerifyPlan, hidden: int, *, layer_step_s: float, rate_per_s: float) -> VerifyCost:
    """Seconds the CPU decode of ``plan`` is expected to take at the measured rates (see the module)."""
    work, steps = prefill_multiply_adds(plan, hidden), layer_steps(plan) - _cached(plan)
    return VerifyCost(seconds=steps * layer_step_s + work / rate_per_s, layer_steps=steps, multiply_adds=work,
                      layer_step_s=layer_step_s, rate_per_s=rate_per_s)


def largest_layers_within(estimate: Callable[[int], VerifyCost], num_layers: int, seconds: float) -> int:
    """The most layers (at least 1) whose estimate stays under ``seconds``: the cost grows with layers."""
    low, high = 1, num_layers
    while low < high:
        mid = (low + high + 1) // 2
        if estimate(mid).seconds < seconds:
            low = mid
        else:
            high = mid - 1
    return low


def measure_layer_step(plan_one_layer: VerifyPlan) -> float:
    """Seconds of one layer step, measured: the median decode step of ``plan_one_layer`` (one layer, a short
    prompt) run on the CPU by the decoder itself."""
    import torch

    # NOTE: lazy: kvplan.verify.decode imports torch; the forecast itself does not need it.
    from kvplan.verify.decode import decode_rank

    measured, _weights = decode_rank(plan_one_layer, torch.device("cpu"))
    return measured.step_seconds or GUESS_LAYER_STEP_S


def foretell(plan: VerifyPlan, replan: Callable[..., VerifyPlan]) -> str | None:
    """Before a CPU decode: None for a short one; for one expected past :data:`ANNOUNCE_S`, a line with the
    estimate, what it rests on, and the --layers that would take under :data:`LONG_RUN_S`. ``replan(n, prompt_len=, gen_len=)``
    plans the same decode over ``n`` layers (the probe decodes one layer for a few steps)."""
    # NOTE: lazy: kvplan.verify.decode imports torch; the forecast itself does not need it.
    from kvplan.verify.decode import hidden_size

    hidden = hidden_size(plan)
    if layer_steps(plan) < 50:
        return None
    step_s = measure_layer_step(replan(1, prompt_len=probe_context(plan), gen_len=12))
    rate = probe_rate(hidden)

    def cost(layers: int) -> VerifyCost:
        return estimate_cost(plan if layers == plan.num_layers else replan(layers), hidden, layer_step_s=step_s,
                             rate_per_s=rate)

    whole = cost(plan.num_layers)
    if whole.seconds < ANNOUNCE_S:
        return None
    fits = largest_layers_within(cost, plan.num_layers, LONG_RUN_S)
    shorter = cost(fits)
    advice = (f"--layers {fits} would take under a minute" if shorter.seconds < LONG_RUN_S else
              f"even --layers 1 takes about {format_seconds(shorter.seconds)}: a shorter --prompt-len or --gen-len "
              "is quicker")
    return (f"verify: this CPU decode is expected to take about {format_seconds(whole.seconds)} "
            f"({whole.layer_steps:,} layer steps x {whole.layer_step_s * 1000:.0f} ms, measured now on one layer, "
            f"+ a prefill of {whole.multiply_adds:.2e} multiply-adds at {whole.rate_per_s:.2e}/s); {advice}")


def format_seconds(seconds: float) -> str:
    """``42 s``, ``5 min 34 s``, ``2 h 5 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{max(whole, 1)} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
