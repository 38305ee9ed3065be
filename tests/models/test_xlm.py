"""XLM (xlm.py): XLMWithLMHeadModel's cache, one mask token more than the text in transformers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers_meta import default_config, meta_count
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan import api
from kvplan.errors import ConfigError
from kvplan.models import count_weights

#: XLMConfig's defaults (transformers 5.25) with two layers, as the zoo builds XLMWithLMHeadModel.
XLM = {"model_type": "xlm", "n_layers": 2, "emb_dim": 2048, "n_heads": 16, "causal": False,
       "architectures": ["XLMWithLMHeadModel"]}


def test_transformers_caches_the_appended_mask_token(tmp_path: Path) -> None:
    """Every layer keeps K/V of n_heads heads of emb_dim // n_heads over T + 1 tokens: prepare_inputs_for_generation
    appends mask_token_id to each step (measured: [2, 16, 7, 128] per K and V for T = 6)."""
    layers, heads, head_dim, mask = XLM["n_layers"], XLM["n_heads"], XLM["emb_dim"] // XLM["n_heads"], 1
    expected = kv(layers, heads, head_dim, T + mask)
    assert kv_bytes(XLM, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("xlm", expected)
    # a causal LM (causal: true) of another size: 6 layers, 8 heads of emb_dim 1024 // 8
    clm = {**XLM, "causal": True, "n_layers": 6, "n_heads": 8, "emb_dim": 1024}
    assert kv_bytes(clm, seq_len=T, tmp_path=tmp_path) == kv(6, 8, 1024 // 8, T + mask)


@pytest.mark.parametrize(("engine", "added"), [("hf-static", 1), ("vllm", 0), ("sglang", 0), ("ideal", 0)])
def test_only_the_transformers_engines_add_the_mask_token(engine: str, added: int, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dtype": "bfloat16", **XLM}))
    api.clear_cache()
    seq_len = 4096  # a whole number of blocks for every engine
    report = api.estimate(api.load_geometry(str(path)), engine=engine, seq_len=seq_len, batch=B, kv_dtype="bf16",
                          allow_defaults=True).to_dict()
    layers, heads, head_dim = XLM["n_layers"], XLM["n_heads"], XLM["emb_dim"] // XLM["n_heads"]
    assert report["totals"]["kv_cache_bytes"] == layers * 2 * B * heads * head_dim * (seq_len + added) * S


def test_an_xlm_classifier_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**XLM, "architectures": ["XLMForSequenceClassification"]}))
    api.clear_cache()
    with pytest.raises(ConfigError, match="XLMForSequenceClassification is an encoder"):
        api.load_geometry(str(path))


def test_weights_equal_transformers() -> None:
    from transformers_meta import check_lm_count

    check_lm_count("xlm", {})
    check_lm_count("xlm", {"n_langs": 15, "tie_word_embeddings": False, "n_layers": 3, "emb_dim": 1024, "n_heads": 8})


def test_xlm_default_weights_by_the_config_class() -> None:
    weights = count_weights({"model_type": "xlm"}, model_id="xlm")
    vocab, dim, layers, positions = 30145, 2048, 12, 512  # vocab_size, emb_dim, n_layers, max_position_embeddings
    ffn = 4 * dim
    layer = 4 * dim * dim + 4 * dim + dim * ffn + ffn + ffn * dim + dim + 2 * 2 * dim  # q/k/v/o, FFN, 2 LayerNorms
    expected = vocab * dim + positions * dim + 2 * dim + layers * layer + vocab  # tied projection: its bias only
    assert weights.parameters == expected == 667_119_041  # what transformers 5.25 counts on the meta device


@pytest.mark.parametrize("overrides", [{}, {"n_langs": 5, "n_layers": 3, "tie_word_embeddings": False, "emb_dim": 512,
                                            "n_heads": 8}], ids=["default", "languages-untied"])
def test_xlm_weights_equal_transformers(overrides: dict[str, Any]) -> None:
    config = default_config("xlm", **overrides)
    assert count_weights(config, model_id="xlm").parameters == meta_count(config)


def test_xlm_adaptive_softmax_is_refused() -> None:
    with pytest.raises(ConfigError, match="adaptive-softmax"):
        count_weights({"model_type": "xlm", "asm": True}, model_id="xlm")
