"""Xiaomi MiMo-V2-Flash: full and sliding layers of their own KV heads (mimo.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import CONTEXT, part, total
from transformers_meta import assert_counts_like_transformers, case_id

from kvplan.models import count_weights, parse_config

from conftest import BF16, shared_config


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_mimo_v2_flash_full_and_swa_layers(engine: str) -> None:
    config = shared_config("XiaomiMiMo__MiMo-V2-Flash")
    n_sliding = sum(config["hybrid_layer_pattern"])
    assert (n_sliding, 48 - n_sliding) == (39, 9)
    window = config["sliding_window_size"] + 1  # MiMoV2FlashConfig: sliding_window = sliding_window_size + 1
    full = CONTEXT * 4 * (192 + 128) * BF16  # num_key_value_heads x (head_dim K + v_head_dim V)
    swa = window * 8 * (192 + 128) * BF16  # swa_num_key_value_heads x (swa_head_dim + swa_v_head_dim)
    assert total(config, engine) == 9 * full + 39 * swa


def test_mimo_v2_flash_transformers_form_doubles_kv_heads_on_sliding_layers() -> None:
    text = {"model_type": "mimo_v2_flash", "num_hidden_layers": 6}  # MiMoV2FlashConfig defaults
    geometry = parse_config(text, model_id="test")
    assert [s.kind for s in geometry.layers] == ["full_attention"] + ["sliding_window"] * 4 + ["full_attention"]
    assert geometry.layers[1].num_kv_heads == 2 * 4  # 2 x num_key_value_heads
    assert geometry.layers[1].window == 129


def test_mimo_v2_flash_weights() -> None:
    weights = count_weights(shared_config("XiaomiMiMo__MiMo-V2-Flash"), model_id="test")
    assert part(weights, "experts") == 47 * 256 * 3 * 4096 * 2048  # 47 MoE layers x 256 experts, gated
    assert part(weights, "attention") == (
        9 * (4096 * 64 * 192 + 4096 * 4 * (192 + 128) + 64 * 128 * 4096)
        + 39 * (4096 * 64 * 192 + 4096 * 8 * (192 + 128) + 64 * 128 * 4096 + 64))  # + sink logits


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("mimo_v2_flash", {}),  # the router's e_score_correction_bias
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
