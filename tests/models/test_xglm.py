"""The BART lineage's decoders run alone: TrOCR, XGLM, Kosmos-2 and Kosmos-2.5 text models (xglm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import assert_counts_like_transformers, case_id, default_config
from zoo_generate import T, check_zoo, kv, kv_bytes

from kvplan.models import count_weights


@pytest.mark.parametrize(("model_type", "config", "heads", "head_dim"), [
    ("xglm", {"model_type": "xglm", "num_layers": 2, "attention_heads": 16, "d_model": 1024}, 16, 64),
    ("trocr", {"model_type": "trocr", "decoder_layers": 2, "decoder_attention_heads": 16, "d_model": 1024,
               "is_encoder_decoder": False}, 16, 64),
    ("kosmos-2", {"model_type": "kosmos-2", "text_config": {"model_type": "kosmos_2_text_model", "layers": 2,
                                                             "attention_heads": 32, "embed_dim": 2048}}, 32, 64),
    ("kosmos-2.5", {"model_type": "kosmos-2.5", "text_config": {"model_type": "kosmos_2_5_text_model", "layers": 2,
                                                                 "attention_heads": 16, "embed_dim": 1536}}, 16, 96),
])
def test_bart_lineage_decoders(model_type: str, config: dict[str, Any], heads: int, head_dim: int,
                               tmp_path: Path) -> None:
    expected = kv(2, heads, head_dim, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_kosmos_2_5_text_model_has_no_cross_attention() -> None:
    # Kosmos2_5TextConfig: embed_dim 1536, 24 layers, ffn 6144, vocab 108481 (tied); per layer q/k/v/o with
    # biases, an fc1/fc2 MLP with biases and a LayerNorm over its hidden width, two LayerNorms; a 2-row segment
    # embedding and a final LayerNorm; sinusoidal positions are not saved
    d, layers, ffn, vocab = 1536, 24, 6144, 108481
    layer = 4 * (d * d + d) + d * ffn + ffn + ffn * d + d + 2 * ffn + 2 * 2 * d
    expected = vocab * d + 2 * d + layers * layer + 2 * d
    weights = count_weights(default_config("kosmos-2.5"), model_id="k")
    assert weights.parameters - weights.vision_parameters == expected


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("trocr", {}),  # learned positions (+2 rows), layernorm_embedding, cross-attention in every layer
    ("trocr", {"use_learned_position_embeddings": False, "layernorm_embedding": False}),  # sinusoidal: not saved
    ("trocr", {"cross_attention_hidden_size": 768}),  # k/v of cross-attention read the encoder's width
    ("xglm", {}),  # sinusoidal positions, no cross-attention
    ("xglm", {"add_cross_attention": True}),
    ("kosmos-2", {}),  # text: inner attention LayerNorm, MLP LayerNorm; vision tower + latent-query projection
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
