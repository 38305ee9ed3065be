"""Issue 15, round 2: hostile values inside real configs. Each test feeds the input the issue describes
and checks for a one-line error naming the field (exit 2), or for the right number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config
from kvplan.models.storage import quantisation

from conftest import REPO_ROOT

BUNDLED = REPO_ROOT / "model_configs"
LLAMA_8B = "meta-llama__Llama-3.1-8B"


def bundled(name: str) -> dict[str, Any]:
    return json.loads((BUNDLED / f"{name}.json").read_text())


def one_error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return lines[0]


def write(tmp_path: Path, config: dict[str, Any], name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


# ---- 1. quantization_config values -------------------------------------------------------------
def _quant(qc: Any) -> Any:
    from kvplan.models.base import ConfigReader

    return quantisation(qc, "m", ConfigReader({}, source_name="m"))


@pytest.mark.parametrize(("qc", "field"), [
    ({"quant_method": "awq", "bits": -4}, "quantization_config.bits"),
    ({"quant_method": "awq", "bits": True}, "quantization_config.bits"),
    ({"quant_method": "awq", "bits": 2.5}, "quantization_config.bits"),
    ({"quant_method": "awq", "bits": 0}, "quantization_config.bits"),
    ({"quant_method": "gptq", "bits": "four"}, "quantization_config.bits"),
    ({"quant_method": "gptq", "bits": 4, "group_size": -128}, "quantization_config.group_size"),
    ({"quant_method": "awq", "w_bit": 16}, "quantization_config.w_bit"),
    ({"quant_method": "fp8", "weight_block_size": [0, 0]}, "quantization_config.weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "quantization_config.weight_block_size"),
    ({"quant_method": "fp8", "modules_to_not_convert": 5}, "quantization_config.modules_to_not_convert"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_blocksize": -64},
     "quantization_config.bnb_4bit_blocksize"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": -8, "strategy": "channel"}}}},
     "quantization_config.config_groups.group_0.weights.num_bits"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "strategy": "group", "group_size": -32}}}},
     "quantization_config.config_groups.group_0.weights.group_size"),
    ({"quant_method": 7}, "quantization_config.quant_method"),
    ("mxfp4", "quantization_config must be a mapping"),
    (["awq"], "quantization_config must be a mapping"),
    (4, "quantization_config must be a mapping"),
])
def test_bad_quantization_values_name_the_field(qc: Any, field: str) -> None:
    with pytest.raises(ConfigError, match="^m: " + field.replace(".", r"\.")):
        _quant(qc)


def test_good_quantization_values_still_read() -> None:
    awq = _quant({"quant_method": "awq", "bits": 4, "group_size": 128})
    assert (awq.bits, awq.group_size, awq.zero_bits) == (4, 128, 4)
    per_channel = _quant({"quant_method": "gptq", "bits": 8, "group_size": -1})  # GPTQ: -1 = one scale per row
    assert (per_channel.bits, per_channel.group_size) == (8, None)
    fp8 = _quant({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]})
    assert fp8.block == (128, 128) and fp8.not_converted == ("lm_head",)


def test_quantization_config_string_is_an_error_not_bf16_weights(runner, tmp_path) -> None:
    """gpt-oss-120b with quantization_config "mxfp4" used to be counted unquantised (3.6x too high)."""
    config = {**bundled("openai__gpt-oss-120b"), "quantization_config": "mxfp4"}
    line = one_error_line(runner.invoke(app, ["capacity", "-m", write(tmp_path, config), "--gpu", "H100-80GB"]))
    assert "quantization_config must be a mapping" in line and "'mxfp4'" in line


def test_awq_negative_bits_never_fits(runner, tmp_path) -> None:
    config = {**bundled(LLAMA_8B), "quantization_config": {"quant_method": "awq", "bits": -4, "group_size": 128}}
    line = one_error_line(runner.invoke(app, ["capacity", "-m", write(tmp_path, config), "--gpu", "H100-80GB"]))
    assert "quantization_config.bits = -4 is out of range" in line


# ---- 2. every numeric field checked --------------------------------------------------------------
@pytest.mark.parametrize(("name", "edit", "phrase"), [
    ("mosaicml__mpt-7b-instruct", {"expansion_ratio": -4}, "expansion_ratio must be a positive number"),
    ("mosaicml__mpt-7b-instruct", {"expansion_ratio": True}, "expansion_ratio must be a positive number"),
    ("state-spaces__mamba-2.8b-hf", {"time_step_rank": True}, "time_step_rank must be an integer, got True"),
    ("state-spaces__mamba-2.8b-hf", {"time_step_rank": 10**30}, "time_step_rank = 1,000,000,000,000,000,000,000"),
    ("Qwen__Qwen3-30B-A3B", {"mlp_only_layers": "0123"}, "mlp_only_layers must be a list"),
    ("Qwen__Qwen3-30B-A3B", {"mlp_only_layers": [0, 48]}, "mlp_only_layers holds 48, not a layer index in 0..47"),
])
def test_weight_fields_are_checked(runner, tmp_path, name: str, edit: dict[str, Any], phrase: str) -> None:
    config = {**bundled(name), **edit}
    line = one_error_line(runner.invoke(app, ["capacity", "-m", write(tmp_path, config), "--gpu", "H100-80GB"]))
    assert phrase in line, line


def test_llama4_moe_layers_past_the_layer_count(runner, tmp_path) -> None:
    config = bundled("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    config["text_config"]["moe_layers"] = list(range(200))
    line = one_error_line(runner.invoke(app, ["capacity", "-m", write(tmp_path, config), "--gpu", "H100-80GB"]))
    assert "text_config.moe_layers holds 48, not a layer index in 0..47" in line


def test_mamba_time_step_rank_auto_is_ceil_hidden_over_16() -> None:
    config = bundled("state-spaces__mamba-2.8b-hf")
    hidden = config["hidden_size"]
    explicit = count_weights({**config, "time_step_rank": -(-hidden // 16)}, model_id="m")
    auto = count_weights({**config, "time_step_rank": "auto"}, model_id="m")
    assert auto.parameters == explicit.parameters


# ---- 3. nested configs only where the architecture nests one ---------------------------------------
LLAMA_8B_32K_X4 = 2 * 32 * 8 * 128 * 2 * 32768 * 4  # K+V, layers, KV heads, head dim, bf16, tokens, batch


@pytest.mark.parametrize("extra", [{"text_config": {}}, {"text_config": {"vocab_size": 5}}, {"llm_config": {}},
                                   {"language_config": {"num_hidden_layers": 2}}])
def test_stray_nested_config_on_plain_llama_is_ignored(runner, tmp_path, extra: dict[str, Any]) -> None:
    config = {**bundled(LLAMA_8B), **extra}
    result = runner.invoke(app, ["estimate", "-m", write(tmp_path, config), "-s", "32k", "-b", "4", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == LLAMA_8B_32K_X4
    assert not any("not in the config" in note for note in report["notes"]), report["notes"]
    plain = count_weights(bundled(LLAMA_8B), model_id="m")
    assert count_weights(config, model_id="m").parameters == plain.parameters


def test_wrapper_types_still_read_their_nested_config() -> None:
    gemma = bundled("google__gemma-3-27b-it")
    geometry = parse_config(gemma, model_id="g")
    assert geometry.num_hidden_layers == gemma["text_config"]["num_hidden_layers"]
    # a nested config naming a model_type of its own is unwrapped even under a registered outer type
    nested = {"model_type": "llama", "text_config": {**bundled(LLAMA_8B), "num_hidden_layers": 4}}
    assert parse_config(nested, model_id="n").num_hidden_layers == 32  # llama == llama: the top level is read
    nested["text_config"]["model_type"] = "mistral"
    assert parse_config(nested, model_id="n").num_hidden_layers == 4


# ---- 4. --set keys nothing reads ------------------------------------------------------------------
def test_set_typo_is_an_error_with_did_you_mean(runner) -> None:
    line_and_hint = runner.invoke(app, ["estimate", "-m", "meta-llama/Llama-3.1-8B", "--set", "num_key_value_head=4"])
    line = one_error_line(line_and_hint)
    assert "--set num_key_value_head: no part of kvplan reads 'num_key_value_head'" in line
    assert "did you mean num_key_value_heads" in line_and_hint.stderr


def test_set_nested_key_on_a_flat_config_is_an_error(runner) -> None:
    line = one_error_line(runner.invoke(app, ["estimate", "-m", "meta-llama/Llama-3.1-8B",
                                              "--set", "text_config.num_key_value_heads=4"]))
    assert "'text_config.num_key_value_heads'" in line


def test_set_keys_read_by_the_weights_are_accepted(runner) -> None:
    result = runner.invoke(app, ["estimate", "-m", "meta-llama/Llama-3.1-8B", "--set", "intermediate_size=100"])
    assert result.exit_code == 0, result.output


def test_set_model_type_applies_before_the_family_is_chosen(runner) -> None:
    """Llama has no sliding window; as mistral, sliding_window=4096 holds 4,096 tokens per layer."""
    result = runner.invoke(app, ["estimate", "-m", "meta-llama/Llama-3.1-8B", "-s", "32k", "--format", "json",
                                 "--set", "model_type=mistral", "--set", "sliding_window=4096"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4096  # window, not 32k


def test_set_reaches_the_weight_count() -> None:
    from kvplan.api import load_geometry

    loaded = load_geometry("meta-llama/Llama-3.1-8B", overrides={"intermediate_size": 1024})
    plain = count_weights(bundled(LLAMA_8B), model_id="m")
    changed = count_weights(loaded.config, model_id="m")
    assert plain.parameters - changed.parameters == 3 * 4096 * (14336 - 1024) * 32  # gate/up/down, layers


def test_plan_set_typo_is_an_error(runner, tmp_path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("scenarios:\n  - name: a\n    model: meta-llama/Llama-3.1-8B\n    set: {num_key_value_head: 4}\n")
    line = one_error_line(runner.invoke(app, ["check", str(plan)]))
    assert "num_key_value_head" in line


# ---- 5. wrong-typed tie_word_embeddings and torch_dtype ------------------------------------------
@pytest.mark.parametrize(("edit", "phrase"), [
    ({"tie_word_embeddings": 1}, "tie_word_embeddings must be true or false, got 1"),
    ({"tie_word_embeddings": "true"}, "tie_word_embeddings must be true or false, got 'true'"),
    ({"torch_dtype": 7}, "torch_dtype must be a dtype name such as \"bfloat16\", got 7"),
    ({"torch_dtype": []}, "torch_dtype must be a dtype name such as \"bfloat16\", got []"),
])
def test_wrong_typed_flags_are_named(runner, tmp_path, edit: dict[str, Any], phrase: str) -> None:
    config = {**bundled(LLAMA_8B), **edit}
    result = runner.invoke(app, ["capacity", "-m", write(tmp_path, config), "--gpu", "H100-80GB"])
    line = one_error_line(result)
    assert phrase in line, line
    assert "not in the config" not in result.stderr


# ---- 6. near-empty configs -------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["estimate"], ["capacity", "--gpu", "H100-80GB"], ["compare"]])
def test_missing_core_fields_are_refused(runner, tmp_path, command: list[str]) -> None:
    """No confident number from defaults: the fields are named, with --set and --allow-defaults (exit 2)."""
    path = write(tmp_path, {"model_type": "llama", "hidden_size": 4096})
    result = runner.invoke(app, [*command, "-m", path, "-s", "4096"])
    line = one_error_line(result)
    assert ("the config does not give num_hidden_layers, num_attention_heads; kvplan would size it from the llama "
            "architecture defaults (num_hidden_layers = 32, num_attention_heads = 32)") in line
    assert "--set num_hidden_layers=N --set num_attention_heads=N; or --allow-defaults" in result.stderr


def test_allow_defaults_warns_in_the_first_line(runner, tmp_path) -> None:
    path = write(tmp_path, {"model_type": "llama"})
    table = runner.invoke(app, ["estimate", "-m", path, "-s", "4096", "--allow-defaults"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert table.stdout.startswith("WARNING: core geometry from the llama architecture defaults")
    cap = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100-80GB", "--allow-defaults"],
                        env={"COLUMNS": "200"})
    assert cap.exit_code == 0, cap.output
    assert cap.stdout.startswith("WARNING: core geometry from the llama architecture defaults")
    report = json.loads(runner.invoke(app, ["estimate", "-m", path, "-s", "4096", "--format", "json",
                                            "--allow-defaults"]).stdout)
    assert report["notes"][0].startswith("WARNING: core geometry")
    # LlamaConfig defaults: 32 layers, 32 heads (MHA), hidden 4096 -> head dim 128
    assert report["totals"]["kv_cache_bytes"] == 2 * 32 * 32 * 128 * 2 * 4096  # K+V, layers, heads, dim, fp16, tokens


def test_allow_defaults_in_the_library() -> None:
    import kvplan
    from kvplan.errors import ConfigError
    from kvplan.models import parse_config

    geometry = parse_config({"model_type": "llama", "hidden_size": 4096}, model_id="sparse")
    with pytest.raises(ConfigError, match="does not give num_hidden_layers, num_attention_heads"):
        kvplan.estimate(geometry, seq_len=4096)
    est = kvplan.estimate(geometry, seq_len=4096, allow_defaults=True)
    assert est.kv_cache_bytes == 2 * 32 * 32 * 128 * 2 * 4096  # K+V, layers, heads, head dim, fp16, tokens


def test_sub_config_defaults_are_the_checkpoints_own() -> None:
    """transformers saves a nested text_config as its difference from the class defaults (recursive_diff_dict),
    so a key missing there is the default's value: llava-1.5-7b-hf (text_config without layers) is sized."""
    import kvplan

    est = kvplan.estimate("llava-hf/llava-1.5-7b-hf", seq_len=4096)
    assert est.kv_cache_bytes == 2 * 32 * 32 * 128 * 2 * 4096  # K+V, llama defaults 32 layers x 32 heads x 128, fp16


