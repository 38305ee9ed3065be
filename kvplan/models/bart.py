"""Encoder-decoder models of the BART lineage (BART, mBART, Marian, Pegasus, M2M-100, NLLB-MoE, Blenderbot, PLBart).

The encoder keeps no cache. Cross-attention holds the encoder output's K/V for every decoder
layer, sized by the encoder length, not by the generated length.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.specs import LayerSpec


class EncoderDecoderParser(ArchParser):
    family = "encoder_decoder"
    model_types = ("bart", "mbart", "marian", "pegasus", "m2m_100", "nllb_moe", "blenderbot", "plbart")
    LAYERS = ("decoder_layers",)
    HEADS = ("decoder_attention_heads",)
    HIDDEN = ("d_model",)
    KV_HEADS = ("decoder_num_key_value_heads",)
    MAX_CONTEXT = ("max_target_positions", "max_position_embeddings")
    ENCODER_LEN = ("max_source_positions", "max_position_embeddings")

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        dims = self.attention_dims(r)
        self_attn, cross = self.full_spec(dims), self.cross_spec(dims)
        r.note(
            "encoder-decoder: each decoder layer caches self-attention K/V (grows with generated tokens) "
            "and cross-attention K/V over the encoder output (fixed by the encoder length)"
        )
        return [self_attn] * num_layers + [cross] * num_layers

    def encoder_len(self, r: ConfigReader) -> int | None:
        return r.optional("encoder_len", self.ENCODER_LEN)


PARSERS: tuple[type[ArchParser], ...] = (EncoderDecoderParser,)
