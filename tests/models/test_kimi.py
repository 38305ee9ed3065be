"""Kimi Linear and Bailing hybrid: Kimi Delta Attention state layers and MLA layers (kimi.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from geometry_check import kinds, parse
from transformers_meta import assert_capacity_counts_the_weights, assert_counts_like_transformers, case_id, meta_count
from zoo_generate import B, S, T, check_zoo, kv_bytes

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import count_weights

from conftest import BF16, FP32


def test_kimi_linear_and_bailing_hybrid_kda_plus_mla(tmp_path: Path) -> None:
    heads, dim, kernel = 32, 128, 4
    kda = B * (3 * heads * dim * kernel * S + heads * dim * dim * 4)  # q/k/v conv window + float32 recurrent state
    mla = B * T * (512 + 64) * S  # kv_lora_rank + qk_rope_head_dim (class default 64)
    kimi = {"model_type": "kimi_linear", "num_hidden_layers": 5, "hidden_size": 2304, "num_attention_heads": 32,
            "kv_lora_rank": 512, "linear_num_heads": heads, "linear_head_dim": dim, "linear_conv_kernel_dim": kernel,
            "layer_types": ["linear_attention"] * 4 + ["full_attention"]}
    assert kv_bytes(kimi, seq_len=T, tmp_path=tmp_path) == 4 * kda + mla
    check_zoo("kimi_linear", 4 * kda + mla)
    # Bailing hybrid as its config.json has it: head_dim is the KDA head dim, full attention every 6th layer
    bailing = {"model_type": "bailing_hybrid", "num_hidden_layers": 6, "hidden_size": 2560, "num_attention_heads": heads,
               "head_dim": dim, "short_conv_kernel_size": kernel, "layer_group_size": 6, "kv_lora_rank": 512}
    assert kv_bytes(bailing, seq_len=T, tmp_path=tmp_path) == 5 * kda + mla
    check_zoo("bailing_hybrid", 5 * kda + mla)


KIMI_LINEAR = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "torch_dtype": "bfloat16",
    "hidden_size": 2304, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 72,
    "num_hidden_layers": 27, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "model_max_length": 1048576,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
        "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
    },
}


def test_kimi_linear_kda_and_mla_layers() -> None:
    geometry = parse(KIMI_LINEAR)
    assert geometry.family == "kimi_linear"
    mla = [i for i, kind in enumerate(kinds(geometry)) if kind == "mla"]
    assert mla == [n - 1 for n in (4, 8, 12, 16, 20, 24, 27)]  # 1-based layer numbers
    assert geometry.max_context_tokens == 1048576
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    assert est.bytes_per_token == 7 * (512 + 64) * BF16  # MLA layers, latent + rope, bf16
    conv = (4 - 1) * 3 * 32 * 128 * BF16  # kernel - 1, q/k/v channels, bf16
    recurrent = 32 * 128 * 128 * FP32  # heads, head dim, head dim: float32 in vLLM
    assert est.state_bytes == 20 * (conv + recurrent)


def test_kimi_linear_rejects_zero_based_or_out_of_range_layers() -> None:
    bad = {**KIMI_LINEAR, "linear_attn_config": {**KIMI_LINEAR["linear_attn_config"], "kda_layers": [0, 1]}}
    with pytest.raises(ConfigError, match="1-based"):
        parse(bad)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("bailing_hybrid", {}),
    # MLA every 4th layer, one dense layer, q through a LoRA, attention biases
    ("bailing_hybrid", {"num_hidden_layers": 12, "layer_group_size": 4, "first_k_dense_replace": 1,
                        "q_lora_rank": 384, "attention_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: The types above ``kvplan capacity`` counts from their default config.
CAPACITY_TYPES = ["bailing_hybrid"]


@pytest.mark.parametrize("model_type", CAPACITY_TYPES)
def test_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, model_type)


KIMI_LINEAR_HUB = {  # Kimi-Linear-48B-A3B's layout at 8 layers: KDA 3 : 1 MLA, as the Hub config writes it
    "model_type": "kimi_linear", "num_hidden_layers": 8, "hidden_size": 2304, "num_attention_heads": 32,
    "num_key_value_heads": 32, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "vocab_size": 163840, "intermediate_size": 9216, "moe_intermediate_size": 1024,
    "num_experts": 256, "num_shared_experts": 1, "num_experts_per_token": 8, "first_k_dense_replace": 1,
    "tie_word_embeddings": False,
    "linear_attn_config": {"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 32,
                           "head_dim": 128, "short_conv_kernel_size": 4},
}


def test_kimi_linear_hub_config_weights_equal_transformers() -> None:
    assert count_weights(KIMI_LINEAR_HUB, model_id="kimi_linear").parameters == meta_count(KIMI_LINEAR_HUB)


#: moonshotai/Kimi-K3's config.json (the Hub's, remote code), the keys sizing reads: a kimi_k3 wrapper around a
#: kimi_linear language model (transformers cannot build it), MXFP4 routed experts, a MoonViT tower.
K3_FULL = [*range(4, 93, 4), 93]  # linear_attn_config.full_attn_layers (1-based)
KIMI_K3 = {
    "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "dtype": "bfloat16",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "kimi_linear", "dtype": "bfloat16", "hidden_size": 7168, "intermediate_size": 33792,
        "num_hidden_layers": 93, "num_attention_heads": 96, "num_key_value_heads": 96, "vocab_size": 163840,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_experts": 896, "num_experts_per_token": 16,
        "num_shared_experts": 2, "moe_intermediate_size": 3072, "routed_expert_hidden_size": 3584,
        "latent_moe_use_norm": True, "attn_res_block_size": 12, "mla_use_output_gate": True, "mla_use_nope": True,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "max_position_embeddings": 1048576, "num_nextn_predict_layers": 0, "tie_word_embeddings": False,
        "linear_attn_config": {"full_attn_layers": K3_FULL, "kda_layers": [i for i in range(1, 94) if i not in K3_FULL],
                               "head_dim": 128, "num_heads": 96, "short_conv_kernel_size": 4,
                               "use_full_rank_gate": True, "gate_lower_bound": -5.0},
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": True,
                "scale_dtype": "torch.uint8"}}},
            "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
                       "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*"]},
    },
    "vision_config": {"vt_hidden_size": 1024, "vt_intermediate_size": 4096, "vt_num_hidden_layers": 27,
                      "vt_num_attention_heads": 12, "qkv_hidden_size": 1536, "patch_size": 14,
                      "init_pos_emb_height": 64, "init_pos_emb_width": 64, "init_pos_emb_time": 4,
                      "merge_kernel_size": [2, 2], "norm_type": "rmsnorm", "attn_bias": False, "linear_bias": False,
                      "patch_embed_proj_bias": False, "text_hidden_size": 7168},
}


def test_kimi_k3_weights_equal_its_checkpoint() -> None:
    # the hidden_size kvplan needs is in text_config; the vision tower's is vt_hidden_size (MoonViT's key)
    weights = count_weights(KIMI_K3, model_id="moonshotai/Kimi-K3")
    H, V, inner, layers, n_kda, n_mla, n_moe = 7168, 163840, 96 * 128, 93, 69, 24, 92
    experts, size, latent, shared = 896, 3072, 3584, 2 * 3072
    # the checkpoint's tensors (model.safetensors.index.json), 4-bit packed experts counted as 2 values a byte
    kda = 3 * inner * H + 3 * inner * 4 + 128 * H + inner * 128 + 96 + inner + 96 * H + 128  # q/k/v, convs, f_a/f_b,
    mla = 576 * H + 512 + 24576 * 512 + 1536 * H + 1536 + 18432 * 1536  # A_log, dt_bias, b, o_norm; MLA's LoRA pairs
    every_layer = 2 * inner * H + 6 * H  # g_proj, o_proj; two norms, two residual norms and projections
    moe = (experts * 3 * size * latent + (experts * H + experts)  # latent experts, router + correction bias
           + 2 * H * latent + latent + 3 * H * shared)  # latent down/up projections and norm, shared experts
    language = 2 * V * H + n_kda * kda + n_mla * mla + layers * every_layer + 3 * H + 3 * H * 33792 + n_moe * moe
    vision = (27 * (4608 * 1024 + 1024 * 1536 + 2 * 4096 * 1024 + 2 * 1024) + 1024 + 64 * 64 * 1024
              + 1024 * 3 * 14 * 14) + (7168 + 4096 * 4096 + 7168 * 4096)  # MoonViT, then mm_projector
    assert weights.vision_parameters == vision
    # NOTE: A_log is one per KDA head here (transformers' KimiDeltaAttention); the K3 checkpoint holds 128
    assert weights.parameters == language + vision
    published_bytes = 1_560_936_091_448  # the 96 safetensors files
    assert abs(weights.bytes - published_bytes) / published_bytes < 0.001


def test_kimi_k3_kv_cache_is_mla_and_kda_states() -> None:
    geometry = parse(KIMI_K3)
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    mla = 24 * (512 + 64) * BF16 * 8192  # MLA layers: kv_lora_rank + qk_rope_head_dim per token
    kda = 69 * ((4 - 1) * 3 * 96 * 128 * BF16 + 96 * 128 * 128 * 4)  # q/k/v conv states, float32 recurrent state
    assert est.state_bytes == kda
    assert est.kv_cache_bytes == mla + kda
