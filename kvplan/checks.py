"""Budget gates and `kvplan check`: run every scenario of a plan, compare with its budgets.

Pure apart from loading model configs: no printing, no exiting. The CLI turns ``passed`` into
exit 0/1 and errors into exit 2. Each scenario runs through the same functions as the commands
whose flags its keys mirror: :func:`estimate_for` as `kvplan estimate` (``api.load_geometry``,
``adjust.deployment_from_flags``, ``calc.estimate``, ``report.estimate_report``) and, for
``require_fit_on`` / ``min_concurrency``, :func:`capacity_for` as `kvplan capacity`
(``weights.resolve_weights``, ``capacity.plan_capacity``, ``capacity.capacity_report``), with each
command's own defaults (estimate: engine ideal; capacity: engine vllm) unless the scenario sets them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvplan import __version__
from kvplan.errors import InputError, KvplanError
from kvplan.plan import Plan, Scenario
from kvplan.report import SCHEMA_VERSION
from kvplan.units import format_bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """One budget compared with one computed value."""

    name: str
    """The budget key (``max_kv_bytes``) or flag (``--max-kv-bytes``)."""
    limit: Any
    actual: Any
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit, "actual": self.actual, "passed": self.passed,
                "message": self.message}


def bytes_gate(name: str, *, actual_bytes: int, limit_bytes: int, what: str = "KV cache") -> Gate:
    """Passes when ``actual_bytes <= limit_bytes`` (exactly at the budget passes)."""
    passed = actual_bytes <= limit_bytes
    needed = f"{what} needs {format_bytes(actual_bytes)} ({actual_bytes:,} bytes)"
    budget = f"{name} budget {format_bytes(limit_bytes)} ({limit_bytes:,} bytes)"
    if passed:
        message = f"{needed}, within the {budget}"
    else:
        over = actual_bytes - limit_bytes
        message = f"{needed}, over the {budget} by {format_bytes(over)} ({over:,} bytes)"
    return Gate(name=name, limit=limit_bytes, actual=actual_bytes, passed=passed, message=message)


def kv_bytes_per_gpu(estimate: dict[str, Any]) -> int:
    """KV bytes on the busiest GPU; the whole cache when the report has no per-GPU split (one GPU)."""
    totals = estimate["totals"]
    per_gpu = totals.get("kv_cache_bytes_per_gpu")
    return int(per_gpu) if per_gpu is not None else int(totals["kv_cache_bytes"])


#: Scenario keys passed to ``adjust.deployment_from_flags`` (the `kvplan estimate` deployment flags).
DEPLOYMENT_KEYS = (
    "engine", "tp", "pp", "block_size", "beams", "prompt_len", "share_prefix", "shared_prefix_tokens", "no_window",
    "quant_group_size", "residual_length", "offload", "max_num_batched_tokens", "max_num_seqs", "ubatch_size",
    "kv_unified", "swa_full_tokens_ratio", "max_cache_len", "cache_type_v", "no_mla",
)


def _given(inputs: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The keys the scenario set (None = not set: the command's own default applies)."""
    return {key: inputs[key] for key in keys if inputs.get(key) is not None}


def _loaded(inputs: dict[str, Any], models: dict[Any, Any] | None) -> Any:
    """The scenario's model (``api.load_geometry``: parsed once per process), looked up once per check run
    in ``models`` when given."""
    from kvplan.api import load_geometry

    overrides = dict(inputs.get("set") or {})
    args = (inputs["model"], inputs.get("revision"), inputs.get("gguf_file"))
    if models is None:
        return load_geometry(args[0], revision=args[1], gguf_file=args[2], overrides=overrides)
    key = (*args, repr(sorted(overrides.items())))
    loaded = models.get(key)
    if loaded is None:
        loaded = models[key] = load_geometry(args[0], revision=args[1], gguf_file=args[2], overrides=overrides)
    return loaded


