"""Xiaomi MiMo-V2-Flash: full and sliding layers of their own KV heads (mimo.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import CONTEXT, part, total
from transformers_meta import assert_counts_like_transformers, case_id

from kvplan.models import count_weights, parse_config

from conftest import BF16, shared_config


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_mimo_v2_flash_full_and_swa_layers(engine: str) -> None:
    config = shared_config("XiaomiMiMo__MiMo-V2-Flash")
    n_sliding = sum(config["hybrid_layer_pattern"])
    assert (n_sliding, 48 - n_sliding) == (39, 9)
    window = config["sliding_window_size"] + 1  # MiMoV2FlashConfig: sliding_window = sliding_window_size + 1
    full = CONTEXT * 4 * (192 + 128) * BF16  # num_key_value_heads x (head_dim K + v_head_dim V)
    swa = window * 8 * (192 + 128) * BF16  # swa_num_key_value_heads x (swa_head_dim + swa_v_head_dim)
    assert total(config, engine) == 9 * full + 39 * swa


def test_mimo_v2_flash_transformers_form_doubles_kv_heads_on_sliding_layers() -> None:
    text = {"model_type": "mimo_v2_flash", "num_hidden_layers": 6}  # MiMoV2FlashConfig defaults
    geometry = parse_config(text, model_id="test")
    assert [s.kind for s in geometry.layers] == ["full_attention"] + ["sliding_window"] * 4 + ["full_attention"]
    assert geometry.layers[1].num_kv_heads == 2 * 4  # 2 x num_key_value_heads
    assert geometry.layers[1].window == 129


def test_mimo_v2_flash_weights() -> None:
    weights = count_weights(shared_config("XiaomiMiMo__MiMo-V2-Flash"), model_id="test")
    assert part(weights, "experts") == 47 * 256 * 3 * 4096 * 2048  # 47 MoE layers x 256 experts, gated
    assert part(weights, "attention") == (
        9 * (4096 * 64 * 192 + 4096 * 4 * (192 + 128) + 64 * 128 * 4096)
        + 39 * (4096 * 64 * 192 + 4096 * 8 * (192 + 128) + 64 * 128 * 4096 + 64))  # + sink logits


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("mimo_v2_flash", {}),  # the router's e_score_correction_bias
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: XiaomiMiMo/MiMo-7B-Base's architecture keys (a Qwen2Config with one MTP layer; remote-code MiMoConfig).
MIMO_7B = {"model_type": "mimo", "architectures": ["MiMoForCausalLM"], "torch_dtype": "bfloat16",
           "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 151680, "max_position_embeddings": 32768,
           "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "use_sliding_window": False,
           "sliding_window": 32768, "max_window_layers": 36}


def test_mimo_7b_is_qwen2_plus_its_mtp_layers() -> None:
    import torch
    import transformers

    from kvplan.calc import estimate

    from conftest import KV

    geometry = parse_config(MIMO_7B, model_id="test")
    assert [s.kind for s in geometry.layers] == ["full_attention"] * 36  # use_sliding_window false
    assert estimate(geometry, seq_len=4096, kv_dtype="bf16").kv_cache_bytes == \
        KV * 36 * 8 * 128 * BF16 * 4096  # K+V, layers, KV heads, hidden 4096 / 32 heads, bf16
    weights = count_weights(MIMO_7B, model_id="mimo")
    base = {k: v for k, v in MIMO_7B.items() if k not in ("model_type", "architectures", "num_nextn_predict_layers")}
    with torch.device("meta"):
        qwen2 = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**base))
    hidden, inner, q, kv = 4096, 11008, 32 * 128, 8 * 128
    mtp = (2 * hidden * q + 2 * hidden * kv + q + 2 * kv  # q, o, k, v and the q/k/v biases (Qwen2Attention)
           + 3 * hidden * inner  # gate, up, down (Qwen2MLP)
           + 2 * hidden * hidden  # input_proj: [token; hidden] -> hidden
           + 5 * hidden)  # input, post-attention, token, hidden and final RMSNorms
    assert weights.parameters == sum(p.numel() for p in qwen2.parameters()) + mtp
    published = 7.83e9  # the Hub's model card: 7.83B parameters (the MTP layer included)
    assert abs(weights.parameters - published) / published < 0.01
