"""Multimodal weight counts against transformers on the meta device: the whole model, and the vision part
(everything outside the language model: tower, projector, merger) tensor for tensor."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_models_weights import default_config, meta_count

from kvplan.errors import ConfigError
from kvplan.models import count_weights
from kvplan.models.vision import TOWERS, VISION_TYPE_OF

from conftest import SHARED_CONFIGS

#: Module paths of the language model inside a composite model; every other tensor is the vision part.
LANGUAGE = re.compile(r"^(model\.)?(language_model|text_model)\.|^lm_head\.")


def meta_vision_count(config: dict[str, Any]) -> int:
    """The tensors of transformers' composite model (meta device) outside its language model and lm_head."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for n, t in tensors if not LANGUAGE.match(n))


#: Multimodal types counted from transformers' default config, tower and projector read per vision type.
TYPES = ["qwen2_vl", "qwen2_5_vl", "internvl", "qianfan_ocr", "kimi_k25", "lfm2_vl", "minicpmv4_6", "minicpmv4_7",
         "minicpm_ocr", "exaone4_5", "gemma3", "hyperclovax_vision_v2", "video_llama_3", "paddleocr_vl", "glm_ocr",
         "granite_docling", "aria", "nemotron_h_omni", "molmo2", "minimax_m3_vl",
         "cosmos3_edge", "ernie4_5_vl_moe", "janus"]


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


# ---- real Hub configs with a vision tower: still exact -------------------------------------------------
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


def test_molmo2_olmo_qk_norm_spans_all_heads() -> None:
    config = default_config("molmo2")
    config["text_config"]["qk_norm_type"] = "olmo"
    weights = count_weights(config, model_id="molmo2")
    assert weights.parameters == meta_count(config)
    text = config["text_config"]  # the norms span all q and k heads: (32 + 8) x 128 per layer, not 2 x 128
    per_head = count_weights(default_config("molmo2"), model_id="molmo2").parameters
    assert weights.parameters - per_head == ((32 + 8) * 128 - 2 * 128) * text["num_hidden_layers"]


def test_minimax_m3_indexer_and_dense_layers_equal_transformers() -> None:
    layers = {"num_hidden_layers": 4, "layer_types": ["full_attention", "minimax_m3_sparse"] * 2,
              "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]}
    config = default_config("minimax_m3_vl_text", **layers)
    weights = count_weights(config, model_id="m3")
    assert weights.parameters == meta_count(config)
    # two indexers of q 6144 x (4 x 128), k 6144 x 128 and their two 128-wide norms
    plain = count_weights(default_config("minimax_m3_vl_text", **{**layers, "layer_types": ["full_attention"] * 4}),
                          model_id="m3")
    assert weights.parameters - plain.parameters == 2 * (6144 * 4 * 128 + 6144 * 128 + 2 * 128)


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
