"""Databricks DBRX: MPT-style keys, KV groups in attn_config.kv_n_heads (dbrx.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import parse
from transformers_meta import (
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    variant_cases,
    variant_ids,
)

from kvplan.calc import estimate

from conftest import BF16, KV

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


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dbrx": [{"n_layers": 3, "attn_config": {"rope_theta": 500000.0, "kv_n_heads": 4},
              "ffn_config": {"moe_num_experts": 8, "ffn_hidden_size": 1024, "moe_top_k": 2}}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
