"""Mistral (sliding-window attention in its first releases), Ministral 3 and Mistral-Nemo (read by the Llama
rules), Mixtral (every MLP a mixture of experts), Mistral 4 (the DeepSeek-V3 layout) and Pixtral, the vision
tower of Mistral 3. Mistral Large 4 (MLA with a sparse indexer) is read with DeepSeek's rules (deepseek.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, MoeLayout, every_layer_moe
from kvplan.models.llama import LlamaParser
from kvplan.models.mla import mla_decoder_weights
from kvplan.models.tensors import Matrix, WeightCount, WeightPart


class MistralParser(DecoderParser):
    family = "mistral"
    model_types = ("mistral", "ministral")
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
    }
    defaults_by_type = {"mistral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
                        "ministral3": {"tie_word_embeddings": False},
                        # VoxtralRealtimeConfig's text_config defaults (merged under a nested text_config)
                        "voxtral_realtime_text": {"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 9216,
                                                  "num_hidden_layers": 26, "num_attention_heads": 32,
                                                  "num_key_value_heads": 8, "head_dim": 128,
                                                  "tie_word_embeddings": True, "sliding_window": 8192}}
    #: ``ministral3`` (Ministral 3, the text model of Mistral 3.x): Mistral's layout; the Llama rules read its
    #: cache (:class:`Ministral3Parser`). ``voxtral_realtime_text`` (Voxtral Realtime's language model): Mistral's
    #: layers, each with an adaptive RMSNorm scale from the time embedding (hidden -> 32 -> hidden, no biases).
    weight_types = ("mistral", "ministral", "ministral3", "voxtral_realtime_text")
    #: VoxtralRealtimeTextAdaRmsNorm's bottleneck width (modeling_voxtral_realtime.py).
    ADA_NORM_WIDTH = 32

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        counted = super().count_weights(r, model_type)
        if model_type != "voxtral_realtime_text":
            return counted
        hidden, layers = counted.hidden_size, self.num_layers(r)
        counted.parts.append(WeightPart(name="adaptive_norms", tp_sharded=False, matrices=(
            Matrix(in_features=hidden, out_features=self.ADA_NORM_WIDTH, count=layers),
            Matrix(in_features=self.ADA_NORM_WIDTH, out_features=hidden, count=layers))))
        return counted

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        vision = outer["vision_config"]
        return pixtral_weights(outer, r, text_hidden) if vision.get("model_type") == "pixtral" else None


class Ministral3Parser(LlamaParser):
    """Ministral 3 (``ministral3``) and Mistral-Nemo (``mistral_nemo``): their caches read by the Llama rules (a
    ``sliding_window`` makes every layer sliding), without Mistral's defaults; Mistral-Nemo's weights Llama's
    layout (Ministral 3's are counted by :class:`MistralParser`)."""

    model_types = ("mistral_nemo", "ministral3")
    weight_types = ("mistral_nemo",)
    defaults_by_type = {}


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


class Mistral4Parser(DecoderParser):
    """Mistral 4 (``mistral4``): the DeepSeek-V3 layout (MLA with a full q, dense then MoE layers with shared
    experts, no router correction bias; :func:`~kvplan.models.mla.mla_decoder_weights`)."""

    family = "mistral4"
    model_types = ("mistral4",)
    weight_types = ("mistral4",)
    #: Mistral4Config's defaults (transformers 5.24) of the keys the count reads.
    defaults_by_type = {"mistral4": {"first_k_dense_replace": 0, "tie_word_embeddings": False}}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        return mla_decoder_weights(r, model_type, router_bias=False)


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


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"voxtral_realtime_text": "sliding-window GQA in every layer: the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (MistralParser, Ministral3Parser, MixtralParser, Mistral4Parser)
