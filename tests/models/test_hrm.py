"""HRM-Text (hrm.py): two stacks of gated-attention layers run in cycles; weights as transformers counts them."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import default_config, meta_count

from kvplan.models import count_weights


def test_hrm_text_default_weights_by_the_config_class() -> None:
    weights = count_weights({"model_type": "hrm_text"}, model_id="hrm")
    vocab, hidden, per_stack, stacks, heads, head_dim, inner = 151808, 1536, 16, 2, 12, 128, 4096
    width = heads * head_dim
    layer = 4 * hidden * width + width * hidden + 3 * hidden * inner  # q, k, v, gate; o; gate/up/down (no biases)
    expected = 2 * vocab * hidden + stacks * per_stack * layer + hidden  # embed, lm_head; the layers; z_L_init
    assert weights.parameters == expected == 1_447_822_848  # what transformers 5.25 counts on the meta device
    assert any("num_layers_per_stack is not in the config" in n for n in weights.notes)


@pytest.mark.parametrize("overrides", [{}, {"attention_bias": True, "mlp_bias": True, "num_hidden_layers": 3,
                                            "tie_word_embeddings": True}], ids=["default", "biased-tied"])
def test_hrm_text_weights_equal_transformers(overrides: dict[str, Any]) -> None:
    # the saved config carries num_layers_per_stack and the inflated num_hidden_layers (one per cache slot)
    config = default_config("hrm_text", **overrides)
    assert config["num_hidden_layers"] == config["num_layers_per_stack"] * 2 * (3 + 1)  # H_cycles x (L_cycles + 1)
    assert count_weights(config, model_id="hrm").parameters == meta_count(config)
