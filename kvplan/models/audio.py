"""Audio towers a speech/audio language model carries beside its text model (``audio_config``), and the
projector into the language model. They keep no KV cache; their weights stay resident, so they are
counted, reported with the vision tower as the model's encoder tower (``weights.vision_*``).

Each tower type reads its own config class's fields with that class's defaults (transformers 5.24),
named by the ``model_type`` of ``audio_config``; each wrapper (``qwen2_audio``, ``voxtral``...) says
which tower it defaults to and how its projector is laid out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvplan.models.base import ConfigReader, hidden_of, switch
from kvplan.models.tensors import Matrix, WeightPart

# ---- the towers' config defaults (transformers' configuration_*.py) ----------------------------
#: Whisper's encoder as Qwen2-Audio, Voxtral and Audio Flamingo 3 configure it (large-v3 size).
_WHISPER_LARGE = {"d_model": 1280, "hidden_size": 1280, "encoder_layers": 32, "num_hidden_layers": 32,
                  "encoder_ffn_dim": 5120, "intermediate_size": 5120, "num_mel_bins": 128,
                  "max_source_positions": 1500}
#: GraniteSpeechEncoderConfig (and the Plus one, the same fields).
_CONFORMER = {"input_dim": 160, "num_layers": 10, "hidden_dim": 1024, "feedforward_mult": 4, "num_heads": 8,
              "output_dim": 42, "max_pos_emb": 512, "conv_kernel_size": 15, "conv_expansion_factor": 2}
TOWER_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2_audio_encoder": _WHISPER_LARGE,
    "voxtral_encoder": _WHISPER_LARGE,
    "audioflamingo3_encoder": _WHISPER_LARGE,
    "moss_transcribe_diarize_audio": {"d_model": 1024, "hidden_size": 1024, "encoder_layers": 24,
                                      "num_hidden_layers": 24, "encoder_ffn_dim": 4096, "intermediate_size": 4096,
                                      "num_mel_bins": 80, "max_source_positions": 1500},
    "glmasr_encoder": {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32,
                       "num_attention_heads": 20, "num_mel_bins": 128},
    "qwen3_asr_encoder": {"d_model": 1024, "encoder_layers": 24, "encoder_ffn_dim": 4096, "num_mel_bins": 128,
                          "output_dim": 3584, "downsample_hidden_size": 480},
    "granite_speech_encoder": _CONFORMER,
    "granite_speech_plus_encoder": _CONFORMER,
    "vibevoice_acoustic_tokenizer_encoder": {"channels": 1, "hidden_size": 64, "kernel_size": 7, "num_filters": 32,
                                             "downsampling_ratios": [2, 2, 4, 5, 5, 8], "depths": [3, 3, 3, 3, 3, 3, 8],
                                             "ffn_expansion": 4},
    "omniasr_audio": {"hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096,
                      "conv_dim": [512] * 7, "conv_kernel": [10, 3, 3, 3, 3, 2, 2], "conv_bias": True,
                      "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16},
}

#: Nemotron 3.5 Transcribe's sub-configs (Nemotron3_5TranscribeAsrAudioConfig, Nemotron3DiarizationAudioConfig,
#: Nemotron3DiarizationHeadConfig, Nemotron3_5TranscribeWordTimestampConfig).
_NEMOTRON_ASR = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 10,
                 "num_mel_bins": 128, "subsampling_factor": 8}
_NEMOTRON_DIARIZATION_AUDIO = {"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 31,
                               "num_attention_heads": 8, "num_mel_bins": 128, "subsampling_factor": 8}
_NEMOTRON_DIARIZATION_HEAD = {"hidden_size": 192, "num_speakers": 8, "audio_hidden_size": 512, "subsampling_factor": 8}
TOWER_DEFAULTS["nemotron3_5_transcribe_audio"] = {}
#: Qwen2_5OmniAudioEncoderConfig (transformers 5.25).
TOWER_DEFAULTS["qwen2_5_omni_audio_encoder"] = {"d_model": 1280, "encoder_layers": 32, "encoder_ffn_dim": 5120,
                                                "num_mel_bins": 128, "output_dim": 3584}
#: Qwen3OmniMoeAudioEncoderConfig (transformers 5.25): Qwen3-ASR's encoder.
TOWER_DEFAULTS["qwen3_omni_moe_audio_encoder"] = {"d_model": 1280, "encoder_layers": 32, "encoder_ffn_dim": 5120,
                                                  "num_mel_bins": 128, "output_dim": 3584, "downsample_hidden_size": 480}
#: VoxtralRealtimeEncoderConfig (transformers 5.25); its num_key_value_heads is num_attention_heads (attribute_map).
TOWER_DEFAULTS["voxtral_realtime_encoder"] = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32,
                                              "num_attention_heads": 32, "head_dim": 64, "num_mel_bins": 128}
TOWER_DEFAULTS["nemotron3_5_transcribe_word_timestamp"] = {
    "hidden_size": 1280, "intermediate_size": 640, "num_hidden_layers": 2, "num_attention_heads": 16,
    "vocab_size": 23863, "upsampling_factor": 2}

HIDDEN = ("d_model", "hidden_size")
LAYERS = ("encoder_layers", "num_hidden_layers")
FFN = ("encoder_ffn_dim", "intermediate_size")


def _layers(d: int, ffn: int, layers: int, *, k_bias: bool) -> tuple[tuple[Matrix, ...], int]:
    """Pre-norm transformer encoder layers: q/k/v/o (biases; k's only if ``k_bias``), two LayerNorms with
    bias, fc1/fc2 with biases."""
    matrices = (Matrix(in_features=d, out_features=d, count=4 * layers),
                Matrix(in_features=d, out_features=ffn, count=layers), Matrix(in_features=ffn, out_features=d, count=layers))
    vectors = ((4 if k_bias else 3) * d + 2 * 2 * d + ffn + d) * layers
    return matrices, vectors


# ---- towers ------------------------------------------------------------------------------------
def whisper_encoder(a: ConfigReader, *, positions: bool = True) -> WeightPart:
    """Whisper's encoder: conv1 (mels -> d, kernel 3) and conv2 (d -> d, kernel 3) with biases, a learned
    position table of ``max_source_positions`` rows (saved), layers with q/v/o biases (k without), a final
    LayerNorm."""
    d = a.first_of("hidden_size", HIDDEN)
    layers = a.first_of("num_hidden_layers", LAYERS)
    ffn = a.first_of("intermediate_size", FFN)
    mels = a.first_of("num_mel_bins", ("num_mel_bins",))
    matrices, vectors = _layers(d, ffn, layers, k_bias=False)
    conv = (Matrix(in_features=mels * 3, out_features=d), Matrix(in_features=d * 3, out_features=d))
    vectors += 2 * d + 2 * d  # conv biases, final LayerNorm
    if positions:
        vectors += a.first_of("max_source_positions", ("max_source_positions",)) * d
    return WeightPart(name="audio_tower", vision=True, matrices=matrices + conv, other_parameters=vectors)


def glmasr_encoder(a: ConfigReader) -> WeightPart:
    """GLM-ASR: Whisper's conv front end, rotary positions (no table), GQA attention (q/v/o biases, k
    without), fc1/fc2 with biases, LayerNorms with bias."""
    d = a.first_of("hidden_size", ("hidden_size",))
    layers = a.first_of("num_hidden_layers", ("num_hidden_layers",))
    ffn = a.first_of("intermediate_size", ("intermediate_size",))
    mels = a.first_of("num_mel_bins", ("num_mel_bins",))
    heads = a.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = a.optional("num_key_value_heads", ("num_key_value_heads",)) or heads
    head_dim = a.optional("head_dim", ("head_dim",)) or d // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    matrices = (Matrix(in_features=d, out_features=q, count=layers), Matrix(in_features=d, out_features=kv, count=2 * layers),
                Matrix(in_features=q, out_features=d, count=layers),
                Matrix(in_features=d, out_features=ffn, count=layers), Matrix(in_features=ffn, out_features=d, count=layers),
                Matrix(in_features=mels * 3, out_features=d), Matrix(in_features=d * 3, out_features=d))
    vectors = (q + kv + d + 2 * 2 * d + ffn + d) * layers + 2 * d + 2 * d
    return WeightPart(name="audio_tower", vision=True, matrices=matrices, other_parameters=vectors)


def qwen3_asr_encoder(a: ConfigReader) -> WeightPart:
    """Qwen3-ASR: three stride-2 3x3 Conv2d (1 -> c -> c -> c, biases) over the mel spectrogram, a linear
    conv_out (c x the mel bins left after them -> d, no bias), sinusoidal positions (a buffer, not saved),
    layers with q/k/v/o biases, ln_post."""
    d = a.first_of("hidden_size", HIDDEN)
    layers = a.first_of("num_hidden_layers", LAYERS)
    ffn = a.first_of("intermediate_size", FFN)
    mels = a.first_of("num_mel_bins", ("num_mel_bins",))
    c = a.first_of("downsample_hidden_size", ("downsample_hidden_size",))
    freq = mels
    for _ in range(3):
        freq = (freq + 1) // 2
    matrices, vectors = _layers(d, ffn, layers, k_bias=True)
    convs = (Matrix(in_features=9, out_features=c), Matrix(in_features=c * 9, out_features=c, count=2),
             Matrix(in_features=c * freq, out_features=d))
    vectors += 3 * c + 2 * d
    return WeightPart(name="audio_tower", vision=True, matrices=matrices + convs, other_parameters=vectors)


def wav2vec2_encoder(a: ConfigReader) -> WeightPart:
    """OmniASR (wav2vec 2.0 layout): a Conv1d stack over the waveform (``conv_dim``/``conv_kernel``, biases if
    ``conv_bias``, a LayerNorm after each), a LayerNorm and a projection to d, a grouped positional
    Conv1d, layers with q/k/v/o biases, a final LayerNorm."""
    d = a.first_of("hidden_size", ("hidden_size",))
    layers = a.first_of("num_hidden_layers", ("num_hidden_layers",))
    ffn = a.first_of("intermediate_size", ("intermediate_size",))
    dims = a.first_of("conv_dim", ("conv_dim",), kind="list")
    kernels = a.first_of("conv_kernel", ("conv_kernel",), kind="list")
    bias = switch(a, "conv_bias", True)
    pos_kernel = a.first_of("num_conv_pos_embeddings", ("num_conv_pos_embeddings",))
    pos_groups = a.first_of("num_conv_pos_embedding_groups", ("num_conv_pos_embedding_groups",))
    matrices, vectors = _layers(d, ffn, layers, k_bias=True)
    convs = []
    for i, (out, kernel) in enumerate(zip(dims, kernels, strict=False)):
        convs.append(Matrix(in_features=(dims[i - 1] if i else 1) * kernel, out_features=out))
        vectors += (out if bias else 0) + 2 * out
    convs.append(Matrix(in_features=dims[-1], out_features=d))
    convs.append(Matrix(in_features=d // pos_groups * pos_kernel, out_features=d))
    vectors += 2 * dims[-1] + d + d + 2 * d  # feature LayerNorm, projection bias, pos-conv bias, final LayerNorm
    return WeightPart(name="audio_tower", vision=True, matrices=matrices + tuple(convs), other_parameters=vectors)


def conformer_encoder(a: ConfigReader) -> WeightPart:
    """Granite Speech's CTC conformer: input_linear, then per block two half-step feed-forwards (LayerNorm,
    up/down with biases), attention (LayerNorm, q and kv without bias, out with bias, a relative position
    table of 2 max_pos_emb + 1 rows of dim_head), a conv module (LayerNorm, pointwise up-conv to 2 x the
    expanded width with bias, depthwise conv without bias, BatchNorm with its saved running statistics,
    pointwise down-conv with bias), a LayerNorm; then out and out_mid (d -> output_dim -> d, biases)."""
    n_in = a.first_of("input_dim", ("input_dim", "num_mel_bins"))
    layers = a.first_of("num_hidden_layers", ("num_layers", "num_hidden_layers"))
    d = a.first_of("hidden_size", ("hidden_dim", "hidden_size"))
    ff = d * a.first_of("feedforward_mult", ("feedforward_mult",))
    heads = a.first_of("num_attention_heads", ("num_heads", "num_attention_heads"))
    dim_head = a.optional("dim_head", ("dim_head",)) or d // heads
    inner = heads * dim_head
    rel = 2 * a.first_of("max_pos_emb", ("max_pos_emb",)) + 1
    ci = d * a.first_of("conv_expansion_factor", ("conv_expansion_factor",))
    kernel = a.first_of("conv_kernel_size", ("conv_kernel_size",))
    out = a.first_of("output_dim", ("output_dim",))
    matrices = (Matrix(in_features=n_in, out_features=d),
                Matrix(in_features=d, out_features=ff, count=2 * layers), Matrix(in_features=ff, out_features=d, count=2 * layers),
                Matrix(in_features=d, out_features=inner, count=3 * layers), Matrix(in_features=inner, out_features=d, count=layers),
                Matrix(in_features=d, out_features=2 * ci, count=layers), Matrix(in_features=ci, out_features=d, count=layers),
                Matrix(in_features=d, out_features=out), Matrix(in_features=out, out_features=d))
    per_layer = (2 * (2 * d + ff + d)  # feed-forwards: LayerNorm, biases
                 + 2 * d + d + rel * dim_head  # attention: LayerNorm, out bias, relative positions
                 + 2 * d + 2 * ci + ci * kernel + 4 * ci + 1 + d  # conv: LayerNorm, up bias, depthwise, BatchNorm, down bias
                 + 2 * d)  # post LayerNorm
    vectors = d + per_layer * layers + out + d
    return WeightPart(name="audio_tower", vision=True, matrices=matrices, other_parameters=vectors)


def convnext_tokenizer_encoder(a: ConfigReader) -> WeightPart:
    """VibeVoice's tokenizer encoder: a stem conv (channels -> num_filters, kernel_size) and ``depths[0]``
    ConvNeXt blocks, then per ``downsampling_ratios[i]`` a strided conv doubling the width (kernel 2 x ratio)
    and ``depths[i + 1]`` blocks, a head conv to ``hidden_size``; every conv with bias. A block of width w:
    two RMSNorms, two layer scales, a depthwise conv (w x kernel + bias), an MLP w -> ffn_expansion x w -> w
    with biases."""
    hidden = a.first_of("hidden_size", ("hidden_size",))
    filters = a.first_of("num_filters", ("num_filters",))
    kernel = a.first_of("kernel_size", ("kernel_size",))
    channels = a.first_of("channels", ("channels",))
    ratios = a.first_of("downsampling_ratios", ("downsampling_ratios",), kind="list")
    depths = a.first_of("depths", ("depths",), kind="list")
    expansion = a.first_of("ffn_expansion", ("ffn_expansion",))
    matrices = [Matrix(in_features=channels * kernel, out_features=filters)]
    vectors = filters
    widths = [filters * 2 ** i for i in range(len(ratios) + 1)]
    for i, ratio in enumerate(ratios):
        matrices.append(Matrix(in_features=widths[i] * 2 * ratio, out_features=widths[i + 1]))
        vectors += widths[i + 1]
    for width, depth in zip(widths, depths, strict=False):
        matrices += [Matrix(in_features=width, out_features=expansion * width, count=depth),
                     Matrix(in_features=expansion * width, out_features=width, count=depth)]
        vectors += (4 * width + width * kernel + width + expansion * width + width) * depth
    matrices.append(Matrix(in_features=widths[-1] * kernel, out_features=hidden))
    vectors += hidden
    return WeightPart(name="audio_tower", vision=True, matrices=tuple(matrices), other_parameters=vectors)


def _sub(a: ConfigReader, key: str, defaults: Mapping[str, Any], name: str) -> ConfigReader:
    """A reader of the nested ``key`` config of ``a`` ({} when absent: its class defaults), notes passed on."""
    node = a.raw(key)
    return ConfigReader(node if isinstance(node, Mapping) else {}, source_name=a.source_name,
                        prefix=f"{a.prefix}{key}.", defaults=defaults, defaults_name=name)


def _stacked_encoder(e: ConfigReader, *, qk_norm: bool, stacking: bool = True) -> tuple[list[Matrix], int]:
    """Nemotron's speech encoders: mel frames stacked ``subsampling_factor`` at a time and projected to d (no
    bias) when ``stacking``, a LayerNorm, layers of q/k/v (no bias; v has every head) and o (bias), LayerNorms
    over q and k per head (with bias) when ``qk_norm``, two LayerNorms, fc1/fc2 with biases; a final LayerNorm."""
    d = e.first_of("hidden_size", ("hidden_size",))
    ffn = e.first_of("intermediate_size", ("intermediate_size",))
    layers = e.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = e.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = e.optional("num_key_value_heads", ("num_key_value_heads",)) or heads
    head_dim = e.optional("head_dim", ("head_dim",)) or d // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    matrices = [Matrix(in_features=d, out_features=q, count=2 * layers), Matrix(in_features=d, out_features=kv, count=layers),
                Matrix(in_features=q, out_features=d, count=layers),
                Matrix(in_features=d, out_features=ffn, count=layers), Matrix(in_features=ffn, out_features=d, count=layers)]
    if stacking:
        frames = e.first_of("subsampling_factor", ("subsampling_factor",)) * e.first_of("num_mel_bins", ("num_mel_bins",))
        matrices.append(Matrix(in_features=frames, out_features=d))
    vectors = (d + (4 * head_dim if qk_norm else 0) + 2 * 2 * d + ffn + d) * layers + 2 * d + 2 * d
    return matrices, vectors


def nemotron_transcribe_audio(a: ConfigReader) -> WeightPart:
    """Nemotron 3.5 Transcribe's audio model: the speech recognition encoder (``asr_config``), the diarization
    model (``diarization_config``: its own encoder, a projection to the head width, a sub-pixel upsampling
    conv (kernel 3), a classification head over ``num_speakers``, a learned silence embedding) and the
    LayerNorms over the ASR states and the speaker activities."""
    asr = _sub(a, "asr_config", _NEMOTRON_ASR, "nemotron3_5_transcribe_asr_audio")
    diar = _sub(a, "diarization_config", {}, "nemotron3_diarization")
    diar_audio = _sub(diar, "audio_config", _NEMOTRON_DIARIZATION_AUDIO, "nemotron3_diarization_audio")
    head = _sub(diar, "head_config", _NEMOTRON_DIARIZATION_HEAD, "nemotron3_diarization_head")
    matrices, vectors = _stacked_encoder(asr, qk_norm=True)
    diar_m, diar_v = _stacked_encoder(diar_audio, qk_norm=False)
    d_asr = asr.first_of("hidden_size", ("hidden_size",))
    d_diar = diar_audio.first_of("hidden_size", ("hidden_size",))
    hh = head.first_of("hidden_size", ("hidden_size",))
    speakers = head.first_of("num_speakers", ("num_speakers",))
    up = head.first_of("subsampling_factor", ("subsampling_factor",))
    into = head.first_of("audio_hidden_size", ("audio_hidden_size",))
    matrices += diar_m + [Matrix(in_features=into, out_features=hh), Matrix(in_features=hh * 3, out_features=hh * up),
                          Matrix(in_features=hh, out_features=hh), Matrix(in_features=hh, out_features=speakers)]
    vectors += diar_v + d_diar + hh + hh * up + hh + speakers + 2 * d_asr + 2 * speakers
    for reader in (asr, diar, diar_audio, head):
        for note in reader.notes:
            a.note(note)
    return WeightPart(name="audio_tower", vision=True, matrices=tuple(matrices), other_parameters=vectors)


def nemotron_word_timestamps(a: ConfigReader) -> WeightPart:
    """Nemotron 3.5 Transcribe's word-timestamp encoder: a ConvTranspose1d upsampler (d -> d, kernel and stride
    ``upsampling_factor``, bias), a LayerNorm, encoder layers as the ASR encoder's, a final LayerNorm."""
    d = a.first_of("hidden_size", ("hidden_size",))
    matrices, vectors = _stacked_encoder(a, qk_norm=True, stacking=False)
    matrices.append(Matrix(in_features=d * a.first_of("upsampling_factor", ("upsampling_factor",)), out_features=d))
    return WeightPart(name="audio_tower", vision=True, matrices=tuple(matrices), other_parameters=vectors + d)


