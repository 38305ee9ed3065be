"""GPT-2 and the GPT-style decoders (GPT-J, GPT-NeoX, OPT, BLOOM, StarCoder2, ...), GPT-BigCode (gpt2.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import geometry_of
from transformers_meta import assert_counts_like_transformers, case_id, check_lm_count


def test_gpt_bigcode_mqa() -> None:
    assert geometry_of("bigcode/gpt_bigcode-santacoder", bundled=True).layers[0].num_kv_heads == 1


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("codegen", {}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("gpt_neo", {}),
    ("gpt_neo wide mlp", {"intermediate_size": 4096, "num_layers": 4,
                                           "attention_types": [[["global", "local"], 2]]}),
    ("gpt_neox_japanese", {}),
    ("gpt_neox_japanese multiple 2", {"intermediate_multiple_size": 2}),
    ("biogpt", {}),
    ("biogpt long", {"max_position_embeddings": 2048}),
    ("openai-gpt", {}),
    ("openai-gpt untied", {"tie_word_embeddings": False}),
    ("ctrl", {}),
    ("ctrl narrow", {"dff": 4096}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
