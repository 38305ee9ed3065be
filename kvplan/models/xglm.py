"""The BART lineage's decoders run alone, as their own models: TrOCR (the text decoder of a
vision-encoder-decoder), XGLM and Kosmos-2's and Kosmos-2.5's text models (with Kosmos-2's vision tower and its
perceiver-style projection). Their cache follows the BART rules for a decoder alone (self-attention only, no
cross-attention); each reads its config class's defaults (transformers 5.24).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.models.bart import EncoderDecoderParser
from kvplan.models.base import ArchParser, ConfigReader, embeddings, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of

#: Each config class's defaults of the keys the cache layout and the weight count read (over BartConfig's).
DEFAULTS: dict[str, dict[str, Any]] = {
    "trocr": {"max_position_embeddings": 512, "is_encoder_decoder": False,
              "d_model": 1024, "decoder_layers": 12, "decoder_ffn_dim": 4096, "vocab_size": 50265,
              "use_learned_position_embeddings": True, "layernorm_embedding": True, "tie_word_embeddings": True},
    "xglm": {"num_layers": 24, "attention_heads": 16, "d_model": 1024, "ffn_dim": 4096,
             "max_position_embeddings": 2048, "is_encoder_decoder": False,
             "vocab_size": 256008, "add_cross_attention": False, "tie_word_embeddings": True},
    "kosmos_2_text_model": {"layers": 24, "attention_heads": 32, "embed_dim": 2048, "ffn_dim": 8192,
                            "max_position_embeddings": 2048, "is_encoder_decoder": False,
                            "vocab_size": 65037, "add_cross_attention": False, "tie_word_embeddings": True},
    "kosmos_2_5_text_model": {"layers": 24, "attention_heads": 16, "embed_dim": 1536, "ffn_dim": 6144,
                              "max_position_embeddings": 4096, "is_encoder_decoder": False,
                              "vocab_size": 108481, "tie_word_embeddings": True},
}
#: Kosmos2VisionConfig's defaults.
_KOSMOS2_VISION = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_channels": 3,
                   "image_size": 224, "patch_size": 14}

#: TrOCRLearnedPositionalEmbedding keeps 2 rows beyond ``max_position_embeddings`` (the padding offset).
TROCR_POSITION_OFFSET = 2


def _attention(d: int, kdim: int, count: int) -> tuple[tuple[Matrix, ...], int]:
    """``count`` BART attention blocks (q/k/v/o with biases), k and v read ``kdim`` features."""
    return ((Matrix(in_features=d, out_features=d, count=2 * count), Matrix(in_features=kdim, out_features=d, count=2 * count)),
            4 * d * count)


class DecoderLineageParser(EncoderDecoderParser):
    """TrOCR, XGLM and the Kosmos-2 / Kosmos-2.5 text models: the decoder alone caches self-attention only.
    Weights: learned or sinusoidal positions (sinusoidal ones are buffers a checkpoint does not save), LayerNorms
    with bias, cross-attention blocks only where the model builds them (TrOCRForCausalLM always; XGLM and
    Kosmos-2 with ``add_cross_attention``)."""

    model_types: ClassVar[tuple[str, ...]] = tuple(DEFAULTS)
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = DEFAULTS
    weight_types: ClassVar[tuple[str, ...]] = tuple(DEFAULTS)

    def has_encoder(self, r: ConfigReader) -> bool:
        return False

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        d = r.first_of("hidden_size", self.HIDDEN)
        layers = self.num_layers(r)
        ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim", "ffn_dim"))
        parts = embeddings(r, d)
        other = 0
        if model_type == "trocr":
            # TrOCRForCausalLM sets is_decoder: every layer has encoder_attn, k/v over cross_attention_hidden_size
            cross, kdim = layers, r.optional("cross_attention_hidden_size", ("cross_attention_hidden_size",)) or d
            if switch(r, "use_learned_position_embeddings", True):
                positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
                parts.append(WeightPart(name="position_embeddings",
                                        other_parameters=(positions + TROCR_POSITION_OFFSET) * d))
            other += 2 * d if switch(r, "layernorm_embedding", True) else 0
            final_norm = False
        elif model_type == "kosmos_2_5_text_model":  # no cross-attention; a 2-row segment embedding
            cross, kdim, final_norm = 0, d, True
            other += 2 * d
        else:
            cross, kdim = (layers if switch(r, "add_cross_attention", False) else 0), d
            final_norm = True
        self_m, self_v = _attention(d, d, layers)
        cross_m, cross_v = _attention(d, kdim, cross)
        # Kosmos-2: an inner LayerNorm in self-attention; Kosmos-2 and 2.5: a LayerNorm over the MLP's hidden width
        kosmos = model_type in ("kosmos_2_text_model", "kosmos_2_5_text_model")
        inner_ln = model_type == "kosmos_2_text_model"
        parts.append(WeightPart(name="attention", matrices=self_m + cross_m,
                                other_parameters=self_v + cross_v + (2 * d * layers if inner_ln else 0)))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=d, out_features=ffn, count=layers),
                                                      Matrix(in_features=ffn, out_features=d, count=layers)),
                                other_parameters=(ffn + d + (2 * ffn if kosmos else 0)) * layers))
        norms = (2 * layers + cross + (1 if final_norm else 0)) * 2 * d + other
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        r.note(f"{model_type}: the decoder alone, {'with' if cross else 'without'} cross-attention weights; "
               + ("learned positions" if model_type == "trocr" else "sinusoidal positions (not saved)"))
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": ffn, "qkv_width": 3 * d,
                                            "vocab_size": vocab_of(r)})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """Kosmos-2: a CLIP-style ViT (class embedding, patch conv without bias, (patches + 1) positions, pre- and
        post-LayerNorm) and the image-to-text projection: ``latent_query_num`` learned queries, a dense layer into
        the text width, and one attention block (q/k/v/o with biases) of the queries over the image features."""
        if outer.get("model_type") != "kosmos-2":
            return None
        text_hidden = r.first_of("hidden_size", self.HIDDEN)  # embed_dim (the caller's reading knows d_model only)
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=_KOSMOS2_VISION, defaults_name="kosmos_2_vision_model")
        o = ConfigReader(outer, source_name=r.source_name, outer=outer, defaults={"latent_query_num": 64},
                         defaults_name="kosmos-2")
        d = v.first_of("hidden_size", ("hidden_size",))
        inner = v.first_of("intermediate_size", ("intermediate_size",))
        layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
        channels = v.first_of("num_channels", ("num_channels",))
        patch = v.first_of("patch_size", ("patch_size",))
        patches = (v.first_of("image_size", ("image_size",)) // patch) ** 2
        queries = o.first_of("latent_query_num", ("latent_query_num",))
        tower = WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=d, out_features=d, count=4 * layers), Matrix(in_features=d, out_features=inner, count=layers),
            Matrix(in_features=inner, out_features=d, count=layers), Matrix(in_features=channels * patch * patch, out_features=d)),
            other_parameters=(4 * d + 2 * 2 * d + inner + d) * layers + d + (patches + 1) * d + 2 * 2 * d)
        projector = WeightPart(name="projector", vision=True, matrices=(
            Matrix(in_features=d, out_features=text_hidden), Matrix(in_features=text_hidden, out_features=text_hidden, count=4)),
            other_parameters=queries * text_hidden + text_hidden + 4 * text_hidden)
        for note in v.notes + o.notes:
            r.note(note)
        r.note(f"vision tower (kosmos_2_vision_model, {layers} layers) and its latent-query projection reported "
               "separately as weights.vision_*")
        return [tower, projector]


PARSERS: tuple[type[ArchParser], ...] = (DecoderLineageParser,)