def voxtral_realtime_encoder(a: ConfigReader) -> WeightPart:
    """Voxtral Realtime's streaming encoder: two causal Conv1d (mels -> d, d -> d, kernel 3, biased), rotary
    positions (no table), layers of two RMSNorms, attention of ``num_attention_heads`` heads of ``head_dim`` (q/v/o
    biased, k not), a gated MLP with a biased down projection; a final RMSNorm."""
    d = a.first_of("hidden_size", HIDDEN)
    layers = a.first_of("num_hidden_layers", LAYERS)
    ffn = a.first_of("intermediate_size", FFN)
    mels = a.first_of("num_mel_bins", ("num_mel_bins",))
    width = a.first_of("num_attention_heads", ("num_attention_heads",)) * a.first_of("head_dim", ("head_dim",))
    matrices = (Matrix(in_features=d, out_features=width, count=3 * layers),  # q, k, v
                Matrix(in_features=width, out_features=d, count=layers),  # o
                Matrix(in_features=d, out_features=ffn, count=2 * layers), Matrix(in_features=ffn, out_features=d, count=layers),
                Matrix(in_features=mels * 3, out_features=d), Matrix(in_features=d * 3, out_features=d))
    vectors = (2 * width + d + 2 * d + d) * layers + 2 * d + d  # q, v, o and down biases, norms; conv biases, norm
    return WeightPart(name="audio_tower", vision=True, matrices=matrices, other_parameters=vectors)


