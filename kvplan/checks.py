"""Budget gates and `kvplan check`: run every scenario of a plan, compare with its budgets.

Pure apart from loading model configs: no printing, no exiting. The CLI turns ``passed`` into
exit 0/1 and errors into exit 2. Each scenario runs through the library functions of the commands
whose flags its keys mirror: ``kvplan.estimate`` as `kvplan estimate` and, for ``require_fit_on`` /
``min_concurrency``, ``kvplan.capacity`` as `kvplan capacity`, with each command's own defaults
(estimate: engine ideal; capacity: engine vllm) unless the scenario sets them.

A check is a sweep: :class:`CheckRunner` remembers, for the run of one plan, each model it loaded and
the estimate and capacity of each set of inputs it met, so a plan that repeats a model or a
deployment pays for it once. The calculator itself remembers nothing.

Each scenario becomes one row of the report: :meth:`ScenarioResult.compact_row` (the default: what
a CI keeps and diffs) or :meth:`ScenarioResult.full_row` (``--full``: the whole estimate and
capacity reports too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kvplan import __version__
from kvplan.api import CapacityResult, EstimateResult, Geometry, capacity, estimate, load_geometry
from kvplan.errors import InputError, KvplanError
from kvplan.models import check_defaults
from kvplan.plan import Plan, Scenario
from kvplan.report import SCHEMA_VERSION
from kvplan.units import format_bytes, parse_tokens


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


#: Scenario keys passed to ``kvplan.estimate`` as they are (the `kvplan estimate` deployment flags).
DEPLOYMENT_KEYS = (
    "engine", "tp", "pp", "dp", "block_size", "beams", "prompt_len", "share_prefix", "shared_prefix_tokens", "no_window",
    "quant_group_size", "residual_length", "offload", "max_num_batched_tokens", "max_num_seqs", "ubatch_size",
    "kv_unified", "swa_full_tokens_ratio", "max_cache_len", "cache_type_v", "no_mla", "n_gpu_layers", "no_kv_offload",
    "flash_attn", "enable_prefix_caching",
)
#: Scenario keys passed to ``kvplan.capacity`` as they are (the `kvplan capacity` flags).
CAPACITY_KEYS = (
    "engine", "kv_dtype", "dtype", "block_size", "gpu_memory_utilization", "mem_fraction_static",
    "free_gpu_memory_fraction", "max_num_batched_tokens", "weights_from", "weights_quant", "dp", "enable_dp_attention",
    "kv_unified", "ubatch_size", "cache_type_v", "no_window", "no_mla", "max_num_seqs", "enforce_eager",
    "quantization", "cpu_offload_gb", "n_gpu_layers", "no_kv_offload", "flash_attn", "enable_prefix_caching",
)


def _given(inputs: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The keys the scenario set (None = not set: the command's own default applies)."""
    return {key: inputs[key] for key in keys if inputs.get(key) is not None}


def _hashable(value: Any) -> Any:
    """``value`` as a memo key: a mapping (``set``, ``require_fit_on``) as its items, a list as a tuple."""
    if isinstance(value, dict):
        return ("{}", *sorted(((key, _hashable(item)) for key, item in value.items()), key=repr))
    if isinstance(value, list):
        return ("[]", *map(_hashable, value))
    return value


def _copy(values: dict[str, Any], *, set_only: bool = False) -> dict[str, Any]:
    """A row's own copy of a scenario's values (a mapping from the plan's ``defaults`` is shared by
    scenarios, and a report holds each object once)."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in values.items()
            if not (set_only and value is None)}


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioResult:
    """One scenario run: the estimate and capacity it asked for, and its gates."""

    scenario: Scenario
    estimate: EstimateResult
    capacity: CapacityResult | None
    """``kvplan.capacity`` on the ``require_fit_on`` GPUs; None without that budget."""
    capacity_report: dict[str, Any] | None
    """``capacity.to_dict()``, which the gates read."""
    gates: tuple[Gate, ...]

    @property
    def passed(self) -> bool:
        return all(gate.passed for gate in self.gates)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Estimate notes a reader must see (a core geometry from architecture defaults)."""
        return tuple(note.removeprefix("WARNING: ") for note in self.estimate.notes if note.startswith("WARNING: "))

    def compact_row(self) -> dict[str, Any]:
        """The row a CI keeps: the name, the inputs and budgets the plan sets, the KV bytes in all and on the
        busiest GPU, fits and concurrency on the ``require_fit_on`` GPUs (null without), each gate's verdict."""
        cap = self.capacity_report["capacity"] if self.capacity_report is not None else None
        return {
            "name": self.scenario.name,
            "inputs": _copy(self.scenario.inputs, set_only=True),
            "budgets": _copy(self.scenario.budgets, set_only=True),
            "kv_cache_bytes": self.estimate.kv_cache_bytes,
            "kv_cache_bytes_per_gpu": self.estimate.kv_cache_bytes_per_gpu,
            "fits": cap["fits"] if cap is not None else None,
            "max_concurrent_requests": cap["max_concurrent_requests"] if cap is not None else None,
            "passed": self.passed,
            "gates": [{"name": g.name, "limit": g.limit, "actual": g.actual, "passed": g.passed} for g in self.gates],
        }

    def full_row(self) -> dict[str, Any]:
        """The whole row (``--full``): every input and budget (null when not set), each gate's message, and
        the `kvplan estimate` and `kvplan capacity` reports."""
        return {
            "name": self.scenario.name,
            "inputs": _copy(self.scenario.inputs),
            "budgets": _copy(self.scenario.budgets),
            "kv_cache_bytes": self.estimate.kv_cache_bytes,
            "kv_cache_bytes_per_gpu": self.estimate.kv_cache_bytes_per_gpu,
            "passed": self.passed,
            "gates": [gate.to_dict() for gate in self.gates],
            "estimate": self.estimate.to_dict(),
            "capacity": self.capacity.to_dict() if self.capacity is not None else None,
        }


