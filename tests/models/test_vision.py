"""Vision towers and projectors of multimodal configs (vision.py, vision_towers.py, vision_projectors.py):
arithmetic over their config fields, and transformers' own count on the meta device."""

from __future__ import annotations

import json

import pytest
from geometry_check import bundled
from transformers_meta import default_config, meta_count, meta_vision_count

from kvplan.errors import ConfigError
from kvplan.models import count_weights
from kvplan.models.vision import TOWERS, VISION_TYPE_OF

from conftest import SHARED_CONFIGS

#: Multimodal types counted from transformers' default config, tower and projector read per vision type.
TYPES = ["qwen2_vl", "qwen2_5_vl", "internvl", "qianfan_ocr", "kimi_k25", "lfm2_vl", "minicpmv4_6", "minicpmv4_7",
         "minicpm_ocr", "exaone4_5", "gemma3", "hyperclovax_vision_v2", "video_llama_3", "paddleocr_vl", "glm_ocr",
         "granite_docling", "aria", "nemotron_h_omni", "molmo2", "minimax_m3_vl",
         "cosmos3_edge", "ernie4_5_vl_moe", "janus",
         "llava", "llava_next", "llava_next_video", "llava_onevision", "vipllava", "video_llava", "florence2",
         "kosmos-2.5", "idefics3", "smolvlm", "lighton_ocr", "blip-2", "instructblip", "instructblipvideo",
         "idefics2", "got_ocr2", "pp_chart2table", "cohere2_vision", "deepseek_vl",
         "deepseek_vl_hybrid", "ovis2", "hy_v4_vl", "unlimited_ocr", "muse_glimmer", "glm4v", "glm4v_moe", "ovis2_5"]


@pytest.mark.parametrize("model_type", TYPES)
def test_multimodal_count_equals_transformers(model_type: str) -> None:
    config = default_config(model_type)
    weights = count_weights(config, model_id=model_type)
    assert weights.parameters == meta_count(config)
    assert weights.vision_parameters == meta_vision_count(config)


def test_every_outer_type_names_a_tower_layout() -> None:
    assert set(VISION_TYPE_OF.values()) <= set(TOWERS)


def test_qwen2_vl_tower_arithmetic() -> None:
    # Qwen2VLVisionConfig defaults: embed_dim 1280, depth 32, mlp_ratio 4, 3 x 2 x 14 x 14 patches, merge 2,
    # merger out = vision hidden_size 3584
    e, layers, inner, merged, out = 1280, 32, 1280 * 4, 1280 * 2 * 2, 3584
    block = 3 * e * e + 3 * e + e * e + e + e * inner + inner + inner * e + e + 2 * 2 * e
    merger = 2 * e + merged * merged + merged + merged * out + out
    expected = 3 * 2 * 14 * 14 * e + block * layers + merger
    weights = count_weights(default_config("qwen2_vl"), model_id="qwen2_vl")
    assert weights.vision_parameters == expected


def test_hub_vision_config_without_model_type_is_read_by_the_outer_type() -> None:
    # Qwen2-VL-7B-Instruct's Hub vision_config names no model_type: Qwen2VLConfig builds a Qwen2VLVisionConfig
    config = default_config("qwen2_vl")
    hub = json.loads(json.dumps(config))
    del hub["vision_config"]["model_type"]
    assert count_weights(hub, model_id="q").vision_parameters == count_weights(config, model_id="q").vision_parameters


def test_list_patch_size_is_a_pair_and_a_bad_one_is_an_error() -> None:
    config = default_config("internvl")
    assert config["vision_config"]["patch_size"] == [14, 14]
    square = json.loads(json.dumps(config))
    square["vision_config"]["patch_size"], square["vision_config"]["image_size"] = 14, 448
    assert count_weights(square, model_id="i").parameters == count_weights(config, model_id="i").parameters
    square["vision_config"]["patch_size"] = "14"
    with pytest.raises(ConfigError, match="patch_size must be an integer"):
        count_weights(square, model_id="i")


def test_vision_default_is_noted() -> None:
    config = default_config("qwen2_5_vl")
    del config["vision_config"]["intermediate_size"]
    weights = count_weights(config, model_id="q")
    assert any("intermediate_size is not in the config; using the qwen2_5_vl_vision" in n for n in weights.notes)


def _shared_multimodal() -> list[str]:
    if not SHARED_CONFIGS.is_dir():
        return []
    return sorted(p.stem for p in SHARED_CONFIGS.glob("*.json") if "vision_config" in json.loads(p.read_text()))