def estimate_for(inputs: dict[str, Any], *, models: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The `kvplan estimate` report for a scenario's resolved inputs (``kvplan.api.estimate``, the
    functions the CLI calls; the model is parsed once per process)."""
    from kvplan.api import estimate

    result = estimate(
        _loaded(inputs, models),
        batch=inputs.get("batch") or 1,
        seq_len=inputs.get("seq_len"),
        kv_dtype=inputs.get("kv_dtype") or "auto",
        encoder_len=inputs.get("encoder_len"),
        **_given(inputs, DEPLOYMENT_KEYS),
    )
    return result.to_dict()


def capacity_for(inputs: dict[str, Any], *, gpu: str, num_gpus: int | None,
                 models: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The `kvplan capacity` report for a scenario on ``num_gpus`` x ``gpu``: ``seq_len`` is the
    capacity's ``--max-model-len``; tp defaults to ``num_gpus // pp`` as `kvplan capacity` does."""
    from kvplan.api import capacity
    from kvplan.units import parse_tokens

    pp = inputs.get("pp") or 1
    tp = inputs.get("tp") or (num_gpus // pp if num_gpus else 1)
    given = _given(inputs, ("engine", "kv_dtype", "dtype", "block_size", "gpu_memory_utilization", "mem_fraction_static",
                            "free_gpu_memory_fraction", "max_num_batched_tokens", "weights_from", "weights_quant", "dp",
                            "enable_dp_attention", "kv_unified", "ubatch_size", "cache_type_v",
                            "no_window", "no_mla"))
    # NOTE: plan files read token counts as kvplan does (32k = 32,768); the API's vLLM-named arguments
    # would read "32k" as vLLM does, so the text is resolved here.
    for key in ("max_num_batched_tokens",):
        if isinstance(given.get(key), str):
            given[key] = parse_tokens(given[key], what=key)
    seq_len = inputs.get("seq_len")
    result = capacity(
        _loaded(inputs, models), revision=inputs.get("revision"), gpu=gpu, tp=tp,
        pp=pp, num_gpus=num_gpus, max_model_len=parse_tokens(seq_len, what="seq_len") if seq_len else None,
        batch=inputs.get("batch") or 1,
        reserve=inputs.get("reserve"), kv_budget=inputs.get("kv_budget"), weights_bytes=inputs.get("weights_bytes"),
        **given,
    )
    return result.to_dict()


def scenario_gates(scenario: Scenario, estimate: dict[str, Any], capacity: dict[str, Any] | None) -> list[Gate]:
    budgets = scenario.budgets
    gates: list[Gate] = []
    if budgets.get("max_kv_bytes") is not None:
        gates.append(bytes_gate("max_kv_bytes", actual_bytes=estimate["totals"]["kv_cache_bytes"],
                                limit_bytes=budgets["max_kv_bytes"]))
    if budgets.get("max_kv_bytes_per_gpu") is not None:
        gates.append(bytes_gate("max_kv_bytes_per_gpu", actual_bytes=kv_bytes_per_gpu(estimate),
                                limit_bytes=budgets["max_kv_bytes_per_gpu"], what="KV cache per GPU"))
    if capacity is not None and budgets.get("require_fit_on") is not None:
        gates.append(fit_gate(budgets["require_fit_on"], capacity))
    if capacity is not None and budgets.get("min_concurrency") is not None:
        limit = budgets["min_concurrency"]
        actual = capacity["capacity"]["max_concurrent_requests"]
        passed = actual >= limit
        gates.append(Gate(
            name="min_concurrency", limit=limit, actual=actual, passed=passed,
            message=f"{actual} requests of {capacity['inputs']['max_model_len']:,} tokens fit at once on "
            f"{_gpus(capacity)}, {'at least' if passed else 'fewer than'} the min_concurrency {limit}",
        ))
    return gates


def _gpus(capacity: dict[str, Any]) -> str:
    inputs = capacity["inputs"]
    return f"{inputs['num_gpus'] or inputs['tp'] * inputs['pp']}× {inputs['gpu']}"


def fit_gate(fit_on: dict[str, Any], capacity: dict[str, Any]) -> Gate:
    """require_fit_on: the batch of ``seq_len``-token requests fits in the KV memory of the GPUs."""
    cap, inputs = capacity["capacity"], capacity["inputs"]
    fits = bool(cap["fits"])
    needed, available = cap["kv_bytes_needed"], cap["kv_bytes_available"]
    message = (
        f"{inputs['batch']} × {inputs['max_model_len']:,} tokens need {format_bytes(needed)} ({needed:,} bytes) of KV "
        f"cache per GPU, {format_bytes(available)} ({available:,} bytes) available per GPU on {_gpus(capacity)}"
    )
    if not fits and capacity.get("suggestions"):
        message += "; " + "; ".join(capacity["suggestions"])
    return Gate(name="require_fit_on", limit=dict(fit_on), actual=needed, passed=fits, message=message)


def run_scenario(scenario: Scenario, *, model: str | None = None, models: dict[Any, Any] | None = None) -> dict[str, Any]:
    """One scenario of the check report: its resolved inputs and budgets, totals, gates, estimate.

    ``model`` replaces the scenario's model as the location to load (a path joined to the plan's folder);
    ``models`` keeps the models one check run has loaded (each location is resolved once per run).
    """
    call_inputs = {**scenario.inputs, "model": model or scenario.inputs["model"]}
    if scenario.strict:
        from kvplan.api import load_geometry
        from kvplan.models import require_config_geometry

        require_config_geometry(load_geometry(call_inputs["model"], revision=call_inputs.get("revision"),
                                              overrides=dict(call_inputs.get("set") or {})), what="strict: true")
    estimate = estimate_for(call_inputs, models=models)
    capacity = None
    fit = scenario.budgets.get("require_fit_on")
    if fit is not None or scenario.budgets.get("min_concurrency") is not None:
        assert fit is not None, "plan.parse_plan requires require_fit_on with min_concurrency"
        capacity = capacity_for(call_inputs, gpu=fit["gpu"], num_gpus=fit["num_gpus"], models=models)
    gates = scenario_gates(scenario, estimate, capacity)
    return {
        "name": scenario.name,
        "inputs": dict(scenario.inputs),
        "budgets": dict(scenario.budgets),
        "kv_cache_bytes": estimate["totals"]["kv_cache_bytes"],
        "kv_cache_bytes_per_gpu": kv_bytes_per_gpu(estimate),
        "passed": all(gate.passed for gate in gates),
        "gates": [gate.to_dict() for gate in gates],
        "estimate": estimate,
        "capacity": capacity,
    }


#: Flag spellings in domain error messages that are not ``--`` + the scenario key with dashes.
_FLAG_KEYS = {
    "--tensor-parallel-size": "tp", "--pipeline-parallel-size": "pp", "--kv-cache-dtype": "kv_dtype",
    "--max-model-len": "seq_len", "--gpu": "require_fit_on", "--set": "set",
}


def _key_named_in(message: str, scenario: Scenario, location: str) -> str | None:
    """The scenario key whose flag a run-time error names (``--engine 'vlm' ...`` -> ``engine``)."""
    import re

    values = {**scenario.inputs, **scenario.budgets}
    for flag in re.findall(r"--[a-z][a-z-]*", message):
        key = _FLAG_KEYS.get(flag, flag[2:].replace("-", "_"))
        if values.get(key) is not None:
            return key
    model = values.get("model")
    return "model" if any(isinstance(m, str) and m in message for m in (model, location)) else None


def iter_check_rows(plan: Plan) -> Iterator[dict[str, Any]]:
    """Each scenario's row of the check report, one at a time (nothing of a scenario is kept after it is
    yielded); errors name the plan file, the scenario and its line."""
    models: dict[Any, Any] = {}
    for scenario in plan.scenarios:
        location = plan.model_location(scenario.inputs["model"])
        try:
            row = run_scenario(scenario, model=location, models=models)
        except KvplanError as exc:
            key = _key_named_in(exc.message, scenario, location)
            line = plan.line_of("scenarios", scenario.index, *([key] if key else []))
            where = f"{plan.path} line {line}" if line else plan.path
            field = f"{key!r}: " if key else ""
            raise InputError(f"{where}: scenario {scenario.name!r}: {field}{exc.message}", exc.hint) from None
        yield row


def check_header(plan: Plan, *, num_failed: int, generated_at: str | None = None) -> dict[str, Any]:
    """The check report without its ``scenarios`` (which come last)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": __version__,
        "command": "check",
        "plan": plan.path,
        "generated_at": generated_at,
        "passed": num_failed == 0,
        "num_failed": num_failed,
    }


def check_report(plan: Plan, *, generated_at: str | None = None) -> dict[str, Any]:
    """Run every scenario; errors name the plan file, the scenario and its line. (`kvplan check` writes
    the same report scenario by scenario: :mod:`kvplan.check_stream`.)"""
    rows = list(iter_check_rows(plan))
    failed = sum(1 for row in rows if not row["passed"])
    return {**check_header(plan, num_failed=failed, generated_at=generated_at), "scenarios": rows}
