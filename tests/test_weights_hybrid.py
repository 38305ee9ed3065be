"""Weight counts of the recurrent and hybrid families (and the Granite/JetMoE MoE relatives) against
transformers itself: the model built on the meta device from the same config (``meta_count``), on the
config class's defaults and on a variant whose changed field changes the layout.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_models_weights import default_config, meta_count

from kvplan.models import count_weights

#: (model_type, overrides of its config class's defaults). The first case of each type is the defaults;
#: the others change the layer pattern, the MoE placement or an optional tensor.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("bailing_hybrid", {}),
    # MLA every 4th layer, one dense layer, q through a LoRA, attention biases
    ("bailing_hybrid", {"num_hidden_layers": 12, "layer_group_size": 4, "first_k_dense_replace": 1,
                        "q_lora_rank": 384, "attention_bias": True}),
    ("olmo_hybrid", {}),
    # its own layer list, fewer KV heads, key heads != value heads, attention biases
    ("olmo_hybrid", {"num_hidden_layers": 6, "num_key_value_heads": 10, "linear_num_key_heads": 15, "attention_bias": True,
                     "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention",
                                     "full_attention", "full_attention"]}),
    ("lara_mini", {}),
    ("lara_mini", {"num_hidden_layers": 4, "tie_word_embeddings": False,
                   "layer_types": ["linear_attention", "sliding_attention", "full_attention", "linear_attention"]}),
    ("lfm3", {}),
    # no sandwich norms or attention gate, biases, untied head, its own layer list
    ("lfm3", {"num_hidden_layers": 5, "use_sandwich_norm": False, "use_attention_gate": False, "attention_bias": True,
              "conv_bias": True, "tie_word_embeddings": False,
              "layer_types": ["conv", "sliding_attention", "full_attention", "conv", "conv"]}),
    ("lfm3_vl", {}),
    ("lfm3_vl", {"vision_config": {"num_hidden_layers": 5, "hidden_size": 768, "num_attention_heads": 12,
                                   "num_key_value_heads": 4}, "projector_bias": False}),
    ("zaya", {}),
    # other conv kernels and head geometry, biases on attention and an untied lm_head, a smaller router
    ("zaya", {"num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
              "cca_time0": 3, "cca_time1": 4, "attention_bias": True, "tie_word_embeddings": False,
              "lm_head_bias": True, "num_experts": 8, "router_hidden_size": 128, "layer_types": ["hybrid"] * 3}),
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
    ("zamba2", {}),
    # two shared blocks used in turn, q/k/v adapters, biases, two Mamba groups, GQA; tied, then untied (transformers
    # ties the shared blocks through tie_word_embeddings: untied, every hybrid layer holds its own copy)
    *[("zamba2", {"num_hidden_layers": 8, "num_mem_blocks": 2, "use_shared_attention_adapter": True,
                  "add_bias_linear": True, "mamba_ngroups": 2, "num_key_value_heads": 8, "intermediate_size": 4096,
                  "tie_word_embeddings": tie,
                  "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid", "hybrid",
                                        "linear_attention", "hybrid", "linear_attention"]}) for tie in (True, False)],
    ("minimax", {}),
    # layer_types with lightning runs, a smaller decay block, GQA with an explicit head dim
    ("minimax", {"num_hidden_layers": 6, "block_size": 128, "num_key_value_heads": 4, "head_dim": 64,
                 "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention",
                                 "linear_attention", "full_attention"]}),
    ("recurrent_gemma", {}),
    ("recurrent_gemma", {"num_hidden_layers": 5, "lru_width": 1280, "num_key_value_heads": 1, "attention_bias": True,
                         "block_types": ["recurrent", "attention"]}),
    ("rwkv", {}),
    ("rwkv", {"num_hidden_layers": 4, "attention_hidden_size": 2048, "intermediate_size": 8192,
              "tie_word_embeddings": True}),
    ("mamba2", {}),
    ("mamba2", {"num_hidden_layers": 4, "n_groups": 1, "use_bias": True, "use_conv_bias": False, "hidden_size": 2048,
                "num_heads": 64}),
    ("granitemoe", {}),
    ("granitemoe", {"num_hidden_layers": 4, "num_local_experts": 16, "num_key_value_heads": 8, "attention_bias": True}),
    ("granite_swa", {}),
    ("granite_swa", {"num_hidden_layers": 4, "mlp_bias": True, "attention_bias": True, "tie_word_embeddings": False}),
    ("granitemoe_swa", {}),
    ("granitemoe_swa", {"num_hidden_layers": 4, "shared_intermediate_size": 512,
                        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]}),
    ("granitemoeshared", {}),
    ("granitemoeshared", {"num_hidden_layers": 4, "shared_intermediate_size": 1024, "num_key_value_heads": 8,
                          "attention_bias": True}),
    ("jetmoe", {}),
    ("jetmoe", {"num_hidden_layers": 4, "num_key_value_heads": 8, "kv_channels": 64, "num_local_experts": 4,
                "tie_word_embeddings": False}),
    ("zamba", {}),
    ("zamba", {"num_hidden_layers": 8, "tie_word_embeddings": False}),
    ("inkling2_loop_text", {"num_hidden_layers": 18, "loop_layer_index_start": 6, "loop_layer_index_end": 12,
                            "loop_gate_rank": 32, "loop_num_passes": 2}),
]


def _id(case: tuple[str, dict[str, Any]]) -> str:
    model_type, overrides = case
    return model_type + ("" if not overrides else "-" + "-".join(sorted(overrides)))


@pytest.mark.parametrize(("model_type", "overrides"), CASES, ids=[_id(c) for c in CASES])
def test_count_equals_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


DEFAULT_TYPES = sorted({model_type for model_type, overrides in CASES if not overrides})


@pytest.mark.parametrize("model_type", DEFAULT_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    from kvplan.cli import app

    config = default_config(model_type)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = runner.invoke(app, ["capacity", "--model", str(path), "--gpu", "H200", "--max-model-len", "4096",
                                 "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    weights = json.loads(result.stdout)["weights"]
    assert weights["source"] == "config"
    assert weights["parameters"] == meta_count(config)


def test_lfm3_vl_text_part_and_default_vision_layers() -> None:
    config = default_config("lfm3_vl")
    weights = count_weights(config, model_id="lfm3_vl")
    assert weights.language_parameters == meta_count(config, language_only=True)
    assert weights.language_parameters == count_weights(config["text_config"], model_id="lfm3").parameters
    # without vision_config.layer_types the tower's default (conv at 0, 1 and odd layers) is read, and noted
    del config["vision_config"]["layer_types"]
    weights = count_weights(config, model_id="lfm3_vl")
    assert weights.parameters == meta_count(config)
    assert any("vision_config.layer_types is not in the config" in note for note in weights.notes)


def test_inkling_layer_types_from_local_layer_ids() -> None:
    # a config with local_layer_ids and no layer_types: InklingTextConfig makes exactly those layers sliding
    config = default_config("inkling_text", num_hidden_layers=7, local_layer_ids=[0, 2, 3, 6])
    del config["layer_types"]
    assert count_weights(config, model_id="inkling").parameters == meta_count(config)


def test_zamba_default_block_types() -> None:
    # no layers_block_type: ZambaConfig's rule (Mamba, Mamba, hybrid, then the period/offset pattern), an explicit
    # dt rank, projection biases and no conv bias
    config = default_config("zamba", num_hidden_layers=10, attn_layer_period=3, attn_layer_offset=1, mamba_dt_rank=64,
                            mamba_proj_bias=True, mamba_conv_bias=False, hidden_size=1024, num_attention_heads=8,
                            num_key_value_heads=8)
    for key in ("layers_block_type", "attention_head_dim", "attention_hidden_size"):
        del config[key]
    assert count_weights(config, model_id="zamba").parameters == meta_count(config)


def test_minimax_without_layer_lists_alternates() -> None:
    # neither layer_types nor attn_type_list: MiniMaxConfig's default (softmax at even layers), noted
    config = default_config("minimax", num_hidden_layers=5)
    del config["layer_types"]
    weights = count_weights(config, model_id="minimax")
    assert weights.parameters == meta_count(config)
    assert any("MiniMaxConfig default alternates" in note for note in weights.notes)


@pytest.mark.parametrize("model_type", ["inkling_mm_model", "inkling2", "inkling2_loop"])
def test_inkling_wrappers_language_part_is_the_text_model(model_type: str) -> None:
    config = default_config(model_type)
    weights = count_weights(config, model_id=model_type)
    assert weights.language_parameters == count_weights(config["text_config"], model_id="text").parameters
    assert weights.language_parameters == meta_count(config["text_config"])
    assert weights.vision_parameters == meta_count(config) - meta_count(config["text_config"])
