"""xLSTM: every block keeps an mLSTM state, no K/V cache (xlstm.py)."""

from __future__ import annotations

import pytest
from transformers_meta import default_config, meta_count

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import count_weights, parse_config

from conftest import BF16

# NX-AI/xLSTM-7b's geometry (its config.json): 32 blocks, hidden 4096, 8 heads, qk_dim_factor 0.5, v_dim_factor 1
XLSTM_7B = {"model_type": "xlstm", "num_blocks": 32, "embedding_dim": 4096, "num_heads": 8, "qk_dim_factor": 0.5,
            "v_dim_factor": 1.0, "vocab_size": 50304, "torch_dtype": "bfloat16"}


def test_xlstm_state_per_block() -> None:
    geometry = parse_config(XLSTM_7B, model_id="xlstm-7b")
    qk_head, v_head, heads = 4096 * 1 // 2 // 8, 4096 // 8, 8  # round_up(4096 * 0.5, 64) // heads; v likewise
    per_block = heads * qk_head * v_head + heads * qk_head + heads * 1  # C, n, m
    for batch, seq_len in ((1, 4096), (4, 100_000)):  # fixed per sequence: the length does not matter
        est = estimate(geometry, batch=batch, seq_len=seq_len, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
        assert est.kv_cache_bytes == batch * 32 * per_block * BF16


@pytest.mark.parametrize("overrides", [{}, {"use_bias": True}, {"num_heads": 4, "qk_dim_factor": 0.25},
                                       {"num_blocks": 3}], ids=["default", "bias", "heads", "num_blocks"])
def test_xlstm_weights_equal_transformers(overrides: dict) -> None:
    config = default_config("xlstm", num_hidden_layers=2, vocab_size=512, **overrides)
    assert count_weights(config, model_id="xlstm").parameters == meta_count(config)
