"""Mistral, Ministral 3, Mixtral, Mistral 4 and Pixtral, Mistral 3's vision tower (mistral.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import BOTH, geometry_of, kinds
from transformers_meta import (
    DROP,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate

from conftest import BF16, KV


@BOTH
def test_mistral_sliding_window(bundled: bool) -> None:
    geometry = geometry_of("mistralai/Mistral-7B-v0.1" if bundled else "mistralai__Mistral-7B-v0.1", bundled=bundled)
    assert kinds(geometry) == ["sliding_window"] * 32
    assert geometry.layers[0].sliding_window == 4096
    # 32k tokens: every layer holds only the 4096-token window.
    assert estimate(geometry, seq_len=32768).kv_cache_bytes == 4096 * 32 * KV * 8 * 128 * BF16


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "mistral4": [{"num_hidden_layers": 4, "first_k_dense_replace": 2, "q_lora_rank": None, "attention_bias": True},
                 {"num_hidden_layers": 3, DROP: ["first_k_dense_replace"]}],
    "ministral3": [{"num_hidden_layers": 3, "tie_word_embeddings": True, "head_dim": 64}],
    # Pixtral's tower and the Mistral 3 projector (shared with Mistral Large 4)
    "mistral3": [{"vision_feature_layer": [-1, -2], "multimodal_projector_bias": True, "spatial_merge_size": 3},
                 {"text_config": {"model_type": "ministral3", "num_hidden_layers": 4}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
