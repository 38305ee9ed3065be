"""Encoder-decoder models: the decoder caches self-attention K/V and cross-attention K/V.

The encoder keeps no cache. Cross-attention holds the encoder output's K/V for every decoder
layer, sized by the encoder length, not by the generated length.
"""

from __future__ import annotations

from kvplan.arch.base import ArchParser, ConfigReader
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


class WhisperParser(EncoderDecoderParser):
    family = "whisper"
    model_types = ("whisper",)
    defaults = {"max_source_positions": 1500, "max_target_positions": 448}
    MAX_CONTEXT = ("max_target_positions",)
    ENCODER_LEN = ("max_source_positions",)


class T5Parser(EncoderDecoderParser):
    """T5 family: ``d_kv`` is the head dim; the decoder has ``num_decoder_layers`` (default ``num_layers``)."""

    family = "t5"
    model_types = ("t5", "mt5", "umt5", "longt5", "switch_transformers")
    LAYERS = ("num_decoder_layers", "num_layers")
    HEADS = ("num_heads",)
    HEAD_DIM = ("d_kv",)
    KV_HEADS = ()
    MAX_CONTEXT = ("n_positions",)
    ENCODER_LEN = ("n_positions",)

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        r.record("num_kv_heads", heads, "derived: T5 attention is multi-head, num_kv_heads = num_heads")
        return heads
