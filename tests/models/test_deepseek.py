"""DeepSeek: DeepSeek-MoE, the MLA of V2/V3 and Kimi K2, V3.2's sparse-attention (DSA) indexer and the MLA families
read with its rules (Mistral Large 4, HY-V4, A.X, dots3-note, LongCat-Flash, MiniCPM3...) (deepseek.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from geometry_check import BOTH, bundled, geometry_of, kinds, per_token
from transformers_meta import (
    DROP,
    SET,
    assert_variant_counts_like_transformers,
    assert_variants_change_the_layout,
    config_of,
    default_config,
    meta_count,
    variant_cases,
    variant_ids,
)
from zoo_generate import B, T

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import KvplanError
from kvplan.models import count_weights, parse_config
from kvplan.specs import IndexerSpec, MLASpec, NoCacheSpec

from conftest import BF16, FP8, REPO_ROOT, shared_config


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


def test_deepseek_v32_indexer_is_its_own_layer_kind() -> None:
    # issue 12: the DSA indexer key cache is counted (one IndexerSpec per MLA layer), no longer only noted.
    config = {**shared_config("deepseek-ai__DeepSeek-V3"), "model_type": "deepseek_v32", "index_head_dim": 128}
    geometry = parse_config(config, model_id="v32")
    assert kinds(geometry).count("mla") == kinds(geometry).count("indexer") == 61
    assert any("indexer key of index_head_dim 128" in n and "132 B" in n for n in geometry.notes)


CONFIGS = {
    "deepseek_v32": dict(model_type="deepseek_v32", num_hidden_layers=2, num_attention_heads=128, hidden_size=7168,
                         kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                         q_lora_rank=1536, index_head_dim=128, index_n_heads=64,
                         layer_types=["indexed_attention"] * 2),
    "axk2": dict(model_type="axk2", num_hidden_layers=2, num_attention_heads=32, hidden_size=2048, kv_lora_rank=128,
                 qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, q_lora_rank=384, index_head_dim=128,
                 index_n_heads=16, layer_types=["indexed_attention"] * 2),
    "hy_v4": dict(model_type="hy_v4", num_hidden_layers=6, num_attention_heads=32, hidden_size=2816, kv_lora_rank=512,
                  qk_rope_head_dim=64, qk_nope_head_dim=192, v_head_dim=256, q_lora_rank=1536, index_head_dim=128,
                  index_n_heads=16, indexer_types=["full", "full", "shared", "shared", "shared", "full"],
                  layer_types=["indexed_attention"] * 6),
    "mistral_large4": dict(model_type="mistral_large4_text", num_hidden_layers=16, num_attention_heads=64,
                           hidden_size=6144, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=64, v_head_dim=128,
                           index_head_dim=128, index_n_heads=32, indexer_types=["full"] * 16,
                           no_rope_layers=[1, 1, 1, 0] * 4, kv_source_layers=list(range(16)),
                           layer_types=["indexed_attention"] * 16),
    "longcat_flash": dict(model_type="longcat_flash", num_layers=2, num_attention_heads=64, hidden_size=6144,
                          kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                          q_lora_rank=1536),
}

#: tests/data/hf_zoo.json (tools/hf_zoo.py, transformers 5.24.0): total bytes of the DynamicCache.
MEASURED = {
    "deepseek_v32": 33792,
    "axk2": 13824,
    "hy_v4": 92160,
    "mistral_large4": 264192,
    "longcat_flash": 55296,
}

EXPECTED = {
    # latent (kv_lora_rank + qk_rope_head_dim) per layer, + one indexer key of index_head_dim per layer
    "deepseek_v32": 2 * (512 + 64) + 2 * 128,
    "axk2": 2 * (128 + 32) + 2 * 128,
    "hy_v4": 6 * (512 + 64) + 3 * 128,  # three layers share an earlier layer's indexer keys
    "mistral_large4": 12 * (512 + 64) + 4 * 512 + 16 * 128,  # every 4th layer is NoPE: no rope part
    "longcat_flash": 2 * 2 * (512 + 64),  # two MLA attentions per layer
}


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic"])
def test_dsa_types_match_transformers(model_type: str, engine: str) -> None:
    geometry = parse_config(CONFIGS[model_type], model_id=model_type)
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine=engine))
    assert est.kv_cache_bytes == B * T * EXPECTED[model_type] * BF16 == MEASURED[model_type]


def test_hy_v4_shared_indexer_layers_cache_no_keys() -> None:
    geometry = parse_config(CONFIGS["hy_v4"], model_id="hy_v4")
    assert sum(isinstance(s, IndexerSpec) for s in geometry.layers) == 3
    assert sum(type(s) is MLASpec for s in geometry.layers) == 6


def test_mistral_large4_kv_source_layers_reuse() -> None:
    config = dict(CONFIGS["mistral_large4"], num_hidden_layers=4, no_rope_layers=[1, 1, 1, 0],
                  kv_source_layers=[0, 1, 1, 3], indexer_types=["full", "full", "shared", "full"],
                  layer_types=["indexed_attention"] * 4)
    geometry = parse_config(config, model_id="ml4")
    mla = [s for s in geometry.layers if type(s) is MLASpec]
    assert [s.qk_rope_head_dim for s in mla] == [64, 64, 0]
    assert isinstance(geometry.layers[2], NoCacheSpec)
    assert sum(isinstance(s, IndexerSpec) for s in geometry.layers) == 3
    del config["no_rope_layers"]
    geometry = parse_config(config, model_id="ml4-default")  # MistralLarge4TextConfig: NoPE every 4th layer
    assert [s.qk_rope_head_dim for s in geometry.layers if type(s) is MLASpec] == [64, 64, 0]
    assert any("no_rope_layer_interval = 4" in n for n in geometry.notes)


DOTS3 = dict(model_type="dots3_note_text", num_hidden_layers=3, num_attention_heads=128, hidden_size=5120,
             kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, q_lora_rank=1024,
             index_head_dim=128, index_n_heads=64, sliding_window=512,
             layer_types=["indexed_attention", "indexed_attention", "sliding_attention"],
             per_layer_config={"2": {"num_attention_heads": 64, "num_key_value_heads": 64, "kv_lora_rank": 1024,
                                     "qk_nope_head_dim": 192}})


@pytest.mark.parametrize(("engine", "indexer_bytes"), [("ideal", BF16), ("hf-dynamic", 4)])
def test_dots3_note_sliding_latent_and_float32_indexer(engine: str, indexer_bytes: int) -> None:
    """Dots3NoteTextConfig: sliding MLA layers with their own latent (per_layer_config), DSA layers whose
    indexer keys transformers keeps in float32 (zoo: 66,048 B measured for B 2, T 6)."""
    geometry = parse_config(DOTS3, model_id="dots3")
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine=engine))
    per_token = 2 * (512 + 64) * BF16 + 2 * 128 * indexer_bytes + (1024 + 64) * BF16  # 2 DSA layers, 1 sliding
    assert est.kv_cache_bytes == B * T * per_token
    if engine == "hf-dynamic":
        assert est.kv_cache_bytes == 66048
    long = estimate(geometry, batch=1, seq_len=4096, kv_dtype="bf16")
    assert long.kv_cache_bytes == 4096 * (2 * (512 + 64) + 2 * 128) * BF16 + 512 * (1024 + 64) * BF16  # window 512


def test_deepseek_v32_weights_are_v3_plus_the_indexer() -> None:
    """DeepseekV32: V3's weights plus, per layer, the indexer's wq_b (q LoRA -> heads x dim), wk, its LayerNorm
    (weight + bias) and weights_proj (transformers modeling_deepseek_v32.py)."""
    from kvplan.models import count_weights

    v3 = shared_config("deepseek-ai__DeepSeek-V3")
    v3.pop("quantization_config", None)
    index = dict(index_head_dim=128, index_n_heads=64, index_topk=2048)
    v32 = dict(v3, model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"], **index)
    base, sparse = count_weights(v3, model_id="v3"), count_weights(v32, model_id="v32")
    per_layer = (v3["q_lora_rank"] * 64 * 128 + v3["hidden_size"] * 128 + 2 * 128 + v3["hidden_size"] * 64)
    assert sparse.parameters == base.parameters + v3["num_hidden_layers"] * per_layer


def test_hy_v4_indexer_keys_sit_on_the_full_layers() -> None:
    """HYV4Config indexer_types full, full, shared, shared, shared, full: layers 0, 1 and 5 hold indexer keys
    (the zoo's per-layer measurement: 16,896 B on those, 13,824 B on the shared ones)."""
    geometry = parse_config(CONFIGS["hy_v4"], model_id="hy_v4")
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    by_kind = {g.spec.kind: g for g in est.groups}
    assert by_kind["indexer"].layer_indices == tuple(6 + i for i in (0, 1, 5))  # appended after the 6 decoder layers
    assert by_kind["no_cache"].layer_indices == tuple(6 + i for i in (2, 3, 4))
    assert (B * T * (512 + 64) * BF16 + B * T * 128 * BF16) == 16896  # latent + indexer key, per layer
    assert B * T * (512 + 64) * BF16 == 13824


V3 = REPO_ROOT / "model_configs" / "deepseek-ai__DeepSeek-V3.json"


LAYERS = 61


LATENT_FP8_DS_MLA = 512 * FP8 + (512 // 128) * 4 + 64 * BF16  # fp8 latent + fp32 scale per 128 + bf16 rope = 656


INDEX_FP8 = 128 * FP8 + (128 // 128) * 4  # fp8 key + fp32 scale = 132


def v32_config(tmp_path: Path) -> Path:
    """DeepSeek-V3.2-Exp's config: V3's plus the published indexer fields (index_head_dim 128, 64 heads, top-k 2048)."""
    config = json.loads(V3.read_text())
    config.update(model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"], index_head_dim=128,
                  index_n_heads=64, index_topk=2048)
    path = tmp_path / "deepseek-v32" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return path


def test_parser_emits_one_indexer_per_mla_layer(tmp_path) -> None:
    geometry = parse_config(json.loads(v32_config(tmp_path).read_text()), model_id="v32")
    mla = [s for s in geometry.layers if type(s) is MLASpec]
    index = [s for s in geometry.layers if isinstance(s, IndexerSpec)]
    assert len(mla) == len(index) == LAYERS
    assert index[0].index_head_dim == 128 and index[0].index_n_heads == 64 and all(s.fp8_ds_mla for s in mla)


@pytest.mark.parametrize(("engine", "kv_dtype", "latent", "index"), [
    ("vllm", "fp8", LATENT_FP8_DS_MLA, INDEX_FP8),
    ("sglang", "fp8", LATENT_FP8_DS_MLA, INDEX_FP8),
    ("vllm", "bf16", (512 + 64) * BF16, INDEX_FP8),  # the indexer stays fp8 + scale in vLLM
    ("hf-dynamic", "bf16", (512 + 64) * BF16, 128 * BF16),  # transformers: the model dtype
])
def test_dsa_bytes_per_token_per_layer(tmp_path, engine, kv_dtype, latent, index) -> None:
    geometry = parse_config(json.loads(v32_config(tmp_path).read_text()), model_id="v32")
    est = estimate(geometry, seq_len=4096, kv_dtype=kv_dtype, deployment=Deployment(engine=engine))
    by_kind = {g.spec.kind: g.bytes_per_token for g in est.groups}
    assert by_kind == {"mla": latent, "indexer": index}


def test_sglang_11309_kv_size_with_the_index(runner, tmp_path) -> None:
    # https://github.com/sgl-project/sglang/pull/11309 (DeepSeek-V3.2-Exp, 8x B200, --tp 8 --dp 8
    # --enable-dp-attention, page 64, fp8): "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"
    tokens, page = 975_424, 64
    budget = tokens * LAYERS * (LATENT_FP8_DS_MLA + INDEX_FP8)  # #tokens x cell size
    result = runner.invoke(app, ["capacity", "-m", str(v32_config(tmp_path)), "--engine", "sglang", "--tp", "8", "--dp",
                                 "8", "--enable-dp-attention", "--kv-dtype", "fp8", "--block-size", "64", "--kv-budget",
                                 str(budget), "--max-model-len", "32768", "--engine-version", "0.5.4", "-f", "json"])
    assert result.exit_code == 0, result.output
    log = json.loads(result.stdout)["capacity"]["engine_log"]
    latent = LAYERS * (tokens + page) * LATENT_FP8_DS_MLA  # layers * (#tokens + page_size) rows * 656 B
    index = LAYERS * ((tokens + page + 1) // page) * page * INDEX_FP8  # pages of page_size * 132 B
    assert log["lines"] == ["KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"]
    assert (log["latent_size_bytes"], log["index_size_bytes"], log["kv_size_bytes"]) == (latent, index, latent + index)
    assert f"{latent / 2**30:.2f}" == "36.35"  # what the same pool logged before the PR (latent only)
    # 0.5.3 (bumped 2025-10-06, sglang#11263; the PR merged 2025-10-09) prints the latent alone
    (tmp_path / "old").mkdir()
    old = runner.invoke(app, ["capacity", "-m", str(v32_config(tmp_path / "old")), "--engine", "sglang", "--tp", "8", "--dp",
                              "8", "--enable-dp-attention", "--kv-dtype", "fp8", "--block-size", "64", "--kv-budget",
                              str(budget), "--max-model-len", "32768", "--engine-version", "0.5.3", "-f", "json"])
    assert json.loads(old.stdout)["capacity"]["engine_log"]["lines"] == [
        "KV Cache is allocated. #tokens: 975424, KV size: 36.35 GB"]


def test_dp_attention_keeps_one_latent_per_request(runner) -> None:
    # DeepSeek-V3 on 8 GPUs: plain --tp 8 replicates the latent on every rank; SGLang --dp 8
    # --enable-dp-attention splits requests over ranks (attention tp 1): same bytes per GPU for 1/8 the requests.
    base = ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--kv-budget", "40GiB",
            "--max-model-len", "32768", "-f", "json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    dp = json.loads(runner.invoke(app, [*base, "--dp", "8", "--enable-dp-attention"]).stdout)
    per_request = LAYERS * 32768 * (512 + 64) * BF16  # one copy of one request's latent
    assert plain["capacity"]["kv_bytes_per_request"] == dp["capacity"]["kv_bytes_per_request"] == per_request
    assert any("--enable-dp-attention" in n and "8 copies" in n for n in plain["notes"])
    assert not any("8 copies" in n for n in dp["notes"])
    assert any("data parallel: 8 ranks on 8 GPUs" in n for n in dp["notes"])


def test_dp_attention_is_refused_where_it_means_nothing(runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--dp",
                                 "3", "--enable-dp-attention", "--kv-budget", "40GiB"])
    assert result.exit_code == 2 and "needs --dp > 1 dividing --tp" in result.output


def test_dp_attention_keeps_attention_weights_whole_per_dp_rank(runner) -> None:
    """SGLang --dp 8 --enable-dp-attention on --tp 8: each DP rank's attention runs on one GPU (attention tp = 8 / 8),
    so every GPU holds the whole attention projections; the MLP and experts stay split over the 8 GPUs."""
    base = ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--gpu", "H200",
            "--max-model-len", "32768", "-f", "json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    dp = json.loads(runner.invoke(app, [*base, "--dp", "8", "--enable-dp-attention"]).stdout)
    attention = next(p["bytes"] for p in plain["weights"]["parts"] if p["name"] == "attention")
    # busiest GPU: attention/8 split under plain tp 8, the whole attention under DP attention (ceil division)
    assert dp["weights"]["bytes_per_gpu"] - plain["weights"]["bytes_per_gpu"] == attention - -(-attention // 8)
    assert plain["budget"]["kv_bytes_per_gpu"] - dp["budget"]["kv_bytes_per_gpu"] == attention - -(-attention // 8)


def test_estimate_names_the_flag_that_removes_replicated_mla(runner) -> None:
    report = json.loads(runner.invoke(app, ["estimate", "-m", "deepseek-ai/DeepSeek-V3", "-tp", "8", "-s", "32k",
                                            "-f", "json"]).stdout)
    note = next(n for n in report["notes"] if n.startswith("MLA latent is replicated"))
    assert "SGLang --dp 8 --enable-dp-attention" in note and "vLLM --data-parallel-size 8" in note


def test_mla_projections_deepseek_v3() -> None:
    w = count_weights(bundled("deepseek-ai/DeepSeek-V3"), model_id="v3")
    attention = next(p for p in w.parts if p.name == "attention")
    h, heads, q_rank, kv_rank, rope, nope, v = 7168, 128, 1536, 512, 64, 128, 128
    per_layer = (h * q_rank + q_rank * heads * (nope + rope) + h * (kv_rank + rope)
                 + kv_rank * heads * (nope + v) + heads * v * h)
    assert sum(m.parameters for m in attention.matrices) == 61 * per_layer
    assert attention.other_parameters == 61 * (q_rank + kv_rank)  # q_a and kv_a layernorms
    shared = next(p for p in w.parts if p.name == "shared_experts")
    assert shared.parameters == (61 - 3) * 3 * h * 2048  # one shared expert in the 58 MoE layers
    assert any("num_nextn_predict_layers" in n for n in w.notes)


def test_fp8_block_scales_deepseek_v3() -> None:
    w = count_weights(bundled("deepseek-ai/DeepSeek-V3"), model_id="v3")
    assert w.quantisation is not None and w.quantisation.block == (128, 128)
    experts = next(p for p in w.parts if p.name == "experts")
    # each 2048 x 7168 expert matrix: 1 byte per value + a float32 scale per 128 x 128 block
    per_matrix = 2048 * 7168 + (2048 // 128) * (7168 // 128) * 4
    assert experts.bytes == 58 * 256 * 3 * per_matrix
    embed = next(p for p in w.parts if p.name == "embed_tokens")
    assert embed.bytes == 129280 * 7168 * 2  # embeddings stay bf16


def test_dots3_note_language_model_equals_transformers() -> None:
    # the wrapper's language model counts exactly; its towers (a MoE ViT, an audio encoder) are refused, not guessed
    config = default_config("dots3_note")
    text = config["text_config"]
    assert count_weights(text, model_id="dots3").parameters == meta_count(text)
    with pytest.raises(KvplanError, match="vision tower") as raised:
        count_weights(config, model_id="dots3")
    assert "--weights-bytes" in raised.value.hint


#: model_type -> variants of its config class's keyword arguments that move layers between layouts, each
#: compared with transformers on its own (``DROP``: keys deleted afterwards, so kvplan applies the
#: config class's rule; ``SET``: keys then added as a Hub config writes them).
WEIGHT_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "mistral_large4": [
        {"text_config": {"num_hidden_layers": 6, "first_k_dense_replace": 2, "attention_bias": True,
                         "kv_source_layers": [0, 1, 1, 3, 3, 5], "indexer_types": ["full", "shared"] * 3,
                         "no_rope_layers": [1, 0, 1, 1, 0, 1]}},
        {"text_config": {"num_hidden_layers": 8, "first_k_dense_replace": 3, "index_topk_freq": 2},
         DROP: ["mlp_layer_types", "no_rope_layers", "kv_source_layers", "indexer_types"]},
    ],
    "hy_v4": [
        {"num_hidden_layers": 5, "mlp_layer_types": ["dense", "dense", "sparse", "dense", "sparse"],
         "indexer_types": ["full", "shared", "full", "full", "shared"], "attention_bias": True, "hc_mult": 2},
        {"num_hidden_layers": 7, DROP: ["mlp_layer_types", "indexer_types"]},
    ],
    "axk1": [{"num_hidden_layers": 5, "first_k_dense_replace": 2, "moe_layer_freq": 2, "attention_bias": True},
             {"num_hidden_layers": 4, DROP: ["mlp_layer_types"], SET: {"first_k_dense_replace": 3}}],
    "axk2": [{"num_hidden_layers": 5, "first_k_dense_replace": 2, "moe_layer_freq": 2, "gated_norm_rank": 8},
             {"num_hidden_layers": 4, DROP: ["mlp_layer_types"]}],
    # sliding MLA layers of their own dims (per_layer_config, or the swa_* defaults in a legacy config where
    # full_attention means an indexed layer unless use_dsa is false)
    "dots3_note_text": [
        {"num_hidden_layers": 6, "first_k_dense_replace": 2, "use_dsa": False},
        {"num_hidden_layers": 6, "first_k_dense_replace": 2, DROP: ["per_layer_config", "rope_parameters"]},
        {"num_hidden_layers": 7, DROP: ["per_layer_config", "rope_parameters", "layer_types", "mlp_layer_types"],
         SET: {"first_k_dense_replace": 3, "use_dsa": False}},
    ],
    "longcat_flash": [{"num_layers": 3, "zero_expert_num": 0, "router_bias": True, "attention_bias": True},
                      {"num_layers": 2, "n_routed_experts": 16, "zero_expert_num": 8, "qk_head_dim": 256}],
    "sarvam_mla": [{"num_hidden_layers": 4, "first_k_dense_replace": 3, "q_lora_rank": 512}],
    "youtu": [{"num_hidden_layers": 4, "q_lora_rank": None, "tie_word_embeddings": False}],
    "minicpm3": [{"num_hidden_layers": 4, "mlp_bias": True, "attention_bias": True},
                 {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, DROP: ["v_head_dim"]}],
}


@pytest.mark.parametrize(("model_type", "overrides"), variant_cases(WEIGHT_VARIANTS),
                         ids=variant_ids(WEIGHT_VARIANTS))
def test_weight_variants_equal_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    assert_variant_counts_like_transformers(model_type, overrides)


def test_weight_variants_change_the_layout() -> None:
    assert_variants_change_the_layout(WEIGHT_VARIANTS)


@pytest.mark.parametrize(("model_type", "drop", "said"), [
    ("hy_v4", ["indexer_types", "mlp_layer_types"], "HYV4Config's default"),
    ("longcat_flash", ["zero_expert_num"], "architecture default zero_expert_num = 256"),
    ("mistral_large4", ["indexer_types"], "MistralLarge4TextConfig's schedule"),
])
def test_a_layout_from_the_config_class_default_is_said(model_type: str, drop: list[str], said: str) -> None:
    # a Hub config that omits a per-layer list is counted by its config class's rule, and the report says so
    config = config_of(model_type, {DROP: drop})
    weights = count_weights(config, model_id=model_type)
    assert any(said in note for note in weights.notes), weights.notes
    assert weights.parameters == meta_count(config)
