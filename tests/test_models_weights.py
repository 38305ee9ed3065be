"""Weights of the families kvplan/models counts beyond the bundled ones: against published parameter
counts (model cards, cited per entry) and against transformers itself, the strongest oracle --
the model built on the meta device from the same config, its parameters and checkpoint buffers summed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.errors import KvplanError
from kvplan.models import count_weights, parse_config
from kvplan.sources import bundled_ids, bundled_index, read_json_config

from conftest import SHARED_CONFIGS, shared_config

#: Words in the names of the vision/audio modules a language-only count leaves out.
VISION_WORDS = ("visual", "vision", "multi_modal_projector", "mm_projector")


def meta_count(config: dict[str, Any], *, language_only: bool = False) -> int:
    """transformers' own count: the model built on the meta device (no memory), parameters plus the
    buffers it saves in a checkpoint (routers' correction biases), tied weights once."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForImageTextToText)
    if "vision_config" in config:  # the composite model, with its vision tower
        autos = autos[::-1]
    with torch.device("meta"):
        for auto in autos:
            try:
                model = auto.from_config(conf)
                break
            except ValueError:
                continue
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for n, t in tensors if not (language_only and any(w in n for w in VISION_WORDS)))


def default_config(model_type: str, **overrides: Any) -> dict[str, Any]:
    """transformers' config class for ``model_type`` with its defaults, as a config.json dict."""
    transformers = pytest.importorskip("transformers")
    return transformers.AutoConfig.for_model(model_type, **overrides).to_dict()


