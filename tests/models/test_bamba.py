"""IBM Bamba: Mamba-2 layers with attention at attn_layer_indices (bamba.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import kinds, mamba2_state_bytes, parse
from transformers_meta import assert_counts_like_transformers, case_id

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError

from conftest import BF16, KV


def bamba(**overrides: Any) -> dict[str, Any]:
    """Shaped like ibm-ai-platform/Bamba-9B."""
    config = {
        "model_type": "bamba", "architectures": ["BambaForCausalLM"], "torch_dtype": "bfloat16",
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096, "attn_layer_indices": [9, 18, 27], "mamba_n_heads": 128,
        "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    config.update(overrides)
    return config


def test_bamba_attn_layer_indices() -> None:
    geometry = parse(bamba())
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == [9, 18, 27]
    assert k.count("state") == 32 - 3
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    assert est.bytes_per_token == 3 * KV * 8 * 128 * BF16  # attention layers, K+V, kv heads, 4096 // 32, bf16
    d_inner = 2 * 4096  # mamba_expand * hidden_size
    per_layer = mamba2_state_bytes(d_inner=d_inner, n_heads=128, head_dim=d_inner // 128, n_groups=1, d_state=128,
                                   d_conv=4)
    assert est.state_bytes == 29 * per_layer


def test_bamba_without_indices_is_all_mamba_and_bad_index_is_an_error() -> None:
    config = bamba()
    del config["attn_layer_indices"]
    assert kinds(parse(config)) == ["state"] * 32
    with pytest.raises(ConfigError, match="attn_layer_indices holds 32"):
        parse(bamba(attn_layer_indices=[9, 32]))


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = bamba()
    path = str(write_config(config))
    result = runner.invoke(app, ["estimate", "-m", path, "--seq-len", "4096", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == estimate(parse(config), seq_len=4096).kv_cache_bytes
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100"])
    # issue 10: these families count their weights from the config (the weight tests of this file)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--format", "json"])
    assert json.loads(result.stdout)["weights"]["source"] == "config"
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--weights-bytes", "4GiB"])
    assert result.exit_code == 0, result.output


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("bamba", {}),
    ("bamba attention", {"attn_layer_indices": [3, 7]}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)
