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
    "voxtral_realtime": "VoxtralRealtimeForConditionalGeneration",
    # the thinker: its audio tower, its Qwen2.5-VL vision tower, its Qwen2 language model
    "qwen2_5_omni_thinker": "Qwen2_5OmniThinkerForConditionalGeneration",
    # Qwen3-Omni's thinker: Qwen3-ASR's audio encoder, Qwen3-VL's tower, a Qwen3-MoE language model
    "qwen3_omni_moe_thinker": "Qwen3OmniMoeThinkerForConditionalGeneration",
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


def test_voxtral_realtime_arithmetic() -> None:
    """Voxtral Realtime at VoxtralRealtimeConfig's defaults: the streaming encoder, the projector over four frames,
    and Mistral's layers each with an adaptive RMSNorm (hidden -> 32 -> hidden); the embedding tied."""
    d, layers, heads, head_dim, ffn, mels = 1280, 32, 32, 64, 5120, 128  # VoxtralRealtimeEncoderConfig
    width = heads * head_dim  # num_key_value_heads is num_attention_heads
    encoder = (mels * 3 * d + d + d * 3 * d + d  # two causal Conv1d with biases
               + layers * (3 * d * width + width * d + 2 * width + d  # q/k/v/o; q, v, o biases
                           + 3 * d * ffn + d + 2 * d)  # gate/up/down, down's bias; two RMSNorms
               + d)  # final RMSNorm
    text, factor = 3072, 4  # text_config.hidden_size, downsample_factor
    projector = d * factor * text + text * text
    vocab, t_layers, t_heads, kv_heads, t_head_dim, inner = 131072, 26, 32, 8, 128, 9216
    language = (vocab * text + t_layers * (2 * text * t_heads * t_head_dim + 2 * text * kv_heads * t_head_dim
                                           + 3 * text * inner + 2 * text + 2 * text * 32) + text)
    config, expected, _ = meta_parameters("voxtral_realtime", AUDIO_WRAPPERS["voxtral_realtime"])
    counted = count_weights(config, model_id="voxtral_realtime")
    assert counted.vision_parameters == encoder + projector
    assert counted.parameters == encoder + projector + language == expected == 4_429_679_360


def test_qwen2_5_omni_thinker_audio_tower_arithmetic() -> None:
    """Qwen2.5-Omni's audio tower: Whisper's encoder without a saved position table, then proj to output_dim
    and the two-row audio_bos_eos_token table (Qwen2_5OmniAudioEncoderConfig defaults)."""
    d, layers, ffn, mels, out = 1280, 32, 5120, 128, 3584  # d_model, encoder_layers, encoder_ffn_dim, mels, output_dim
    conv = mels * 3 * d + d + d * 3 * d + d
    per_layer = 4 * d * d + 3 * d + 2 * 2 * d + 2 * d * ffn + ffn + d  # q/k/v/o (k without bias), 2 LNs, fc1/fc2
    audio = conv + per_layer * layers + 2 * d + d * out + out + 2 * out  # ln_post; proj; audio_bos_eos_token
    config, expected, _ = meta_parameters("qwen2_5_omni_thinker", AUDIO_WRAPPERS["qwen2_5_omni_thinker"])
    counted = count_weights(config, model_id="qwen2_5_omni_thinker")
    parts = {p.name: p.parameters for p in counted.parts}
    assert parts["audio_tower"] + parts["audio_projector"] == audio
    assert counted.parameters == expected == 11_338_288_896


def test_qwen3_omni_thinker_head_dim_is_floored_like_transformers() -> None:
    # Qwen3OmniMoeTextConfig has no head_dim: 2048 // 28 = 73 (floored), as Qwen3OmniMoeThinkerTextAttention computes
    config, expected, _ = meta_parameters("qwen3_omni_moe_thinker", AUDIO_WRAPPERS["qwen3_omni_moe_thinker"])
    counted = count_weights(config, model_id="qwen3_omni_moe_thinker")
    assert any("2048 // 28 = 73, floored" in note for note in counted.notes)
    assert counted.parameters == expected == 18_418_329_704
