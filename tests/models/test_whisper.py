"""Whisper: decoder self-attention and cross-attention over the audio encoder (whisper.py)."""

from __future__ import annotations

from geometry_check import BOTH, bundled, geometry_of, kinds
from transformers_meta import meta_parameters

from kvplan.calc import estimate
from kvplan.models import count_weights

from conftest import FP16, KV, shared_config


@BOTH
def test_whisper_cross_attention(bundled: bool) -> None:
    geometry = geometry_of("openai/whisper-large-v3" if bundled else "openai__whisper-large-v3", bundled=bundled)
    assert kinds(geometry) == ["full_attention"] * 32 + ["cross_attention"] * 32
    est = estimate(geometry)  # default: 448 decoder positions, 1500 encoder positions
    heads, head_dim = 20, 64
    assert (est.seq_len, est.encoder_len) == (448, 1500)
    assert est.cross_attention_bytes == 32 * KV * heads * head_dim * 1500 * FP16  # 234.4 MiB
    assert est.kv_cache_bytes == 32 * KV * heads * head_dim * (448 + 1500) * FP16


def test_whisper_large_v3_exact_with_128_mel_bins() -> None:
    config = bundled("openai/whisper-large-v3") | {"num_mel_bins": 128}
    w = count_weights(config, model_id="whisper")
    d, ffn, layers, vocab, mels = 1280, 5120, 32, 51866, 128
    attn = 4 * d * d + 3 * d  # q, k, v, o; biases on q, v, o
    mlp = d * ffn + ffn + ffn * d + d
    encoder = layers * (attn + mlp + 2 * 2 * d) + 2 * d  # two LayerNorms (w + b) per layer, final norm
    decoder = layers * (2 * attn + mlp + 3 * 2 * d) + 2 * d  # self + cross attention, three LayerNorms
    front = mels * d * 3 + d + d * d * 3 + d + 1500 * d  # conv1, conv2, encoder positions
    embeddings = vocab * d + 448 * d  # tokens (tied with proj_out) and decoder positions
    assert w.parameters == encoder + decoder + front + embeddings == 1_543_490_560  # the Hub's count
    default = count_weights(bundled("openai/whisper-large-v3"), model_id="whisper")
    assert w.parameters - default.parameters == (128 - 80) * d * 3  # WhisperConfig default num_mel_bins 80, noted
    assert any("num_mel_bins" in n for n in default.notes)


def test_whisper_for_causal_lm_counts_the_decoder_alone() -> None:
    """``WhisperForCausalLM``: no encoder, no conv front end, no encoder positions; the decoder layers keep
    their cross-attention weights."""
    config, expected, _ = meta_parameters("whisper", "WhisperForCausalLM", architectures=["WhisperForCausalLM"])
    assert count_weights(config, model_id="whisper").parameters == expected


def test_real_whisper_large_v3_counts_like_transformers() -> None:
    """The shared Hub config of whisper-large-v3 (WhisperForConditionalGeneration: encoder and decoder)."""

    config = shared_config("openai__whisper-large-v3")
    values = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    _, expected, _ = meta_parameters("whisper", "WhisperForConditionalGeneration", **values)
    assert count_weights(config, model_id="whisper-large-v3").parameters == expected
