"""ViT as the encoder of a vision-encoder-decoder: weights only, no cache (vit.py)."""

from __future__ import annotations

from kvplan.models import count_weights


def test_vit_encoder_arithmetic() -> None:
    h, layers, inner, patch, image, channels = 768, 12, 3072, 16, 224, 3  # ViTConfig defaults
    tokens = (image // patch) ** 2 + 1  # patches + the class token
    per_layer = 4 * h * h + 3 * h + h + 2 * h * inner + inner + h + 4 * h  # q/k/v/o, their biases, MLP, 2 LayerNorms
    embeddings = channels * patch * patch * h + h + h + tokens * h  # patch conv + bias, class token, positions
    expected = embeddings + layers * per_layer + 2 * h + h * h + h  # final LayerNorm, pooler
    vit = count_weights({"model_type": "vit"}, model_id="vit")
    assert vit.parameters == vit.vision_parameters == expected
    no_bias = count_weights({"model_type": "vit", "qkv_bias": False, "pooler_output_size": 512}, model_id="vit")
    assert no_bias.parameters == expected - layers * 3 * h - (h * h + h) + (h * 512 + 512)
