"""MosaicML MPT: KV heads in attn_config (mpt.py)."""

from __future__ import annotations

from kvplan.models import parse_config


def test_mpt_attn_config_kv_n_heads() -> None:
    config = {"model_type": "mpt", "n_layers": 32, "n_heads": 32, "d_model": 4096, "max_seq_len": 2048,
              "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8}}
    geometry = parse_config(config, model_id="mpt")
    assert (geometry.layers[0].num_kv_heads, geometry.layers[0].head_size, geometry.max_context_tokens) == (8, 128, 2048)
    config["attn_config"] = {"attn_type": "multihead_attention"}
    assert parse_config(config, model_id="mpt").layers[0].num_kv_heads == 32
