"""StepFun Step-3.7-Flash: sliding and full GQA layers, MoE (step.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import default_config, meta_count, meta_vision_count

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

from conftest import BF16, shared_config


def test_step3p7_real_sliding_and_full() -> None:
    config = shared_config("stepfun-ai__Step-3.7-Flash")
    text = config.get("text_config", config)
    geometry = parse_config(config, model_id="step")
    full = text["layer_types"].count("full_attention")
    sliding = text["num_hidden_layers"] - full
    for engine in ("ideal", "hf-dynamic"):
        est = estimate(geometry, batch=1, seq_len=4096, kv_dtype="bf16", deployment=Deployment(engine=engine))
        row = 2 * text["num_key_value_heads"] * text["head_dim"] * BF16  # K+V
        window = text["sliding_window"]
        assert est.kv_cache_bytes == (full * 4096 + sliding * window) * row


def test_step3p7_mtp_padded_layer_types() -> None:
    """Legacy Hub lists carry num_nextn_predict_layers trailing MTP entries (Step3p7TextConfig cuts them)."""
    config = {"model_type": "step3p7", "num_hidden_layers": 4, "num_attention_heads": 64, "num_key_value_heads": 8,
              "head_dim": 128, "hidden_size": 4096, "sliding_window": 512, "num_nextn_predict_layers": 1,
              "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention",
                              "full_attention"]}
    geometry = parse_config(config, model_id="step-mtp")
    assert [s.kind for s in geometry.layers] == ["full_attention", "sliding_window", "sliding_window", "full_attention"]


def test_step37_language_model_equals_transformers() -> None:
    # The shared Step-3.7 config is the flat (text) form; transformers' Step3p7Config nests it as text_config.
    config = shared_config("stepfun-ai__Step-3.7-Flash")
    nested = {"model_type": "step3p7", "text_config": config}
    assert count_weights(config, model_id="step").parameters == meta_count(nested, language_only=True)


@pytest.mark.parametrize("overrides", [
    {},
    {"text_config": {"num_hidden_layers": 4, "n_routed_experts": 8},
     "vision_config": {"num_hidden_layers": 2, "image_size": 448}, "projector_bias": True},
], ids=["default", "small-biased-projector"])
def test_step3p7_with_its_vision_tower_equals_transformers(overrides: dict[str, Any]) -> None:
    # the text_config model_type Step3p7TextConfig saves is step3p5; one shared expert of share_expert_dim always
    config = default_config("step3p7", **overrides)
    assert config["text_config"]["model_type"] == "step3p5"
    weights = count_weights(config, model_id="step3p7")
    assert weights.parameters == meta_count(config)
    assert weights.vision_parameters == meta_vision_count(config)


def test_step3p7_vision_tower_and_downsamplers_arithmetic() -> None:
    # Step3p7VisionConfig: hidden_size, hidden x mlp_ratio (8960), num_hidden_layers, image_size / patch_size
    h, inner, layers, grid, channels, patch, text = 1536, 8960, 47, 728 // 14, 3, 14, 4096
    tower = (channels * patch * patch * h + grid * grid * h + 2 * h  # patch conv (no bias), positions, pre-LN
             + layers * (4 * h * h + 4 * h + 2 * h * inner + inner + h + 2 * 2 * h + 2 * h))  # attn, MLP, LNs, scales
    projector = 9 * h * 2 * h + 2 * h + 9 * 2 * h * 4 * h + 4 * h + 4 * h * text  # two convs; Linear, no bias
    weights = count_weights(default_config("step3p7"), model_id="step3p7")
    assert weights.vision_parameters == tower + projector == 1_981_014_784  # transformers' count of the same