SHARED = _shared_multimodal()


@pytest.mark.skipif(not SHARED, reason="../shared/hf_configs not present")
@pytest.mark.parametrize("name", SHARED)
def test_shared_multimodal_config_equals_transformers(name: str) -> None:
    config = json.loads((SHARED_CONFIGS / f"{name}.json").read_text())
    weights = count_weights(config, model_id=name)
    assert weights.parameters == meta_count(config)
    assert weights.vision_parameters == meta_vision_count(config)


def test_lfm3_vl_vision_part_equals_transformers() -> None:
    # The lfm3 language model is counted by the LFM family (another module); the vision part stands alone here.
    from kvplan.models.base import ConfigReader
    from kvplan.models.vision import vision_weights

    config = default_config("lfm3_vl")
    text = ConfigReader(config["text_config"], source_name="lfm3_vl")
    parts = vision_weights(config, text, text_hidden=config["text_config"]["hidden_size"])
    assert sum(p.parameters for p in parts) == meta_vision_count(config)


def test_aria_language_model_alone_equals_transformers() -> None:
    # AriaTextForCausalLM: MoE in every layer, shared experts fused into one MLP of 2 x intermediate_size
    config = default_config("aria_text")
    assert count_weights(config, model_id="aria_text").parameters == meta_count(config)


def test_florence2_davit_vision_part_equals_transformers() -> None:
    # The BART language model's learned position tables are not counted by bart.py (said in its note), so only
    # the DaViT tower and projector are compared here.
    config = default_config("florence2")
    assert count_weights(config, model_id="florence2").vision_parameters == meta_vision_count(config)


def test_kosmos25_pix2struct_vision_part_equals_transformers() -> None:
    # The projector works at the text model's embed_dim (1536), which the BART-lineage parser reads; the text
    # model's own count is bart.py's, so only the vision part is compared.
    config = default_config("kosmos-2.5")
    assert count_weights(config, model_id="kosmos-2.5").vision_parameters == meta_vision_count(config)


