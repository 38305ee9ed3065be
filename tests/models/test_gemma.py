"""Gemma 1-4, Gemma 3n, VaultGemma and PaliGemma's language model (gemma.py)."""

from __future__ import annotations

from typing import Any

import pytest
from geometry_check import BOTH, CONTEXT, geometry_of, kinds, parse, part, total
from transformers_meta import assert_counts_like_transformers, case_id, check_lm_count, meta_count

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config
from kvplan.specs import SharedKVSpec

from conftest import BF16, KV, shared_config


@BOTH
def test_gemma2_alternates(bundled: bool) -> None:
    geometry = geometry_of("google/gemma-2-9b" if bundled else "google__gemma-2-9b", bundled=bundled)
    assert kinds(geometry) == ["sliding_window", "full_attention"] * 21  # even layers slide
    assert geometry.layers[0].head_size == 256
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.kv_cache_bytes == (21 * 4096 + 21 * 8192) * KV * 8 * 256 * BF16


@BOTH
def test_gemma3_sparse_config_uses_defaults(bundled: bool) -> None:
    geometry = geometry_of("google/gemma-3-27b-it" if bundled else "google__gemma-3-27b-it", bundled=bundled)
    expected = ["full_attention" if (i + 1) % 6 == 0 else "sliding_window" for i in range(62)]
    assert kinds(geometry) == expected  # 10 global, 52 local
    assert geometry.max_context_tokens == 131072  # Gemma3TextConfig default, noted
    assert any("sliding_window_pattern" in n for n in geometry.notes)
    est = estimate(geometry, seq_len=131072)
    # From the config: at 128k, 10 GiB global + 416 MiB local.
    assert est.kv_cache_bytes == (10 * 131072 + 52 * 1024) * KV * 16 * 128 * BF16 == 10 * 1024**3 + 416 * 1024**2


def test_gemma3_12b_pattern_and_head_dim() -> None:
    geometry = geometry_of("google__gemma-3-12b-it")
    assert kinds(geometry).count("full_attention") == 48 // 6
    assert geometry.layers[0].head_size == 256 and geometry.layers[0].sliding_window == 1024


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_gemma4_26b_a4b_global_layers_use_their_own_heads_and_head_dim(engine: str) -> None:
    config = shared_config("google__gemma-4-26B-A4B")
    types = config["text_config"]["layer_types"]
    n_full, n_sliding = types.count("full_attention"), types.count("sliding_attention")
    assert (n_full, n_sliding) == (5, 25)
    window = 1024  # sliding_window
    assert total(config, engine) == (n_sliding * window * KV * 8 * 256 * BF16  # num_key_value_heads, head_dim
                                     + n_full * CONTEXT * KV * 2 * 512 * BF16)  # num_global_key_value_heads, global_head_dim


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_gemma4_31b_dense(engine: str) -> None:
    config = shared_config("nvidia__Gemma-4-31B-IT-NVFP4")
    geometry = parse_config(config, model_id="test")
    assert [s.kind for s in geometry.layers].count("full_attention") == 10
    assert total(config, engine) == 50 * 1024 * KV * 16 * 256 * BF16 + 10 * CONTEXT * KV * 4 * 512 * BF16
    assert any("attention_k_eq_v" in note for note in geometry.notes)


def test_gemma4_without_k_eq_v_keeps_num_key_value_heads_on_global_layers() -> None:
    config = shared_config("nvidia__Gemma-4-31B-IT-NVFP4")
    # Gemma4TextConfig: num_global_key_value_heads applies only with attention_k_eq_v
    got = total(config, **{"text_config.attention_k_eq_v": False})
    assert got == 50 * 1024 * KV * 16 * 256 * BF16 + 10 * CONTEXT * KV * 16 * 512 * BF16


def test_gemma4_reads_transformers_per_layer_config() -> None:
    text = {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "sliding_window": 512, "per_layer_config": {"5": {"head_dim": 512}}}
    assert total(text, seq_len=10) == 5 * 10 * KV * 4 * 256 * BF16 + 10 * KV * 4 * 512 * BF16


