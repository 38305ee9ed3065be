"""Parser bugs found by running real Hugging Face config.json files through kvplan.

Each config is the minimum of the released file (only the keys that matter, values copied from it);
expected bytes are arithmetic over named factors.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import parse_config

from conftest import BF16, FP32, KV


def parse(config: dict[str, Any], **overrides: Any):
    return parse_config(config, model_id="test", overrides=overrides)


def kinds(geometry) -> list[str]:
    return [spec.kind for spec in geometry.layers]


# ---- DBRX: the KV heads live in attn_config.kv_n_heads -------------------------------------------------------
DBRX = {  # databricks/dbrx-instruct
    "architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "torch_dtype": "bfloat16",
    "d_model": 6144, "n_heads": 48, "n_layers": 40, "max_seq_len": 32768,
    "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
}


def test_dbrx_reads_kv_heads_from_attn_config() -> None:
    geometry = parse(DBRX)
    assert geometry.family == "dbrx"
    assert geometry.max_context_tokens == 32768
    spec = geometry.layers[0]
    assert (spec.num_kv_heads, spec.head_size) == (8, 6144 // 48)
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    assert est.bytes_per_token == KV * 40 * 8 * 128 * BF16  # K+V, layers, kv heads, head dim, bf16


def test_dbrx_without_kv_n_heads_uses_the_dbrx_default_of_one() -> None:
    geometry = parse({**DBRX, "attn_config": {"clip_qkv": 8}})
    assert geometry.layers[0].num_kv_heads == 1  # DbrxAttentionConfig kv_n_heads = 1
    assert any("attn_config.kv_n_heads" in note for note in geometry.notes)


# ---- Nemotron NAS (DeciLM): per-layer block_configs ----------------------------------------------------------
def nemotron_nas(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Shaped like nvidia/Llama-3_3-Nemotron-Super-49B-v1 (hidden 8192, 64 heads, num_key_value_heads null)."""
    return {
        "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "torch_dtype": "bfloat16",
        "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": None,
        "num_hidden_layers": len(blocks), "max_position_embeddings": 131072, "block_configs": blocks,
    }


def attention(group: int | None, *, no_op: bool = False, linear: bool = False) -> dict[str, Any]:
    return {"attention": {"n_heads_in_group": group, "no_op": no_op, "replace_with_linear": linear,
                          "window_length": None}, "ffn": {"ffn_mult": 5.25, "no_op": False}}


def test_nemotron_nas_block_configs_set_heads_per_layer_and_skip_no_op_layers() -> None:
    blocks = [attention(8), attention(None, no_op=True), attention(16), attention(None, linear=True)]
    geometry = parse(nemotron_nas(blocks))
    assert geometry.family == "nemotron_nas"
    assert kinds(geometry) == ["full_attention", "no_cache", "full_attention", "no_cache"]
    assert [geometry.layers[i].num_kv_heads for i in (0, 2)] == [64 // 8, 64 // 16]
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    head_dim = 8192 // 64
    assert est.bytes_per_token == KV * (64 // 8 + 64 // 16) * head_dim * BF16  # K+V, kv heads of both layers


def test_nemotron_nas_needs_one_block_per_layer_and_a_group_size() -> None:
    with pytest.raises(ConfigError, match="block_configs has 1 entries but the model has 2 layers"):
        parse({**nemotron_nas([attention(8)]), "num_hidden_layers": 2})
    with pytest.raises(ConfigError, match=r"block_configs\[0\].attention.n_heads_in_group"):
        parse(nemotron_nas([attention(None)]))


# ---- Gemma 3n: the last num_kv_shared_layers layers store no K/V -------------------------------------------
GEMMA3N_E4B = {  # google/gemma-3n-E4B-it
    "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n", "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512, "max_position_embeddings": 32768,
        "num_kv_shared_layers": 15,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    },
}


def test_gemma3n_kv_shared_layers_cache_nothing() -> None:
    geometry = parse(GEMMA3N_E4B)
    assert geometry.family == "gemma3n"
    own = 35 - 15
    assert kinds(geometry) == (["sliding_window"] * 4 + ["full_attention"]) * 4 + ["no_cache"] * 15
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    full_layers = own // 5  # layers 4, 9, 14, 19
    assert est.bytes_per_token == KV * own * 2 * 256 * BF16  # K+V, own-cache layers, kv heads, head dim, bf16
    per_layer = KV * 2 * 256 * BF16
    assert est.kv_cache_bytes == (full_layers * 4096 + (own - full_layers) * 512) * per_layer  # window 512


def test_gemma3n_sparse_text_config_uses_gemma3n_defaults() -> None:
    geometry = parse({"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}})
    # Gemma3nTextConfig: 35 layers, (i + 1) % 5 == 0 global, 15 shared, 2 KV heads of 256, window 512.
    assert kinds(geometry) == (["sliding_window"] * 4 + ["full_attention"]) * 4 + ["no_cache"] * 15
    assert geometry.layers[0].sliding_window == 512
    assert geometry.max_context_tokens == 32768
    assert parse({"model_type": "gemma3n_text", "num_kv_shared_layers": 0}).layers[-1].kind == "full_attention"


# ---- Kimi Linear: 1-based kda_layers, MLA elsewhere ----------------------------------------------------------
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
