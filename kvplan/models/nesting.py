"""Wrapper configs: where a multimodal or composite ``config.json`` nests its language model's config, and which
``model_type`` that nested config is read as."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.registry import REGISTRY

#: Keys under which multimodal / wrapper configs nest the language model's config.
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")

#: NOTE: the ``model_type``s whose transformers config class nests its language model's config
#: (``sub_configs`` holds ``text_config``; transformers 5.24). Only these, the wrappers below, model
#: types kvplan does not know, and a nested config that names a different ``model_type`` are unwrapped:
#: a plain Llama config with a stray ``"text_config": {}`` is read from its own top-level fields.
NESTING_TYPES = frozenset("""
aimv2 align altclip apertus1p5 aria audioflamingo3 aya_vision blip blip-2 bridgetower chinese_clip clap clip
clipseg clvp cohere2_vision cohere_compass cosmos3_edge cosmos3_omni deepseek_ocr2 deepseek_vl
deepseek_vl_hybrid diffusion_gemma dots3_note embedding_gemma2 emu3 ernie4_5_vl_moe exaone4_5 fast_vlm flava
florence2 fun_asr_nano fuyu gemma3 gemma3n gemma4 gemma4_assistant gemma4_unified gemma4_unified_assistant
glm46v glm4v glm4v_moe glm5_next glm_image glm_ocr glmasr glmga got_ocr2 granite4_vision granite_docling
granite_speech granite_speech_plus grounding-dino groupvit hunyuan_vl hy_v4_vl hyperclovax_vision_v2 idefics2
idefics3 inkling2 inkling2_loop inkling_mm_model instructblip instructblipvideo internvl janus jev kimi_k25
kosmos-2 kosmos-2.5 lfm2_vl lfm3_vl lighton_ocr llama4 llava llava_next llava_next_video llava_onevision
metaclip_2 minicpm_ocr minicpmv4_6 minicpmv4_7 minimax_m3_vl mistral3 mistral_large4 mllama mm-grounding-dino
modernvbert molmo2 moss_transcribe_diarize muse_glimmer muse_spark musicflamingo nemo_speechlm nemotron_h_omni
omdet-turbo omniasr ovis2 owlv2 owlvit paddleocr_vl paligemma pe_audio pe_audio_video pe_video perception_lm
pix2struct pp_chart2table pp_formulanet qianfan_ocr qwen2_5_omni_thinker qwen2_5_vl qwen2_audio qwen2_vl
qwen3_5 qwen3_5_moe qwen3_asr qwen3_omni_moe_thinker qwen3_vl qwen3_vl_moe qwen4_exp sam3 sam3_lite_text
shieldgemma2 siglip siglip2 smolvlm step3p7 t5gemma2_encoder tipsv2 ultravbert unlimited_ocr vibevoice
vibevoice_asr video_llama_3 video_llava videoprism vipllava vision-text-dual-encoder voxtral voxtral_realtime
xclip
""".split())

#: Top-level keys that give a model its own layer count: such a config is not a wrapper of a nested one.
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")

#: Wrapper model types whose nested text config may omit its own ``model_type``.
WRAPPER_TEXT_TYPES = {
    "llava": "llama", "llava_next": "llama", "llava_onevision": "qwen2", "vipllava": "llama",
    "gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "llama4": "llama4_text", "mistral3": "mistral", "paligemma": "gemma",
    "mllama": "mllama_text_model",
}


def nested_key_of(config: Mapping[str, Any]) -> str | None:
    """The key of the nested language-model config to read, or None: read the top level.

    A nested dict is used only where the architecture nests one (transformers' composite configs, the
    wrappers kvplan knows), for a ``model_type`` kvplan does not know, or when the nested dict names a
    ``model_type`` of its own that differs from the outer one."""
    key = next((k for k in NESTED_TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
    if key is None:
        return None
    outer_type = config.get("model_type")
    if not isinstance(outer_type, str) or not outer_type:
        return key
    inner_type = config[key].get("model_type")
    if outer_type in NESTING_TYPES or outer_type in WRAPPER_TEXT_TYPES or outer_type not in REGISTRY:
        return key
    if isinstance(inner_type, str) and inner_type and inner_type != outer_type:
        return key
    return None


def decoder_key_of(config: Mapping[str, Any]) -> str | None:
    """The (dotted) key of the language model's config to read, or None: read the top level.

    :func:`nested_key_of`, else one level deeper: a config that nests a whole multimodal model, itself with a
    ``text_config`` (pi05's ``vlm_config.text_config``, a PaliGemma inside a vision-language-action model), when
    the top level names no layer count of its own. The first such sub-config in the file's order is read."""
    key = nested_key_of(config)
    if key is not None or any(k in config for k in LAYER_COUNT_KEYS):
        return key
    for outer_key, child in config.items():
        if isinstance(child, Mapping) and outer_key not in NESTED_TEXT_KEYS:
            inner = next((k for k in NESTED_TEXT_KEYS if isinstance(child.get(k), Mapping)), None)
            if inner is not None:
                return f"{outer_key}.{inner}"
    return None


def node_at(config: Mapping[str, Any], dotted: str) -> Mapping[str, Any]:
    """The sub-config at a key :func:`decoder_key_of` returned."""
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    assert isinstance(node, Mapping)
    return node


def check_model_types(config: Mapping[str, Any], source_name: str) -> None:
    """``model_type`` (top level and nested) must be a string: ``[]`` or ``7`` names no architecture."""
    for key in ("", *NESTED_TEXT_KEYS):
        node = config.get(key) if key else config
        value = node.get("model_type") if isinstance(node, Mapping) else None
        if value is not None and not isinstance(value, str):
            where = f"{key}.model_type" if key else "model_type"
            raise ConfigError(f"{source_name}: {where} must be a string such as \"llama\", got {value!r}"[:300],
                              "fix the config, or pass --set model_type=NAME")
