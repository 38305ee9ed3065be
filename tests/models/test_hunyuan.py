"""Tencent Hunyuan: dense, A13B MoE, Hy3, and cross-layer attention (hunyuan.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import kinds, per_token
from transformers_meta import (
    DROP,
    assert_counts_like_transformers,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    case_id,
    config_of,
    meta_count,
    variant_cases,
    variant_ids,
)

from kvplan.models import count_weights, parse_config

from conftest import BF16, KV, make_config


def test_cross_layer_attention_shares_kv() -> None:
    # Hunyuan-Large style: use_cla with cla_share_factor 2 -> every other layer keeps a cache.
    config = make_config(model_type="hunyuan", num_hidden_layers=8, num_key_value_heads=8,
                         use_cla=True, cla_share_factor=2)
    geometry = parse_config(config, model_id="h")
    assert kinds(geometry) == ["full_attention", "no_cache"] * 4
    assert per_token(geometry) == 4 * KV * 8 * 128 * BF16  # 4 caching layers


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    # HunYuanDenseV1Config's defaults name no head_dim and no rope_theta, which its model needs
    ("hunyuan_v1_dense", {"head_dim": 128, "num_key_value_heads": 8,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "hy_v3": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"],
               "num_shared_experts": 2, "attention_bias": True},
              {"num_hidden_layers": 3, DROP: ["mlp_layer_types"]}],
    "hunyuan_v1_moe": [{"num_hidden_layers": 3, "num_experts": 4, "moe_topk": 2, "attention_bias": True}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


@pytest.mark.parametrize(("model_type", "drop", "said"), [
    ("hy_v3", ["mlp_layer_types"], "HYV3Config's default"),
])
def test_a_layout_from_the_config_class_default_is_said(model_type: str, drop: list[str], said: str) -> None:
    # a Hub config that omits a per-layer list is counted by its config class's rule, and the report says so
    config = config_of(model_type, {DROP: drop})
    weights = count_weights(config, model_id=model_type)
    assert any(said in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)