def test_near_empty_config_in_a_plan(runner, tmp_path) -> None:
    write(tmp_path, {"model_type": "llama"}, "empty.json")
    plan = tmp_path / "plan.yaml"
    plan.write_text("scenarios:\n  - name: a\n    model: ./empty.json\n    seq_len: 4k\n    max_kv_bytes: 10GiB\n")
    refused = runner.invoke(app, ["check", str(plan)])
    assert "scenario 'a': empty: the config does not give num_hidden_layers" in one_error_line(refused)
    assert "or allow_defaults: true to size the default anyway" in refused.stderr
    plan.write_text(plan.read_text().replace("seq_len: 4k", "seq_len: 4k\n    allow_defaults: true"))
    result = runner.invoke(app, ["check", str(plan)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "PASS" in result.stdout
    assert "WARNING a: core geometry from the llama architecture defaults" in result.stderr


@pytest.mark.parametrize("command", [["estimate"], ["capacity", "--gpu", "H100-80GB"], ["compare"]])
def test_strict_refuses_defaulted_geometry(runner, tmp_path, command: list[str]) -> None:
    path = write(tmp_path, {"model_type": "llama"})
    line = one_error_line(runner.invoke(app, [*command, "-m", path, "--strict", "--allow-defaults"]))
    assert "--strict: the config does not give num_hidden_layers, num_attention_heads, hidden_size" in line
    sub = one_error_line(runner.invoke(app, [*command, "-m", "llava-hf/llava-1.5-7b-hf", "--strict"]))
    assert "--strict: the config does not give num_hidden_layers" in sub
    full = runner.invoke(app, [*command, "-m", "meta-llama/Llama-3.1-8B", "--strict"])
    assert full.exit_code == 0, full.output
    assert "WARNING" not in full.stdout


def test_plan_strict_key(runner, tmp_path) -> None:
    write(tmp_path, {"model_type": "llama"}, "empty.json")
    plan = tmp_path / "plan.yaml"
    plan.write_text("defaults:\n  strict: true\n  allow_defaults: true\nscenarios:\n  - name: a\n"
                    "    model: ./empty.json\n    seq_len: 4k\n")
    line = one_error_line(runner.invoke(app, ["check", str(plan)]))
    assert "strict: true: the config does not give num_hidden_layers" in line
    plan.write_text(plan.read_text().replace("strict: true", "strict: false"))
    assert runner.invoke(app, ["check", str(plan)]).exit_code == 0


# ---- 7. verify --tp on the CPU counts its rank processes -----------------------------------------
def test_verify_cpu_ranks_are_counted_and_capped(runner) -> None:
    pytest.importorskip("torch")
    from kvplan.verify.decode import RANK_PROCESS_BYTES, RANKS_PER_CORE, cpu_cores

    base = ["verify", "-m", "meta-llama/Llama-3.1-8B", "--layers", "1", "--prompt-len", "8", "--gen-len", "2"]
    line = one_error_line(runner.invoke(app, [*base, "--tp", "4", "--max-memory", "256MiB"]))
    assert f"4 rank processes of about {RANK_PROCESS_BYTES:,} bytes each ({4 * RANK_PROCESS_BYTES:,})" in line
    most = RANKS_PER_CORE * cpu_cores()
    line = one_error_line(runner.invoke(app, [*base, "--tp", "4096"]))
    assert f"more than {RANKS_PER_CORE} per core on {cpu_cores()} cores ({most})" in line
