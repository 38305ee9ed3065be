"""CPM-Ant (cpmant.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers_meta import check_lm_count
from zoo_generate import B, S, T, check_zoo, kv, kv_bytes

from kvplan import api

#: CpmAntConfig's defaults (transformers 5.25) with two layers: 32 heads of dim_head 128, prompt_length 32.
CPMANT = {"model_type": "cpmant", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
          "dim_head": 128, "prompt_length": 32, "architectures": ["CpmAntForCausalLM"]}


def test_transformers_caches_the_prompt_tokens_ahead_of_the_text(tmp_path: Path) -> None:
    """CpmAntModel.forward puts prompt_length prompt tokens ahead of every sequence: the transformers engines
    cache T + prompt_length tokens (measured: [2, 32, 38, 128] per K and V for T = 6)."""
    layers, heads, dim_head, prompt = 2, 32, 128, CPMANT["prompt_length"]
    expected = kv(layers, heads, dim_head, T + prompt)
    assert kv_bytes(CPMANT, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("cpmant", expected)
    fewer = kv_bytes({**CPMANT, "prompt_length": 8}, seq_len=T, tmp_path=tmp_path)
    assert fewer == kv(layers, heads, dim_head, T + 8)


@pytest.mark.parametrize(("engine", "added"), [("hf-static", CPMANT["prompt_length"]), ("vllm", 0), ("sglang", 0),
                                               ("llamacpp", 0), ("ideal", 0)])
def test_only_the_transformers_engines_add_the_prompt(engine: str, added: int, tmp_path: Path) -> None:
    """The prompt prefix is transformers' own: no other engine runs CPM-Ant, and none adds it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dtype": "bfloat16", **CPMANT}))
    api.clear_cache()
    seq_len = 4096  # a whole number of blocks for every engine
    report = api.estimate(api.load_geometry(str(path)), engine=engine, seq_len=seq_len, batch=B, kv_dtype="bf16",
                          allow_defaults=True).to_dict()
    layers, heads, dim_head = 2, 32, 128
    assert report["totals"]["kv_cache_bytes"] == layers * 2 * B * heads * dim_head * (seq_len + added) * S

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("cpmant", {}),
    ("cpmant fewer prompts", {"prompt_types": 8, "segment_types": 8, "num_hidden_layers": 4}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)


def test_a_static_cache_must_hold_the_prompt_tokens(tmp_path: Path) -> None:
    """transformers' generate() sizes a StaticCache for the text and CPM-Ant's prompt overflows it (IndexError,
    measured with 5.25): --max-cache-len must cover T + prompt_length (fits at it, refused one below)."""
    from kvplan.errors import InputError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dtype": "bfloat16", **CPMANT}))
    api.clear_cache()
    geometry = api.load_geometry(str(path))
    layers, heads, dim_head, prompt, seq_len = 2, 32, 128, CPMANT["prompt_length"], 100

    def static(max_cache_len: int) -> int:
        report = api.estimate(geometry, engine="hf-static", seq_len=seq_len, batch=B, kv_dtype="bf16",
                              max_cache_len=max_cache_len, allow_defaults=True).to_dict()
        return report["totals"]["kv_cache_bytes"]

    assert static(seq_len + prompt) == layers * 2 * B * heads * dim_head * (seq_len + prompt) * S
    with pytest.raises(InputError, match=f"cannot hold {seq_len} tokens and the {prompt} the model adds") as caught:
        static(seq_len + prompt - 1)
    assert caught.value.hint == f"use --max-cache-len {seq_len + prompt} or more"