# ---- published counts -----------------------------------------------------------------------------
# (shared config, published total, which count it is, source). Within 1 %.
PUBLISHED = [
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


@pytest.mark.parametrize(("name", "published", "which", "source"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_count_matches_published(name: str, published: float, which: str, source: str) -> None:
    weights = count_weights(shared_config(name), model_id=name)
    counted = weights.parameters if which == "total" else weights.language_parameters
    assert abs(counted - published) / published < 0.01, f"{name}: {counted:,} vs {published:,.0f} ({source})"


def test_llama_32_vision_11b_matches_published() -> None:
    # MllamaConfig's defaults are meta-llama/Llama-3.2-11B-Vision's; its model card: "11B (10.6)" parameters.
    weights = count_weights(default_config("mllama"), model_id="mllama")
    assert abs(weights.parameters - 10.6e9) / 10.6e9 < 0.01
    assert weights.vision_parameters > 0 and weights.language_parameters > 9e9


# ---- transformers on the meta device: the same count, tensor for tensor ------------------------------
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


def test_step37_language_model_equals_transformers() -> None:
    # The shared Step-3.7 config is the flat (text) form; transformers' Step3p7Config nests it as text_config.
    config = shared_config("stepfun-ai__Step-3.7-Flash")
    nested = {"model_type": "step3p7", "text_config": config}
    assert count_weights(config, model_id="step").parameters == meta_count(nested, language_only=True)


def test_refinedweb_is_falcons_new_decoder_architecture() -> None:
    # Falcon-40B's original remote-code config (RWForCausalLM): n_head_kv K/V groups and two LayerNorms per
    # layer are FalconConfig's new_decoder_architecture.
    config = shared_config("tiiuae__falcon-40b")
    falcon = {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": config["n_head_kv"],
              "hidden_size": config["hidden_size"], "num_attention_heads": config["n_head"],
              "num_hidden_layers": config["n_layer"], "vocab_size": config["vocab_size"], "bias": config["bias"],
              "parallel_attn": config["parallel_attn"], "alibi": config["alibi"]}
    assert count_weights(config, model_id="falcon-40b").parameters == meta_count(falcon)


LAYERS8 = ["mamba", "attention", "mamba", "mamba", "mamba", "mamba", "attention", "mamba"]
KIMI_LINEAR = {  # Kimi-Linear-48B-A3B's layout at 8 layers: KDA 3 : 1 MLA, as the Hub config writes it
    "model_type": "kimi_linear", "num_hidden_layers": 8, "hidden_size": 2304, "num_attention_heads": 32,
    "num_key_value_heads": 32, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "vocab_size": 163840, "intermediate_size": 9216, "moe_intermediate_size": 1024,
    "num_experts": 256, "num_shared_experts": 1, "num_experts_per_token": 8, "first_k_dense_replace": 1,
    "tie_word_embeddings": False,
    "linear_attn_config": {"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 32,
                           "head_dim": 128, "short_conv_kernel_size": 4},
}
#: (id, the config kvplan reads, the config transformers builds) for the families that had no count.
FAMILIES = [
    ("falcon_h1", {}, None),
    ("falcon_h1 rms-norm bias", {"mamba_rms_norm": True, "attention_bias": True}, None),
    ("bamba", {}, None),
    ("bamba attention", {"attn_layer_indices": [3, 7]}, None),
    ("granitemoehybrid", {"num_hidden_layers": 8, "layer_types": LAYERS8}, None),
    ("granitemoehybrid dense", {"num_hidden_layers": 8, "layer_types": LAYERS8, "num_local_experts": 0}, None),
    ("lfm2", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2}, None),
    ("lfm2 multiplier", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2,
                         "block_ffn_dim_multiplier": 1.5, "conv_bias": True, "intermediate_size": 10000}, None),
    ("lfm2_moe", {"num_hidden_layers": 6, "layer_types": ["conv", "conv", "full_attention"] * 2}, None),
    ("mllama", {}, None),
    ("gemma3n_text", {}, None),
    ("gemma3n_text shared", {"num_hidden_layers": 10, "num_kv_shared_layers": 4}, None),
    ("kimi_linear", KIMI_LINEAR, KIMI_LINEAR),
    # Llama-like members that had no count (issue 10 audit): transformers' default configs
    ("olmo2", {}, None), ("olmo3", {}, None), ("olmoe", {}, None), ("glm", {}, None), ("glm4", {}, None),
    ("arcee", {}, None), ("apertus", {}, None), ("ernie4_5", {}, None), ("ernie4_5_moe", {}, None),
    ("ernie4_5_moe interval", {"moe_layer_interval": 2, "moe_layer_start_index": 3, "moe_layer_end_index": 20}, None),
    ("seed_oss", {}, None), ("seed_oss o-bias", {"attention_out_bias": True}, None),
    ("cohere", {}, None), ("cohere2", {}, None), ("exaone4", {}, None), ("codegen", {}, None),
    ("phimoe", {}, None), ("phimoe biases", {"lm_head_bias": True, "attention_bias": True}, None),
    # HunYuanDenseV1Config's defaults name no head_dim and no rope_theta, which its model needs
    ("hunyuan_v1_dense", {"head_dim": 128, "num_key_value_heads": 8,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, None),
]


@pytest.mark.parametrize(("name", "overrides", "hub"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_family_count_equals_transformers(name: str, overrides: dict[str, Any], hub: dict[str, Any] | None) -> None:
    model_type = name.split()[0]
    values = {k: v for k, v in overrides.items() if k != "model_type"}
    config = default_config(model_type, **values)
    if model_type == "granitemoehybrid":  # the Hub spelling of layer_types, which transformers renames
        config["layer_types"] = overrides["layer_types"]
    kvplan = count_weights(hub or config, model_id=name).parameters
    assert kvplan == meta_count(hub or default_config(model_type, **values))


def test_zero_shared_expert_and_zero_mtp_layers_are_valid() -> None:
    # Qwen3-Coder-480B: shared_expert_intermediate_size 0 = no shared expert (Qwen3MoeSparseMoeBlock has none).
    coder = count_weights(shared_config("Qwen__Qwen3-Coder-480B-A35B-Instruct"), model_id="coder")
    assert "shared_experts" not in {p.name for p in coder.parts}
    assert coder.num_experts == 160 and coder.experts_per_token == 8
    # Kimi-K2.5: num_nextn_predict_layers 0 = no MTP module, so no MTP note.
    kimi = count_weights(shared_config("moonshotai__Kimi-K2.5"), model_id="kimi")
    assert not any("multi-token-prediction" in note for note in kimi.notes)
    assert kimi.vision_parameters > 0


# ---- every model estimate reads counts its weights -----------------------------------------------------
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
    from kvplan.cli import app

    args = ["capacity", "--model", model, "--gpu", "H200", "--format", "json"]
    if parse_config(config, model_id=model).max_context_tokens is None:
        args += ["--max-model-len", "4096"]  # the config names no context; the weights are still counted
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert report["weights"]["source"] == "config"
    assert report["weights"]["parameters"] > 0
