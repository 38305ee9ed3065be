"""Per-family geometry on real Hugging Face configs (../shared/hf_configs) and the bundled ones.

Expected values are arithmetic over the architecture's own numbers.
"""

from __future__ import annotations

import json

import pytest

from kvplan.calc import estimate
from kvplan.errors import ConfigError
from kvplan.models import parse_config
from kvplan.sources import bundled_index, read_json_config

from conftest import BF16, FP16, KV, make_config, shared_config


def geometry_of(name: str, *, bundled: bool = False, **overrides):
    if bundled:
        config = read_json_config(bundled_index()[name.lower()])
    else:
        config = shared_config(name)
    return parse_config(config, model_id=name, overrides=overrides)


def kinds(geometry) -> list[str]:
    return [spec.kind for spec in geometry.layers]


def per_token(geometry, dtype: str = "bf16") -> int:
    return estimate(geometry, seq_len=1, kv_dtype=dtype).bytes_per_token


BOTH = pytest.mark.parametrize("bundled", [False, True], ids=["shared", "bundled"])


# ---- dense GQA / MQA / MHA ------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head_dim"),
    [
        ("meta-llama/Llama-2-7b-hf", 32, 32, 128),
        ("meta-llama/Llama-2-13b-hf", 40, 40, 128),
        ("meta-llama/Llama-2-70b-hf", 80, 8, 128),
        ("meta-llama/Meta-Llama-3-8B", 32, 8, 128),
        ("meta-llama/Llama-3.1-8B", 32, 8, 128),
        ("meta-llama/Llama-3.1-70B", 80, 8, 128),
        ("meta-llama/Llama-3.1-405B", 126, 8, 128),
        ("meta-llama/Llama-3.2-1B-Instruct", 16, 8, 64),  # explicit head_dim 64 = 2048 // 32
        ("mistralai/Mixtral-8x7B-v0.1", 32, 8, 128),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32, 8, 128),  # sliding_window null -> full
        ("Qwen/Qwen2-7B", 28, 4, 128),  # use_sliding_window false -> full
        ("Qwen/Qwen2.5-7B-Instruct", 28, 4, 128),
        ("Qwen/Qwen3-0.6B", 28, 8, 128),  # head_dim 128, not 1024 // 16 = 64
        ("Qwen/Qwen3-1.7B", 28, 8, 128),
        ("Qwen/Qwen3-8B", 36, 8, 128),
        ("Qwen/Qwen3-32B", 64, 8, 128),
        ("Qwen/Qwen3-30B-A3B", 48, 4, 128),
        ("google/gemma-2b", 18, 1, 256),
        ("microsoft/phi-2", 32, 32, 80),  # 2560 // 32
        ("openai-community/gpt2", 12, 12, 64),  # n_layer, n_head, n_embd 768 // 12
        ("openai-community/gpt2-xl", 48, 25, 64),  # 1600 // 25
        ("llava-hf/llava-1.5-7b-hf", 32, 32, 128),  # sparse text_config: LlamaConfig defaults
        ("tiiuae/falcon-40b", 60, 8, 64),  # n_head_kv 8, 8192 // 128
    ],
)
def test_dense_families(name: str, layers: int, kv_heads: int, head_dim: int, bundled: bool) -> None:
    geometry = geometry_of(name.replace("/", "__") if not bundled else name, bundled=bundled)
    assert kinds(geometry) == ["full_attention"] * layers
    spec = geometry.layers[0]
    assert (spec.num_kv_heads, spec.head_size, spec.head_size_v) == (kv_heads, head_dim, head_dim)
    assert per_token(geometry) == KV * layers * kv_heads * head_dim * BF16


def test_seed_numbers_llama2_7b() -> None:
    geometry = geometry_of("meta-llama__Llama-2-7b-hf")
    one = estimate(geometry, seq_len=4096, kv_dtype="fp16")
    assert one.kv_cache_bytes == 4096 * 32 * KV * 32 * 128 * FP16 == 2 * 1024**3  # tokens, layers, K+V, heads, dim
    assert estimate(geometry, seq_len=4096, batch=8).kv_cache_bytes == 8 * 4096 * 32 * KV * 32 * 128 * FP16 == 16 * 1024**3


