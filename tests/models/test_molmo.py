"""AllenAI Molmo2's language model (molmo.py)."""

from __future__ import annotations

from transformers_meta import default_config, meta_count

from kvplan.models import count_weights


def test_molmo2_olmo_qk_norm_spans_all_heads() -> None:
    config = default_config("molmo2")
    config["text_config"]["qk_norm_type"] = "olmo"
    weights = count_weights(config, model_id="molmo2")
    assert weights.parameters == meta_count(config)
    text = config["text_config"]  # the norms span all q and k heads: (32 + 8) x 128 per layer, not 2 x 128
    per_head = count_weights(default_config("molmo2"), model_id="molmo2").parameters
    assert weights.parameters - per_head == ((32 + 8) * 128 - 2 * 128) * text["num_hidden_layers"]
