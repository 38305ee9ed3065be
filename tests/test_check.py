"""`kvplan check` plan files, budget gates (at the budget and one byte over) and `estimate --max-kv-bytes`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.cli import app

from conftest import BF16, FP8, KV, REPO_ROOT, make_config

# NOTE: meta-llama/Llama-3.1-8B (bundled): 32 layers, 8 KV heads, head_size 128, bf16.
LLAMA = "meta-llama/Llama-3.1-8B"
LLAMA_PER_TOKEN = KV * 32 * 8 * 128 * BF16  # K+V * layers * kv_heads * head_size * bf16 = 131072
HAS_CAPACITY = importlib.util.find_spec("kvplan.fit") is not None


def write_plan(tmp_path: Path, scenarios: list[dict[str, Any]] | Any, name: str = "kvplan.yaml", **top: Any) -> Path:
    path = tmp_path / name
    data = {"scenarios": scenarios, **top} if isinstance(scenarios, list) else scenarios
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def llama(**overrides: Any) -> dict[str, Any]:
    return {"name": "llama-chat", "model": LLAMA, "batch": 4, "seq_len": 4096, **overrides}


def run_check(runner, plan: Path, *args: str):
    return runner.invoke(app, ["check", str(plan), *args])


# ---- gates at the boundary ------------------------------------------------------------------------
def test_max_kv_bytes_passes_exactly_at_budget(runner, tmp_path):
    need = LLAMA_PER_TOKEN * 4096 * 4  # per token * seq_len * batch
    result = run_check(runner, write_plan(tmp_path, [llama(max_kv_bytes=need)]), "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["passed"] is True
    (scenario,) = report["scenarios"]
    assert scenario["kv_cache_bytes"] == need
    assert scenario["gates"] == [{"name": "max_kv_bytes", "limit": need, "actual": need, "passed": True}]
    full = json.loads(run_check(runner, write_plan(tmp_path, [llama(max_kv_bytes=need)]), "-f", "json", "--full").stdout)
    assert full["scenarios"][0]["gates"][0]["message"] == (
        "KV cache needs 2.00 GiB (2,147,483,648 bytes), within the max_kv_bytes budget 2.00 GiB (2,147,483,648 bytes)")


def test_max_kv_bytes_fails_one_byte_over(runner, tmp_path):
    need = LLAMA_PER_TOKEN * 4096 * 4
    result = run_check(runner, write_plan(tmp_path, [llama(max_kv_bytes=need - 1)]), "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert (report["passed"], report["num_failed"]) == (False, 1)
    assert report["scenarios"][0]["gates"][0]["passed"] is False
    assert "FAIL llama-chat: KV cache needs 2.00 GiB (2,147,483,648 bytes), over the max_kv_bytes budget" in result.stderr
    assert "by 1 B (1 bytes)" in result.stderr


def test_size_units_in_budgets(runner, tmp_path):
    # 4 x 4096 tokens x 128 KiB = 2 GiB exactly, so "2GiB" passes and "2GB" (2 * 1000**3) fails.
    assert run_check(runner, write_plan(tmp_path, [llama(max_kv_bytes="2GiB")])).exit_code == 0
    assert run_check(runner, write_plan(tmp_path, [llama(max_kv_bytes="2GB")])).exit_code == 1


def test_max_kv_bytes_per_gpu_boundary(runner, tmp_path):
    # No tensor parallelism: one GPU holds the whole cache.
    need = LLAMA_PER_TOKEN * 8192 * 2
    at = write_plan(tmp_path, [llama(batch=2, seq_len="8k", max_kv_bytes_per_gpu=need)])
    assert run_check(runner, at).exit_code == 0
    over = write_plan(tmp_path, [llama(batch=2, seq_len="8k", max_kv_bytes_per_gpu=need - 1)])
    result = run_check(runner, over)
    assert result.exit_code == 1, result.output
    assert "KV cache per GPU needs" in result.stderr


def test_one_failing_scenario_fails_the_plan(runner, tmp_path):
    fp8_need = LLAMA_PER_TOKEN // BF16 * FP8 * 4096 * 4
    plan = write_plan(tmp_path, [
        llama(name="bf16", max_kv_bytes=fp8_need),  # bf16 needs twice the fp8 budget
        llama(name="fp8", kv_dtype="fp8", max_kv_bytes=fp8_need),
        llama(name="no-budget"),
    ])
    result = run_check(runner, plan, "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [(s["name"], s["passed"]) for s in report["scenarios"]] == [("bf16", False), ("fp8", True), ("no-budget", True)]
    assert report["scenarios"][2]["gates"] == []


def test_table_shows_pass_and_fail(runner, tmp_path):
    need = LLAMA_PER_TOKEN * 4096 * 4
    plan = write_plan(tmp_path, [llama(name="fits", max_kv_bytes=need), llama(name="tight", max_kv_bytes=need - 1)])
    result = run_check(runner, plan)
    assert result.exit_code == 1, result.output
    assert "fits" in result.stdout and "PASS" in result.stdout and "FAIL" in result.stdout
    assert "KV ≤ 2.00 GiB" in result.stdout
    assert "1 of 2 scenario(s) over budget" in result.stdout


# ---- plan features ----------------------------------------------------------------------------------
def test_defaults_apply_under_each_scenario(runner, tmp_path):
    plan = write_plan(tmp_path, [llama(name="a"), llama(name="b", kv_dtype="bf16")], defaults={"kv_dtype": "fp8"})
    report = json.loads(run_check(runner, plan, "-f", "json").stdout)
    assert [s["kv_cache_bytes"] for s in report["scenarios"]] == [
        KV * 32 * 8 * 128 * FP8 * 4096 * 4,
        KV * 32 * 8 * 128 * BF16 * 4096 * 4,
    ]


def test_inputs_are_resolved(runner, tmp_path):
    plan = write_plan(tmp_path, [{"name": "x", "model": LLAMA, "seq_len": "32k"}])
    scenario = json.loads(run_check(runner, plan, "-f", "json").stdout)["scenarios"][0]
    assert scenario["inputs"] == {"model": LLAMA, "seq_len": 32 * 1024}  # only what the plan sets
    assert scenario["budgets"] == {}
    assert scenario["kv_cache_bytes"] == LLAMA_PER_TOKEN * 32 * 1024  # batch defaults to 1
    assert (scenario["fits"], scenario["max_concurrent_requests"]) == (None, None)  # no require_fit_on
    from kvplan.plan import FIELDS

    full = json.loads(run_check(runner, plan, "-f", "json", "--full").stdout)["scenarios"][0]
    assert list(full["inputs"]) == [k for k, f in FIELDS.items() if f.kind in ("inputs", "capacity")]  # every key
    assert {k: v for k, v in full["inputs"].items() if v is not None} == scenario["inputs"]
    assert full["budgets"]["max_kv_bytes"] is None


def test_set_overrides_and_model_path_relative_to_plan(runner, tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(make_config()))
    plan = write_plan(tmp_path, [
        {"name": "mha", "model": "./cfg/config.json", "seq_len": 1024},
        {"name": "gqa", "model": "./cfg/config.json", "seq_len": 1024, "set": {"num_key_value_heads": 8}},
    ])
    result = run_check(runner, plan, "-f", "json")
    assert result.exit_code == 0, result.output
    totals = [s["kv_cache_bytes"] for s in json.loads(result.stdout)["scenarios"]]
    assert totals == [KV * 32 * 32 * 128 * BF16 * 1024, KV * 32 * 8 * 128 * BF16 * 1024]  # fp16 = 2 bytes too


def test_output_file_is_deterministic_yaml(runner, tmp_path):
    plan = write_plan(tmp_path, [llama(max_kv_bytes="4GiB")])
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert run_check(runner, plan, "--output", str(first)).exit_code == 0
    assert run_check(runner, plan, "--output", str(second)).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    report = yaml.safe_load(first.read_text())
    assert (report["command"], report["generated_at"]) == ("check", None)


def test_timestamp_only_on_request(runner, tmp_path):
    plan = write_plan(tmp_path, [llama()])
    report = json.loads(run_check(runner, plan, "--timestamp", "-f", "json").stdout)
    assert report["generated_at"] is not None and report["generated_at"].endswith("+00:00")


def test_example_plan_passes(runner):
    result = run_check(runner, REPO_ROOT / "examples" / "kvplan.yaml", "-f", "json", "--full")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    names = [s["name"] for s in report["scenarios"]]
    assert len(names) == len(set(names)) >= 5
    assert len({s["estimate"]["model"]["id"] for s in report["scenarios"]}) >= 5
    assert {s["estimate"]["inputs"]["engine"] for s in report["scenarios"]} >= {"ideal", "vllm", "sglang", "llama.cpp"}
    gpus = {s["budgets"]["require_fit_on"]["gpu"] for s in report["scenarios"] if s["budgets"]["require_fit_on"]}
    assert len(gpus) >= 3 and all(s["capacity"] for s in report["scenarios"] if s["budgets"]["require_fit_on"])
    assert all(s["passed"] for s in report["scenarios"])
    chat = next(s for s in report["scenarios"] if s["name"] == "llama-3.1-8b-chat")
    assert chat["kv_cache_bytes"] == chat["budgets"]["max_kv_bytes"] == LLAMA_PER_TOKEN * 8192 * 16


# ---- bad plan files: exit 2, one clear line naming where ---------------------------------------------
BAD_PLANS = {
    "unknown key": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    btach: 4\n",
        "line 4: scenario 'chat': unknown key 'btach'", "Hint: Did you mean 'batch'?",
    ),
    "wrong type": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    batch: '4'\n",
        "line 4: scenario 'chat': 'batch' must be a positive integer, got a string '4'", "batch: 8",
    ),
    "bool is not an int": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    batch: true\n",
        "'batch' must be a positive integer, got a boolean True", None,
    ),
    "bad size": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    max_kv_bytes: lots\n",
        "line 4: scenario 'chat': max_kv_bytes 'lots' is not a size", "e.g. 80GiB",
    ),
    "missing model": (
        "scenarios:\n  - name: chat\n    batch: 4\n",
        "line 2: scenario 'chat' has no 'model'", "model: ...",
    ),
    "missing name": (
        "scenarios:\n  - model: meta-llama/Llama-3.1-8B\n",
        "line 2: scenario #1 has no 'name'", None,
    ),
    "not a mapping": ("- name: chat\n  model: x\n", "a plan file must be a mapping with a 'scenarios:' list, got a list", "scenarios:"),
    "empty file": ("", "a plan file must be a mapping with a 'scenarios:' list, got nothing (null)", None),
    "scenario not a mapping": ("scenarios:\n  - chat\n", "line 2: scenario #1 must be a mapping, got a string", None),
    "no scenarios": ("defaults: {batch: 2}\n", "missing the 'scenarios:' list", None),
    "unknown top-level key": ("scenario:\n  - name: a\n", "line 1: unknown top-level key 'scenario'", "did you mean 'scenarios'?"),
    "python object tag": (
        "scenarios:\n  - name: chat\n    model: !!python/object/apply:os.system ['echo hacked']\n",
        "line 3: scenario #1: 'model': the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed", "plain data",
    ),
    "invalid yaml": ("scenarios: [\n", "not valid YAML", None),
    "invalid yaml, worded by PyYAML": (
        "scenarios:\n  - name: chat\n    model: [unclosed\n",
        "line 4: not valid YAML: expected ',' or ']', but got '<stream end>'", "check the indentation",
    ),
    "undefined alias": ("scenarios:\n  - *nope\n", "line 2: not valid YAML: found undefined alias 'nope'", None),
    "unknown key after a merge": (
        "defaults: &d {batch: 2}\nscenarios:\n  - <<: *d\n    name: a\n    model: meta-llama/Llama-3.1-8B\n    btach: 3\n",
        "line 6: scenario 'a': unknown key 'btach'", None,
    ),
    "duplicate key": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    model: Qwen/Qwen3-8B\n",
        "line 4: key 'model' appears twice", None,
    ),
    "duplicate top-level key": ("scenarios: []\nscenarios: []\n", "line 2: key 'scenarios' appears twice", None),
    "duplicate scenario name": (
        "scenarios:\n  - {name: a, model: meta-llama/Llama-3.1-8B}\n  - {name: a, model: Qwen/Qwen3-8B}\n",
        "scenario name 'a' is used twice", None,
    ),
    "missing model file": (  # NOTE: a local path, so the test never reaches the Hub client
        "scenarios:\n  - name: chat\n    model: ./no-such-dir/config.json\n",
        "line 3: scenario 'chat': 'model': no such file", None,
    ),
    "bad value at run time": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    kv_dtype: fp7\n",
        "scenario 'chat':", None,
    ),
    "bool flag given a string": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    no_window: 'yes'\n",
        "line 4: scenario 'chat': 'no_window' must be true or false, got a string 'yes'", "no_window: true",
    ),
    "bad deployment value at run time": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    engine: vllm-turbo\n",
        "line 4: scenario 'chat': 'engine': --engine 'vllm-turbo'", None,
    ),
    "capacity key without require_fit_on": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    gpu_memory_utilization: 0.8\n",
        "line 4: scenario 'chat': 'gpu_memory_utilization' only applies with require_fit_on", "require_fit_on:",
    ),
    "min_concurrency without require_fit_on": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    min_concurrency: 8\n",
        "'min_concurrency' only applies with require_fit_on", None,
    ),
    "require_fit_on without gpu": (
        "scenarios:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B\n    require_fit_on: {num_gpus: 2}\n",
        "line 4: scenario 'chat': require_fit_on.gpu must be a GPU name, got None", None,
    ),
}


@pytest.mark.parametrize("name", list(BAD_PLANS))
def test_bad_plan_exits_2_with_a_clear_message(runner, tmp_path, name):
    text, message, hint = BAD_PLANS[name]
    plan = tmp_path / "kvplan.yaml"
    plan.write_text(text)
    result = run_check(runner, plan)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"Error: {plan}"), first
    assert message in first
    assert "Traceback" not in result.stderr
    if hint is not None:
        assert hint in result.stderr


def test_a_merged_key_may_be_overridden(runner, tmp_path):
    plan = tmp_path / "kvplan.yaml"
    plan.write_text("defaults: {seq_len: 4096}\nscenarios:\n  - &base {name: a, model: meta-llama/Llama-3.1-8B, batch: 4}\n"
                    "  - <<: *base\n    name: b\n    batch: 2\n")
    result = run_check(runner, plan, "-f", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["scenarios"]
    assert [(row["name"], row["kv_cache_bytes"]) for row in rows] == [
        ("a", LLAMA_PER_TOKEN * 4096 * 4), ("b", LLAMA_PER_TOKEN * 4096 * 2)]


def test_python_tag_is_never_constructed(runner, tmp_path):
    marker = tmp_path / "constructed"
    plan = tmp_path / "kvplan.yaml"
    plan.write_text(f"scenarios: !!python/object/apply:pathlib.Path.touch [!!python/object/apply:pathlib.Path ['{marker}']]\n")
    assert run_check(runner, plan).exit_code == 2
    assert not marker.exists()


def test_missing_plan_file(runner, tmp_path):
    result = run_check(runner, tmp_path / "nope.yaml")
    assert result.exit_code == 2, result.output
    assert "cannot read plan file" in result.stderr


# ---- deployment inputs and capacity budgets ---------------------------------------------------------
def test_deployment_keys_reach_the_estimate(runner, tmp_path):
    # Llama-3.1-8B on 4 tensor-parallel ranks: 8 KV heads / 4 = 2 per rank; vLLM blocks of 16 tokens.
    plan = write_plan(tmp_path, [llama(engine="vllm", tp=4, max_kv_bytes_per_gpu=KV * 32 * (8 // 4) * 128 * BF16 * 4096 * 4)])
    result = run_check(runner, plan, "-f", "json", "--full")
    assert result.exit_code == 0, result.output
    scenario = json.loads(result.stdout)["scenarios"][0]
    assert (scenario["estimate"]["inputs"]["engine"], scenario["estimate"]["inputs"]["tp"]) == ("vllm", 4)
    assert scenario["kv_cache_bytes"] == LLAMA_PER_TOKEN * 4096 * 4  # all ranks together
    assert scenario["kv_cache_bytes_per_gpu"] == LLAMA_PER_TOKEN * 4096 * 4 // 4
    over = write_plan(tmp_path, [llama(engine="vllm", tp=4, max_kv_bytes_per_gpu=LLAMA_PER_TOKEN * 4096 * 4 // 4 - 1)])
    assert run_check(runner, over).exit_code == 1


@pytest.mark.skipif(not HAS_CAPACITY, reason="needs kvplan.fit")
@pytest.mark.parametrize(("kv_budget", "code"), [
    (LLAMA_PER_TOKEN * 4096 * 4, 0),      # exactly 4 requests of 4096 tokens (256 blocks of 16 each)
    (LLAMA_PER_TOKEN * 4096 * 4 - 1, 1),  # one byte short: the last block of the 4th request is missing
])
def test_require_fit_on_and_min_concurrency_boundary(runner, tmp_path, kv_budget, code):
    # kv_budget pins the KV memory per GPU (vLLM's logged "Available KV cache memory") so the
    # boundary is exact and does not depend on weight and activation estimates.
    plan = write_plan(tmp_path, [llama(engine="vllm", kv_budget=kv_budget, require_fit_on={"gpu": "H100"}, min_concurrency=4)])
    result = run_check(runner, plan, "-f", "json")
    assert result.exit_code == code, result.output
    scenario = json.loads(result.stdout)["scenarios"][0]
    gates = {gate["name"]: gate for gate in scenario["gates"]}
    assert gates["require_fit_on"]["passed"] is scenario["fits"] is (code == 0)
    assert gates["min_concurrency"]["actual"] == scenario["max_concurrent_requests"] == (4 if code == 0 else 3)
    full = json.loads(run_check(runner, plan, "-f", "json", "--full").stdout)["scenarios"][0]
    assert full["capacity"]["command"] == "capacity"
    assert full["capacity"]["capacity"]["max_concurrent_requests"] == scenario["max_concurrent_requests"]
    if code:
        assert "FAIL llama-chat: 4 × 4,096 tokens need 2.00 GiB (2,147,483,648 bytes) of KV cache per GPU" in result.stderr
        assert "fewer than the min_concurrency 4" in result.stderr


@pytest.mark.skipif(not HAS_CAPACITY, reason="needs kvplan.fit")
def test_require_fit_on_unknown_gpu_is_exit_2(runner, tmp_path):
    result = run_check(runner, write_plan(tmp_path, [llama(require_fit_on={"gpu": "H1000", "num_gpus": 1})]))
    assert result.exit_code == 2, result.output
    assert "scenario 'llama-chat'" in result.stderr and "H1000" in result.stderr


# ---- estimate --max-kv-bytes --------------------------------------------------------------------------
@pytest.mark.parametrize(("budget", "code"), [
    (LLAMA_PER_TOKEN * 4096 * 4, 0),       # exactly the need
    (LLAMA_PER_TOKEN * 4096 * 4 - 1, 1),   # one byte short
    ("2GiB", 0),
    ("2047MiB", 1),
])
def test_estimate_max_kv_bytes(runner, budget, code):
    args = ["estimate", "-m", LLAMA, "-s", "4096", "-b", "4", "--max-kv-bytes", str(budget), "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] == LLAMA_PER_TOKEN * 4096 * 4
    if code:
        assert result.stderr.startswith("Budget exceeded: KV cache needs 2.00 GiB (2,147,483,648 bytes), over the --max-kv-bytes budget")
    else:
        assert "Budget exceeded" not in result.stderr


def test_estimate_bad_budget_is_exit_2(runner):
    result = runner.invoke(app, ["estimate", "-m", LLAMA, "--max-kv-bytes", "forty gigs"])
    assert result.exit_code == 2, result.output
    assert "Error: --max-kv-bytes 'forty gigs' is not a size" in result.stderr


# ---- scenario keys mirror the CLI ---------------------------------------------------------------------
def _params(command: str) -> set[str]:
    import inspect

    (callback,) = [c.callback for c in app.registered_commands if (c.name or c.callback.__name__) == command]
    return set(inspect.signature(callback).parameters)


#: Flags with no scenario key of the same name, and why.
NOT_SCENARIO_KEYS = {
    "set_": "the key is `set`",
    "model_arg": "the model given first, without -m: the key is `model`",
    "token": "secrets stay out of plan files (HF_TOKEN)",
    "fmt": "output", "output": "output",
    "gpu": "require_fit_on.gpu", "num_gpus": "require_fit_on.num_gpus", "require_fit": "require_fit_on",
    "max_model_len": "seq_len is capacity's --max-model-len",
    "gpu_mem": "catalog GPUs only", "gpu_bandwidth": "speed is not budgeted",
    "engine_version": "only the form of engine_log's lines", "tensor_split": "only engine_log's per-device lines",
    "ctx_size": "llama.cpp's spelling of seq_len x batch", "parallel": "llama.cpp's spelling of batch",
    "cache_type_k": "llama.cpp's spelling of kv_dtype for K (with cache_type_v for V)",
    "compare_log": "reads a log file; a plan checks budgets, not logs",
    "plot": "output (a picture)", "verbose": "output (the whole table)",
    "cmd": "a launch line; a plan names each of its keys (kvplan.launch.KEYWORDS)",
}


def test_every_estimate_and_capacity_flag_has_a_scenario_key():
    from kvplan.plan import FIELDS

    for command in ("estimate", "capacity"):
        missing = _params(command) - set(FIELDS) - set(NOT_SCENARIO_KEYS)
        assert not missing, f"`kvplan {command}` flags with no plan key: {sorted(missing)}"


def test_every_scenario_key_mirrors_a_flag():
    from kvplan.plan import FIELDS

    flags = _params("estimate") | _params("capacity")
    own = {"name", "set", "require_fit_on", "min_concurrency"}  # plan-only keys
    assert set(FIELDS) - flags == own
    assert {"max_kv_bytes", "max_kv_bytes_per_gpu"} <= flags  # both budgets are flags on estimate too


# ---- run-time errors point at the field ---------------------------------------------------------------
@pytest.mark.parametrize(("key", "value", "phrase"), [
    ("engine", "vlm", "'engine': --engine 'vlm' is not a known engine profile"),
    ("kv_dtype", "fp7", "'kv_dtype': --kv-dtype 'fp7' is not a known KV dtype"),
    ("offload", 1.5, "'offload': --offload fraction must be between 0 and 1"),
    ("model", "nope/nope", "'model': nope/nope is not bundled"),
])
def test_run_time_error_names_the_field_and_its_line(runner, tmp_path, key, value, phrase):
    plan = tmp_path / "kvplan.yaml"
    scenario = {"name": "a", "model": LLAMA, "seq_len": 4096, key: value}
    plan.write_text(yaml.safe_dump({"scenarios": [scenario]}, sort_keys=False))
    line = 2 + list(scenario).index(key)  # `scenarios:` on line 1, `- name: a` on line 2
    result = run_check(runner, plan)
    assert result.exit_code == 2, result.output
    assert f"kvplan.yaml line {line}: scenario 'a': {phrase}" in result.stderr
    assert "Traceback" not in result.output


def test_null_value_message(runner, tmp_path):
    plan = tmp_path / "kvplan.yaml"
    plan.write_text("scenarios:\n  - name: a\n    model: meta-llama/Llama-3.1-8B\n    batch:\n")
    result = run_check(runner, plan)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0].endswith("line 4: scenario 'a': 'batch' must be a positive integer, got nothing (null)")


def test_table_shows_the_per_gpu_need(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one line per row
    # 4 requests of 4096 tokens on vLLM with tp 4: 2 of the 8 KV heads per rank.
    per_gpu = KV * 32 * (8 // 4) * 128 * BF16 * 4096 * 4
    plan = write_plan(tmp_path, [llama(engine="vllm", tp=4, max_kv_bytes_per_gpu=per_gpu)])
    result = run_check(runner, plan, "--verbose")  # one row per budget
    assert result.exit_code == 0, result.output
    assert "KV/GPU 512.00 MiB ≤ 512.00 MiB" in result.stdout
    assert "4×4k bf16 vllm tp4" in result.stdout
    short = run_check(runner, plan)  # one row per scenario, the verdict first
    assert short.stdout.startswith("1 scenario(s), all within budget\n")
    assert "4×4k bf16 vllm tp4" in short.stdout and "PASS" in short.stdout and "KV/GPU" not in short.stdout


# ---- estimate --max-kv-bytes-per-gpu --------------------------------------------------------------------
@pytest.mark.parametrize(("budget", "code"), [
    (KV * 32 * (8 // 4) * 128 * BF16 * 4096 * 4, 0),      # exactly the busiest GPU's need (tp 4: 2 heads each)
    (KV * 32 * (8 // 4) * 128 * BF16 * 4096 * 4 - 1, 1),  # one byte short
])
def test_estimate_max_kv_bytes_per_gpu(runner, budget, code):
    args = ["estimate", "-m", LLAMA, "-s", "4096", "-b", "4", "--engine", "vllm", "--tp", "4",
            "--max-kv-bytes-per-gpu", str(budget), "--max-kv-bytes", "2GiB", "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes_per_gpu"] == KV * 32 * 2 * 128 * BF16 * 4096 * 4
    if code:
        assert result.stderr == (
            "Budget exceeded: KV cache per GPU needs 512.00 MiB (536,870,912 bytes), over the --max-kv-bytes-per-gpu "
            "budget 512.00 MiB (536,870,911 bytes) by 1 B (1 bytes)\n"
        )  # the whole-cache budget (2 GiB, exactly the need) holds, so only the per-GPU gate is reported
    else:
        assert "Budget exceeded" not in result.stderr


def test_estimate_bad_per_gpu_budget_is_exit_2(runner):
    result = runner.invoke(app, ["estimate", "-m", LLAMA, "--max-kv-bytes-per-gpu", "lots"])
    assert result.exit_code == 2, result.output
    assert "Error: --max-kv-bytes-per-gpu 'lots' is not a size" in result.stderr


def test_fit_gate_says_weights_that_overrun_the_gpu_in_words(runner, tmp_path):
    """Llama-3.1-70B's bf16 weights (131.42 GiB) on one 80 GB H100: the KV budget is negative; the FAIL line says
    it as a size and in words, never as a raw negative count of bytes."""
    plan = write_plan(tmp_path, [{"name": "big", "model": "meta-llama/Llama-3.1-70B", "seq_len": 8192,
                                  "engine": "vllm", "require_fit_on": {"gpu": "H100"}}])
    report = json.loads(run_check(runner, plan, "--format", "json", "--full").stdout)
    budget = report["scenarios"][0]["capacity"]["budget"]["kv_bytes_per_gpu"]
    assert budget < 0
    from kvplan.units import format_bytes

    result = run_check(runner, plan)
    assert result.exit_code == 1, result.output
    said = " ".join(result.stderr.split())
    assert (f"none available on 1× H100-SXM-80GB: KV budget -{format_bytes(-budget)}, the weights and reserve exceed "
            "the GPU's memory") in said
    assert f"{budget:,}" not in said and f"{budget} B" not in said