def test_gemma4_kv_shared_layers_cache_nothing() -> None:
    text = {"model_type": "gemma4_text", "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "global_head_dim": 512, "sliding_window": 512, "num_kv_shared_layers": 6}
    geometry = parse_config(text, model_id="test")
    assert all(isinstance(s, SharedKVSpec) for s in geometry.layers[6:])
    # layers 0-4 slide, 5 is global; 6-11 read them
    assert total(text, seq_len=1000) == 5 * 512 * KV * 4 * 256 * BF16 + 1000 * KV * 4 * 512 * BF16
    with pytest.raises(ConfigError, match="no full"):
        parse_config({**text, "num_kv_shared_layers": 7}, model_id="test")  # layer 5, the only global, shared


def test_gemma4_assistant_reads_the_target_models_cache() -> None:
    config = {"model_type": "gemma4_assistant", "text_config": {
        "model_type": "gemma4_text", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "hidden_size_per_layer_input": 0}}
    assert total(config, seq_len=100) == 0
    assert any("gemma4_assistant" in n for n in parse_config(config, model_id="test").notes)


def test_gemma4_defaults_are_noted() -> None:
    geometry = parse_config({"model_type": "gemma4_text"}, model_id="test")
    assert len(geometry.layers) == 30  # Gemma4TextConfig num_hidden_layers
    assert any("global_head_dim = 512" in n for n in geometry.notes)


def test_gemma4_31b_weights() -> None:
    weights = count_weights(shared_config("nvidia__Gemma-4-31B-IT-NVFP4"), model_id="test")
    hidden, heads, inter = 5376, 32, 21504
    sliding = 2 * hidden * heads * 256 + 2 * hidden * 16 * 256 + 2 * 256  # q, o; k, v; q/k norms
    full = 2 * hidden * heads * 512 + hidden * 4 * 512 + 2 * 512  # q, o; k (K = V, no v_proj); q/k norms
    assert part(weights, "attention") == 50 * sliding + 10 * full
    assert part(weights, "mlp") == 60 * 3 * hidden * inter
    assert part(weights, "embed_tokens") == 262144 * hidden  # tied
    # NVFP4: the MLPs in 4 bits with one fp8 scale per 16; self_attn is in the ignore list (16-bit)
    assert next(p.bytes for p in weights.parts if p.name == "mlp") == 60 * 3 * hidden * inter * (4 + 8 / 16) // 8


def test_gemma4_26b_weights_count_experts_beside_the_dense_mlp() -> None:
    weights = count_weights(shared_config("google__gemma-4-26B-A4B"), model_id="test")
    hidden, experts, expert_size = 2816, 128, 704
    assert part(weights, "experts") == 30 * experts * 3 * hidden * expert_size
    assert part(weights, "mlp") == 30 * 3 * hidden * 2112
    assert part(weights, "router") == 30 * (hidden * experts + hidden + experts)


GEMMA3N_E4B = {  # google/gemma-3n-E4B-it
    "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n", "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512, "max_position_embeddings": 32768,
        "num_kv_shared_layers": 15,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    },
}


def test_gemma3n_kv_shared_layers_cache_nothing() -> None:
    geometry = parse(GEMMA3N_E4B)
    assert geometry.family == "gemma3n"
    own = 35 - 15
    assert kinds(geometry) == (["sliding_window"] * 4 + ["full_attention"]) * 4 + ["no_cache"] * 15
    est = estimate(geometry, seq_len=4096, kv_dtype="bf16")
    full_layers = own // 5  # layers 4, 9, 14, 19
    assert est.bytes_per_token == KV * own * 2 * 256 * BF16  # K+V, own-cache layers, kv heads, head dim, bf16
    per_layer = KV * 2 * 256 * BF16
    assert est.kv_cache_bytes == (full_layers * 4096 + (own - full_layers) * 512) * per_layer  # window 512


def test_gemma3n_sparse_text_config_uses_gemma3n_defaults() -> None:
    geometry = parse({"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}})
    # Gemma3nTextConfig: 35 layers, (i + 1) % 5 == 0 global, 15 shared, 2 KV heads of 256, window 512.
    assert kinds(geometry) == (["sliding_window"] * 4 + ["full_attention"]) * 4 + ["no_cache"] * 15
    assert geometry.layers[0].sliding_window == 512
    assert geometry.max_context_tokens == 32768
    assert parse({"model_type": "gemma3n_text", "num_kv_shared_layers": 0}).layers[-1].kind == "full_attention"


@pytest.mark.parametrize("name", ["google__gemma-3-12b-it", "google__gemma-3-27b-it"])
def test_real_gemma3_counts_like_transformers(name: str) -> None:
    """The shared Hub configs of Gemma 3 (vision_use_head false): language model, SigLIP tower and projector."""
    config = shared_config(name)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("gemma3", {}),  # SigLIP tower with its attention-pooling head, the soft-embedding norm of the projector
    ("shieldgemma2", {}),
    ("paligemma", {}),  # SigLIP without its head; the projector to projection_dim, with bias
    ("gemma3n_text", {}),
    ("gemma3n_text shared", {"num_hidden_layers": 10, "num_kv_shared_layers": 4}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("vaultgemma", {}),
    ("vaultgemma narrow", {"intermediate_size": 4096, "num_key_value_heads": 8}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
