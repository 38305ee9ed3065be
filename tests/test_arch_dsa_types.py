"""The MLA model types transformers 5.24 ships with DSA ``indexed_attention`` layers (DeepSeek-V3.2, GLM-5 /
glm_moe_dsa, AXK2, HY-V4, Mistral Large 4), LongCat-Flash (two MLA attentions per layer) and Step-3.7-Flash.

Each config below holds the cache fields of the record tools/hf_zoo.py measured (the type's own config-class
defaults, shrunk to a few layers); ``MEASURED`` is what transformers' DynamicCache held after generate() with
batch 2 and a 6-token cache in bf16. The expected values are arithmetic over the fields and equal the measurement.
"""

from __future__ import annotations

import pytest

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import parse_config
from kvplan.specs import IndexerSpec, MLASpec, NoCacheSpec

from conftest import BF16, shared_config

B, T = 2, 6  # batch and cached tokens of the zoo's generate (prompt 5, 2 new tokens)

CONFIGS = {
    "deepseek_v32": dict(model_type="deepseek_v32", num_hidden_layers=2, num_attention_heads=128, hidden_size=7168,
                         kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                         q_lora_rank=1536, index_head_dim=128, index_n_heads=64,
                         layer_types=["indexed_attention"] * 2),
    "glm_moe_dsa": dict(model_type="glm_moe_dsa", num_hidden_layers=2, num_attention_heads=64, hidden_size=6144,
                        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=192, v_head_dim=256, q_lora_rank=2048,
                        index_head_dim=128, index_n_heads=32, indexer_types=["full", "full"],
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
MEASURED = {"deepseek_v32": 33792, "glm_moe_dsa": 33792, "axk2": 13824, "hy_v4": 92160, "mistral_large4": 264192,
            "longcat_flash": 55296}

EXPECTED = {
    # latent (kv_lora_rank + qk_rope_head_dim) per layer, + one indexer key of index_head_dim per layer
    "deepseek_v32": 2 * (512 + 64) + 2 * 128,
    "glm_moe_dsa": 2 * (512 + 64) + 2 * 128,
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


def test_glm5_real_latent_and_indexer() -> None:
    config = shared_config("zai-org__GLM-5")
    geometry = parse_config(config, model_id="glm5")
    layers = config["num_hidden_layers"]
    est = estimate(geometry, batch=1, seq_len=1000, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    latent = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    assert est.kv_cache_bytes == 1000 * layers * (latent + config["index_head_dim"]) * BF16


def test_step3p7_real_sliding_and_full() -> None:
    config = shared_config("stepfun-ai__Step-3.7-Flash")
    text = config.get("text_config", config)
    geometry = parse_config(config, model_id="step")
    full = text["layer_types"].count("full_attention")
    sliding = text["num_hidden_layers"] - full
    for engine in ("ideal", "hf-dynamic"):
        est = estimate(geometry, batch=1, seq_len=4096, kv_dtype="bf16", deployment=Deployment(engine=engine))
        row = 2 * text["num_key_value_heads"] * text["head_dim"] * BF16  # K+V
        window = text["sliding_window"]
        assert est.kv_cache_bytes == (full * 4096 + sliding * window) * row


def test_step3p7_mtp_padded_layer_types() -> None:
    """Legacy Hub lists carry num_nextn_predict_layers trailing MTP entries (Step3p7TextConfig cuts them)."""
    config = {"model_type": "step3p7", "num_hidden_layers": 4, "num_attention_heads": 64, "num_key_value_heads": 8,
              "head_dim": 128, "hidden_size": 4096, "sliding_window": 512, "num_nextn_predict_layers": 1,
              "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention",
                              "full_attention"]}
    geometry = parse_config(config, model_id="step-mtp")
    assert [s.kind for s in geometry.layers] == ["full_attention", "sliding_window", "sliding_window", "full_attention"]


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


GLM5_NEXT = {"model_type": "glm5_next_text", "num_hidden_layers": 8, "kv_lora_rank": 512, "qk_rope_head_dim": 0,
             "index_head_dim": 128, "index_kpool": 16, "linear_num_heads": 64, "linear_head_dim": 128,
             "linear_conv_kernel_dim": 4}


def test_glm5_next_linear_and_indexed_layers() -> None:
    """Glm5NextTextConfig: without layer_types every fourth layer (i % 4 == 3) is indexed MLA, the rest Kimi Delta
    Attention. transformers caches per KDA layer a [B, 3 * heads * head_dim, kernel] bf16 conv window and a
    [B, heads, head_dim, head_dim] float32 state; per indexed layer a latent of kv_lora_rank (no rope) and a packed
    indexer entry: key + pool-gate scores (index_head_dim each) + a validity flag (zoo record glm5_next)."""
    geometry = parse_config(GLM5_NEXT, model_id="glm5-next")
    est = estimate(geometry, batch=B, seq_len=T, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    kda = 3 * 64 * 128 * 4 * BF16 + 64 * 128 * 128 * 4  # conv window (bf16) + recurrent state (fp32)
    indexed = T * 512 * BF16 + T * (2 * 128 + 1) * BF16  # latent + packed indexer entry
    assert est.kv_cache_bytes == B * (6 * kda + 2 * indexed)
    assert any("i % 4 == 3" in n for n in geometry.notes)
