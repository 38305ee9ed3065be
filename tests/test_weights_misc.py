"""Weight counts of single families fixed against transformers (the meta-device count of the model built
from the config class's defaults, with the config switches that change the tensors)."""

from __future__ import annotations

from typing import Any

import pytest
from test_models_weights import default_config, meta_count

from kvplan.models import count_weights

from conftest import shared_config

CASES: list[tuple[str, dict[str, Any]]] = [
    ("olmo", {}),  # LayerNorms without weights
    ("stablelm", {}),  # LayerNorms with bias
    ("stablelm", {"qk_layernorm": True}),  # a LayerNorm per q and KV head
    ("stablelm", {"use_parallel_residual": True}),  # no post_attention_layernorm
    ("stablelm", {"qk_layernorm": True, "use_parallel_residual": True, "num_key_value_heads": 8}),
    ("llama4_text", {"use_qk_norm": True}),  # the qk norm is a weightless L2 norm
    ("mimo_v2_flash", {}),  # the router's e_score_correction_bias
    ("minimax_m2", {}),  # q/k norms over all heads
    ("gemma3", {}),  # SigLIP tower with its attention-pooling head, the soft-embedding norm of the projector
    ("shieldgemma2", {}),
    ("paligemma", {}),  # SigLIP without its head; the projector to projection_dim, with bias
]


@pytest.mark.parametrize(("model_type", "overrides"), CASES, ids=[f"{t}-{'-'.join(o) or 'defaults'}" for t, o in CASES])
def test_counts_like_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


def test_stablelm_norm_arithmetic() -> None:
    """StableLM-3B's defaults: LayerNorm weight + bias before attention, before the MLP, at the end."""
    hidden, layers = 2560, 32  # StableLmConfig hidden_size, num_hidden_layers
    counted = count_weights(default_config("stablelm"), model_id="stablelm")
    norms = next(p for p in counted.parts if p.name == "norms")
    assert norms.parameters == (2 * layers + 1) * 2 * hidden


@pytest.mark.parametrize("name", ["google__gemma-3-12b-it", "google__gemma-3-27b-it"])
def test_real_gemma3_counts_like_transformers(name: str) -> None:
    """The shared Hub configs of Gemma 3 (vision_use_head false): language model, SigLIP tower and projector."""
    config = shared_config(name)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


LINEAGE: list[tuple[str, dict[str, Any]]] = [
    ("trocr", {}),  # learned positions (+2 rows), layernorm_embedding, cross-attention in every layer
    ("trocr", {"use_learned_position_embeddings": False, "layernorm_embedding": False}),  # sinusoidal: not saved
    ("trocr", {"cross_attention_hidden_size": 768}),  # k/v of cross-attention read the encoder's width
    ("xglm", {}),  # sinusoidal positions, no cross-attention
    ("xglm", {"add_cross_attention": True}),
    ("kosmos-2", {}),  # text: inner attention LayerNorm, MLP LayerNorm; vision tower + latent-query projection
]


@pytest.mark.parametrize(("model_type", "overrides"), LINEAGE,
                         ids=[f"{t}-{'-'.join(o) or 'defaults'}" for t, o in LINEAGE])
def test_decoder_lineage_counts_like_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


@pytest.mark.parametrize("encoder_type", ["bert", "roberta"])
def test_encoder_decoder_counts_the_encoder_as_a_bare_model(encoder_type: str) -> None:
    """BERT2BERT-style ``encoder-decoder``: the encoder is AutoModel's bare stack (pooler, no LM head), the
    decoder the LM-head model with cross-attention."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    encoder = transformers.AutoConfig.for_model(encoder_type, num_hidden_layers=2)
    decoder = transformers.AutoConfig.for_model("bert", num_hidden_layers=2, is_decoder=True, add_cross_attention=True)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    with torch.device("meta"):
        model = transformers.EncoderDecoderModel(config=config)
    expected = sum(p.numel() for p in model.parameters())
    assert count_weights(config.to_dict(), model_id="bert2bert").parameters == expected


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
    from pathlib import Path

    config = json.loads((Path(__file__).resolve().parents[1] / "model_configs" / f"{name}.json").read_text())
    assert count_weights(config, model_id=name).parameters == meta_count(config)
