"""GLM-5-Next's weights (language model, vision tower, projector) equal transformers' own model on the meta device."""

from __future__ import annotations

import pytest
from test_models_weights import default_config, meta_count

from kvplan.models import count_weights

SMALL = {"vocab_size": 512, "pad_token_id": 0, "n_routed_experts": 4, "intermediate_size": 64, "moe_intermediate_size": 64}


@pytest.mark.parametrize("text", [
    {"num_hidden_layers": 4},  # the class's default pattern: layers 0-2 KDA, layer 3 indexed; 3 dense MLPs
    {"num_hidden_layers": 8, "index_kpool": 8, "hc_mult": 2},
    {"num_hidden_layers": 4, "layer_types": ["linear_attention", "indexed_attention"] * 2,
     "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]},
], ids=["default", "kpool-hc", "layer-types"])
def test_glm5_next_weights_equal_transformers(text: dict) -> None:
    config = default_config("glm5_next", text_config={**SMALL, **text}, vision_config={"depth": 2})
    counted = count_weights(config, model_id="glm5-next")
    assert counted.parameters == meta_count(config)
    assert counted.vision_parameters == meta_count(config) - meta_count(config, language_only=True)