def test_llava_next_clip_tower_and_projector_arithmetic() -> None:
    # LlavaNextConfig's CLIP tower: hidden 1024, MLP 4096, 24 layers, 336 / 14 patches, a class token;
    # projector 1024 -> text 4096 -> 4096 (biased) and the image_newline vector of the text width
    h, inner, layers, patches, text = 1024, 4096, 24, (336 // 14) ** 2, 4096
    block = 4 * (h * h + h) + h * inner + inner + inner * h + h + 2 * 2 * h
    tower = 3 * 14 * 14 * h + h + (patches + 1) * h + 2 * 2 * h + block * layers
    projector = h * text + text + text * text + text + text  # linear_1, linear_2, image_newline
    weights = count_weights(default_config("llava_next"), model_id="llava_next")
    assert weights.vision_parameters == tower + projector


def test_vision_feature_layer_list_widens_the_projector() -> None:
    config = default_config("llava")
    wide = json.loads(json.dumps(config))
    wide["vision_feature_layer"] = [-2, -5]
    h, text = config["vision_config"]["hidden_size"], config["text_config"]["hidden_size"]
    extra = h * text  # linear_1 reads two layers' features
    assert count_weights(wide, model_id="w").parameters - count_weights(config, model_id="l").parameters == extra
    assert count_weights(wide, model_id="w").parameters == meta_count(wide)


def test_vision_config_without_model_type_is_the_config_class_default_tower() -> None:
    # LlavaConfig builds a CLIPVisionConfig when vision_config names no model_type
    config = default_config("llava")
    hub = json.loads(json.dumps(config))
    del hub["vision_config"]["model_type"]
    assert count_weights(hub, model_id="h").parameters == count_weights(config, model_id="l").parameters


@pytest.mark.parametrize("model_type", ["minicpm_ocr", "minicpmv4_6", "minicpmv4_7"])
def test_minicpm_window_merger_reads_the_vit_intermediate_size(model_type: str) -> None:
    # the window merger's MLP is intermediate_size x window (4 h x window only when intermediate_size = 4 h);
    # the downsample MLP reads 4 h whatever merge_kernel_size says
    config = default_config(model_type)
    config["vision_config"]["intermediate_size"] = 64
    config["merger_times"] = 2
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


def test_florence2_language_model_has_no_final_logits_bias() -> None:
    config = default_config("florence2")
    bart = dict(config["text_config"])
    weights = count_weights(config, model_id="f")
    # the same BART config alone (BartForConditionalGeneration) holds final_logits_bias over the vocabulary
    assert count_weights(bart, model_id="b").parameters - (weights.parameters - weights.vision_parameters) \
        == bart["vocab_size"]


def test_blip2_qformer_arithmetic() -> None:
    # Blip2QFormerConfig: hidden 768, 12 layers, MLP 3072, cross-attention over 1408 features in layers 0, 2, ..;
    # 32 queries; Linear(768, text hidden) into OPT (Blip2Config's default text model, hidden 768)
    h, layers, inner, enc, queries, text = 768, 12, 3072, 1408, 32, 768
    cross = layers // 2
    self_attn = 4 * (h * h + h) + 2 * h
    cross_attn = 2 * (h * h + h) + 2 * (enc * h + h) + 2 * h
    mlp = h * inner + inner + inner * h + h + 2 * h
    qformer = layers * (self_attn + mlp) + cross * cross_attn + 2 * h
    projector = queries * h + qformer + h * text + text
    config = default_config("blip-2")
    vision = count_weights(config, model_id="b").vision_parameters
    with_text_mlp = json.loads(json.dumps(config))
    with_text_mlp["qformer_config"]["use_qformer_text_input"] = True
    assert count_weights(with_text_mlp, model_id="t").vision_parameters - vision == layers * mlp
    assert count_weights(with_text_mlp, model_id="t").parameters == meta_count(with_text_mlp)
    d, vl, vi, patches = 1408, 39, 6144, (224 // 14) ** 2  # the ViT: class token, biased patch conv, qkv bias 3 d
    tower = 3 * 14 * 14 * d + d + d + (patches + 1) * d + 2 * d + vl * (
        3 * d * d + 3 * d + d * d + d + d * vi + vi + vi * d + d + 2 * 2 * d)
    assert vision == tower + projector


def test_idefics2_perceiver_runs_at_the_text_width() -> None:
    # Idefics2PerceiverConfig's hidden_size follows the text model (4096, MistralConfig's intermediate 14336):
    # 64 latents, 3 layers of GQA 16 x 96 (kv 4 x 96) and a gated MLP of 4 x 4096, three RMSNorms each
    w, inner, vision, latents, depth, q, kv = 4096, 14336, 768, 64, 3, 16 * 96, 4 * 96
    layer = w * q + 2 * w * kv + q * w + 3 * w * 4 * w + 3 * w
    expected = 2 * vision * inner + inner * w  # the modality projection: gate, up; down
    expected += latents * w + depth * layer + w
    config = default_config("idefics2")
    weights = count_weights(config, model_id="i")
    d, layers, mlp, patches = 768, 12, 3072, (224 // 32) ** 2  # the SigLIP tower
    tower = 3 * 32 * 32 * d + d + patches * d + 2 * d + layers * (4 * (d * d + d) + 2 * d * mlp + mlp + d + 4 * d)
    assert weights.vision_parameters == tower + expected


def test_got_ocr2_sam_tower_arithmetic() -> None:
    # GotOcr2VisionConfig: hidden 768, 12 layers (2, 5, 8, 11 global), 12 heads, 1024 / 16 patches, window 14,
    # MLP 3072, neck to 256 channels; the projector convolves 256 -> 512 -> text hidden (Qwen2 default 1024 here)
    h, layers, heads, grid, window, mlp, out = 768, 12, 12, 1024 // 16, 14, 3072, 256
    rel = 2 * (h // heads) * (4 * (2 * grid - 1) + 8 * (2 * window - 1))
    block = 2 * 2 * h + h * 3 * h + 3 * h + h * h + h + h * mlp + mlp + mlp * h + h
    tower = 3 * 16 * 16 * h + h + grid * grid * h + layers * block + rel + h * out + 9 * out * out + 2 * 2 * out
    config = default_config("got_ocr2")
    text = config["text_config"]["hidden_size"]
    projector = 9 * out * 2 * out + 9 * 2 * out * text + text * text + text
    assert count_weights(config, model_id="g").vision_parameters == tower + projector
    no_rel = json.loads(json.dumps(config))
    no_rel["vision_config"]["use_rel_pos"] = False
    assert count_weights(no_rel, model_id="n").parameters == meta_count(no_rel)


def test_deepseek_vl_hybrid_sam_mlp_follows_mlp_ratio() -> None:
    # SamVisionConfig's mlp_dim defaults to None: hidden x mlp_ratio (3072 = 768 x 4); a set mlp_dim replaces it
    config = default_config("deepseek_vl_hybrid")
    assert config["high_res_vision_config"]["mlp_dim"] == 768 * 4
    unset = json.loads(json.dumps(config))
    del unset["high_res_vision_config"]["mlp_dim"]
    assert count_weights(unset, model_id="u").parameters == count_weights(config, model_id="c").parameters
    narrow = json.loads(json.dumps(config))
    narrow["high_res_vision_config"]["mlp_dim"] = 1024
    h, layers = config["high_res_vision_config"]["hidden_size"], config["high_res_vision_config"]["num_hidden_layers"]
    saved = layers * (2 * h * (4 * h - 1024) + (4 * h - 1024))  # lin1 / lin2 weights and lin1's bias
    assert count_weights(config, model_id="c").parameters - count_weights(narrow, model_id="n").parameters == saved
    assert count_weights(narrow, model_id="n").parameters == meta_count(narrow)


def test_vision_tower_reported_separately() -> None:
    w = count_weights(bundled("llava-hf/llava-1.5-7b-hf"), model_id="llava")
    h, inner, layers = 1024, 4096, 24
    tower = layers * (4 * h * h + 2 * h * inner + 4 * h + 4 * h + inner + h)  # matrices, qkvo biases, 2 LNs, MLP biases
    tower += 3 * 14 * 14 * h + (24 * 24 + 1) * h + h + 4 * h  # patch conv, positions, class embedding, pre/post LN
    projector = h * 4096 + 4096 + 4096 * 4096 + 4096
    assert w.vision_parameters == tower + projector
    assert w.language_parameters == 6_738_939_904  # Llama-2-7B with a 32,064-token vocabulary


def test_llava_onevision1_5_rice_vit_has_no_image_size() -> None:
    # RiceViT: rotary positions (no image_size), a class token with a learned rotary angle, a pre-LayerNorm
    config = default_config("llava_onevision1_5")
    assert "image_size" not in config["vision_config"]
    weights = count_weights(config, model_id="llava_onevision1_5")
    assert weights.parameters == meta_count(config)
    hidden, inner, depth, heads, patch, merge, out = 1024, 4096, 24, 16, 14, 2, 4096  # the config class's defaults
    block = 2 * 2 * hidden + 4 * hidden * hidden + 4 * hidden + 2 * hidden * inner + inner + hidden
    merged = hidden * merge * merge
    tower = (3 * patch * patch * hidden + hidden + hidden // heads // 2 + 2 * hidden + depth * block
             + 2 * hidden + merged * merged + merged + merged * out + out)  # patches, class, pre-norm, blocks, merger
    assert weights.vision_parameters == tower == meta_vision_count(config)


def test_muse_glimmer_tower_and_adapter_arithmetic() -> None:
    # MuseGlimmerVisionConfig and MuseGlimmerConfig defaults (transformers 5.25)
    h, inner, layers, patch, frames, pos_h, pos_w = 1536, 8960, 50, 14, 2, 32, 32
    tower = (frames * 3 * patch * patch * h  # linear patch embedding, no bias
             + layers * (4 * h * h + 4 * h + 2 * h * inner + inner + h + 2 * 2 * h)  # q/k/v/proj, fc1/fc2, 2 LNs
             + pos_h * pos_w * h + 2 * 2 * h)  # position table; ln_pre, ln_post
    out, projector_hidden, text = 6144, 4096, 6656  # out_hidden_size, projector_hidden_size, text hidden_size
    adapter = out * projector_hidden + projector_hidden * projector_hidden + projector_hidden * text
    weights = count_weights(default_config("muse_glimmer"), model_id="muse_glimmer")
    assert weights.vision_parameters == tower + adapter == 1_921_845_760  # transformers' count of the same


def test_ovis2_5_visual_tokenizer_and_embedding_table_arithmetic() -> None:
    # Ovis2_5VisionConfig: hidden_size, spatial_merge_size, vocab_size, num_visual_indicator_tokens; the text width
    config = default_config("ovis2_5")
    h, merge, vocab, indicators = 1152, 2, 65536, 4
    text = config["text_config"]["hidden_size"]
    words = vocab - indicators
    weights = count_weights(config, model_id="ovis2_5")
    projector = next(p for p in weights.parts if p.name == "projector")
    assert projector.parameters == h * merge * merge * words + 2 * words + vocab * text  # tokenizer, LayerNorm, table
