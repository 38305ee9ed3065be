"""DeepSeek-V4: sliding, compressed-sparse and heavily compressed layers (deepseek_v4.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import (
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    default_config,
    meta_count,
    variant_cases,
    variant_ids,
)

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.models import count_weights, parse_config
from kvplan.specs import CompressedSparseSpec, HeavilyCompressedSpec, SharedKVSlidingSpec

from conftest import BF16, shared_config

HEAD, WINDOW, INDEX = 512, 128, 128  # head_dim, sliding_window, index_head_dim of V4-Flash


CSA, HCA = 4, 128  # compress rates


# compress_ratios of V4-Flash: 44 entries for 43 layers (the last is the MTP layer's): 0, 0, then 4/128 alternating
N_SWA, N_CSA, N_HCA = 2, 21, 20


def v4_flash():
    return parse_config(shared_config("deepseek-ai__DeepSeek-V4-Flash"), model_id="v4")


def test_v4_flash_layers_from_compress_ratios() -> None:
    geometry = v4_flash()
    kinds = [type(s) for s in geometry.layers]
    assert len(kinds) == 43
    assert kinds[:2] == [SharedKVSlidingSpec] * 2 and kinds[2] is CompressedSparseSpec and kinds[3] is HeavilyCompressedSpec
    assert (kinds.count(SharedKVSlidingSpec), kinds.count(CompressedSparseSpec), kinds.count(HeavilyCompressedSpec)) == (
        N_SWA, N_CSA, N_HCA)
    csa = geometry.layers[2]
    assert (csa.head_size, csa.sliding_window, csa.compress_ratio, csa.index_head_size, csa.overlap) == (
        HEAD, WINDOW, CSA, INDEX, True)
    assert any("44 entries for 43 layers" in n for n in geometry.notes)


@pytest.mark.parametrize("seq_len", [100, 1000, 131072])
def test_v4_flash_ideal(seq_len: int) -> None:
    est = estimate(v4_flash(), batch=1, seq_len=seq_len)
    window = min(seq_len, WINDOW) * HEAD * BF16  # one K=V row per windowed token
    expected = (N_SWA * window
                + N_CSA * (window + seq_len // CSA * (HEAD + INDEX) * BF16)  # entries + indexer keys
                + N_HCA * (window + seq_len // HCA * HEAD * BF16))
    assert est.kv_cache_bytes == expected


def test_v4_flash_hf_dynamic_at_1000_tokens() -> None:
    """transformers' DeepseekV4 cache after decoding to T = 1000 (T % 4 = 0, T % 128 = 104)."""
    est = estimate(v4_flash(), batch=1, seq_len=1000, deployment=Deployment(engine="hf-dynamic"))
    t = 1000
    swa = 2 * WINDOW * HEAD * BF16  # DynamicSlidingWindowLayer: K and V stored apart (W tokens of storage)
    csa = (WINDOW * HEAD * BF16 + t // CSA * (HEAD + INDEX) * BF16
           + 2 * CSA * (2 * HEAD + 2 * INDEX) * BF16  # kv+gate tail: an empty view of the last 4-token cat
           + CSA * (HEAD * BF16 + HEAD * 4) + CSA * (INDEX * BF16 + INDEX * 4))  # overlap kv (bf16) + gate (fp32)
    hca = WINDOW * HEAD * BF16 + t // HCA * HEAD * BF16 + 2 * (t % HCA) * HEAD * BF16
    assert est.kv_cache_bytes == N_SWA * swa + N_CSA * csa + N_HCA * hca


def test_v4_refuses_static_cache() -> None:
    with pytest.raises(InputError, match="dynamic only"):
        estimate(v4_flash(), batch=1, seq_len=10, deployment=Deployment(engine="hf-static"))


def test_v4_defaults_and_layer_types() -> None:
    """transformers' own layout: layer_types + compress_rates; without either, the config class's schedule."""
    config = {"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_attention_heads": 64, "hidden_size": 4096,
              "vocab_size": 512, "layer_types": ["sliding_attention", "compressed_sparse_attention",
                                                 "heavily_compressed_attention", "compressed_sparse_attention"],
              "compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 64}}
    geometry = parse_config(config, model_id="v4-types")
    assert [s.compress_ratio for s in geometry.layers] == [0, 8, 64, 8]
    assert any("architecture default head_dim = 512" in n for n in geometry.notes)
    del config["layer_types"], config["compress_rates"]
    geometry = parse_config(config, model_id="v4-default")
    assert [type(s) for s in geometry.layers] == [HeavilyCompressedSpec, HeavilyCompressedSpec,
                                                  HeavilyCompressedSpec, CompressedSparseSpec]
    assert any("default schedule" in n for n in geometry.notes)


TINY = dict(vocab_size=128, hidden_size=64, moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
            head_dim=64, q_lora_rank=32, o_groups=2, o_lora_rank=16, n_routed_experts=2, num_experts_per_tok=1,
            index_n_heads=2, index_head_dim=32, sliding_window=8, hc_mult=2,
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
            layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"])


def _measure(cache) -> list[int]:
    import torch

    seen: set[int] = set()
    out = []
    for layer in cache.layers:
        total = 0
        for name, value in vars(layer).items():
            for t in (value.values() if isinstance(value, dict) else [value]):
                if isinstance(t, torch.Tensor) and not name.startswith("_"):
                    storage = t.untyped_storage()
                    if storage.nbytes() and storage.data_ptr() not in seen:
                        seen.add(storage.data_ptr())
                        total += storage.nbytes()
        out.append(total)
    return out


@pytest.mark.parametrize(("prompt", "new"), [(5, 2), (31, 2), (26, 4)])
def test_v4_hf_dynamic_matches_transformers(prompt: int, new: int) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekV4ForCausalLM"):
        pytest.skip("transformers without DeepSeek-V4")
    config = transformers.DeepseekV4Config(**TINY)
    torch.manual_seed(0)
    model = transformers.DeepseekV4ForCausalLM._from_config(config, dtype=torch.bfloat16).eval()
    ids = torch.randint(2, TINY["vocab_size"], (2, prompt))
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                         do_sample=False, return_dict_in_generate=True, pad_token_id=0)
    measured = _measure(out.past_key_values)
    geometry = parse_config({"model_type": "deepseek_v4", **TINY}, model_id="tiny-v4")
    est = estimate(geometry, batch=2, seq_len=prompt + new - 1, kv_dtype="bf16",
                   deployment=Deployment(engine="hf-dynamic"))
    assert [g.total_bytes for g in est.groups] == measured


def test_deepseek_v4_hash_layers_from_legacy_key_or_default() -> None:
    config = default_config("deepseek_v4", num_hidden_layers=5)
    del config["mlp_layer_types"]
    vocab, top_k, experts = config["vocab_size"], config["num_experts_per_tok"], config["n_routed_experts"]
    default = count_weights(config, model_id="v4")
    tables = next(p for p in default.parts if p.name == "router_tables")
    # DeepseekV4Config.default_num_hash_layers = 3: token -> experts tables there, correction biases in the rest
    assert tables.parameters == vocab * top_k * 3 + experts * 2
    assert any("num_hash_layers" in n and "default" in n for n in default.notes)
    legacy = count_weights({**config, "num_hash_layers": 1}, model_id="v4")
    assert legacy.parameters == meta_count({**config, "num_hash_layers": 1})


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "deepseek_v4": [{"num_hidden_layers": 6, "mlp_layer_types": ["hash_moe"] * 2 + ["moe"] * 4,
                     "layer_types": ["sliding_attention", "compressed_sparse_attention",
                                     "heavily_compressed_attention"] * 2}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)
