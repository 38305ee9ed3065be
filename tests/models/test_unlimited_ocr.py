"""Unlimited-OCR's language model (unlimited_ocr.py)."""

from __future__ import annotations

from transformers_meta import default_config

from kvplan.models import count_weights


def test_unlimited_ocr_text_model_arithmetic() -> None:
    # UnlimitedOcrTextConfig: hidden 1280, 12 layers, 10 heads x 128 (MHA), MLP 6848 in the dense first layer,
    # 64 experts of 896 and 2 shared ones after it, a bias-free router; vocab 129280, untied lm_head
    h, layers, heads, dense, experts, size, shared, vocab = 1280, 12, 10, 6848, 64, 896, 2, 129280
    attention = layers * 4 * h * heads * 128
    mlp = 3 * h * dense + (layers - 1) * (experts * 3 * h * size + 3 * h * shared * size + experts * h)
    expected = 2 * vocab * h + attention + mlp + (2 * layers + 1) * h
    weights = count_weights(default_config("unlimited_ocr"), model_id="u")
    assert weights.parameters - weights.vision_parameters == expected
