"""Weight counts of the Llama-likes, the encoder-decoders, the BERT-style decoders and the classic decoders
that had none (issue 11: a weight count for every family), each against transformers itself: the model
built on the meta device from the same config (transformers' defaults of the type, then a variant where
one field changes the layout), its parameters and checkpoint buffers summed.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_models_weights import default_config

from kvplan.models import count_weights

from conftest import shared_config


def meta_count(config: dict[str, Any]) -> int:
    """test_models_weights.meta_count, extended to encoder-decoders (``AutoModelForSeq2SeqLM``): transformers'
    model on the meta device, parameters plus the buffers it saves in a checkpoint, tied weights once."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForSeq2SeqLM)
    causal = any(a.endswith("ForCausalLM") for a in config.get("architectures") or [])
    if config.get("is_encoder_decoder") and not causal:  # the whole encoder-decoder, as kvplan counts it
        autos = autos[::-1]
    with torch.device("meta"):
        for auto in autos:
            try:
                model = auto.from_config(conf)
                break
            except ValueError:
                continue
        else:
            raise AssertionError(f"transformers builds no causal or seq2seq LM for {config['model_type']}")
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for _, t in tensors)


def check(name: str, overrides: dict[str, Any]) -> None:
    model_type = name.split()[0]
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=name).parameters == meta_count(default_config(model_type, **overrides))


# ---- Llama-likes (llama.py; vaultgemma in gemma.py) ---------------------------------------------------
LLAMA_LIKES = [
    ("apertus1p5_text", {}), ("apertus1p5_text gqa", {"num_key_value_heads": 8}),
    ("bitnet", {}), ("bitnet narrow mlp tied", {"intermediate_size": 4096, "tie_word_embeddings": True}),
    ("cwm", {}), ("cwm gqa4", {"num_key_value_heads": 4}),
    ("diffllama", {}), ("diffllama 16 heads", {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 128}),
    ("doge", {}), ("doge cdmoe", {"is_moe": True, "num_experts": 1024, "attention_bias": True}),
    ("helium", {}), ("helium tied", {"tie_word_embeddings": True}),
    ("hyperclovax", {}), ("hyperclovax no post-norm", {"use_post_norm": False}),
    ("iquestcoder", {}), ("iquestcoder tied", {"tie_word_embeddings": True}),
    ("jais2", {}), ("jais2 no biases", {"attention_bias": False, "mlp_bias": False}),
    ("mellum", {}), ("mellum dense first", {"mlp_layer_types": ["dense"] * 2 + ["sparse"] * 26}),
    ("nanochat", {}), ("nanochat biased", {"attention_bias": True}),
    ("vaultgemma", {}), ("vaultgemma narrow", {"intermediate_size": 4096, "num_key_value_heads": 8}),
    ("kolibri1", {}), ("kolibri1 wide shared", {"shared_expert_intermediate_size": 1024}),
    ("flint", {}), ("flint step 2", {"decoder_sparse_step": 2, "mlp_only_layers": [0, 1, 2, 3]}),
    ("beam", {}), ("beam 6 layers", {"num_hidden_layers": 6, "mlp_layer_types": ["dense", "sparse"] * 3}),
]


@pytest.mark.parametrize(("name", "overrides"), LLAMA_LIKES, ids=[n for n, _ in LLAMA_LIKES])
def test_llama_like_count_equals_transformers(name: str, overrides: dict[str, Any]) -> None:
    check(name, overrides)


