"""Weight counts of the 2025-2026 MoE / MLA families and the classic ones kvplan once refused, against
transformers itself: the model built on the meta device from the same config (``meta_count``), on the
config class's defaults, on a variant whose fields change the layout, and on real Hub configs."""

from __future__ import annotations

from typing import Any

import pytest
from test_models_weights import default_config, meta_count

from kvplan.errors import KvplanError
from kvplan.models import count_weights

from conftest import shared_config

#: model_type -> variants: keyword arguments of the config class (its __post_init__ derives the per-layer lists
#: from them) that move layers between layouts (dense vs MoE, hash-routed, NoPE, shared latents...), each compared
#: with transformers on its own. ``DROP`` lists keys deleted from the (text) config afterwards, so kvplan applies
#: the config class's rule for them itself, as it must for a Hub config that omits them; ``SET`` then adds keys
#: as a Hub config writes them (legacy keys the config class folds into its per-layer lists).
DROP, SET = "_drop", "_set"
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "deepseek_v4": [{"num_hidden_layers": 6, "mlp_layer_types": ["hash_moe"] * 2 + ["moe"] * 4,
                     "layer_types": ["sliding_attention", "compressed_sparse_attention",
                                     "heavily_compressed_attention"] * 2}],
    "qwen3_moe": [{"num_hidden_layers": 6, "mlp_only_layers": [0, 3], "decoder_sparse_step": 2}],
    "qwen3_vl_moe": [{"text_config": {"num_hidden_layers": 4, "mlp_only_layers": [1]}}],
    "mistral_large4": [
        {"text_config": {"num_hidden_layers": 6, "first_k_dense_replace": 2, "attention_bias": True,
                         "kv_source_layers": [0, 1, 1, 3, 3, 5], "indexer_types": ["full", "shared"] * 3,
                         "no_rope_layers": [1, 0, 1, 1, 0, 1]}},
        {"text_config": {"num_hidden_layers": 8, "first_k_dense_replace": 3, "index_topk_freq": 2},
         DROP: ["mlp_layer_types", "no_rope_layers", "kv_source_layers", "indexer_types"]},
    ],
    "hy_v4": [
        {"num_hidden_layers": 5, "mlp_layer_types": ["dense", "dense", "sparse", "dense", "sparse"],
         "indexer_types": ["full", "shared", "full", "full", "shared"], "attention_bias": True, "hc_mult": 2},
        {"num_hidden_layers": 7, DROP: ["mlp_layer_types", "indexer_types"]},
    ],
    "axk1": [{"num_hidden_layers": 5, "first_k_dense_replace": 2, "moe_layer_freq": 2, "attention_bias": True},
             {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 3}}],
    "axk2": [{"num_hidden_layers": 5, "first_k_dense_replace": 2, "moe_layer_freq": 2, "gated_norm_rank": 8},
             {"num_hidden_layers": 4, DROP: ["mlp_layer_types"]}],
    # sliding MLA layers of their own dims (per_layer_config, or the swa_* defaults in a legacy config where
    # full_attention means an indexed layer unless use_dsa is false)
    "dots3_note_text": [
        {"num_hidden_layers": 6, "first_k_dense_replace": 2, "use_dsa": False},
        {"num_hidden_layers": 6, "first_k_dense_replace": 2, DROP: ["per_layer_config", "rope_parameters"]},
        {"num_hidden_layers": 7, DROP: ["per_layer_config", "rope_parameters", "layer_types", "mlp_layer_types"],
         SET: {"first_k_dense_replace": 3, "use_dsa": False}},
    ],
    "longcat_flash": [{"num_layers": 3, "zero_expert_num": 0, "router_bias": True, "attention_bias": True},
                      {"num_layers": 2, "n_routed_experts": 16, "zero_expert_num": 8, "qk_head_dim": 256}],
    "mistral4": [{"num_hidden_layers": 4, "first_k_dense_replace": 2, "q_lora_rank": None, "attention_bias": True},
                 {"num_hidden_layers": 3, DROP: ["first_k_dense_replace"]}],
    "sarvam_mla": [{"num_hidden_layers": 4, "first_k_dense_replace": 3, "q_lora_rank": 512}],
    "glm4_moe_lite": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "dense", "sparse", "dense"]},
                      {"num_hidden_layers": 5, DROP: ["mlp_layer_types"]}],
    "youtu": [{"num_hidden_layers": 4, "q_lora_rank": None, "tie_word_embeddings": False}],
    "minicpm3": [{"num_hidden_layers": 4, "mlp_bias": True, "attention_bias": True},
                 {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, DROP: ["v_head_dim"]}],
    "hy_v3": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"],
               "num_shared_experts": 2, "attention_bias": True},
              {"num_hidden_layers": 3, DROP: ["mlp_layer_types"]}],
    "hunyuan_v1_moe": [{"num_hidden_layers": 3, "num_experts": 4, "moe_topk": 2, "attention_bias": True}],
    "solar_open": [{"num_hidden_layers": 3, "first_k_dense_replace": 2, "attention_bias": True, "n_shared_experts": 2}],
    "cohere2_moe": [{"num_hidden_layers": 4, "first_k_dense_replace": 2, "prefix_dense_intermediate_size": 1024,
                     "num_shared_experts": 1, "attention_bias": True},
                    {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 1}}],
    "exaone_moe": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"],
                    "num_shared_experts": 2},
                   {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 3}}],
    "flex_olmo": [{"num_hidden_layers": 3, "num_experts": 3, "attention_bias": True, "num_key_value_heads": 8}],
    "ministral3": [{"num_hidden_layers": 3, "tie_word_embeddings": True, "head_dim": 64}],
    "afmoe": [{"num_hidden_layers": 4, "num_dense_layers": 2, "num_shared_experts": 1, "attention_bias": True}],
    "laguna": [{"num_hidden_layers": 4, "num_attention_heads_per_layer": [48, 32, 48, 16], "gating": "per-channel",
                "mlp_layer_types": ["dense", "sparse", "dense", "sparse"], "attention_bias": True},
               {"num_hidden_layers": 3, DROP: ["mlp_layer_types", "num_attention_heads_per_layer"]}],
    # GLM-4.5's attention_bias biases q/k/v, not o_proj
    "glm4_moe": [{"num_hidden_layers": 3, "attention_bias": True, "first_k_dense_replace": 1}],
    "sarvam_moe": [{"num_hidden_layers": 3, "first_k_dense_replace": 2, "attention_bias": True},
                   {"num_hidden_layers": 3, DROP: ["use_qk_norm"]}],
    "persimmon": [{"num_hidden_layers": 3, "qk_layernorm": False, "tie_word_embeddings": True}],
    "fuyu": [{"patch_size": 16, "num_channels": 4, "text_config": {"num_hidden_layers": 3}}],
    "nemotron": [{"num_hidden_layers": 3, "num_key_value_heads": 8, "head_dim": 64, "attention_bias": True,
                  "mlp_bias": True}],
    "dbrx": [{"n_layers": 3, "attn_config": {"rope_theta": 500000.0, "kv_n_heads": 4},
              "ffn_config": {"moe_num_experts": 8, "ffn_hidden_size": 1024, "moe_top_k": 2}}],
    # Pixtral's tower and the Mistral 3 projector (shared with Mistral Large 4)
    "mistral3": [{"vision_feature_layer": [-1, -2], "multimodal_projector_bias": True, "spatial_merge_size": 3},
                 {"text_config": {"model_type": "ministral3", "num_hidden_layers": 4}}],
}