TOWERS: dict[str, Callable[[ConfigReader], WeightPart]] = {
    "nemotron3_5_transcribe_audio": nemotron_transcribe_audio,
    "nemotron3_5_transcribe_word_timestamp": nemotron_word_timestamps,
    "vibevoice_acoustic_tokenizer_encoder": convnext_tokenizer_encoder,
    "granite_speech_encoder": conformer_encoder, "granite_speech_plus_encoder": conformer_encoder,
    "qwen2_audio_encoder": whisper_encoder, "voxtral_encoder": whisper_encoder,
    "audioflamingo3_encoder": whisper_encoder, "moss_transcribe_diarize_audio": whisper_encoder,
    "glmasr_encoder": glmasr_encoder, "qwen3_asr_encoder": qwen3_asr_encoder, "omniasr_audio": wav2vec2_encoder,
    "voxtral_realtime_encoder": voxtral_realtime_encoder,
    # Qwen2.5-Omni: Whisper's encoder with sinusoidal positions (a buffer, not saved) and ln_post
    "qwen2_5_omni_audio_encoder": lambda a: whisper_encoder(a, positions=False),
    "qwen3_omni_moe_audio_encoder": qwen3_asr_encoder,
}


# ---- projectors ----------------------------------------------------------------------------------
def _mlp2(n_in: int, mid: int, n_out: int, bias: bool) -> WeightPart:
    """linear_1 (n_in -> mid), an activation, linear_2 (mid -> n_out)."""
    return WeightPart(name="audio_projector", vision=True,
                      matrices=(Matrix(in_features=n_in, out_features=mid), Matrix(in_features=mid, out_features=n_out)),
                      other_parameters=(mid + n_out) if bias else 0)