def test_seed_numbers_llama31_8b() -> None:
    geometry = geometry_of("meta-llama__Llama-3.1-8B")
    assert estimate(geometry, seq_len=8192).kv_cache_bytes == 8192 * 32 * KV * 8 * 128 * BF16 == 1024**3


def test_llava_defaults_are_noted() -> None:
    geometry = geometry_of("llava-hf__llava-1.5-7b-hf")
    assert any("hidden_size" in note and "default" in note for note in geometry.notes)
    sources = {p.field: p.source for p in geometry.provenance}
    assert sources["num_hidden_layers"] == "default of llama: num_hidden_layers"
    assert sources["max_context_tokens"] == "config: text_config.max_position_embeddings"


# ---- windows -----------------------------------------------------------------------------------------
@BOTH
def test_mistral_sliding_window(bundled: bool) -> None:
    geometry = geometry_of("mistralai/Mistral-7B-v0.1" if bundled else "mistralai__Mistral-7B-v0.1", bundled=bundled)
    assert kinds(geometry) == ["sliding_window"] * 32
    assert geometry.layers[0].sliding_window == 4096
    # 32k tokens: every layer holds only the 4096-token window.
    assert estimate(geometry, seq_len=32768).kv_cache_bytes == 4096 * 32 * KV * 8 * 128 * BF16


def test_qwen2_window_only_with_use_sliding_window() -> None:
    config = shared_config("Qwen__Qwen2-7B")
    assert kinds(parse_config(config, model_id="q")) == ["full_attention"] * 28
    geometry = parse_config(config, model_id="q", overrides={"use_sliding_window": True, "max_window_layers": 20, "sliding_window": 4096})
    assert kinds(geometry) == ["full_attention"] * 20 + ["sliding_window"] * 8  # layers >= max_window_layers slide
    est = estimate(geometry, seq_len=8192)
    assert est.kv_cache_bytes == (20 * 8192 + 8 * 4096) * KV * 4 * 128 * BF16


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


@BOTH
def test_gpt_oss_layer_types(bundled: bool) -> None:
    geometry = geometry_of("openai/gpt-oss-20b" if bundled else "openai__gpt-oss-20b", bundled=bundled)
    assert kinds(geometry) == ["sliding_window", "full_attention"] * 12
    assert geometry.layers[0].sliding_window == 128
    est = estimate(geometry, seq_len=131072, kv_dtype="bf16")
    assert est.kv_cache_bytes == (12 * 128 + 12 * 131072) * KV * 8 * 64 * BF16


def test_gpt_oss_120b_per_token() -> None:
    geometry = geometry_of("openai__gpt-oss-120b")
    assert per_token(geometry) == 36 * KV * 8 * 64 * BF16 == 73728


@BOTH
def test_llama4_chunked_layers(bundled: bool) -> None:
    name = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    geometry = geometry_of(name if bundled else name.replace("/", "__"), bundled=bundled)
    expected = ["full_attention" if (i + 1) % 4 == 0 else "chunked_local" for i in range(48)]
    assert kinds(geometry) == expected  # 12 NoPE global layers, 36 chunked
    assert geometry.layers[0].attention_chunk_size == 8192
    est = estimate(geometry, seq_len=65536)
    assert est.kv_cache_bytes == (12 * 65536 + 36 * 8192) * KV * 8 * 128 * BF16


