"""Real Hub configs (../shared/hf_configs, skipped without it) and the bundled ones, across families:
their geometry as arithmetic over their fields, their weights against published counts and
transformers' own count, and capacity counting the weights of every model estimate reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import BOTH, bundled, geometry_of, kinds, per_token
from transformers_meta import meta_count

from kvplan.cli import app
from kvplan.errors import KvplanError
from kvplan.models import count_weights, parse_config
from kvplan.sources import bundled_ids, bundled_index, read_json_config

from conftest import BF16, KV, SHARED_CONFIGS, shared_config


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


# Published total parameter counts (model cards / the Hub's safetensors parameter count), checked
# against kvplan's count from the bundled config.json. Within 1%.
PUBLISHED = [
    ("meta-llama/Llama-3.1-8B", 8.03e9),
    ("meta-llama/Llama-3.1-70B", 70.6e9),
    ("meta-llama/Llama-3.1-405B", 405.9e9),
    ("meta-llama/Llama-3.2-1B", 1.24e9),
    ("meta-llama/Llama-3.2-3B", 3.21e9),
    ("meta-llama/Llama-2-7b-hf", 6.74e9),
    ("meta-llama/Llama-2-13b-hf", 13.0e9),
    ("meta-llama/Llama-2-70b-hf", 69.0e9),
    ("mistralai/Mistral-7B-v0.1", 7.24e9),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9),
    ("Qwen/Qwen3-8B", 8.19e9),
    ("Qwen/Qwen3-0.6B", 0.596e9),
    ("Qwen/Qwen3-32B", 32.8e9),
    ("Qwen/Qwen3-30B-A3B", 30.5e9),
    ("Qwen/Qwen2.5-7B-Instruct", 7.61e9),
    ("deepseek-ai/DeepSeek-V3", 671e9),
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9),
    ("openai/gpt-oss-20b", 20.9e9),
    ("openai/gpt-oss-120b", 116.8e9),
    ("google/gemma-2-9b", 9.24e9),
    ("google/gemma-2-27b", 27.2e9),
    ("google/gemma-2-2b", 2.61e9),
    ("google/gemma-3-12b-it", 12.2e9),
    ("microsoft/phi-2", 2.78e9),
    ("microsoft/Phi-3-mini-4k-instruct", 3.82e9),
    ("microsoft/phi-4", 14.7e9),
    ("openai-community/gpt2", 124e6),
    ("EleutherAI/gpt-j-6b", 6.05e9),
    ("EleutherAI/gpt-neox-20b", 20.6e9),
    ("bigscience/bloom-560m", 559e6),
    ("llava-hf/llava-1.5-7b-hf", 7.06e9),
    ("state-spaces/mamba-2.8b-hf", 2.77e9),
    # hybrid-state, GLM, encoder-decoder and other families with their own counters
    ("ai21labs/Jamba-v0.1", 51.6e9),  # "52B total, 12B active" (Jamba paper); the Hub lists 51.6B
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 80e9),  # "80B in total and 3B activated" (model card)
    ("nvidia/Nemotron-H-56B-Base-8K", 56e9),
    ("MiniMaxAI/MiniMax-M1-40k", 456e9),  # "456 billion parameters, 45.9B activated" (model card)
    ("THUDM/chatglm3-6b", 6.24e9),
    ("THUDM/glm-4-9b-chat", 9.40e9),
    ("google-t5/t5-base", 222.9e6),
    ("openai/whisper-large-v3", 1.5435e9),  # the Hub lists 1,543,490,560
    ("bigcode/starcoder2-7b", 7.17e9),
    ("mosaicml/mpt-7b-instruct", 6.65e9),
    ("openai-community/gpt2-xl", 1.56e9),
]


@pytest.mark.parametrize(("hub_id", "published"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_count_matches_published(hub_id: str, published: float) -> None:
    counted = count_weights(bundled(hub_id), model_id=hub_id).parameters
    assert abs(counted - published) / published < 0.01, f"{hub_id}: {counted:,} vs {published:,.0f}"


# (shared config, published total, which count it is, source). Within 1 %.
PUBLISHED_SHARED = [
    ("MiniMaxAI__MiniMax-M2.5", 229e9, "total", "MiniMaxAI/MiniMax-M2.5 model card: 229B parameters"),
    ("Qwen__Qwen3.5-27B", 27e9, "language", "Qwen/Qwen3.5-27B model card: 27B (the language model)"),
    ("Qwen__Qwen3.5-397B-A17B", 397e9, "total", "Qwen/Qwen3.5-397B-A17B model card: 397B total, 17B active"),
    ("Qwen__Qwen3-Coder-480B-A35B-Instruct", 480e9, "total", "Qwen3-Coder model card: 480B total, 35B active"),
    ("deepseek-ai__DeepSeek-V4-Flash", 284e9, "total", "deepseek-ai/DeepSeek-V4-Flash: 284B total, 13B activated"),
    ("zai-org__GLM-5", 744e9, "total", "zai-org/GLM-5 model card: 744B parameters (40B active)"),
    ("XiaomiMiMo__MiMo-V2-Flash", 309e9, "total", "XiaomiMiMo/MiMo-V2-Flash model card: 309B total, 15B active"),
    # vLLM's Step-3.7-Flash recipe: "a 196B sparse language backbone with a 1.8B perception encoder"; the
    # shared config carries no vision_config, so the language model is what it describes.
    ("stepfun-ai__Step-3.7-Flash", 196e9, "language", "vLLM recipe for stepfun-ai/Step-3.7-Flash: 196B backbone"),
]


@pytest.mark.parametrize(("name", "published", "which", "source"), PUBLISHED_SHARED, ids=[p[0] for p in PUBLISHED_SHARED])
def test_count_matches_published(name: str, published: float, which: str, source: str) -> None:
    weights = count_weights(shared_config(name), model_id=name)
    counted = weights.parameters if which == "total" else weights.language_parameters
    assert abs(counted - published) / published < 0.01, f"{name}: {counted:,} vs {published:,.0f} ({source})"


#: Shared configs compared in full (language model and the vision tower the config carries).
ORACLE_SHARED = [
    "MiniMaxAI__MiniMax-M2.5", "Qwen__Qwen3-VL-8B-Instruct", "Qwen__Qwen3-VL-30B-A3B-Instruct",
    "Qwen__Qwen3.5-27B", "Qwen__Qwen3.5-35B-A3B", "Qwen__Qwen3.5-397B-A17B", "XiaomiMiMo__MiMo-V2-Flash",
    "deepseek-ai__DeepSeek-V4-Flash", "zai-org__GLM-5", "moonshotai__Kimi-K2.5",
    "Qwen__Qwen3-Coder-480B-A35B-Instruct",
]


@pytest.mark.parametrize("name", ORACLE_SHARED)
def test_shared_config_count_equals_transformers(name: str) -> None:
    config = shared_config(name)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


SHARED_MOE = ["deepseek-ai__DeepSeek-V4-Flash", "Qwen__Qwen3-30B-A3B", "Qwen__Qwen3-Coder-480B-A35B-Instruct",
        "Qwen__Qwen3-VL-30B-A3B-Instruct"]


@pytest.mark.parametrize("name", SHARED_MOE)
def test_shared_moe_config_equals_transformers(name: str) -> None:
    config = shared_config(name)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


def _estimable() -> list[tuple[str, dict[str, Any]]]:
    found = [(hub_id, read_json_config(bundled_index()[hub_id.lower()])) for hub_id in sorted(bundled_ids())]
    for path in sorted(SHARED_CONFIGS.glob("*.json")) if SHARED_CONFIGS.is_dir() else []:
        config = json.loads(path.read_text())
        try:
            parse_config(config, model_id=path.stem)
        except KvplanError:
            continue  # estimate does not read it (gemma4_text), so capacity cannot either
        found.append((str(path), config))
    return found


ESTIMABLE = _estimable()


@pytest.mark.parametrize(("model", "config"), ESTIMABLE, ids=[m for m, _ in ESTIMABLE])
def test_capacity_counts_weights_for_every_model_estimate_reads(runner, model: str, config: dict) -> None:

    args = ["capacity", "--model", model, "--gpu", "H200", "--format", "json"]
    if parse_config(config, model_id=model).max_context_tokens is None:
        args += ["--max-model-len", "4096"]  # the config names no context; the weights are still counted
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert report["weights"]["source"] == "config"
    assert report["weights"]["parameters"] > 0