def _qwen2_audio_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    d = a.first_of("hidden_size", HIDDEN)
    return WeightPart(name="audio_projector", vision=True, matrices=(Matrix(in_features=d, out_features=text),),
                      other_parameters=text)


def _voxtral_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    # NOTE: linear_1 reads the tower's intermediate_size: four frames of d (= 4 d in the released models)
    return _mlp2(a.first_of("intermediate_size", FFN), text, text, False)


def _voxtral_realtime_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """linear_1 over ``downsample_factor`` encoder frames (d x factor -> text), linear_2 (text -> text), no biases."""
    factor = o.first_of("downsample_factor", ("downsample_factor",))
    return _mlp2(a.first_of("hidden_size", HIDDEN) * factor, text, text, False)


def _qwen_omni_audio_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """Qwen2.5-Omni's audio tower ends in proj (d_model -> ``output_dim``, biased) and the audio_bos_eos_token table
    (two rows of ``output_dim``)."""
    d, out = a.first_of("hidden_size", HIDDEN), a.first_of("output_dim", ("output_dim",))
    return WeightPart(name="audio_projector", vision=True, matrices=(Matrix(in_features=d, out_features=out),),
                      other_parameters=out + 2 * out)


def _flamingo_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    return _mlp2(a.first_of("hidden_size", HIDDEN), text, text, switch(o, "projector_bias", True))