# ---- encoder-decoders (bart.py, t5.py; T5Gemma's stacks in gemma.py) -----------------------------------
def causal(model_type: str) -> list[str]:
    """The ``architectures`` of the type's ``*ForCausalLM`` (its decoder alone, no cross-attention cache)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type)
    return [transformers.AutoModelForCausalLM._model_mapping[type(config)].__name__]


ENCODER_DECODERS = [
    ("bart", {}), ("bart 3+2 layers", {"encoder_layers": 3, "decoder_layers": 2}),
    ("mbart", {}), ("mbart wide ffn", {"decoder_ffn_dim": 8192}),
    ("marian", {}), ("marian own decoder vocab", {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 30000,
                                  "pad_token_id": 0}),
    ("pegasus", {}), ("pegasus long", {"max_position_embeddings": 2048}),
    ("pegasus_x", {}), ("pegasus_x 64 global", {"num_global_tokens": 64}),
    ("blenderbot", {}), ("blenderbot untied", {"tie_word_embeddings": False}),
    ("blenderbot-small", {}), ("blenderbot-small 4 layers", {"encoder_layers": 4, "decoder_layers": 4}),
    ("plbart", {}), ("plbart untied", {"tie_word_embeddings": False}),
    ("mvp", {}), ("mvp prompts", {"use_prompt": True}),
    ("prophetnet", {}), ("prophetnet ngram 3", {"ngram": 3, "num_buckets": 64}),
    ("led", {}), ("led short encoder", {"max_encoder_position_embeddings": 4096}),
    ("bigbird_pegasus", {}), ("bigbird_pegasus biased", {"use_bias": True}),
    ("fsmt", {}), ("fsmt tied", {"tgt_vocab_size": 30000, "tie_word_embeddings": True}),
    ("m2m_100", {}), ("m2m_100 6 decoder layers", {"decoder_layers": 6}),
    ("nllb-moe", {}), ("nllb-moe step 2", {"num_experts": 4, "encoder_sparse_step": 2, "router_bias": True}),
    ("t5", {}), ("t5 3 decoder layers", {"num_decoder_layers": 3}),
    ("mt5", {}), ("mt5 tied", {"tie_word_embeddings": True}),
    ("umt5", {}), ("umt5 8 heads", {"num_heads": 8}),
    ("longt5", {}), ("longt5 transient-global", {"encoder_attention_type": "transient-global"}),
    ("switch_transformers", {}),
    ("switch_transformers 4 experts", {"num_experts": 4, "num_sparse_encoder_layers": 6, "router_bias": True}),
    ("t5gemma", {}), ("t5gemma untied", {"tie_word_embeddings": False}),
]
#: The BART lineage's ``*ForCausalLM``: the decoder alone (its cross-attention blocks kept, no final_logits_bias).
CAUSAL = ["bart", "mbart", "marian", "pegasus", "blenderbot", "blenderbot-small", "plbart", "mvp", "prophetnet",
          "bigbird_pegasus"]


@pytest.mark.parametrize(("name", "overrides"), ENCODER_DECODERS, ids=[n for n, _ in ENCODER_DECODERS])
def test_encoder_decoder_count_equals_transformers(name: str, overrides: dict[str, Any]) -> None:
    check(name, overrides)


@pytest.mark.parametrize("model_type", CAUSAL)
def test_causal_lm_of_encoder_decoder_equals_transformers(model_type: str) -> None:
    check(f"{model_type} causal", {"architectures": causal(model_type)})


def test_fsmt_reads_its_two_vocabularies() -> None:
    config = default_config("fsmt", src_vocab_size=1000, tgt_vocab_size=2000, encoder_layers=1, decoder_layers=1)
    weights = count_weights(config, model_id="fsmt")
    embed = next(p for p in weights.parts if p.name == "embed_tokens")
    head = next(p for p in weights.parts if p.name == "lm_head")
    assert embed.parameters == (1000 + 2000) * 1024  # source + target tables, d_model 1024
    assert head.parameters == 2000 * 1024  # output_projection over the target vocabulary, untied by default


# ---- BERT-style decoders (bert.py) ----------------------------------------------------------------------
BERT_DECODERS = [
    ("bert-generation", {}), ("bert-generation untied", {"tie_word_embeddings": False}),
    ("big_bird", {}), ("big_bird no qkv bias", {"use_bias": False}),
    ("data2vec-text", {}), ("data2vec-text cross-attention", {"is_decoder": True, "add_cross_attention": True}),
    ("ernie", {}), ("ernie task ids", {"use_task_id": True, "task_type_vocab_size": 5}),
    ("megatron-bert", {}), ("megatron-bert 6 layers untied", {"num_hidden_layers": 6, "tie_word_embeddings": False}),
    ("rembert", {}), ("rembert narrow output embedding", {"output_embedding_size": 512}),
    ("roberta-prelayernorm", {}), ("roberta-prelayernorm 1 type untied", {"type_vocab_size": 1, "tie_word_embeddings": False}),
    ("roc_bert", {}), ("roc_bert no shape", {"enable_shape": False}),
    ("roformer", {}), ("roformer small embedding", {"embedding_size": 384}),
    ("xlm-roberta-xl", {}), ("xlm-roberta-xl 4 layers", {"num_hidden_layers": 4}),
    ("modernbert-decoder", {}), ("modernbert-decoder biases", {"norm_bias": True, "mlp_bias": True,
                                                               "attention_bias": True, "classifier_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), BERT_DECODERS, ids=[n for n, _ in BERT_DECODERS])
def test_bert_style_decoder_count_equals_transformers(name: str, overrides: dict[str, Any]) -> None:
    check(name, overrides)


@pytest.mark.parametrize("model_type", ["bert", "roberta", "electra", "xlm-roberta"])
def test_bert_untied_head_equals_transformers(model_type: str) -> None:
    check(f"{model_type} untied", {"tie_word_embeddings": False})


# ---- classic decoders (gpt2.py) -------------------------------------------------------------------------
CLASSICS = [
    ("gpt_neo", {}), ("gpt_neo wide mlp", {"intermediate_size": 4096, "num_layers": 4,
                                           "attention_types": [[["global", "local"], 2]]}),
    ("gpt_neox_japanese", {}), ("gpt_neox_japanese multiple 2", {"intermediate_multiple_size": 2}),
    ("biogpt", {}), ("biogpt long", {"max_position_embeddings": 2048}),
    ("openai-gpt", {}), ("openai-gpt untied", {"tie_word_embeddings": False}),
    ("ctrl", {}), ("ctrl narrow", {"dff": 4096}),
    # cpmant.py, moshi.py (the text decoder MoshiForCausalLM)
    ("cpmant", {}), ("cpmant fewer prompts", {"prompt_types": 8, "segment_types": 8, "num_hidden_layers": 4}),
    ("moshi", {}), ("moshi gqa", {"num_key_value_heads": 8, "ffn_dim": 16384}),
    # bert.py: GIT, its text decoder and its CLIP image encoder
    ("git", {}), ("git video", {"num_image_with_embedding": 6}), ("git tied", {"tie_word_embeddings": True}),
]


@pytest.mark.parametrize(("name", "overrides"), CLASSICS, ids=[n for n, _ in CLASSICS])
def test_classic_decoder_count_equals_transformers(name: str, overrides: dict[str, Any]) -> None:
    check(name, overrides)


def test_git_reports_its_image_encoder_as_vision() -> None:
    weights = count_weights(default_config("git"), model_id="git")
    # GitVisionConfig defaults: 12 CLIP layers of 768 (q/k/v/o, MLP 3072, biases, 2 LayerNorms), 224 / 16 patches
    h, i, layers, patches = 768, 3072, 12, (224 // 16) ** 2
    tower = 3 * 16 * 16 * h + h + (patches + 1) * h + 4 * h + layers * (4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h)
    projection = h * h + h + 2 * h  # dense into the text model + LayerNorm
    assert weights.vision_parameters == tower + projection


def test_real_t5_base_count_equals_transformers() -> None:
    config = shared_config("google-t5__t5-base")  # skips when ../shared is absent
    assert count_weights(config, model_id="t5-base").parameters == meta_count(config)
