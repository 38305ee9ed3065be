"""The BART lineage: encoder-decoders with cross-attention per decoder layer, and their causal LMs (bart.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import causal, check_lm_count, default_config
from zoo_generate import N, P, T, check_zoo, kv, kv_bytes

from kvplan.models import count_weights

BART = {"model_type": "bart", "decoder_layers": 2, "decoder_attention_heads": 16, "d_model": 1024,
        "encoder_layers": 2, "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "vocab_size": 512,
        "architectures": ["BartForConditionalGeneration"]}


@pytest.mark.parametrize(("model_type", "fields"), [
    ("bart", {}),
    ("bigbird_pegasus", {}),
    ("fsmt", {}),
    ("nllb-moe", {}),
    ("blenderbot-small", {"d_model": 512}),
    ("prophetnet", {"decoder_layers": None, "decoder_attention_heads": None, "d_model": None,
                    "num_decoder_layers": 2, "num_decoder_attention_heads": 16, "hidden_size": 1024}),
    ("seamless_m4t", {"d_model": None, "hidden_size": 1024}),
])
def test_bart_lineage_self_and_cross(model_type: str, fields: dict[str, Any], tmp_path: Path) -> None:
    config = {k: v for k, v in {**BART, "model_type": model_type, **fields}.items() if v is not None}
    head_dim = (config.get("d_model") or config["hidden_size"]) // 16
    expected = kv(2, 16, head_dim, N) + kv(2, 16, head_dim, P)  # self over N tokens, cross over the P encoder tokens
    assert kv_bytes(config, seq_len=N, encoder_len=P, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_causal_lm_architecture_runs_the_decoder_alone(tmp_path: Path) -> None:
    config = {**BART, "architectures": ["BartForCausalLM"]}
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == kv(2, 16, 64, T)
    whisper = {"model_type": "whisper", "decoder_layers": 2, "decoder_attention_heads": 6, "d_model": 384,
               "is_encoder_decoder": True, "architectures": ["WhisperForCausalLM"]}
    expected = kv(2, 6, 384 // 6, T)
    assert kv_bytes(whisper, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("whisper", expected)


def test_bart_weights_add_encoder_and_decoder() -> None:
    d, ffn, vocab, layers = 1024, 64, 512, 2
    counted = count_weights(BART, model_id="bart")
    attention = (layers + 2 * layers) * (4 * d * d + 4 * d)  # encoder self, decoder self + cross: q/k/v/o with bias
    mlp = 2 * layers * (2 * d * ffn + ffn + d)  # fc1 / fc2 with bias, encoder and decoder
    norms = (2 * layers + 3 * layers + 2) * 2 * d  # LayerNorms with bias (+ layernorm_embedding per stack)
    positions = 2 * (1024 + 2) * d  # learned, max_position_embeddings (BartConfig default 1024) + offset 2, per stack
    assert counted.parameters == vocab * d + attention + mlp + norms + positions + vocab  # tied lm_head; final_logits_bias


def test_fsmt_reads_its_two_vocabularies() -> None:
    config = default_config("fsmt", src_vocab_size=1000, tgt_vocab_size=2000, encoder_layers=1, decoder_layers=1)
    weights = count_weights(config, model_id="fsmt")
    embed = next(p for p in weights.parts if p.name == "embed_tokens")
    head = next(p for p in weights.parts if p.name == "lm_head")
    assert embed.parameters == (1000 + 2000) * 1024  # source + target tables, d_model 1024
    assert head.parameters == 2000 * 1024  # output_projection over the target vocabulary, untied by default


#: The BART lineage's ``*ForCausalLM``: the decoder alone (its cross-attention blocks kept, no final_logits_bias).
CAUSAL = ["bart", "mbart", "marian", "pegasus", "blenderbot", "blenderbot-small", "plbart", "mvp", "prophetnet",
          "bigbird_pegasus"]


@pytest.mark.parametrize("model_type", CAUSAL)
def test_causal_lm_of_encoder_decoder_equals_transformers(model_type: str) -> None:
    check_lm_count(f"{model_type} causal", {"architectures": causal(model_type)})


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("bart", {}),
    ("bart 3+2 layers", {"encoder_layers": 3, "decoder_layers": 2}),
    ("mbart", {}),
    ("mbart wide ffn", {"decoder_ffn_dim": 8192}),
    ("marian", {}),
    ("marian own decoder vocab", {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 30000,
                                  "pad_token_id": 0}),
    ("pegasus", {}),
    ("pegasus long", {"max_position_embeddings": 2048}),
    ("pegasus_x", {}),
    ("pegasus_x 64 global", {"num_global_tokens": 64}),
    ("blenderbot", {}),
    ("blenderbot untied", {"tie_word_embeddings": False}),
    ("blenderbot-small", {}),
    ("blenderbot-small 4 layers", {"encoder_layers": 4, "decoder_layers": 4}),
    ("plbart", {}),
    ("plbart untied", {"tie_word_embeddings": False}),
    ("mvp", {}),
    ("mvp prompts", {"use_prompt": True}),
    ("prophetnet", {}),
    ("prophetnet ngram 3", {"ngram": 3, "num_buckets": 64}),
    ("led", {}),
    ("led short encoder", {"max_encoder_position_embeddings": 4096}),
    ("bigbird_pegasus", {}),
    ("bigbird_pegasus biased", {"use_bias": True}),
    ("fsmt", {}),
    ("fsmt tied", {"tgt_vocab_size": 30000, "tie_word_embeddings": True}),
    ("m2m_100", {}),
    ("m2m_100 6 decoder layers", {"decoder_layers": 6}),
    ("nllb-moe", {}),
    ("nllb-moe step 2", {"num_experts": 4, "encoder_sparse_step": 2, "router_bias": True}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
