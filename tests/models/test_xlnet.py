"""XLNet (xlnet.py): weights as transformers' XLNetLMHeadModel holds them; the cache is the generic rules'."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import default_config, meta_count

from kvplan.models import count_weights


def test_xlnet_default_weights_by_the_config_class() -> None:
    weights = count_weights({"model_type": "xlnet"}, model_id="xlnet")
    vocab, d, layers, heads, inner = 32000, 1024, 24, 16, 4096  # vocab_size, d_model, n_layer, n_head, d_inner
    width = heads * (d // heads)  # n_head x d_head
    layer = (5 * d * width + 3 * width + 2 * width  # q, k, v, o, r; r_r/r_s/r_w biases; segment embedding
             + d * inner + inner + inner * d + d + 2 * 2 * d)  # feed-forward; two LayerNorms
    expected = vocab * d + d + layers * layer + vocab  # embedding, mask_emb; layers; the tied LM head's bias
    assert weights.parameters == expected == 360_300_800  # what transformers 5.25 counts on the meta device


@pytest.mark.parametrize("overrides", [{}, {"n_layer": 3, "d_model": 512, "n_head": 8, "tie_word_embeddings": False}],
                         ids=["default", "small-untied"])
def test_xlnet_weights_equal_transformers(overrides: dict[str, Any]) -> None:
    config = default_config("xlnet", **overrides)
    assert count_weights(config, model_id="xlnet").parameters == meta_count(config)
