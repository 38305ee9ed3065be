"""Kolibri 1.1 (kolibri.py): sliding and indexed-attention layers, K/V shared across layers by kv_source_layers."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import (
    assert_capacity_counts_the_weights,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    default_config,
    meta_count,
    variant_cases,
    variant_ids,
)
from zoo_generate import B, T, check_zoo, kv_bytes

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config

from conftest import BF16, KV


def test_kolibri_defaults_share_six_indexed_layers() -> None:
    # Kolibri1_1Config: 50 layers, indexed when (i + 1) % 5 == 0 (10 layers), 6 of them read another's K/V
    geometry = parse_config({"model_type": "kolibri1_1", "torch_dtype": "bfloat16"}, model_id="kolibri")
    kinds = [s.kind for s in geometry.layers]
    assert kinds.count("sliding_window") == 40
    assert kinds.count("full_attention") == 4 and kinds.count("no_cache") == 6
    indexed = list(range(4, 50, 5))
    own = [indexed[i] for i in (0, 3, 4, 5)]  # the 1st, 4th, 5th and 6th keep their own K/V
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == own
    kv_heads, head_dim, window, tokens = 4, 128, 513, 8192
    est = estimate(geometry, seq_len=tokens, kv_dtype="bf16")
    assert est.kv_cache_bytes == KV * kv_heads * head_dim * BF16 * (40 * window + 4 * tokens)


def test_kolibri_kv_source_layers_as_the_zoo_ran_it(tmp_path) -> None:
    # 16 layers: 4, 9 and 14 indexed, 9 and 14 read layer 4's K/V (tools/hf_zoo.py's shrunk default)
    layer_types = ["indexed_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(16)]
    sources = list(range(16))
    sources[9] = sources[14] = 4
    config = {"model_type": "kolibri1_1", "num_hidden_layers": 16, "layer_types": layer_types,
              "kv_source_layers": sources, "index_layers": [4, 14]}
    kv_heads, head_dim, own_layers = 4, 128, 16 - 2
    expected = B * T * KV * kv_heads * head_dim * BF16 * own_layers  # T = 6 tokens, under the 513 window
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("kolibri1_1", expected)


def test_kolibri_refuses_a_source_of_another_type() -> None:
    config = {"model_type": "kolibri1_1", "num_hidden_layers": 5,
              "layer_types": ["sliding_attention"] * 4 + ["indexed_attention"], "kv_source_layers": [0, 1, 2, 3, 3]}
    with pytest.raises(ConfigError, match="kv_source_layers must name"):
        parse_config(config, model_id="k")


# ---- weights -------------------------------------------------------------------------------------------------------
#: Kolibri1_1Config (transformers 5.25) smaller, then with the dense MLPs, the shared K/V and the embedding moved.
SMALL = {"num_hidden_layers": 10, "num_local_experts": 8, "vocab_size": 4096}
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "kolibri1_1": [{**SMALL},
                   {**SMALL, "mlp_only_layers": [0, 3, 7], "tie_word_embeddings": True,
                    "kv_source_layers": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
                   {**SMALL, "num_hidden_layers": 20, "shared_expert_intermediate_size": 1024,
                    "kv_source_layers": [*range(9), 4, *range(10, 19), 14]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS), ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


def test_kolibri_default_weights_by_the_config_class() -> None:
    # Kolibri1_1Config's defaults, written by hand: nothing but the model type
    weights = count_weights({"model_type": "kolibri1_1"}, model_id="kolibri")
    vocab, hidden, layers, heads, kv_heads, head_dim = 128000, 2560, 50, 48, 4, 128
    own_kv = layers - 6  # six indexed-attention layers read another's K/V: no k/v projections, no k norm
    dense_layers, dense_size = 2, 3584  # mlp_only_layers [0, 1], mlp_only_intermediate_size
    moe_layers, experts, expert_size, shared_size = layers - dense_layers, 384, 512, 512
    embed_and_head = 2 * vocab * hidden  # tie_word_embeddings false
    attention = layers * 2 * hidden * heads * head_dim + own_kv * 2 * hidden * kv_heads * head_dim  # q, o; k, v
    qk_norms = head_dim * (layers + own_kv)
    dense = dense_layers * 3 * hidden * dense_size  # gate, up, down
    moe = moe_layers * (experts * 3 * hidden * expert_size + 3 * hidden * shared_size  # experts, shared expert
                        + experts * hidden + experts)  # router weight and its saved e_score_correction_bias
    norms = (4 * layers + 1) * hidden
    expected = embed_and_head + attention + qk_norms + dense + moe + norms
    assert weights.parameters == expected == 75_112_665_344  # what transformers 5.25 counts on the meta device
    assert weights.num_experts == experts and weights.experts_per_token == 6
    assert any("6 layers read another layer's K/V and have no k/v projections" in n for n in weights.notes)
    assert weights.parameters == meta_count(default_config("kolibri1_1"))


def test_capacity_counts_kolibri_weights(runner, tmp_path) -> None:
    assert_capacity_counts_the_weights(runner, tmp_path, "kolibri1_1")
