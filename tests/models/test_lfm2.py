"""Liquid LFM2 (+MoE), LFM3 and LFM3-VL: short-convolution state layers and attention (lfm2.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from geometry_check import kinds, parse
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_counts_like_transformers,
    case_id,
    default_config,
    meta_count,
)
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import count_weights

from conftest import BF16, KV


def test_lfm3_conv_window_is_whole_in_transformers(tmp_path: Path) -> None:
    config = {"model_type": "lfm3", "num_hidden_layers": 5, "hidden_size": 2048, "num_attention_heads": 16,
              "num_key_value_heads": 4, "head_dim": 128, "conv_L_cache": 7, "sliding_window": 256,
              "layer_types": ["conv", "conv", "full_attention", "conv", "sliding_attention"]}
    expected = 3 * B * 7 * 2048 * S + 2 * kv(1, 4, 128, T)  # conv_L_cache inputs of hidden_size; T < window
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("lfm3", expected)


def lfm2(**overrides: Any) -> dict[str, Any]:
    """Shaped like LiquidAI/LFM2-1.2B."""
    config = {
        "model_type": "lfm2", "architectures": ["Lfm2ForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 128000, "conv_L_cache": 3, "full_attn_idxs": [2, 5, 8, 10, 12, 14],
    }
    config.update(overrides)
    return config


def test_lfm2_full_attn_idxs_and_short_conv_state() -> None:
    geometry = parse(lfm2())
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "full_attention"] == [2, 5, 8, 10, 12, 14]
    conv = geometry.layers[0]
    assert (conv.mixer, dict(conv.shapes)) == ("short_conv", {"conv": (3 - 1, 2048)})
    est = estimate(geometry, seq_len=1000, kv_dtype="bf16")
    assert est.bytes_per_token == 6 * KV * 8 * (2048 // 32) * BF16  # attention layers, K+V, kv heads, head dim
    assert est.state_bytes == 10 * (3 - 1) * 2048 * BF16  # conv layers, L_cache - 1, hidden_size, bf16


def test_lfm2_layer_types_win_over_full_attn_idxs() -> None:
    layer_types = ["conv", "full_attention"] * 8
    geometry = parse(lfm2(layer_types=layer_types))
    assert kinds(geometry) == ["state", "full_attention"] * 8


def test_lfm2_without_layout_uses_the_default_and_lfm2_moe_requires_it() -> None:
    config = lfm2()
    del config["full_attn_idxs"]
    geometry = parse(config)
    assert kinds(geometry) == ["full_attention"] * 16  # Lfm2Config: full_attn_idxs defaults to every layer
    assert any("every layer attention" in note for note in geometry.notes)
    moe = lfm2(model_type="lfm2_moe")
    del moe["full_attn_idxs"]
    with pytest.raises(ConfigError, match="layer_types is missing .*full_attn_idxs"):
        parse(moe)


def test_lfm2_moe_layer_types() -> None:
    layer_types = ["conv"] * 24
    for index in (2, 6, 10, 14, 18, 21):
        layer_types[index] = "full_attention"
    config = lfm2(model_type="lfm2_moe", num_hidden_layers=24, layer_types=layer_types)
    del config["full_attn_idxs"]
    est = estimate(parse(config), seq_len=1, kv_dtype="bf16")
    assert est.state_bytes == 18 * (3 - 1) * 2048 * BF16


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = lfm2()
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


def test_lfm3_vl_text_part_and_default_vision_layers() -> None:
    config = default_config("lfm3_vl")
    weights = count_weights(config, model_id="lfm3_vl")
    assert weights.language_parameters == meta_count(config, language_only=True)
    assert weights.language_parameters == count_weights(config["text_config"], model_id="lfm3").parameters
    # without vision_config.layer_types the tower's default (conv at 0, 1 and odd layers) is read, and noted
    del config["vision_config"]["layer_types"]
    weights = count_weights(config, model_id="lfm3_vl")
    assert weights.parameters == meta_count(config)
    assert any("vision_config.layer_types is not in the config" in note for note in weights.notes)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("lfm3", {}),
    # no sandwich norms or attention gate, biases, untied head, its own layer list
    ("lfm3", {"num_hidden_layers": 5, "use_sandwich_norm": False, "use_attention_gate": False, "attention_bias": True,
              "conv_bias": True, "tie_word_embeddings": False,
              "layer_types": ["conv", "sliding_attention", "full_attention", "conv", "conv"]}),
    ("lfm3_vl", {}),
    ("lfm3_vl", {"vision_config": {"num_hidden_layers": 5, "hidden_size": 768, "num_attention_heads": 12,
                                   "num_key_value_heads": 4}, "projector_bias": False}),
    ("lfm2", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2}),
    ("lfm2 multiplier", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2,
                         "block_ffn_dim_multiplier": 1.5, "conv_bias": True, "intermediate_size": 10000}),
    ("lfm2_moe", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["lfm3", "lfm3_vl"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