def _glmasr_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    return _mlp2(a.first_of("intermediate_size", ("intermediate_size",)), 2 * text, text, True)


def _moss_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    merge = o.first_of("audio_merge_size", ("audio_merge_size",))
    mlp = _mlp2(a.first_of("hidden_size", HIDDEN) * merge, text, text, switch(o, "projector_bias", True))
    return WeightPart(name=mlp.name, vision=True, matrices=mlp.matrices, other_parameters=mlp.other_parameters + 2 * text)


def _qwen3_asr_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    d = a.first_of("hidden_size", HIDDEN)
    return _mlp2(d, d, a.first_of("output_dim", ("output_dim",)), True)


def _omniasr_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    d = a.first_of("hidden_size", ("hidden_size",))
    return WeightPart(name="audio_projector", vision=True, matrices=(Matrix(in_features=d, out_features=text),),
                      other_parameters=text)


#: Blip2QFormerConfig's defaults (Granite Speech's projector_config).
QFORMER_DEFAULTS = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072,
                    "cross_attention_frequency": 2, "encoder_hidden_size": 1408, "use_qformer_text_input": False}


def _qformer_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """Granite Speech: window_size // downsample_rate learned queries, a BLIP-2 Q-Former over the encoder
    output (a LayerNorm; per layer self-attention, cross-attention every ``cross_attention_frequency`` layers
    with k/v from ``encoder_hidden_size``, the query feed-forward; every linear with bias, a LayerNorm after
    each block), and a linear to the language model."""
    queries = o.first_of("window_size", ("window_size",)) // o.first_of("downsample_rate", ("downsample_rate",))
    sub = o.raw("projector_config")
    q = ConfigReader(sub if isinstance(sub, Mapping) else {}, source_name=o.source_name, prefix="projector_config.",
                     defaults=QFORMER_DEFAULTS, defaults_name="blip_2_qformer")
    h = q.first_of("hidden_size", ("hidden_size",))
    layers = q.first_of("num_hidden_layers", ("num_hidden_layers",))
    ffn = q.first_of("intermediate_size", ("intermediate_size",))
    freq = q.first_of("cross_attention_frequency", ("cross_attention_frequency",))
    enc = q.first_of("encoder_hidden_size", ("encoder_hidden_size",))
    if switch(q, "use_qformer_text_input", False):
        o.note("projector_config.use_qformer_text_input: the Q-Former's text embeddings and text feed-forward are "
               "not counted")
    cross = sum(1 for i in range(layers) if i % freq == 0)
    matrices = (Matrix(in_features=h, out_features=h, count=4 * layers + 2 * cross),
                Matrix(in_features=enc, out_features=h, count=2 * cross),
                Matrix(in_features=h, out_features=ffn, count=layers), Matrix(in_features=ffn, out_features=h, count=layers),
                Matrix(in_features=h, out_features=text))
    vectors = (queries * h + 2 * h + (4 * h + 2 * h) * (layers + cross) + (ffn + h + 2 * h) * layers + text)
    for note in q.notes:
        o.note(note)
    return WeightPart(name="audio_projector", vision=True, matrices=matrices, other_parameters=vectors)


