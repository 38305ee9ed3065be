"""BERT-style decoders (BertGeneration, RoBERTa-style, ModernBERT decoder) and GIT (bert.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers_meta import check_lm_count, default_config, meta_count
from zoo_generate import T, check_zoo, kv, kv_bytes

from kvplan import api
from kvplan.errors import ConfigError
from kvplan.models import count_weights

BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 12, "hidden_size": 768,
        "intermediate_size": 64, "vocab_size": 512, "max_position_embeddings": 512, "type_vocab_size": 2,
        "is_decoder": False}


@pytest.mark.parametrize("model_type", ["bert", "roberta", "camembert", "xlm-roberta"])
def test_bert_style_decoder(model_type: str, tmp_path: Path) -> None:
    arch = "BertLMHeadModel" if model_type == "bert" else "ForCausalLM"
    config = {**BERT, "model_type": model_type, "architectures": [arch]}
    expected = kv(2, 12, 768 // 12, T)  # multi-head: 12 KV heads of hidden_size // heads
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_bert_as_encoder_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BERT, "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(ConfigError, match="encoder-only"):
        api.load_geometry(str(path))


def test_bert_weights() -> None:
    h, inner, vocab, pos, types, layers = 768, 64, 512, 512, 2, 2
    counted = count_weights({**BERT, "architectures": ["BertLMHeadModel"]}, model_id="bert")
    embeddings = vocab * h + (pos + types) * h + 2 * h
    per_layer = 4 * h * h + 4 * h + 2 * h + (h * inner + inner) + (inner * h + h) + 2 * h
    head = h * h + h + 2 * h + vocab  # transform dense + LayerNorm, decoder bias (tied weight)
    assert counted.parameters == embeddings + layers * per_layer + head


@pytest.mark.parametrize("model_type", ["bert", "roberta", "electra", "xlm-roberta"])
def test_bert_untied_head_equals_transformers(model_type: str) -> None:
    check_lm_count(f"{model_type} untied", {"tie_word_embeddings": False})


def test_git_reports_its_image_encoder_as_vision() -> None:
    weights = count_weights(default_config("git"), model_id="git")
    # GitVisionConfig defaults: 12 CLIP layers of 768 (q/k/v/o, MLP 3072, biases, 2 LayerNorms), 224 / 16 patches
    h, i, layers, patches = 768, 3072, 12, (224 // 16) ** 2
    tower = 3 * 16 * 16 * h + h + (patches + 1) * h + 4 * h + layers * (4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h)
    projection = h * h + h + 2 * h  # dense into the text model + LayerNorm
    assert weights.vision_parameters == tower + projection


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("bert-generation", {}),
    ("bert-generation untied", {"tie_word_embeddings": False}),
    ("big_bird", {}),
    ("big_bird no qkv bias", {"use_bias": False}),
    ("data2vec-text", {}),
    ("data2vec-text cross-attention", {"is_decoder": True, "add_cross_attention": True}),
    ("ernie", {}),
    ("ernie task ids", {"use_task_id": True, "task_type_vocab_size": 5}),
    ("megatron-bert", {}),
    ("megatron-bert 6 layers untied", {"num_hidden_layers": 6, "tie_word_embeddings": False}),
    ("rembert", {}),
    ("rembert narrow output embedding", {"output_embedding_size": 512}),
    ("roberta-prelayernorm", {}),
    ("roberta-prelayernorm 1 type untied", {"type_vocab_size": 1, "tie_word_embeddings": False}),
    ("roc_bert", {}),
    ("roc_bert no shape", {"enable_shape": False}),
    ("roformer", {}),
    ("roformer small embedding", {"embedding_size": 384}),
    ("xlm-roberta-xl", {}),
    ("xlm-roberta-xl 4 layers", {"num_hidden_layers": 4}),
    ("modernbert-decoder", {}),
    ("modernbert-decoder biases", {"norm_bias": True, "mlp_bias": True,
                                                               "attention_bias": True, "classifier_bias": True}),
    ("git", {}),
    ("git video", {"num_image_with_embedding": 6}),
    ("git tied", {"tie_word_embeddings": True}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)


def test_xmod_adapters_per_language_and_layer() -> None:
    # XmodConfig's defaults as a causal LM: RoBERTa's layers plus, per layer, one adapter per language
    config = default_config("xmod", is_decoder=True)
    h, layers, reduction, languages = 768, 12, 2, 1  # hidden_size, num_hidden_layers, ("en_XX",)
    bottleneck = h // reduction
    adapters = layers * languages * (h * bottleneck + bottleneck + bottleneck * h + h)
    weights = count_weights(config, model_id="xmod")
    assert next(p for p in weights.parts if p.name == "adapters").parameters == adapters
    assert weights.parameters == meta_count(config) == 116_606_010
    variant = default_config("xmod", is_decoder=True, languages=["en_XX", "de_DE", "fr_XX"], adapter_layer_norm=True,
                             pre_norm=True, num_hidden_layers=3, adapter_reduction_factor=4)
    assert count_weights(variant, model_id="xmod").parameters == meta_count(variant)