def test_llama4_explicit_no_rope_layers() -> None:
    config = shared_config("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    flags = [1, 1, 0] * 16
    geometry = parse_config(config, model_id="l4", overrides={"no_rope_layers": flags})
    assert kinds(geometry) == ["chunked_local", "chunked_local", "full_attention"] * 16


def test_phi3_window() -> None:
    geometry = geometry_of("microsoft__Phi-3-mini-4k-instruct")
    assert kinds(geometry) == ["sliding_window"] * 32 and geometry.layers[0].sliding_window == 2047


# ---- MLA ---------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize(("name", "layers"), [("deepseek-ai/DeepSeek-V3", 61), ("deepseek-ai/DeepSeek-V2-Lite", 27)])
def test_deepseek_mla(name: str, layers: int, bundled: bool) -> None:
    geometry = geometry_of(name if bundled else name.replace("/", "__"), bundled=bundled)
    assert kinds(geometry) == ["mla"] * layers
    spec = geometry.layers[0]
    assert (spec.kv_lora_rank, spec.qk_rope_head_dim, spec.num_kv_heads) == (512, 64, 1)
    # One latent of kv_lora_rank + qk_rope_head_dim, no factor 2 for K and V.
    assert per_token(geometry) == layers * (512 + 64) * BF16


def test_deepseek_v3_per_token_fact() -> None:
    assert per_token(geometry_of("deepseek-ai__DeepSeek-V3")) == 70272  # 61 layers * 576 * 2


def test_kimi_k2_is_mla() -> None:
    geometry = geometry_of("moonshotai/Kimi-K2-Instruct", bundled=True)
    assert set(kinds(geometry)) == {"mla"}


# ---- hybrid and state-only -----------------------------------------------------------------------------
@BOTH
def test_mamba_state_only(bundled: bool) -> None:
    geometry = geometry_of("state-spaces/mamba-2.8b-hf" if bundled else "state-spaces__mamba-2.8b-hf", bundled=bundled)
    assert kinds(geometry) == ["state"] * 64
    d_inner, d_conv, d_state, fp32 = 5120, 4, 16, 4
    est = estimate(geometry)  # no --seq-len needed: nothing grows with tokens
    assert est.seq_len is None
    assert est.kv_cache_bytes == 64 * ((d_conv - 1) * d_inner + d_inner * d_state) * fp32
    # constant in the sequence length
    assert estimate(geometry, seq_len=1_000_000).kv_cache_bytes == est.kv_cache_bytes


def test_falcon_mamba_uses_intermediate_size() -> None:
    geometry = geometry_of("tiiuae__falcon-mamba-7b")
    d_inner, d_conv, d_state = 8192, 4, 16  # intermediate_size, not expand (16) * hidden
    assert estimate(geometry).kv_cache_bytes == 64 * ((d_conv - 1) * d_inner + d_inner * d_state) * BF16


@BOTH
def test_nemotron_h_pattern(bundled: bool) -> None:
    geometry = geometry_of("nvidia/Nemotron-H-56B-Base-8K" if bundled else "nvidia__Nemotron-H-56B-Base-8K", bundled=bundled)
    k = kinds(geometry)
    assert (k.count("state"), k.count("full_attention"), k.count("no_cache")) == (54, 10, 54)
    heads, head_dim, groups, d_state, d_conv = 256, 64, 8, 256, 4
    d_inner = heads * head_dim
    state = ((d_conv - 1) * (d_inner + 2 * groups * d_state) + heads * head_dim * d_state) * BF16
    est = estimate(geometry, seq_len=8192)
    assert est.state_bytes == 54 * state
    assert est.kv_cache_bytes == 54 * state + 8192 * 10 * KV * 8 * 128 * BF16


@BOTH
def test_minimax_attn_type_list(bundled: bool) -> None:
    geometry = geometry_of("MiniMaxAI/MiniMax-M1-80k" if bundled else "MiniMaxAI__MiniMax-M1", bundled=bundled)
    k = kinds(geometry)
    assert (k.count("full_attention"), k.count("state")) == (10, 70)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == list(range(7, 80, 8))
    heads, head_dim = 64, 128
    est = estimate(geometry, seq_len=1000, kv_dtype="bf16")
    assert est.state_bytes == 70 * heads * head_dim * head_dim * FP16  # no torch_dtype: 16-bit state


def test_jamba_bundled() -> None:
    geometry = geometry_of("ai21labs/Jamba-v0.1", bundled=True)
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == [4, 12, 20, 28]
    d_inner, d_conv, d_state = 2 * 4096, 4, 16
    est = estimate(geometry, seq_len=1, kv_dtype="bf16")
    # From the config: 16,384 B/token and about 8.3 MiB of Mamba state per sequence.
    assert est.bytes_per_token == 4 * KV * 8 * 128 * BF16 == 16384
    assert est.state_bytes == 28 * ((d_conv - 1) * d_inner + d_inner * d_state) * FP16


def test_qwen3_next_bundled() -> None:
    geometry = geometry_of("Qwen/Qwen3-Next-80B-A3B-Instruct", bundled=True)
    k = kinds(geometry)
    assert (k.count("full_attention"), k.count("state")) == (12, 36)
    hk, hv, dk, dv, conv = 16, 32, 128, 128, 4
    state = ((conv - 1) * (2 * hk * dk + hv * dv) + hv * dk * dv) * FP16
    est = estimate(geometry, seq_len=1, kv_dtype="bf16")
    assert est.bytes_per_token == 12 * KV * 2 * 256 * BF16 == 24576
    assert est.state_bytes == 36 * state


# ---- encoder-decoder -----------------------------------------------------------------------------------
@BOTH
def test_whisper_cross_attention(bundled: bool) -> None:
    geometry = geometry_of("openai/whisper-large-v3" if bundled else "openai__whisper-large-v3", bundled=bundled)
    assert kinds(geometry) == ["full_attention"] * 32 + ["cross_attention"] * 32
    est = estimate(geometry)  # default: 448 decoder positions, 1500 encoder positions
    heads, head_dim = 20, 64
    assert (est.seq_len, est.encoder_len) == (448, 1500)
    assert est.cross_attention_bytes == 32 * KV * heads * head_dim * 1500 * FP16  # 234.4 MiB
    assert est.kv_cache_bytes == 32 * KV * heads * head_dim * (448 + 1500) * FP16


@BOTH
def test_t5_decoder_self_and_cross(bundled: bool) -> None:
    geometry = geometry_of("google-t5/t5-base" if bundled else "google-t5__t5-base", bundled=bundled)
    assert kinds(geometry) == ["full_attention"] * 12 + ["cross_attention"] * 12
    est = estimate(geometry, seq_len=128, encoder_len=512, kv_dtype="fp32")
    heads, d_kv, fp32 = 12, 64, 4
    assert est.kv_cache_bytes == 12 * KV * heads * d_kv * (128 + 512) * fp32


def test_t5_num_decoder_layers_differs() -> None:
    geometry = parse_config(shared_config("google-t5__t5-base"), model_id="t5", overrides={"num_decoder_layers": 3})
    assert kinds(geometry) == ["full_attention"] * 3 + ["cross_attention"] * 3


# ---- legacy names ------------------------------------------------------------------------------------
def test_falcon_multi_query() -> None:
    geometry = geometry_of("tiiuae/falcon-7b", bundled=True)
    assert geometry.layers[0].num_kv_heads == 1 and geometry.layers[0].head_size == 4544 // 71


def test_falcon_new_decoder_architecture() -> None:
    config = {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 8, "num_attention_heads": 128,
              "hidden_size": 8192, "num_hidden_layers": 60, "torch_dtype": "bfloat16"}
    assert parse_config(config, model_id="f").layers[0].num_kv_heads == 8


def test_falcon_default_multi_query_is_noted() -> None:
    config = {"model_type": "falcon", "num_attention_heads": 71, "hidden_size": 4544, "num_hidden_layers": 32}
    geometry = parse_config(config, model_id="f")
    assert geometry.layers[0].num_kv_heads == 1
    assert any("multi_query" in n for n in geometry.notes)


def test_mpt_attn_config_kv_n_heads() -> None:
    config = {"model_type": "mpt", "n_layers": 32, "n_heads": 32, "d_model": 4096, "max_seq_len": 2048,
              "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8}}
    geometry = parse_config(config, model_id="mpt")
    assert (geometry.layers[0].num_kv_heads, geometry.layers[0].head_size, geometry.max_context_tokens) == (8, 128, 2048)
    config["attn_config"] = {"attn_type": "multihead_attention"}
    assert parse_config(config, model_id="mpt").layers[0].num_kv_heads == 32


def test_chatglm_multi_query_group_num() -> None:
    geometry = geometry_of("THUDM/chatglm3-6b", bundled=True)
    spec = geometry.layers[0]
    assert (spec.num_kv_heads, spec.head_size, len(geometry.layers)) == (2, 128, 28)


def test_gpt_bigcode_mqa() -> None:
    assert geometry_of("bigcode/gpt_bigcode-santacoder", bundled=True).layers[0].num_kv_heads == 1


@pytest.mark.parametrize(
    "hub_id",
    ["EleutherAI/gpt-j-6b", "EleutherAI/gpt-neox-20b", "facebook/opt-6.7b", "bigscience/bloom-560m",
     "internlm/internlm2_5-7b-chat", "baichuan-inc/Baichuan2-7B-Chat", "stabilityai/stablelm-3b-4e1t",
     "CohereForAI/aya-23-8B", "zai-org/GLM-4.5", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"],
)
def test_more_families_parse_with_full_attention_math(hub_id: str) -> None:
    geometry = geometry_of(hub_id, bundled=True)
    attention = [s for s in geometry.layers if s.kind in ("full_attention", "chunked_local")]
    assert attention, hub_id
    spec = attention[0]
    assert per_token(geometry) == len(attention) * KV * spec.num_kv_heads * spec.head_size * BF16


# ---- rules ---------------------------------------------------------------------------------------------
def test_missing_required_field_names_aliases() -> None:
    config = make_config(model_type="custom_llm", num_hidden_layers=...)
    with pytest.raises(ConfigError) as err:
        parse_config(config, model_id="m")
    assert "num_hidden_layers" in err.value.message and "n_layer" in err.value.message


def test_head_dim_derived_is_noted() -> None:
    geometry = parse_config(make_config(), model_id="m")
    assert any("head_dim derived as hidden_size // num_attention_heads = 4096 // 32 = 128" in n for n in geometry.notes)


def test_unknown_model_type_uses_generic_rules() -> None:
    geometry = parse_config(make_config(model_type="brand_new_llm", num_key_value_heads=4), model_id="m")
    assert geometry.family == "generic" and geometry.layers[0].num_kv_heads == 4
    assert any("brand_new_llm" in n for n in geometry.notes)


def test_unknown_model_type_missing_field_is_an_error() -> None:
    with pytest.raises(ConfigError):
        parse_config({"model_type": "brand_new_llm", "num_hidden_layers": 4}, model_id="m")


def test_set_overrides_and_records_provenance() -> None:
    geometry = parse_config(make_config(), model_id="m", overrides={"num_key_value_heads": 8})
    assert geometry.layers[0].num_kv_heads == 8
    assert {p.field: p.source for p in geometry.provenance}["num_kv_heads"] == "--set num_key_value_heads"


def test_set_reaches_nested_text_config() -> None:
    config = shared_config("google__gemma-3-27b-it")
    geometry = parse_config(config, model_id="g", overrides={"sliding_window": 512})
    assert geometry.layers[0].sliding_window == 512
    geometry = parse_config(config, model_id="g", overrides={"text_config.sliding_window": 256})
    assert geometry.layers[0].sliding_window == 256


@pytest.mark.parametrize(
    ("override", "phrase"),
    [
        ({"num_hidden_layers": 0}, "must be positive"),
        ({"num_hidden_layers": -3}, "must be positive"),
        ({"num_key_value_heads": "eight"}, "must be an integer"),
        ({"num_attention_heads": 10**9}, "absurdly large"),
        ({"num_key_value_heads": 64}, "more than the 32 attention heads"),
        ({"hidden_size": 4097}, "not divisible"),
        ({"num_key_value_heads": 5}, "not a multiple of 5 KV heads"),
        ({"layer_types": ["full_attention"] * 3}, "layer_types has 3 entries"),
        ({"layer_types": ["warp_attention"] * 32}, "unknown layer type"),
    ],
)
def test_bad_values_are_config_errors(override: dict, phrase: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(make_config(**override), model_id="m")
    assert phrase in err.value.message


def test_non_object_config() -> None:
    with pytest.raises(ConfigError):
        parse_config([1, 2], model_id="m")


def test_encoder_only_model_rejected() -> None:
    with pytest.raises(ConfigError, match="encoder-only"):
        parse_config({"model_type": "bert", "num_hidden_layers": 12}, model_id="b")


def test_every_bundled_config_parses_and_names_itself() -> None:
    index = bundled_index()
    paths = sorted(set(index.values()))
    assert len(paths) >= 40
    for path in paths:
        data = json.loads(path.read_text())
        meta = data["_kvplan"]
        assert meta["hub_id"].replace("/", "__") == path.stem
        assert meta["source"].startswith("https://")
        geometry = parse_config(data, model_id=meta["hub_id"])
        assert geometry.layers, path


def test_bundled_mpt_glm4_starcoder2_olmo2() -> None:
    mpt = geometry_of("mosaicml/mpt-7b-instruct", bundled=True)  # attn_config.attn_type multihead_attention
    assert per_token(mpt) == 32 * KV * 32 * 128 * BF16 and mpt.max_context_tokens == 2048
    glm = geometry_of("THUDM/glm-4-9b-chat", bundled=True)  # multi_query_group_num 2, kv_channels 128
    assert per_token(glm) == 40 * KV * 2 * 128 * BF16 and glm.max_context_tokens == 131072
    starcoder = geometry_of("bigcode/starcoder2-7b", bundled=True)
    assert kinds(starcoder) == ["sliding_window"] * 32 and starcoder.layers[0].sliding_window == 4096
    olmo = geometry_of("allenai/OLMo-2-1124-13B", bundled=True)
    assert per_token(olmo) == 40 * KV * 40 * 128 * BF16


def test_cohere2_three_local_one_global() -> None:
    # Command-R7B-style config: 3 sliding layers then 1 global (sliding_window_pattern 4).
    config = make_config(model_type="cohere2", num_hidden_layers=32, num_key_value_heads=8,
                         sliding_window=4096, sliding_window_pattern=4, max_position_embeddings=8192)
    geometry = parse_config(config, model_id="c2")
    assert kinds(geometry) == ["sliding_window", "sliding_window", "sliding_window", "full_attention"] * 8
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.kv_cache_bytes == (24 * 4096 + 8 * 8192) * KV * 8 * 128 * BF16


def test_generic_sliding_window_applies_to_every_layer_and_is_noted() -> None:
    geometry = parse_config(make_config(model_type="new_llm", sliding_window=1024), model_id="n")
    assert kinds(geometry) == ["sliding_window"] * 32
    assert any("sliding_window = 1024 applies to every layer" in n for n in geometry.notes)


def test_qwen2_vl_top_level_text_fields() -> None:
    config = make_config(model_type="qwen2_vl", num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                         hidden_size=3584, sliding_window=32768, use_sliding_window=False, max_window_layers=28)
    geometry = parse_config(config, model_id="qvl")
    assert geometry.family == "qwen" and kinds(geometry) == ["full_attention"] * 28


def test_cross_layer_attention_shares_kv() -> None:
    # Hunyuan-Large style: use_cla with cla_share_factor 2 -> every other layer keeps a cache.
    config = make_config(model_type="hunyuan", num_hidden_layers=8, num_key_value_heads=8,
                         use_cla=True, cla_share_factor=2)
    geometry = parse_config(config, model_id="h")
    assert kinds(geometry) == ["full_attention", "no_cache"] * 4
    assert per_token(geometry) == 4 * KV * 8 * 128 * BF16  # 4 caching layers


def test_unknown_type_with_hybrid_layout_markers_is_refused() -> None:
    config = make_config(model_type="zamba_like", layers_block_type=["mamba", "hybrid"] * 16)
    with pytest.raises(ConfigError, match="layers_block_type"):
        parse_config(config, model_id="z")


def test_top_level_dtype_wins_over_text_config() -> None:
    config = {"model_type": "llava_next", "torch_dtype": "float16",
              "text_config": {**make_config(model_type="mistral"), "torch_dtype": "bfloat16"}}
    geometry = parse_config(config, model_id="l")
    assert (geometry.config_dtype, geometry.config_dtype_source) == ("float16", "config: torch_dtype")
    geometry = parse_config(config, model_id="l", overrides={"torch_dtype": "float32"})
    assert (geometry.config_dtype, geometry.config_dtype_source) == ("float32", "--set torch_dtype")


def test_deepseek_v32_indexer_is_its_own_layer_kind() -> None:
    # issue 12: the DSA indexer key cache is counted (one IndexerSpec per MLA layer), no longer only noted.
    config = {**shared_config("deepseek-ai__DeepSeek-V3"), "model_type": "deepseek_v32", "index_head_dim": 128}
    geometry = parse_config(config, model_id="v32")
    assert kinds(geometry).count("mla") == kinds(geometry).count("indexer") == 61
    assert any("indexer key of index_head_dim 128" in n and "132 B" in n for n in geometry.notes)