def _vibevoice_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """VibeVoice-ASR, per tokenizer: linear_1 (the tokenizer's hidden -> text, bias), a RMSNorm, linear_2 (bias)."""
    mlp = _mlp2(a.first_of("hidden_size", ("hidden_size",)), text, text, True)
    return WeightPart(name=mlp.name, vision=True, matrices=mlp.matrices, other_parameters=mlp.other_parameters + text)


def _nemotron_asr_projector(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """One linear with bias from the ASR encoder's width into the language model."""
    d = _sub(a, "asr_config", _NEMOTRON_ASR, "nemotron3_5_transcribe_asr_audio").first_of("hidden_size", ("hidden_size",))
    return WeightPart(name="audio_projector", vision=True, matrices=(Matrix(in_features=d, out_features=text),),
                      other_parameters=text)


def _word_timestamp_head(o: ConfigReader, a: ConfigReader, text: int) -> WeightPart:
    """A kernel-1 Conv1d with bias from the word-timestamp encoder's width to its ``vocab_size`` pieces."""
    d, vocab = a.first_of("hidden_size", ("hidden_size",)), a.first_of("vocab_size", ("vocab_size",))
    return WeightPart(name="audio_projector", vision=True, matrices=(Matrix(in_features=d, out_features=vocab),),
                      other_parameters=vocab)


Projector = Callable[[ConfigReader, ConfigReader, int], WeightPart]
#: A tower of a wrapper: the key of its config, the tower type the wrapper's config class defaults to, the
#: defaults the wrapper sets on that sub-config, and the projector from it into the language model.
Tower = tuple[str, str, dict[str, Any], Projector]


def _audio(tower: str, projector: Projector) -> tuple[Tower, ...]:
    return (("audio_config", tower, {}, projector),)


#: wrapper model_type -> (its towers, its own defaults).
WRAPPERS: dict[str, tuple[tuple[Tower, ...], dict[str, Any]]] = {
    "granite_speech": ((("encoder_config", "granite_speech_encoder", {}, _qformer_projector),),
                       {"window_size": 15, "downsample_rate": 5}),
    "granite_speech_plus": ((("encoder_config", "granite_speech_plus_encoder", {}, _qformer_projector),),
                            {"window_size": 15, "downsample_rate": 5}),
    "qwen2_audio": (_audio("qwen2_audio_encoder", _qwen2_audio_projector), {}),
    "voxtral": (_audio("voxtral_encoder", _voxtral_projector), {}),
    "voxtral_realtime": (_audio("voxtral_realtime_encoder", _voxtral_realtime_projector), {"downsample_factor": 4}),
    "qwen2_5_omni_thinker": (_audio("qwen2_5_omni_audio_encoder", _qwen_omni_audio_projector), {}),
    "qwen3_omni_moe_thinker": (_audio("qwen3_omni_moe_audio_encoder", _qwen3_asr_projector), {}),
    "audioflamingo3": (_audio("audioflamingo3_encoder", _flamingo_projector), {"projector_bias": True}),
    "musicflamingo": (_audio("audioflamingo3_encoder", _flamingo_projector), {"projector_bias": True}),
    "glmasr": (_audio("glmasr_encoder", _glmasr_projector), {}),
    "moss_transcribe_diarize": (_audio("moss_transcribe_diarize_audio", _moss_projector),
                                {"projector_bias": True, "audio_merge_size": 4}),
    "qwen3_asr": (_audio("qwen3_asr_encoder", _qwen3_asr_projector), {}),
    "omniasr": (_audio("omniasr_audio", _omniasr_projector), {}),
    # Nemotron 3.5 Transcribe: the audio model (ASR encoder + diarization), and the word-timestamp encoder and head
    "nemo_speechlm": ((("audio_config", "nemotron3_5_transcribe_audio", {}, _nemotron_asr_projector),
                       ("word_timestamp_config", "nemotron3_5_transcribe_word_timestamp", {}, _word_timestamp_head)), {}),
    # VibeVoiceAsrConfig: an acoustic and a semantic tokenizer encoder (the latter of hidden_size 128)
    "vibevoice_asr": ((("acoustic_tokenizer_encoder_config", "vibevoice_acoustic_tokenizer_encoder", {},
                        _vibevoice_projector),
                       ("semantic_tokenizer_encoder_config", "vibevoice_acoustic_tokenizer_encoder",
                        {"hidden_size": 128}, _vibevoice_projector)), {}),
}


def audio_weights(outer: Mapping[str, Any], text: ConfigReader) -> list[WeightPart]:
    """The audio towers and projectors of an audio wrapper's config; [] for a config without one."""
    outer_type = str(outer.get("model_type") or "")
    if outer_type not in WRAPPERS:
        return []
    text_hidden = hidden_of(text)
    towers, wrapper_defaults = WRAPPERS[outer_type]
    o = ConfigReader(outer, source_name=text.source_name, outer=outer, defaults=wrapper_defaults,
                     defaults_name=outer_type)
    parts: list[WeightPart] = []
    for key, default_tower, sub_defaults, projector in towers:
        sub = outer.get(key)
        if not isinstance(sub, Mapping):
            text.note(f"{key} is not in the config; the {outer_type} default tower {default_tower} is counted "
                      "with its architecture defaults")
            sub = {}
        tower_type = str(sub.get("model_type") or default_tower)
        if tower_type not in TOWERS:
            text.note(f"audio tower {tower_type} of {outer_type} is not counted (kvplan does not know its layout)")
            continue
        a = ConfigReader(sub, source_name=text.source_name, prefix=f"{key}.", outer=outer,
                         defaults={**TOWER_DEFAULTS[tower_type], **sub_defaults}, defaults_name=tower_type)
        parts += [TOWERS[tower_type](a), projector(o, a, text_hidden)]
        for note in a.notes:
            text.note(note)
        text.note(f"audio tower ({tower_type}) and its projector reported with the encoder towers as weights.vision_*")
    for note in o.notes:
        text.note(note)
    return parts
