"""Kolibri 1.1 (kolibri.py): sliding and indexed-attention layers, K/V shared across layers by kv_source_layers."""

from __future__ import annotations

import pytest
from zoo_generate import B, T, check_zoo, kv_bytes

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import parse_config

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
