"""Audio towers: kvplan's weight count of speech/audio language models (the tower, its projector and the
language model) against transformers' own count on the meta device, on each wrapper's default config
(its config class's defaults, the released size) -- the zoo oracle covers the shrunk configs.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from kvplan.models import count_weights

#: wrapper model_type -> the transformers class that generates with it.
AUDIO_WRAPPERS = {
    "qwen2_audio": "Qwen2AudioForConditionalGeneration",
    "voxtral": "VoxtralForConditionalGeneration",
    "audioflamingo3": "AudioFlamingo3ForConditionalGeneration",
    "musicflamingo": "MusicFlamingoForConditionalGeneration",
    "glmasr": "GlmAsrForConditionalGeneration",
    "moss_transcribe_diarize": "MossTranscribeDiarizeForConditionalGeneration",
    "qwen3_asr": "Qwen3ASRForConditionalGeneration",
    "omniasr": "OmniASRForConditionalGeneration",
    "granite_speech": "GraniteSpeechForConditionalGeneration",
    "granite_speech_plus": "GraniteSpeechPlusForConditionalGeneration",
    "vibevoice_asr": "VibeVoiceAsrForConditionalGeneration",
    "nemo_speechlm": "Nemotron3_5TranscribeForConditionalGeneration",
}


def meta_parameters(model_type: str, class_name: str, **overrides: Any) -> tuple[dict[str, Any], int, int]:
    """The default config of ``model_type`` as a config.json dict, transformers' count of the model built on
    the meta device (parameters once, saved buffers), and the part of it outside the language model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type, **overrides)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers, class_name)._from_config(config)
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    tower = sum(t.numel() for n, t in tensors if "language_model" not in n and not n.startswith("lm_head"))
    return config.to_dict(), sum(t.numel() for _, t in tensors), tower


@pytest.mark.parametrize("model_type", sorted(AUDIO_WRAPPERS))
def test_audio_wrapper_default_config_counts_like_transformers(model_type: str) -> None:
    config, expected, tower = meta_parameters(model_type, AUDIO_WRAPPERS[model_type])
    counted = count_weights(config, model_id=model_type)
    assert counted.parameters == expected
    # the audio tower and its projector are reported with the encoder towers (weights.vision_*)
    assert counted.vision_parameters == tower > 0
    assert any("audio tower" in note for note in counted.notes)


def test_audio_tower_missing_config_uses_the_wrapper_default_tower() -> None:
    """A wrapper config without ``audio_config`` is counted with the default tower's own defaults, said."""
    config, expected, _ = meta_parameters("qwen2_audio", AUDIO_WRAPPERS["qwen2_audio"])
    del config["audio_config"]
    counted = count_weights(config, model_id="qwen2_audio")
    assert counted.parameters == expected
    assert any("audio_config is not in the config" in note for note in counted.notes)
    assert any("encoder_layers = 32" in note for note in counted.notes)


def test_whisper_encoder_arithmetic() -> None:
    """Qwen2-Audio's tower (Whisper large-v3's encoder): the arithmetic over its config fields."""
    d, layers, ffn, mels, positions = 1280, 32, 5120, 128, 1500  # d_model, encoder_layers, ffn, mel bins, 30 s
    conv = mels * 3 * d + d + d * 3 * d + d
    per_layer = 4 * d * d + 3 * d + 2 * 2 * d + 2 * d * ffn + ffn + d  # q/k/v/o (k without bias), 2 LNs, fc1/fc2
    projector = d * 4096 + 4096  # one linear into Qwen2-7B's hidden size, with bias
    config, _, _ = meta_parameters("qwen2_audio", AUDIO_WRAPPERS["qwen2_audio"])
    counted = count_weights(config, model_id="qwen2_audio")
    assert counted.vision_parameters == conv + positions * d + per_layer * layers + 2 * d + projector


def test_whisper_for_causal_lm_counts_the_decoder_alone() -> None:
    """``WhisperForCausalLM``: no encoder, no conv front end, no encoder positions; the decoder layers keep
    their cross-attention weights."""
    config, expected, _ = meta_parameters("whisper", "WhisperForCausalLM", architectures=["WhisperForCausalLM"])
    assert count_weights(config, model_id="whisper").parameters == expected


def test_real_whisper_large_v3_counts_like_transformers() -> None:
    """The shared Hub config of whisper-large-v3 (WhisperForConditionalGeneration: encoder and decoder)."""
    from conftest import shared_config

    config = shared_config("openai__whisper-large-v3")
    values = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    _, expected, _ = meta_parameters("whisper", "WhisperForConditionalGeneration", **values)
    assert count_weights(config, model_id="whisper-large-v3").parameters == expected
