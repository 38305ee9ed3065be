"""XLM (xlm.py): weights as transformers' XLMWithLMHeadModel holds them; the cache is the generic rules'."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import default_config, meta_count

from kvplan.errors import ConfigError
from kvplan.models import count_weights


def test_xlm_default_weights_by_the_config_class() -> None:
    weights = count_weights({"model_type": "xlm"}, model_id="xlm")
    vocab, dim, layers, positions = 30145, 2048, 12, 512  # vocab_size, emb_dim, n_layers, max_position_embeddings
    ffn = 4 * dim
    layer = 4 * dim * dim + 4 * dim + dim * ffn + ffn + ffn * dim + dim + 2 * 2 * dim  # q/k/v/o, FFN, 2 LayerNorms
    expected = vocab * dim + positions * dim + 2 * dim + layers * layer + vocab  # tied projection: its bias only
    assert weights.parameters == expected == 667_119_041  # what transformers 5.25 counts on the meta device


@pytest.mark.parametrize("overrides", [{}, {"n_langs": 5, "n_layers": 3, "tie_word_embeddings": False, "emb_dim": 512,
                                            "n_heads": 8}], ids=["default", "languages-untied"])
def test_xlm_weights_equal_transformers(overrides: dict[str, Any]) -> None:
    config = default_config("xlm", **overrides)
    assert count_weights(config, model_id="xlm").parameters == meta_count(config)


def test_xlm_adaptive_softmax_is_refused() -> None:
    with pytest.raises(ConfigError, match="adaptive-softmax"):
        count_weights({"model_type": "xlm", "asm": True}, model_id="xlm")
