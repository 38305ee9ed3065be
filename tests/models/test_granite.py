"""IBM Granite: Granite 3 dense and MoE, the SWA members, MoE-shared and the Granite 4.0 hybrid (granite.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import kinds, mamba2_state_bytes, parse
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_counts_like_transformers,
    case_id,
    default_config,
    meta_count,
)

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import count_weights

from conftest import BF16, KV


def granite(**overrides: Any) -> dict[str, Any]:
    layer_types = ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"]
    config = {
        "model_type": "granitemoehybrid", "architectures": ["GraniteMoeHybridForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 12, "num_key_value_heads": 4,
        "max_position_embeddings": 131072, "layer_types": layer_types, "mamba_n_heads": 48, "mamba_d_head": 64,
        "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    config.update(overrides)
    return config


def test_granitemoehybrid_layer_types() -> None:
    geometry = parse(granite())
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "full_attention"] == [3, 7]
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    head_dim = 1536 // 12  # no head_dim field: hidden_size // num_attention_heads
    assert est.bytes_per_token == 2 * KV * 4 * head_dim * BF16  # attention layers, K+V, kv heads, head dim, bf16
    d_inner = 2 * 1536  # mamba_expand * hidden_size (vLLM GraniteMoeHybrid intermediate_size)
    per_layer = mamba2_state_bytes(d_inner=d_inner, n_heads=48, head_dim=64, n_groups=1, d_state=128, d_conv=4)
    assert est.state_bytes == 6 * per_layer


def test_granitemoehybrid_layers_block_type_alias_and_auto_head_dim() -> None:
    config = granite(mamba_d_head="auto")
    config["layers_block_type"] = config.pop("layer_types")
    geometry = parse(config)
    assert kinds(geometry).count("full_attention") == 2
    assert dict(geometry.layers[0].shapes)["ssm"] == (48, 2 * 1536 // 48, 128)
    assert any(p.source == "config: layers_block_type" for p in geometry.provenance)


def test_granitemoehybrid_without_layer_types_is_all_mamba() -> None:
    config = granite()
    del config["layer_types"]
    geometry = parse(config)
    assert kinds(geometry) == ["state"] * 8
    assert any("every layer a Mamba-2 layer" in note for note in geometry.notes)


def test_granitemoehybrid_rejects_other_layer_names() -> None:
    with pytest.raises(ConfigError, match="unknown layer type 'sliding_attention'"):
        parse(granite(layer_types=["mamba"] * 7 + ["sliding_attention"]))


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = granite()
    path = str(write_config(config))
    result = runner.invoke(app, ["estimate", "-m", path, "--seq-len", "4096", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == estimate(parse(config), seq_len=4096).kv_cache_bytes
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100"])
    # issue 10: these families count their weights from the config (the weight tests of this file)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--format", "json"])
    assert json.loads(result.stdout)["weights"]["source"] == "config"
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--weights-bytes", "4GiB"])
    assert result.exit_code == 0, result.output


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("granitemoe", {}),
    ("granitemoe", {"num_hidden_layers": 4, "num_local_experts": 16, "num_key_value_heads": 8, "attention_bias": True}),
    ("granite_swa", {}),
    ("granite_swa", {"num_hidden_layers": 4, "mlp_bias": True, "attention_bias": True, "tie_word_embeddings": False}),
    ("granitemoe_swa", {}),
    ("granitemoe_swa", {"num_hidden_layers": 4, "shared_intermediate_size": 512,
                        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]}),
    ("granitemoeshared", {}),
    ("granitemoeshared", {"num_hidden_layers": 4, "shared_intermediate_size": 1024, "num_key_value_heads": 8,
                          "attention_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)


LAYERS8 = ["mamba", "attention", "mamba", "mamba", "mamba", "mamba", "attention", "mamba"]


@pytest.mark.parametrize("overrides", [{"num_hidden_layers": 8, "layer_types": LAYERS8},
                                       {"num_hidden_layers": 8, "layer_types": LAYERS8, "num_local_experts": 0}],
                         ids=["granitemoehybrid", "granitemoehybrid dense"])
def test_granitemoehybrid_hub_layer_types_weights_equal_transformers(overrides: dict[str, Any]) -> None:
    config = default_config("granitemoehybrid", **overrides)
    config["layer_types"] = overrides["layer_types"]  # the Hub spelling of layer_types, which transformers renames
    kvplan = count_weights(config, model_id="granitemoehybrid").parameters
    assert kvplan == meta_count(default_config("granitemoehybrid", **overrides))


def test_granitemoehybrid_transformers_5_25_layer_names() -> None:
    # GraniteMoeHybridConfig (5.25) names the Mamba-2 layers linear_attention and the GQA ones full_attention
    from kvplan.models import count_weights

    config = default_config("granitemoehybrid", num_hidden_layers=2, num_local_experts=4,
                            layer_types=["linear_attention", "full_attention"])
    assert count_weights(config, model_id="granite").parameters == meta_count(config)
    assert kinds(parse(config)) == ["state", "full_attention"]
