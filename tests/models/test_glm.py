"""Zhipu GLM: ChatGLM, GLM and GLM-4, GLM-4.5 MoE, GLM-4.7-Flash, GLM-5 (MLA with a sparse indexer)
and GLM-5-Next (glm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from geometry_check import bundled, geometry_of
from transformers_meta import (
    DROP,
    assert_counts_like_transformers,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    case_id,
    config_of,
    default_config,
    meta_count,
    variant_cases,
    variant_ids,
)
from zoo_generate import B, T, check_zoo, kv, kv_bytes

from kvplan.adjust import Deployment
from kvplan.api import load_geometry
from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

from conftest import BF16, FP8, SHARED_CONFIGS, shared_config


def test_chatglm_multi_query_group_num() -> None:
    geometry = geometry_of("THUDM/chatglm3-6b", bundled=True)
    spec = geometry.layers[0]
    assert (spec.num_kv_heads, spec.head_size, len(geometry.layers)) == (2, 128, 28)


def test_glm4_moe_head_dim_floored_like_transformers(tmp_path: Path) -> None:
    config = {"model_type": "glm4_moe", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 96,
              "num_key_value_heads": 8}
    expected = kv(2, 8, 4096 // 96, T)  # modeling_glm4_moe: hidden_size // num_attention_heads = 42
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("glm4_moe", expected)


CONFIGS = {
    "glm_moe_dsa": dict(model_type="glm_moe_dsa", num_hidden_layers=2, num_attention_heads=64, hidden_size=6144,
                        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=192, v_head_dim=256, q_lora_rank=2048,
                        index_head_dim=128, index_n_heads=32, indexer_types=["full", "full"],
                        layer_types=["indexed_attention"] * 2),
}

#: tests/data/hf_zoo.json (tools/hf_zoo.py, transformers 5.24.0): total bytes of the DynamicCache.
MEASURED = {
    "glm_moe_dsa": 33792,
}

EXPECTED = {
    "glm_moe_dsa": 2 * (512 + 64) + 2 * 128,
}


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_dsa_types_match_transformers(model_type: str, engine: str) -> None:
    geometry = parse_config(CONFIGS[model_type], model_id=model_type)
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine=engine))
    assert est.kv_cache_bytes == B * T * EXPECTED[model_type] * BF16 == MEASURED[model_type]


def test_glm5_real_latent_and_indexer() -> None:
    config = shared_config("zai-org__GLM-5")
    geometry = parse_config(config, model_id="glm5")
    layers = config["num_hidden_layers"]
    est = estimate(geometry, batch=1, seq_len=1000, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    latent = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    assert est.kv_cache_bytes == 1000 * layers * (latent + config["index_head_dim"]) * BF16


GLM5_NEXT = {"model_type": "glm5_next_text", "num_hidden_layers": 8, "kv_lora_rank": 512, "qk_rope_head_dim": 0,
             "index_head_dim": 128, "index_kpool": 16, "linear_num_heads": 64, "linear_head_dim": 128,
             "linear_conv_kernel_dim": 4}


def test_glm5_next_linear_and_indexed_layers() -> None:
    """Glm5NextTextConfig: without layer_types every fourth layer (i % 4 == 3) is indexed MLA, the rest Kimi Delta
    Attention. transformers caches per KDA layer a [B, 3 * heads * head_dim, kernel] bf16 conv window and a
    [B, heads, head_dim, head_dim] float32 state; per indexed layer a latent of kv_lora_rank (no rope) and a packed
    indexer entry: key + pool-gate scores (index_head_dim each) + a validity flag (zoo record glm5_next)."""
    geometry = parse_config(GLM5_NEXT, model_id="glm5-next")
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    kda = 3 * 64 * 128 * 4 * BF16 + 64 * 128 * 128 * 4  # conv window (bf16) + recurrent state (fp32)
    indexed = T * 512 * BF16 + T * (2 * 128 + 1) * BF16  # latent + packed indexer entry
    assert est.kv_cache_bytes == B * (6 * kda + 2 * indexed)
    assert any("i % 4 == 3" in n for n in geometry.notes)


LATENT_FP8_DS_MLA = 512 * FP8 + (512 // 128) * 4 + 64 * BF16  # fp8 latent + fp32 scale per 128 + bf16 rope = 656


INDEX_FP8 = 128 * FP8 + (128 // 128) * 4  # fp8 key + fp32 scale = 132


@pytest.mark.skipif(not (SHARED_CONFIGS / "zai-org__GLM-5.json").exists(), reason="shared configs absent")
def test_glm5_real_config_has_the_indexer() -> None:
    geometry, _ = load_geometry(str(SHARED_CONFIGS / "zai-org__GLM-5.json"))
    est = estimate(geometry, seq_len=8192, kv_dtype="fp8", deployment=Deployment(engine="vllm"))
    assert {g.spec.kind: (g.count, g.bytes_per_token) for g in est.groups} == {
        "mla": (78, LATENT_FP8_DS_MLA), "indexer": (78, INDEX_FP8)}


def test_chatglm_multi_query_groups() -> None:
    w = count_weights(bundled("THUDM/chatglm3-6b"), model_id="glm")
    h, layers, q, kv, ffn, vocab = 4096, 28, 32 * 128, 2 * 128, 13696, 65024
    per_layer = h * (q + 2 * kv) + q * h + h * 2 * ffn + ffn * h + 2 * h  # qkv, dense, SwiGLU, two RMS norms
    assert w.parameters == layers * per_layer + h + 2 * vocab * h  # final norm, embedding + output_layer


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


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("glm", {}),
    ("glm4", {}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "glm4_moe_lite": [{"num_hidden_layers": 4, "mlp_layer_types": ["dense", "dense", "sparse", "dense"]},
                      {"num_hidden_layers": 5, DROP: ["mlp_layer_types"]}],
    "solar_open": [{"num_hidden_layers": 3, "first_k_dense_replace": 2, "attention_bias": True, "n_shared_experts": 2}],
    # GLM-4.5's attention_bias biases q/k/v, not o_proj
    "glm4_moe": [{"num_hidden_layers": 3, "attention_bias": True, "first_k_dense_replace": 1}],
    "sarvam_moe": [{"num_hidden_layers": 3, "first_k_dense_replace": 2, "attention_bias": True},
                   {"num_hidden_layers": 3, DROP: ["use_qk_norm"]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


@pytest.mark.parametrize(("model_type", "drop", "said"), [
    ("glm4_moe_lite", ["mlp_layer_types"], "Glm4MoeLiteConfig's default"),
])
def test_a_layout_from_the_config_class_default_is_said(model_type: str, drop: list[str], said: str) -> None:
    # a Hub config that omits a per-layer list is counted by its config class's rule, and the report says so
    config = config_of(model_type, {DROP: drop})
    weights = count_weights(config, model_id=model_type)
    assert any(said in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)


#: GLM-4V, GLM-4.6V, GLM-GA and GLM-4.5V with their towers, at their config classes' defaults and smaller: the
#: language model (glm4v_text's always-biased q/k/v, or GLM-4.5's MoE) and Glm4vVisionModel (learned positions,
#: RMSNorms, a gated MLP of out_hidden_size, the merge convolution and merger).
GLM4V_CASES: list[tuple[str, dict[str, Any]]] = [
    ("glm4v", {}), ("glm46v", {}), ("glmga", {}),
    ("glm4v", {"text_config": {"num_hidden_layers": 3, "vocab_size": 4096},
               "vision_config": {"depth": 2, "attention_bias": True, "image_size": 448, "out_hidden_size": 2048}}),
    ("glm4v_moe", {"text_config": {"num_hidden_layers": 3, "n_routed_experts": 8, "attention_bias": True}}),
]


@pytest.mark.parametrize(("model_type", "overrides"), GLM4V_CASES, ids=[case_id(c) for c in GLM4V_CASES])
def test_glm4v_weights_with_the_vision_tower_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = default_config(model_type, **overrides)
    counted = count_weights(config, model_id=model_type)
    assert counted.parameters == meta_count(config)
    assert counted.vision_parameters == meta_count(config) - meta_count(config, language_only=True)
