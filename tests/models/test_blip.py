"""BLIP's captioning model (blip.py and the BLIP ViT): weights as transformers' BlipForConditionalGeneration holds
them."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import meta_parameters

from kvplan.models import count_weights

CLASS = "BlipForConditionalGeneration"


def test_blip_text_decoder_arithmetic() -> None:
    config, expected, _ = meta_parameters("blip", CLASS)
    weights = count_weights(config, model_id="blip")
    # BlipTextConfig: vocab_size, hidden_size, encoder_hidden_size, intermediate_size, num_hidden_layers, positions
    vocab, h, enc, inner, layers, positions = 30524, 768, 768, 3072, 12, 512
    layer = (4 * h * h + 4 * h + 2 * h  # self-attention q/k/v/o, biases, LayerNorm
             + 2 * h * h + 2 * enc * h + 4 * h + 2 * h  # cross-attention: q, o of h; k, v from the encoder; LayerNorm
             + h * inner + inner + inner * h + h + 2 * h)  # intermediate, output, LayerNorm
    decoder = vocab * h + positions * h + 2 * h + layers * layer + h * h + h + 2 * h + vocab  # tied projection
    assert weights.parameters - weights.vision_parameters == decoder
    assert weights.parameters == expected == 223_971_644


@pytest.mark.parametrize("overrides", [{"text_config": {"num_hidden_layers": 3, "encoder_hidden_size": 1024,
                                                        "tie_word_embeddings": False},
                                        "vision_config": {"num_hidden_layers": 2, "hidden_size": 1024,
                                                          "num_attention_heads": 16, "image_size": 224}}])
def test_blip_variant_equals_transformers(overrides: dict[str, Any]) -> None:
    config, expected, _ = meta_parameters("blip", CLASS, **overrides)
    assert count_weights(config, model_id="blip").parameters == expected
