"""Pix2Struct (pix2struct.py and the Pix2Struct tower): weights as transformers' Pix2StructForConditionalGeneration
holds them."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import meta_parameters

from kvplan.models import count_weights

CLASS = "Pix2StructForConditionalGeneration"


def test_pix2struct_default_weights_arithmetic() -> None:
    config, expected, _ = meta_parameters("pix2struct", CLASS)
    weights = count_weights(config, model_id="pix2struct")
    # Pix2StructTextConfig: vocab_size, hidden_size, num_layers, d_ff, num_heads, relative_attention_num_buckets
    vocab, h, layers, d_ff, heads, buckets = 50244, 768, 12, 2048, 12, 32
    text = (2 * vocab * h  # embedding and the untied lm_head
            + layers * (8 * h * h + 3 * h * d_ff + 3 * h)  # self/cross q,k,v,o; gated FF; three norms
            + buckets * heads + h)  # the first layer's relative-position table; the final norm
    # Pix2StructVisionConfig: hidden_size, patch_embed_hidden_size, d_ff, num_attention_heads x d_kv, seq_len
    v, patch, v_ff, inner, seq, v_layers = 768, 768, 2048, 12 * 64, 4096, 12
    vision = (patch * v + v + 2 * seq * v  # biased patch projection; row and column tables
              + v_layers * (4 * v * inner + 3 * v * v_ff + 2 * v) + v)  # blocks (no biases); the final norm
    assert weights.vision_parameters == vision
    assert weights.parameters == text + vision == expected == 282_285_696


@pytest.mark.parametrize("overrides", [{"text_config": {"num_layers": 3}, "vision_config": {"num_hidden_layers": 2,
                                                                                            "seq_len": 1024}}])
def test_pix2struct_variant_equals_transformers(overrides: dict[str, Any]) -> None:
    config, expected, _ = meta_parameters("pix2struct", CLASS, **overrides)
    assert count_weights(config, model_id="pix2struct").parameters == expected
