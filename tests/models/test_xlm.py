"""XLM (xlm.py): XLMWithLMHeadModel's cache, one mask token more than the text in transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan import api
from kvplan.errors import ConfigError

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
