"""Llama (1-3.x, 4, 3.2 Vision) and the Llama-layout types with no family module of their own (llama.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from geometry_check import BOTH, bundled, geometry_of, kinds, parse
from transformers_meta import assert_counts_like_transformers, case_id, check_lm_count, default_config, meta_count

from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models import count_weights, parse_config

from conftest import BF16, FP16, KV, REPO_ROOT, shared_config


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


def mllama(**text_overrides: Any) -> dict[str, Any]:
    """Shaped like meta-llama/Llama-3.2-11B-Vision-Instruct."""
    text = {
        "model_type": "mllama_text_model", "hidden_size": 4096, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
    }
    text.update(text_overrides)
    return {
        "model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"], "torch_dtype": "bfloat16",
        "text_config": text,
        "vision_config": {"model_type": "mllama_vision_model", "image_size": 560, "patch_size": 14, "max_num_tiles": 4},
    }


def test_mllama_cross_attention_layers() -> None:
    geometry = parse(mllama())
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "cross_attention"] == [3, 8, 13, 18, 23, 28, 33, 38]
    assert k.count("full_attention") == 40 - 8
    tiles, patches = 4, (560 // 14) ** 2 + 1  # + 1 class token per tile
    assert geometry.default_encoder_len == tiles * patches == 6404
    est = estimate(geometry, seq_len=8192, kv_dtype="bf16")
    assert est.encoder_len == 6404
    assert est.cross_attention_bytes == 8 * KV * 8 * 128 * 6404 * BF16  # cross layers, K+V, kv heads, dim, tokens
    assert est.kv_cache_bytes == 32 * KV * 8 * 128 * 8192 * BF16 + est.cross_attention_bytes


def test_mllama_sparse_configs_use_architecture_defaults() -> None:
    config = mllama()
    del config["text_config"]["model_type"], config["text_config"]["cross_attention_layers"]
    del config["vision_config"]
    geometry = parse(config)  # text model type from the wrapper; MllamaVisionConfig: 448 / 14, 4 tiles
    assert [i for i, kind in enumerate(kinds(geometry)) if kind == "cross_attention"] == [3, 8, 13, 18, 23, 28, 33, 38]
    assert geometry.default_encoder_len == 4 * ((448 // 14) ** 2 + 1)
    assert any("vision_config.image_size is not in the config" in note for note in geometry.notes)
    assert any("cross_attention_layers is not in the config" in note for note in geometry.notes)


def test_mllama_bad_cross_attention_index() -> None:
    with pytest.raises(ConfigError, match="cross_attention_layers holds 40"):
        parse(mllama(cross_attention_layers=[3, 40]))


def test_cli_estimate_and_capacity(runner, write_config) -> None:
    config = mllama()
    path = str(write_config(config))
    result = runner.invoke(app, ["estimate", "-m", path, "--seq-len", "4096", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["kv_cache_bytes"] == estimate(parse(config), seq_len=4096).kv_cache_bytes
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100"])
    # issue 10: these families count their weights from the config (the weight tests of this file)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--format", "json"])
    assert json.loads(result.stdout)["weights"]["source"] == "config"
    result = runner.invoke(app, ["capacity", "-m", path, "--gpu", "H100", "--weights-bytes", "4GiB"])
    assert result.exit_code == 0, result.output


def test_llama_reads_no_sliding_window(runner) -> None:
    """LlamaConfig defines no sliding_window and LlamaAttention has none: a stray key does not make Llama slide
    (Mistral's config class does define it, and slides)."""
    args = ["estimate", "-s", "32k", "--format", "json", "--set", "sliding_window=4096"]
    llama = json.loads(runner.invoke(app, [*args, "-m", "meta-llama/Llama-3.1-8B"]).stdout)
    assert llama["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 32768  # K+V, layers, kv heads, head dim, bf16
    assert any("has no window" in n for n in llama["notes"])
    mistral = json.loads(runner.invoke(app, [*args, "-m", "mistralai/Mistral-7B-v0.1"]).stdout)
    assert mistral["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4096  # the window holds 4,096 tokens


def test_llama_31_8b_exact_count_and_bytes() -> None:
    w = count_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="llama")
    hidden, layers, inter, vocab, kv = 4096, 32, 14336, 128256, 8 * 128
    attention = layers * (hidden * hidden * 2 + hidden * kv * 2)  # q, o + k, v
    mlp = layers * 3 * hidden * inter
    norms = (2 * layers + 1) * hidden
    embeddings = 2 * vocab * hidden  # embed_tokens + untied lm_head
    assert w.parameters == attention + mlp + norms + embeddings == 8_030_261_248
    assert w.bytes == 8_030_261_248 * 2  # bf16
    assert w.bytes_per_gpu(tp=2) == (attention + mlp + embeddings) * 2 // 2 + norms * 2


def test_tied_embeddings_have_no_lm_head() -> None:
    tied = count_weights(bundled("meta-llama/Llama-3.2-1B"), model_id="x")
    assert "lm_head" not in {p.name for p in tied.parts}
    untied = count_weights(bundled("meta-llama/Llama-3.2-1B") | {"tie_word_embeddings": False}, model_id="x")
    assert untied.parameters - tied.parameters == 128256 * 2048


def test_stablelm_norm_arithmetic() -> None:
    """StableLM-3B's defaults: LayerNorm weight + bias before attention, before the MLP, at the end."""
    hidden, layers = 2560, 32  # StableLmConfig hidden_size, num_hidden_layers
    counted = count_weights(default_config("stablelm"), model_id="stablelm")
    norms = next(p for p in counted.parts if p.name == "norms")
    assert norms.parameters == (2 * layers + 1) * 2 * hidden


@pytest.mark.parametrize("model_type", ["llama4", "mllama"])
def test_causal_lm_architecture_counts_the_language_model_alone(model_type: str) -> None:
    """A multimodal config whose ``architectures`` names the ``*ForCausalLM`` class (which engines and
    transformers build as the language model alone) counts no vision tower; the same config naming
    ``*ForConditionalGeneration`` counts it."""
    text_only = default_config(model_type, architectures=[f"{_CLASS[model_type]}ForCausalLM"])
    full = default_config(model_type, architectures=[f"{_CLASS[model_type]}ForConditionalGeneration"])
    text_count = count_weights(text_only, model_id=model_type)
    assert text_count.vision_parameters == 0
    assert any("the language model alone" in note for note in text_count.notes)
    assert count_weights(full, model_id=model_type).vision_parameters > 0


_CLASS = {"llama4": "Llama4", "mllama": "Mllama"}


def test_mllama_with_its_vision_tower_counts_like_transformers() -> None:
    config = default_config("mllama", architectures=["MllamaForConditionalGeneration"])
    assert count_weights(config, model_id="mllama").parameters == meta_count(config)


@pytest.mark.parametrize("name", ["stabilityai__stablelm-3b-4e1t", "stabilityai__stablelm-2-zephyr-1_6b"])
def test_bundled_stablelm_counts_like_transformers(name: str) -> None:
    import json

    config = json.loads((REPO_ROOT / "model_configs" / f"{name}.json").read_text())
    assert count_weights(config, model_id=name).parameters == meta_count(config)


def test_llama_32_vision_11b_matches_published() -> None:
    # MllamaConfig's defaults are meta-llama/Llama-3.2-11B-Vision's; its model card: "11B (10.6)" parameters.
    weights = count_weights(default_config("mllama"), model_id="mllama")
    assert abs(weights.parameters - 10.6e9) / 10.6e9 < 0.01
    assert weights.vision_parameters > 0 and weights.language_parameters > 9e9


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' model built on the meta device from the same config.
WEIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("stablelm", {}),  # LayerNorms with bias
    ("stablelm", {"qk_layernorm": True}),  # a LayerNorm per q and KV head
    ("stablelm", {"use_parallel_residual": True}),  # no post_attention_layernorm
    ("stablelm", {"qk_layernorm": True, "use_parallel_residual": True, "num_key_value_heads": 8}),
    ("llama4_text", {"use_qk_norm": True}),  # the qk norm is a weightless L2 norm
    ("mllama", {}),
    ("arcee", {}),
    ("apertus", {}),
    ("seed_oss", {}),
    ("seed_oss o-bias", {"attention_out_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), WEIGHT_CASES, ids=[case_id(c) for c in WEIGHT_CASES])
def test_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    assert_counts_like_transformers(name, overrides)


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("apertus1p5_text", {}),
    ("apertus1p5_text gqa", {"num_key_value_heads": 8}),
    ("bitnet", {}),
    ("bitnet narrow mlp tied", {"intermediate_size": 4096, "tie_word_embeddings": True}),
    ("cwm", {}),
    ("cwm gqa4", {"num_key_value_heads": 4}),
    ("diffllama", {}),
    ("diffllama 16 heads", {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 128}),
    ("doge", {}),
    ("doge cdmoe", {"is_moe": True, "num_experts": 1024, "attention_bias": True}),
    ("helium", {}),
    ("helium tied", {"tie_word_embeddings": True}),
    ("hyperclovax", {}),
    ("hyperclovax no post-norm", {"use_post_norm": False}),
    ("iquestcoder", {}),
    ("iquestcoder tied", {"tie_word_embeddings": True}),
    ("jais2", {}),
    ("jais2 no biases", {"attention_bias": False, "mlp_bias": False}),
    ("mellum", {}),
    ("mellum dense first", {"mlp_layer_types": ["dense"] * 2 + ["sparse"] * 26}),
    ("nanochat", {}),
    ("nanochat biased", {"attention_bias": True}),
    ("kolibri1", {}),
    ("kolibri1 wide shared", {"shared_expert_intermediate_size": 1024}),
    ("flint", {}),
    ("flint step 2", {"decoder_sparse_step": 2, "mlp_only_layers": [0, 1, 2, 3]}),
    ("beam", {}),
    ("beam 6 layers", {"num_hidden_layers": 6, "mlp_layer_types": ["dense", "sparse"] * 3}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)


def test_llama4_vision_model_and_projector_equal_transformers() -> None:
    # Llama4ForConditionalGeneration: the language model, Llama4VisionModel and the multi-modal projector
    config = default_config("llama4", text_config={"num_hidden_layers": 2, "num_local_experts": 4},
                            vision_config={"num_hidden_layers": 2})
    weights = count_weights(config, model_id="llama4")
    assert weights.parameters == meta_count(config)
    v = config["vision_config"]
    hidden, inner, layers, patch = v["hidden_size"], v["intermediate_size"], 2, v["patch_size"]
    positions = (v["image_size"] // patch) ** 2 + 1  # one per patch and the class token
    tower = (3 * patch * patch * hidden + hidden + positions * hidden + 2 * 2 * hidden  # patches, class, LNs
             + layers * (4 * hidden * hidden + 4 * hidden + 2 * hidden * inner + inner + hidden + 4 * hidden)
             + inner * v["projector_input_dim"] + v["projector_output_dim"] ** 2)  # the pixel-shuffle adapter
    assert weights.vision_parameters == tower + v["vision_output_dim"] * config["text_config"]["hidden_size"]


@pytest.mark.parametrize("overrides", [{}, {"num_hidden_layers": 3, "attention_bias": True, "mlp_bias": True}],
                         ids=["default", "biased"])
def test_emu3_language_model_equals_transformers(overrides: dict[str, Any]) -> None:
    # an Emu3 config built as Emu3ForCausalLM: the language model (Llama's layers); its VQ-VAE is said, not counted
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    text = transformers.Emu3TextConfig(**overrides)
    with torch.device("meta"):
        expected = sum(p.numel() for p in transformers.Emu3ForCausalLM._from_config(text).parameters())
    config = {**default_config("emu3", text_config=text.to_dict()), "architectures": ["Emu3ForCausalLM"]}
    weights = count_weights(config, model_id="emu3")
    assert weights.parameters == expected
    assert any("vq_config (Emu3's VQ-VAE image tokenizer) is not counted" in n for n in weights.notes)
    if not overrides:  # Emu3TextConfig: vocab, hidden, layers, heads, KV heads x head dim, intermediate; untied
        vocab, h, layers, kv, inner = 184622, 4096, 32, 8 * 128, 14336
        assert expected == 2 * vocab * h + layers * (2 * h * h + 2 * h * kv + 3 * h * inner + 2 * h) + h
