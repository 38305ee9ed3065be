"""NVIDIA Nemotron: Nemotron-H, the NAS-pruned Llama-Nemotron and Nemotron-4 (nemotron.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from geometry_check import BOTH, CONTEXT, geometry_of, kinds, parse, part, total
from transformers_meta import (
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    variant_cases,
    variant_ids,
)
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config

from conftest import BF16, FP32, KV, shared_config


@BOTH
def test_nemotron_h_pattern(bundled: bool) -> None:
    geometry = geometry_of("nvidia/Nemotron-H-56B-Base-8K" if bundled else "nvidia__Nemotron-H-56B-Base-8K", bundled=bundled)
    k = kinds(geometry)
    assert (k.count("state"), k.count("full_attention"), k.count("no_cache")) == (54, 10, 54)
    heads, head_dim, groups, d_state, d_conv = 256, 64, 8, 256, 4
    d_inner = heads * head_dim
    state = ((d_conv - 1) * (d_inner + 2 * groups * d_state) + heads * head_dim * d_state) * BF16
    est = estimate(geometry, seq_len=8192)
    assert est.state_bytes == 54 * state
    assert est.kv_cache_bytes == 54 * state + 8192 * 10 * KV * 8 * 128 * BF16


def test_nemotron3_super_state_dtype_and_provenance() -> None:
    config = shared_config("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    geometry = parse_config(config, model_id="t")
    pattern = config["hybrid_override_pattern"]
    n_m, n_a = pattern.count("M"), pattern.count("*")
    conv = 3 * (128 * 64 + 2 * 8 * 128)  # (conv_kernel - 1) x (mamba_num_heads x mamba_head_dim + 2 n_groups d_state)
    assert total(config) == n_m * (conv * BF16 + 128 * 64 * 128 * FP32) + n_a * CONTEXT * KV * 2 * 128 * BF16
    assert any(p.field == "ssm_state_dtype" and p.source == "config: mamba_ssm_cache_dtype" for p in geometry.provenance)
    assert any("mamba_ssm_cache_dtype = float32" in n for n in geometry.notes)


def test_nemotron3_super_weights_read_the_latent_moe() -> None:
    config = shared_config("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    n_e = config["hybrid_override_pattern"].count("E")
    weights = count_weights(config, model_id="t")
    assert part(weights, "experts") == n_e * 512 * 2 * 1024 * 2688  # up + down in moe_latent_size 1024
    assert part(weights, "latent_projections") == n_e * 2 * 4096 * 1024
    assert part(weights, "shared_experts") == n_e * 2 * 4096 * 5376
    assert 120e9 < sum(p.parameters for p in weights.parts) < 121e9  # "120B-A12B", not 458.6B


def test_nemotron_h_layer_count_from_block_types(tmp_path: Path) -> None:
    heads, head_dim, groups, d_state, conv = 128, 64, 8, 128, 4
    config = {"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "mamba_num_heads": heads, "mamba_head_dim": head_dim, "n_groups": groups,
              "conv_kernel": conv, "ssm_state_size": d_state,
              "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"]}
    mamba = B * ((heads * head_dim + 2 * groups * d_state) * conv * S + heads * head_dim * d_state * 4)
    expected = mamba + kv(1, 8, 128, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("nemotron_h", expected)


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


#: nvidia/Llama-3_3-Nemotron-Super-49B-v1's block_configs (its config.json): per layer, the attention's
#: n_heads_in_group (None: no_op) and the FFN's ffn_mult.
SUPER_49B_BLOCKS = (
    [(8, 2.625)] + [(8, 5.25)] * 5 + [(None, 2.625)] * 2 + [(8, 5.25)] * 3 + [(None, 3.28125)] + [(8, 5.25)] * 30
    + [(None, m) for m in (1.3125, 2.625, 2.625, 1.3125, 5.25, 1.3125, 2.625, 1.3125, 1.3125, 1.3125)] + [(8, 5.25)]
    + [(None, m) for m in (1.3125, 1.0, 1.0, 1.3125, 1.0, 1.0, 1.0, 1.3125, 1.3125, 0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 1.0,
                           0.5, 0.5)] + [(8, 5.25)] * 9)


def test_nemotron_nas_weights_block_by_block() -> None:
    blocks = [{"attention": {"n_heads_in_group": g, "no_op": g is None}, "ffn": {"ffn_mult": m, "no_op": False}}
              for g, m in SUPER_49B_BLOCKS]
    config = {**nemotron_nas(blocks), "vocab_size": 128256, "tie_word_embeddings": False}
    weights = count_weights(config, model_id="nvidia/Llama-3_3-Nemotron-Super-49B-v1")
    hidden, head_dim = 8192, 8192 // 64

    def inner(mult: float) -> int:  # DeciLM: int(2 * ffn_mult * hidden / 3) up to a multiple of 256
        return -(-int(2 * mult * hidden / 3) // 256) * 256

    n_attn = sum(1 for g, _ in SUPER_49B_BLOCKS if g)
    attention = n_attn * (2 * hidden * hidden + 2 * hidden * (64 // 8) * head_dim)  # q, o; k, v of 8 KV heads
    mlp = sum(3 * hidden * inner(m) for _, m in SUPER_49B_BLOCKS)  # gate, up, down
    norms = (n_attn + 80 + 1) * hidden  # input norms of attention blocks, post-attention norms, the final norm
    assert weights.parameters == 2 * 128256 * hidden + attention + mlp + norms  # + embed_tokens, lm_head
    published = 49.9e9  # the model card
    assert abs(weights.parameters - published) / published < 0.01
    # a Linear in place of attention or the MLP, and an absent MLP
    linear = [{"attention": {"replace_with_linear": True}, "ffn": {"replace_with_linear": True}},
              {"attention": {"n_heads_in_group": 8}, "ffn": {"no_op": True}}]
    small = count_weights({**nemotron_nas(linear), "vocab_size": 1000}, model_id="t")
    assert small.parameters == (2 * hidden * hidden + 2 * hidden  # two Linears and their norms
                                + 2 * hidden * hidden + 2 * hidden * 8 * head_dim + hidden  # GQA and its norm
                                + hidden + 2 * 1000 * hidden)  # final norm, embeddings and lm_head (untied default)


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "nemotron": [{"num_hidden_layers": 3, "num_key_value_heads": 8, "head_dim": 64, "attention_bias": True,
                  "mlp_bias": True}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
