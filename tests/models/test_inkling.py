"""Inkling: hybrid layers with sliding attention, and its multimodal wrappers (inkling.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_counts_like_transformers,
    case_id,
    default_config,
    meta_count,
)
from zoo_generate import B, T, check_zoo, kv, kv_bytes

from kvplan.models import count_weights


def test_inkling_hybrid_sliding_layers(tmp_path: Path) -> None:
    hidden, kernel = 6144, 4
    config = {"model_type": "inkling_text", "num_hidden_layers": 6, "hidden_size": hidden, "num_attention_heads": 64,
              "num_key_value_heads": 8, "head_dim": 128, "swa_num_key_value_heads": 16, "swa_head_dim": 128,
              "sliding_window_size": 512, "conv_kernel_size": kernel, "layer_types": ["hybrid_sliding"] * 5 + ["hybrid"]}

    def convs(kv_width: int) -> int:  # four float32 conv windows of `kernel` inputs: K, V, pre-attention, pre-MLP
        return B * kernel * 4 * (2 * kv_width + 2 * hidden)

    expected = 5 * (kv(1, 16, 128, T) + convs(16 * 128)) + kv(1, 8, 128, T) + convs(8 * 128)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("inkling_text", expected)


def test_inkling_layer_types_from_local_layer_ids() -> None:
    # a config with local_layer_ids and no layer_types: InklingTextConfig makes exactly those layers sliding
    config = default_config("inkling_text", num_hidden_layers=7, local_layer_ids=[0, 2, 3, 6])
    del config["layer_types"]
    assert count_weights(config, model_id="inkling").parameters == meta_count(config)


@pytest.mark.parametrize("model_type", ["inkling_mm_model", "inkling2", "inkling2_loop"])
def test_inkling_wrappers_language_part_is_the_text_model(model_type: str) -> None:
    config = default_config(model_type)
    weights = count_weights(config, model_id=model_type)
    assert weights.language_parameters == count_weights(config["text_config"], model_id="text").parameters
    assert weights.language_parameters == meta_count(config["text_config"])
    assert weights.vision_parameters == meta_count(config) - meta_count(config["text_config"])


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("inkling_text", {}),
    # dense MLPs in the first layers, one shared expert, fewer sliding heads and a shorter window
    ("inkling_text", {"num_hidden_layers": 7, "mlp_layer_types": ["dense"] * 2 + ["sparse"] * 5, "n_shared_experts": 1,
                      "swa_num_attention_heads": 32, "sliding_window_size": 256}),
    ("inkling2_text", {}),
    ("inkling2_text", {"num_hidden_layers": 8, "swa_num_attention_heads": 24, "sliding_window_size": 512,
                       "unpadded_vocab_size": 201000,
                       "layer_types": ["hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid", "hybrid_sliding",
                                       "hybrid_sliding", "hybrid_sliding", "hybrid"]}),
    ("inkling2_loop_text", {}),
    # the multimodal wrappers: the text model above plus Inkling's hierarchical patch encoder and audio embedding,
    # Inkling2's ViT and merger
    ("inkling_mm_model", {}),
    ("inkling_mm_model", {"vision_config": {"n_layers": 8, "patch_size": 16, "temporal_patch_size": 4},
                          "audio_config": {"n_mel_bins": 16, "mel_vocab_size": 128},
                          "text_config": {"num_hidden_layers": 4}}),
    ("inkling2", {}),
    ("inkling2", {"vision_config": {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
                                    "patch_size": 14, "projector_bias": True, "posemb_grid_size": 16},
                  "text_config": {"num_hidden_layers": 6}}),
    ("inkling2_loop", {}),
    ("inkling2_loop_text", {"num_hidden_layers": 18, "loop_layer_index_start": 6, "loop_layer_index_end": 12,
                            "loop_gate_rank": 32, "loop_num_passes": 2}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["inkling2", "inkling2_loop", "inkling2_loop_text", "inkling2_text", "inkling_mm_model",
                  "inkling_text"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)
