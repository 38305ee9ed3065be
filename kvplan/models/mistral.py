"""Mistral (sliding-window attention in its first releases) and Mixtral (every MLP a mixture of experts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, MoeLayout, every_layer_moe
from kvplan.models.tensors import Matrix, WeightPart


class MistralParser(DecoderParser):
    family = "mistral"
    model_types = ("mistral", "ministral")
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
    }
    defaults_by_type = {"mistral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
                        "ministral3": {"tie_word_embeddings": False}}
    #: ``ministral3`` (Ministral 3, the text model of Mistral 3.x): Mistral's layout; llama.py reads its cache.
    weight_types = ("mistral", "ministral", "ministral3")

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        vision = outer["vision_config"]
        return pixtral_weights(outer, r, text_hidden) if vision.get("model_type") == "pixtral" else None


class MixtralParser(DecoderParser):
    family = "mixtral"
    model_types = ("mixtral",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
    }
    defaults_by_type = {"mixtral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False,
                                    "num_local_experts": 8}}
    weight_types = ("mixtral",)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return every_layer_moe(r, layers, intermediate, top_k)


def pixtral_weights(outer: Mapping[str, Any], text: ConfigReader, text_hidden: int) -> list[WeightPart]:
    """Pixtral's vision tower (a bias-free patch convolution, RMSNorms, bias-free attention and a gated MLP; 2-D
    RoPE, no position table) and the Mistral 3 projector: an RMSNorm, the learned merge of spatial_merge_size^2
    patches, two linears into the language model (Mistral3 / MistralLarge4 modeling)."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.")
    o = ConfigReader(outer, source_name=text.source_name)
    hidden = v.first_of("hidden_size", ("hidden_size",))
    inner = v.first_of("intermediate_size", ("intermediate_size",))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
    patch = v.first_of("patch_size", ("patch_size",))
    channels = v.first_of("num_channels", ("num_channels",))
    merge = o.first_of("spatial_merge_size", ("spatial_merge_size",))
    feature = outer.get("vision_feature_layer", -1)
    n_features = len(feature) if isinstance(feature, list) else 1
    bias = outer.get("multimodal_projector_bias") is True
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=channels * patch * patch, out_features=hidden),
                  Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                  Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                  Matrix(in_features=inner, out_features=hidden, count=layers)),
        other_parameters=hidden + 2 * hidden * layers,  # ln_pre; attention and FFN RMSNorms
    )
    projector = WeightPart(
        name="projector", vision=True,
        matrices=(Matrix(in_features=hidden * merge * merge, out_features=hidden),
                  Matrix(in_features=hidden * n_features, out_features=text_hidden),
                  Matrix(in_features=text_hidden, out_features=text_hidden)),
        other_parameters=hidden + (2 * text_hidden if bias else 0),
    )
    text.note(f"vision tower (Pixtral, {layers} layers) reported separately as weights.vision_*")
    text.notes += [n for n in v.notes + o.notes if n not in text.notes]
    return [tower, projector]


PARSERS: tuple[type[ArchParser], ...] = (MistralParser, MixtralParser)
