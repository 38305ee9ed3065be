"""π0.5 (pi05.py): a PaliGemma under vlm_config (its Gemma decoder's K/V is the cache) and an action expert under
dit_config; the weights of both, as transformers' PI05ForConditionalGeneration holds them."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import assert_capacity_counts_the_weights, default_config, meta_count

from kvplan.errors import ConfigError
from kvplan.models import count_weights


def test_pi05_default_weights_by_the_config_class() -> None:
    # PI05Config's sub-config defaults, written by hand: nothing but the model type
    weights = count_weights({"model_type": "pi05"}, model_id="pi05")
    # the PaliGemma's Gemma (vlm_config.text_config): no lm_head in the AutoModel PI05Model holds
    vocab, hidden, layers, heads, kv_heads, head_dim, inner = 257152, 2048, 18, 8, 1, 256, 16384
    language = (vocab * hidden + layers * (2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim)
                + layers * 3 * hidden * inner + (2 * layers + 1) * hidden)  # embed; q, o, k, v; gate/up/down; norms
    # its SigLIP tower (vision_use_head false) and the projector to projection_dim
    width, tower_inner, tower_layers, patch, image, channels, projection = 1152, 4304, 27, 14, 224, 3, 2048
    positions = (image // patch) ** 2
    tower = (tower_layers * (4 * width * width + 2 * width * tower_inner)  # q/k/v/o; fc1, fc2
             + tower_layers * (4 * width + 2 * 2 * width + tower_inner + width)  # their biases; two LayerNorms
             + channels * patch * patch * width + width + positions * width + 2 * width)  # patch conv; post norm
    projector = width * projection + projection
    # the action expert (dit_config): Gemma-shaped layers, adaptive RMSNorms (hidden -> 3 x hidden, biased)
    e_hidden, e_layers, e_heads, e_kv_heads, e_head_dim, e_inner, action = 1024, 18, 8, 1, 256, 4096, 32
    expert = (e_layers * (2 * e_hidden * e_heads * e_head_dim + 2 * e_hidden * e_kv_heads * e_head_dim)
              + e_layers * 3 * e_hidden * e_inner
              + (2 * e_layers + 1) * (3 * e_hidden * e_hidden + 3 * e_hidden))  # two per layer and the final norm
    projections = 2 * (action * e_hidden) + 2 * e_hidden * e_hidden + 3 * e_hidden + action  # action in/out, time MLP
    expected = language + tower + projector + expert + projections
    assert weights.parameters == expected == 3_353_433_872  # what transformers 5.25 counts on the meta device
    assert weights.vision_parameters == tower + projector
    assert weights.hidden_size == hidden and weights.vocab_size == vocab  # the decoder whose cache is sized
    assert any("dit_config is not in the config; the PI05Config default" in n for n in weights.notes)
    assert weights.parameters == meta_count(default_config("pi05"))


#: Realistic variants: the action expert biased and shallower, a wider action space, a Gemma 2 decoder.
VARIANTS: list[dict[str, Any]] = [
    {"max_action_dim": 7, "dit_config": {"model_type": "gemma", "hidden_size": 512, "num_hidden_layers": 6,
                                         "intermediate_size": 2048, "num_attention_heads": 4,
                                         "num_key_value_heads": 1, "head_dim": 128, "attention_bias": True}},
    {"vlm_config": {"model_type": "paligemma", "projection_dim": 2304,
                    "text_config": {"model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 4,
                                    "intermediate_size": 9216, "num_attention_heads": 8, "num_key_value_heads": 4,
                                    "vocab_size": 4096},
                    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                      "intermediate_size": 4304, "num_hidden_layers": 2, "num_attention_heads": 16,
                                      "patch_size": 14, "image_size": 448}}},
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=["biased-expert", "gemma2-decoder"])
def test_pi05_variants_equal_transformers(overrides: dict[str, Any]) -> None:
    config = default_config("pi05", **overrides)
    counted = count_weights(config, model_id="pi05").parameters
    assert counted == meta_count(config)
    assert counted != count_weights(default_config("pi05"), model_id="pi05").parameters


def test_pi05_without_its_decoder_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="vlm_config needs its text_config and vision_config"):
        count_weights({"model_type": "pi05", "vlm_config": {"model_type": "paligemma"}}, model_id="pi05")


def test_capacity_counts_pi05_weights(runner, tmp_path) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, "pi05")


def test_pi05_cache_is_the_vlm_prefix_transformers_keeps(tmp_path) -> None:
    """PI05ForConditionalGeneration.sample_actions runs the PaliGemma once over the prefix and keeps its cache (the
    action expert attends over it and keeps none): transformers' cache of T prefix tokens, measured, is kvplan's."""
    import json

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import kvplan

    text = {"model_type": "gemma", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 128}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "num_hidden_layers": 1, "intermediate_size": 64,
              "num_attention_heads": 2, "patch_size": 14, "image_size": 28}
    dit = {**text, "hidden_size": 32, "intermediate_size": 64}
    config = transformers.PI05Config(vlm_config={"model_type": "paligemma", "text_config": text,
                                                 "vision_config": vision, "projection_dim": 64}, dit_config=dit)
    torch.manual_seed(0)
    model = transformers.PI05ForConditionalGeneration(config).eval()
    tokens = 37
    with torch.no_grad():
        cache = model.model.vlm(inputs_embeds=torch.randn(1, tokens, text["hidden_size"]), use_cache=True).cache
    measured = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    estimate = kvplan.estimate(str(path), seq_len=tokens, engine="hf-dynamic", kv_dtype="fp32")
    expected = 2 * text["num_hidden_layers"] * tokens * text["num_key_value_heads"] * text["head_dim"] * 4  # K+V, fp32
    assert measured == estimate.kv_cache_bytes == expected
