"""T5, mT5, UMT5, LongT5 and Switch Transformers (t5.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import BOTH, bundled, geometry_of, kinds
from transformers_meta import check_lm_count, meta_count_lm

from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

from conftest import KV, shared_config


@BOTH
def test_t5_decoder_self_and_cross(bundled: bool) -> None:
    geometry = geometry_of("google-t5/t5-base" if bundled else "google-t5__t5-base", bundled=bundled)
    assert kinds(geometry) == ["full_attention"] * 12 + ["cross_attention"] * 12
    est = estimate(geometry, seq_len=128, encoder_len=512, kv_dtype="fp32")
    heads, d_kv, fp32 = 12, 64, 4
    assert est.kv_cache_bytes == 12 * KV * heads * d_kv * (128 + 512) * fp32


def test_t5_num_decoder_layers_differs() -> None:
    geometry = parse_config(shared_config("google-t5__t5-base"), model_id="t5", overrides={"num_decoder_layers": 3})
    assert kinds(geometry) == ["full_attention"] * 3 + ["cross_attention"] * 3


def test_t5_base_exact() -> None:
    w = count_weights(bundled("google-t5/t5-base"), model_id="t5")
    d, d_ff, heads, d_kv, layers, vocab, buckets = 768, 3072, 12, 64, 12, 32128, 32
    attention = (layers + 2 * layers) * 4 * d * heads * d_kv  # enc self + dec self + dec cross: q, k, v, o
    mlp = 2 * layers * 2 * d * d_ff  # wi, wo in encoder and decoder (relu: not gated)
    norms = (2 * layers + 3 * layers + 2) * d  # RMS norms per sub-layer + the two final norms
    rel_bias = 2 * buckets * heads  # first layer of each stack
    assert w.parameters == vocab * d + attention + mlp + norms + rel_bias == 222_903_552  # the Hub's count


def test_real_t5_base_count_equals_transformers() -> None:
    config = shared_config("google-t5__t5-base")  # skips when ../shared is absent
    assert count_weights(config, model_id="t5-base").parameters == meta_count_lm(config)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("t5", {}),
    ("t5 3 decoder layers", {"num_decoder_layers": 3}),
    ("mt5", {}),
    ("mt5 tied", {"tie_word_embeddings": True}),
    ("umt5", {}),
    ("umt5 8 heads", {"num_heads": 8}),
    ("longt5", {}),
    ("longt5 transient-global", {"encoder_attention_type": "transient-global"}),
    ("switch_transformers", {}),
    ("switch_transformers 4 experts", {"num_experts": 4, "num_sparse_encoder_layers": 6, "router_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
