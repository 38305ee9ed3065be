"""PP-FormulaNet (pp_formulanet.py, its SAM tower and projector): weights as transformers'
PPFormulaNetForConditionalGeneration holds them."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import meta_parameters

from kvplan.models import count_weights

CLASS = "PPFormulaNetForConditionalGeneration"


def test_pp_formulanet_decoder_and_projector_arithmetic() -> None:
    config, expected, _ = meta_parameters("pp_formulanet", CLASS)
    weights = count_weights(config, model_id="pp_formulanet")
    # PPFormulaNetTextConfig: vocab_size, d_model, decoder_layers, decoder_ffn_dim, max_position_embeddings (+ 2)
    vocab, d, layers, ffn, positions = 50000, 512, 8, 2048, 2560 + 2
    decoder = (2 * vocab * d + positions * d  # embedding, untied lm_head; learned positions
               + layers * (8 * d * d + 8 * d + d * ffn + ffn + ffn * d + d + 3 * 2 * d)  # self/cross attn, FFN, 3 LNs
               + 2 * 2 * d)  # embedding and final LayerNorms
    # PPFormulaNetVisionConfig: post_conv_in/mid/out_channels, decoder_hidden_size
    c_in, mid, out = 256, 512, 1024
    projector = 9 * c_in * mid + 9 * mid * out + out * out + out + out * d + d
    assert weights.parameters - weights.vision_parameters == decoder
    assert next(p for p in weights.parts if p.name == "projector").parameters == projector
    assert weights.parameters == expected == 180_897_536


@pytest.mark.parametrize("overrides", [{"text_config": {"decoder_layers": 3}, "vision_config": {
    "num_hidden_layers": 4, "global_attn_indexes": [1, 3], "image_size": 768}}])
def test_pp_formulanet_variant_equals_transformers(overrides: dict[str, Any]) -> None:
    config, expected, _ = meta_parameters("pp_formulanet", CLASS, **overrides)
    assert count_weights(config, model_id="pp_formulanet").parameters == expected
