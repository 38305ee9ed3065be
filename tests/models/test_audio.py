"""Audio towers of speech and audio language models (audio.py): the tower, its projector and the language
model against transformers' own count on the meta device, on each wrapper's default config."""

from __future__ import annotations

import pytest
from transformers_meta import meta_parameters

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
