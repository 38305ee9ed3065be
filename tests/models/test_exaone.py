"""LG EXAONE 3.x, EXAONE 4.0 (sliding and global layers) and K-EXAONE (exaone.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import kinds, parse
from transformers_meta import (
    DROP,
    SET,
    assert_counts_like_transformers,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    case_id,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError

from conftest import BF16, KV


def exaone4(**overrides: Any) -> dict[str, Any]:
    config = {
        "model_type": "exaone4", "architectures": ["Exaone4ForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 5120, "num_hidden_layers": 8, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 4,
    }
    config.update(overrides)
    return config


def test_exaone4_integer_pattern_and_layer_types() -> None:
    geometry = parse(exaone4())
    assert kinds(geometry) == (["sliding_window"] * 3 + ["full_attention"]) * 2  # (i + 1) % 4 == 0 is global
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    per_token_layer = KV * 8 * 128 * BF16  # K+V, kv heads, head dim, bf16
    assert est.kv_cache_bytes == (2 * 8192 + 6 * 4096) * per_token_layer  # 2 global layers, 6 windowed at 4096
    layer_types = ["sliding_attention", "full_attention"] * 4
    assert kinds(parse(exaone4(layer_types=layer_types, sliding_window_pattern="LG"))) == [
        "sliding_window", "full_attention"] * 4


def test_exaone4_null_window_and_string_pattern() -> None:
    assert kinds(parse(exaone4(sliding_window=None))) == ["full_attention"] * 8
    with pytest.raises(ConfigError, match="no layer_types"):
        parse(exaone4(sliding_window_pattern="LLLG"))


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = exaone4()
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
    ("exaone4", {}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "exaone_moe": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"],
                    "num_shared_experts": 2},
                   {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 3}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


def test_exaone4_5_text_is_read_as_exaone4() -> None:
    # EXAONE 4.5 first shipped its language model as exaone4_5_text; Exaone4_5_Config reads it as exaone4
    from transformers_meta import config_of, meta_count

    from kvplan.models import count_weights

    config = config_of("exaone4_5", {})
    released = json.loads(json.dumps(config))
    released["text_config"]["model_type"] = "exaone4_5_text"
    weights = count_weights(released, model_id="exaone4_5")
    assert weights.parameters == meta_count(config) == count_weights(config, model_id="exaone4_5").parameters
    text = released["text_config"]
    geometry = parse(text)
    assert kinds(geometry) == kinds(parse(config["text_config"]))
    layers, kv_heads, head_dim = text["num_hidden_layers"], text["num_key_value_heads"], 4096 // 32
    full = layers // text["sliding_window_pattern"]
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.kv_cache_bytes == KV * kv_heads * head_dim * BF16 * (full * 8192 + (layers - full) * 4096)