#: Keys without which transformers 5.24 cannot build the type's default config at all (its own default is None
#: where the modeling file needs a number): every case of the type starts from these.
BASE: dict[str, dict[str, Any]] = {
    "hunyuan_v1_moe": {"head_dim": 128},  # HunYuanMoEV1Config.head_dim None: the rotary embedding fails
    "nemotron": {"num_key_value_heads": 48},  # NemotronConfig leaves it None: the attention fails
    "dbrx": {"attn_config": {"rope_theta": 500000.0}},  # DbrxAttentionConfig has no rope_theta default
}

CASES = [(t, {}) for t in VARIANTS] + [(t, v) for t, vs in VARIANTS.items() for v in vs]


def config_of(model_type: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The config class's defaults with ``overrides``, less the keys ``overrides[DROP]`` names."""
    overrides = dict(overrides)
    drop, add = overrides.pop(DROP, []), overrides.pop(SET, {})
    config = default_config(model_type, **{**BASE.get(model_type, {}), **overrides})
    inner = config.get("text_config", config)
    for key in drop:
        del inner[key]
    inner.update(add)
    return config


@pytest.mark.parametrize(("model_type", "overrides"), CASES, ids=[f"{t}-{'variant' if v else 'default'}" for t, v in CASES])
def test_count_equals_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = config_of(model_type, overrides)
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


def test_variants_change_the_layout() -> None:
    # each variant is a different model from its type's default: the comparison is not the default twice
    for model_type, variants in VARIANTS.items():
        counts = {count_weights(config_of(model_type, v), model_id=model_type).parameters for v in [{}, *variants]}
        assert len(counts) == 1 + len(variants), model_type


# ---- the keys transformers 5 saves, and the defaults when a config omits them ------------------------
def test_qwen3_moe_reads_num_local_experts_as_transformers_5_saves_it() -> None:
    # Qwen3MoeConfig maps num_experts to num_local_experts and to_dict() writes only the latter
    config = default_config("qwen3_moe", num_hidden_layers=2, num_experts=4)
    assert "num_experts" not in config and config["num_local_experts"] == 4
    weights = count_weights(config, model_id="qwen3")
    hidden, size = config["hidden_size"], config["moe_intermediate_size"]
    assert weights.expert_parameters == 3 * hidden * size * 4 * 2  # gate/up/down, experts, layers
    old = {**{k: v for k, v in config.items() if k != "num_local_experts"}, "num_experts": 4}
    assert count_weights(old, model_id="qwen3").parameters == weights.parameters


def test_qwen3_moe_without_expert_count_takes_the_class_default_and_says_so() -> None:
    config = default_config("qwen3_moe", num_hidden_layers=2)
    del config["num_local_experts"]
    weights = count_weights(config, model_id="qwen3")
    assert weights.num_experts == 128  # Qwen3MoeConfig.num_experts
    assert any("num_experts" in n and "default" in n for n in weights.notes)
    assert weights.parameters == meta_count(config)


def test_deepseek_v4_hash_layers_from_legacy_key_or_default() -> None:
    config = default_config("deepseek_v4", num_hidden_layers=5)
    del config["mlp_layer_types"]
    vocab, top_k, experts = config["vocab_size"], config["num_experts_per_tok"], config["n_routed_experts"]
    default = count_weights(config, model_id="v4")
    tables = next(p for p in default.parts if p.name == "router_tables")
    # DeepseekV4Config.default_num_hash_layers = 3: token -> experts tables there, correction biases in the rest
    assert tables.parameters == vocab * top_k * 3 + experts * 2
    assert any("num_hash_layers" in n and "default" in n for n in default.notes)
    legacy = count_weights({**config, "num_hash_layers": 1}, model_id="v4")
    assert legacy.parameters == meta_count({**config, "num_hash_layers": 1})


def test_dots3_note_language_model_equals_transformers() -> None:
    # the wrapper's language model counts exactly; its towers (a MoE ViT, an audio encoder) are refused, not guessed
    config = default_config("dots3_note")
    text = config["text_config"]
    assert count_weights(text, model_id="dots3").parameters == meta_count(text)
    with pytest.raises(KvplanError, match="vision tower") as raised:
        count_weights(config, model_id="dots3")
    assert "--weights-bytes" in raised.value.hint


# ---- real Hub configs ------------------------------------------------------------------------------
REAL = ["deepseek-ai__DeepSeek-V4-Flash", "Qwen__Qwen3-30B-A3B", "Qwen__Qwen3-Coder-480B-A35B-Instruct",
        "Qwen__Qwen3-VL-30B-A3B-Instruct"]


@pytest.mark.parametrize("name", REAL)
def test_real_config_equals_transformers(name: str) -> None:
    config = shared_config(name)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


@pytest.mark.parametrize(("model_type", "drop", "said"), [
    ("hy_v4", ["indexer_types", "mlp_layer_types"], "HYV4Config's default"),
    ("hy_v3", ["mlp_layer_types"], "HYV3Config's default"),
    ("laguna", ["mlp_layer_types"], "LagunaConfig's default"),
    ("glm4_moe_lite", ["mlp_layer_types"], "Glm4MoeLiteConfig's default"),
    ("longcat_flash", ["zero_expert_num"], "architecture default zero_expert_num = 256"),
    ("mistral_large4", ["indexer_types"], "MistralLarge4TextConfig's schedule"),
])
def test_a_layout_from_the_config_class_default_is_said(model_type: str, drop: list[str], said: str) -> None:
    # a Hub config that omits a per-layer list is counted by its config class's rule, and the report says so
    config = config_of(model_type, {DROP: drop})
    weights = count_weights(config, model_id=model_type)
    assert any(said in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)