def scenario_gates(scenario: Scenario, estimate: EstimateResult, capacity: dict[str, Any] | None) -> list[Gate]:
    budgets = scenario.budgets
    gates: list[Gate] = []
    if budgets.get("max_kv_bytes") is not None:
        gates.append(bytes_gate("max_kv_bytes", actual_bytes=estimate.kv_cache_bytes,
                                limit_bytes=budgets["max_kv_bytes"]))
    if budgets.get("max_kv_bytes_per_gpu") is not None:
        gates.append(bytes_gate("max_kv_bytes_per_gpu", actual_bytes=estimate.kv_cache_bytes_per_gpu,
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
    message = (f"{inputs['batch']} × {inputs['max_model_len']:,} tokens need {format_bytes(needed)} ({needed:,} bytes) "
               "of KV cache per GPU, ")
    if available > 0:
        message += f"{format_bytes(available)} ({available:,} bytes) available per GPU on {_gpus(capacity)}"
    else:  # NOTE: a budget the weights overran is said in words, not as a negative count of bytes
        message += (f"none available on {_gpus(capacity)}: KV budget {format_bytes(available)}, the weights and "
                    "reserve exceed the GPU's memory")

    if not fits and capacity.get("suggestions"):
        message += "; " + "; ".join(capacity["suggestions"])
    return Gate(name="require_fit_on", limit=dict(fit_on), actual=needed, passed=fits, message=message)


#: Answers a check run keeps of each kind (models, estimates, capacities); past it the oldest goes, so a plan of
#: 10,000 distinct scenarios runs in the memory of about a thousand.
MEMO_SIZE = 1024

T = TypeVar("T")


def _remember(memo: dict[Any, T], key: Any, make: Callable[[], T]) -> T:
    """``memo[key]``, made by ``make()`` the first time it is asked (the oldest entry goes past :data:`MEMO_SIZE`)."""
    value = memo.get(key)
    if value is None:
        if len(memo) >= MEMO_SIZE:
            del memo[next(iter(memo))]
        value = memo[key] = make()
    return value


@dataclass(kw_only=True, slots=True)
class CheckRunner:
    """Runs the scenarios of one plan, remembering answers across them (the sweep's memo, local to the run):
    each model loaded once, and the estimate and the capacity of each distinct set of inputs computed once."""

    plan: Plan
    _models: dict[Any, Geometry] = field(default_factory=dict)
    _estimates: dict[Any, EstimateResult] = field(default_factory=dict)
    _capacities: dict[Any, tuple[CapacityResult, dict[str, Any]]] = field(default_factory=dict)

    def results(self) -> Iterator[ScenarioResult]:
        """Each scenario's result, in plan order; errors name the plan file, the scenario and its line."""
        for scenario in self.plan.scenarios:
            location = self.plan.model_location(scenario.inputs["model"])
            try:
                yield self.run(scenario, location)
            except KvplanError as exc:
                key = _key_named_in(exc.message, scenario, location)
                line = self.plan.line_of("scenarios", scenario.index, *([key] if key else []))
                where = f"{self.plan.path} line {line}" if line else self.plan.path
                named = f"{key!r}: " if key else ""
                raise InputError(f"{where}: scenario {scenario.name!r}: {named}{exc.message}", exc.hint) from None

    def run(self, scenario: Scenario, location: str) -> ScenarioResult:
        """One scenario, its model loaded from ``location`` (the plan's ``model`` joined to the plan's folder)."""
        inputs = scenario.inputs
        geometry = self._model(location, inputs)
        check_defaults(geometry.model_geometry, allow_defaults=scenario.allow_defaults, strict=scenario.strict,
                       allow_flag="allow_defaults: true", strict_flag="strict: true")
        # NOTE: a scenario's inputs resolve everything both library calls read; the GPUs are the capacity's too.
        key = (location, *map(_hashable, inputs.values()))
        est = _remember(self._estimates, key, lambda: estimate(
            geometry, batch=inputs.get("batch") or 1, seq_len=inputs.get("seq_len"),
            kv_dtype=inputs.get("kv_dtype") or "auto", encoder_len=inputs.get("encoder_len"),
            **_given(inputs, DEPLOYMENT_KEYS), allow_defaults=True,  # checked above, as the plan asks
        ))
        cap: CapacityResult | None = None
        cap_report = None
        fit = scenario.budgets.get("require_fit_on")
        if fit is not None:
            cap, cap_report = _remember(self._capacities, key + (_hashable(fit),),
                                        lambda: self._capacity(geometry, inputs, fit))
        return ScenarioResult(scenario=scenario, estimate=est, capacity=cap, capacity_report=cap_report,
                              gates=tuple(scenario_gates(scenario, est, cap_report)))

    def _model(self, location: str, inputs: dict[str, Any]) -> Geometry:
        overrides = dict(inputs.get("set") or {})
        key = (location, inputs.get("revision"), inputs.get("gguf_file"), _hashable(overrides))
        return _remember(self._models, key, lambda: load_geometry(
            location, revision=inputs.get("revision"), gguf_file=inputs.get("gguf_file"), overrides=overrides))

    @staticmethod
    def _capacity(geometry: Geometry, inputs: dict[str, Any], fit: dict[str, Any]) -> tuple[CapacityResult, dict[str, Any]]:
        """`kvplan capacity` for the scenario on ``require_fit_on``'s GPUs: ``seq_len`` is the capacity's
        ``--max-model-len``; tp defaults to ``num_gpus // pp`` as `kvplan capacity` does."""
        num_gpus = fit["num_gpus"]
        pp = inputs.get("pp") or 1
        tp = inputs.get("tp") or (num_gpus // pp if num_gpus else 1)
        given = _given(inputs, CAPACITY_KEYS)
        # NOTE: plan files read token counts as kvplan does (32k = 32,768); the API's vLLM-named arguments
        # would read "32k" as vLLM does, so the text is resolved here.
        if isinstance(given.get("max_num_batched_tokens"), str):
            given["max_num_batched_tokens"] = parse_tokens(given["max_num_batched_tokens"], what="max_num_batched_tokens")
        seq_len = inputs.get("seq_len")
        result = capacity(
            geometry, revision=inputs.get("revision"), gpu=fit["gpu"], tp=tp, pp=pp, num_gpus=num_gpus,
            max_model_len=parse_tokens(seq_len, what="seq_len") if seq_len else None, batch=inputs.get("batch") or 1,
            reserve=inputs.get("reserve"), kv_budget=inputs.get("kv_budget"), weights_bytes=inputs.get("weights_bytes"),
            **given, allow_defaults=True,  # the scenario's model was checked by run()
        )
        return result, result.to_dict()


#: Flag spellings in domain error messages that are not ``--`` + the scenario key with dashes.
_FLAG_KEYS = {
    "--tensor-parallel-size": "tp", "--pipeline-parallel-size": "pp", "--kv-cache-dtype": "kv_dtype",
    "--max-model-len": "seq_len", "--gpu": "require_fit_on", "--set": "set",
}


def _key_named_in(message: str, scenario: Scenario, location: str) -> str | None:
    """The scenario key whose flag a run-time error names (``--engine 'vlm' ...`` -> ``engine``)."""
    values = {**scenario.inputs, **scenario.budgets}
    for flag in re.findall(r"--[a-z][a-z-]*", message):
        key = _FLAG_KEYS.get(flag, flag[2:].replace("-", "_"))
        if values.get(key) is not None:
            return key
    model = values.get("model")
    return "model" if any(isinstance(m, str) and m in message for m in (model, location)) else None


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


def check_report(plan: Plan, *, full: bool = False, generated_at: str | None = None) -> dict[str, Any]:
    """Run every scenario: the whole report in memory, compact rows (``full``: whole rows). `kvplan check`
    writes the same report scenario by scenario (:mod:`kvplan.check_stream`)."""
    results = list(CheckRunner(plan=plan).results())
    failed = sum(1 for result in results if not result.passed)
    rows = [result.full_row() if full else result.compact_row() for result in results]
    return {**check_header(plan, num_failed=failed, generated_at=generated_at), "scenarios": rows}
