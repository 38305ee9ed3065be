"""The BART lineage: encoder-decoder transformers with learned or sinusoidal positions and a
decoder of ``decoder_layers`` layers that attends to itself and to the encoder output (BART, mBART,
Marian, Pegasus, Pegasus-X, BigBird-Pegasus, M2M-100, NLLB-MoE, Blenderbot(-Small), PLBart, MVP,
LED, FSMT, ProphetNet, SeamlessM4T text), and the decoder-only members of the same lineage
(TrOCR, XGLM, Kosmos-2 / Kosmos-2.5 text models, and any ``*ForCausalLM`` of an encoder-decoder).

The encoder keeps no cache. Cross-attention holds the encoder output's K/V for every decoder
layer, sized by the encoder length, not by the generated length. A ``*ForCausalLM`` architecture
(``BartForCausalLM``, ``WhisperForCausalLM``) runs the decoder alone: no cross-attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, embeddings, vocab_of
from kvplan.specs import LayerSpec

#: The BART layout's defaults (transformers ``BartConfig``); the others differ where ``_BY_TYPE`` says.
_BART = {"decoder_layers": 12, "decoder_attention_heads": 16, "d_model": 1024, "encoder_layers": 12,
         "decoder_ffn_dim": 4096, "encoder_ffn_dim": 4096, "max_position_embeddings": 1024,
         "tie_word_embeddings": True, "is_encoder_decoder": True}
#: Each config class's defaults of the keys the cache layout and the weight count read.
_BY_TYPE: dict[str, dict[str, Any]] = {
    "bart": {}, "mbart": {}, "marian": {}, "pegasus": {}, "m2m_100": {}, "nllb_moe": {}, "nllb-moe": {}, "mvp": {},
    "fsmt": {"tie_word_embeddings": False},
    "blenderbot": {"decoder_layers": 24, "decoder_attention_heads": 32, "d_model": 2560, "encoder_layers": 2,
                   "decoder_ffn_dim": 10240, "encoder_ffn_dim": 10240, "max_position_embeddings": 128},
    "blenderbot-small": {"decoder_layers": 8, "d_model": 512, "encoder_layers": 8, "decoder_ffn_dim": 2048,
                         "encoder_ffn_dim": 2048, "max_position_embeddings": 512},
    "plbart": {"decoder_layers": 6, "decoder_attention_heads": 12, "d_model": 768, "encoder_layers": 6,
               "decoder_ffn_dim": 3072, "encoder_ffn_dim": 3072},
    "bigbird_pegasus": {"decoder_layers": 16, "encoder_layers": 16, "max_position_embeddings": 4096},
    "pegasus_x": {"decoder_layers": 16, "encoder_layers": 16, "max_position_embeddings": 16384},
    "led": {"max_decoder_position_embeddings": 1024, "max_encoder_position_embeddings": 16384},
    "prophetnet": {"num_decoder_layers": 12, "num_decoder_attention_heads": 16, "hidden_size": 1024,
                   "num_encoder_layers": 12, "max_position_embeddings": 512},
    "seamless_m4t": {"decoder_layers": 24, "hidden_size": 1024, "encoder_layers": 24, "decoder_ffn_dim": 8192,
                     "encoder_ffn_dim": 8192, "max_source_positions": 4096},
    "seamless_m4t_v2": {"decoder_layers": 24, "hidden_size": 1024, "encoder_layers": 24, "decoder_ffn_dim": 8192,
                        "encoder_ffn_dim": 8192, "max_position_embeddings": 4096},
    "trocr": {"max_position_embeddings": 512, "is_encoder_decoder": False},
    "xglm": {"num_layers": 24, "attention_heads": 16, "d_model": 1024, "ffn_dim": 4096,
             "max_position_embeddings": 2048, "is_encoder_decoder": False},
    "kosmos_2_text_model": {"layers": 24, "attention_heads": 32, "embed_dim": 2048, "ffn_dim": 8192,
                            "max_position_embeddings": 2048, "is_encoder_decoder": False},
    "kosmos_2_5_text_model": {"layers": 24, "attention_heads": 16, "embed_dim": 1536, "ffn_dim": 6144,
                              "max_position_embeddings": 4096, "is_encoder_decoder": False},
}
#: The model types whose decoder runs alone (no encoder, no cross-attention) whatever the architecture says.
DECODER_ONLY = frozenset({"trocr", "xglm", "kosmos_2_text_model", "kosmos_2_5_text_model"})


def causal_only(r: ConfigReader) -> str | None:
    """The ``*ForCausalLM`` architecture that runs an encoder-decoder's decoder alone, if the config names one."""
    archs = r.outer.get("architectures") or r.raw("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0].endswith("ForCausalLM"):
        return archs[0]
    return None


class EncoderDecoderParser(ArchParser):
    """Decoder self-attention + cross-attention over the encoder per decoder layer; `*ForCausalLM`: self only."""

    family = "encoder_decoder"
    model_types: ClassVar[tuple[str, ...]] = tuple(_BY_TYPE)
    defaults = _BART
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = _BY_TYPE
    weight_types: ClassVar[tuple[str, ...]] = tuple(t for t in _BY_TYPE if t not in (
        "nllb_moe", "nllb-moe", "trocr", "xglm", "kosmos_2_text_model"))  # the last three: xglm.py counts them
    LAYERS = ("decoder_layers", "num_decoder_layers", "num_layers", "layers")
    HEADS = ("decoder_attention_heads", "num_decoder_attention_heads", "attention_heads")
    HIDDEN = ("d_model", "hidden_size", "embed_dim")
    KV_HEADS = ("decoder_num_key_value_heads",)
    MAX_CONTEXT = ("max_target_positions", "max_decoder_position_embeddings", "max_position_embeddings")
    ENCODER_LEN = ("max_source_positions", "max_encoder_position_embeddings", "max_position_embeddings")

    def has_encoder(self, r: ConfigReader) -> bool:
        """Whether generation runs an encoder whose output the decoder cross-attends to."""
        if r.defaults_name in DECODER_ONLY:
            return False
        arch = causal_only(r)
        if arch:
            r.note(f"architectures names {arch}: the decoder runs alone, without cross-attention")
            return False
        return True

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        dims = self.attention_dims(r)
        self_attn = self.full_spec(dims)
        if not self.has_encoder(r):
            return [self_attn] * num_layers
        r.note(
            "encoder-decoder: each decoder layer caches self-attention K/V (grows with generated tokens) "
            "and cross-attention K/V over the encoder output (fixed by the encoder length)"
        )
        return [self_attn] * num_layers + [self.cross_spec(dims)] * num_layers

    def encoder_len(self, r: ConfigReader) -> int | None:
        if not self.has_encoder(r):
            return None
        return r.optional("encoder_len", self.ENCODER_LEN)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """BART layout: token embedding (+ lm_head unless tied), encoder layers (self-attention, MLP) and
        decoder layers (self- and cross-attention, MLP), q/k/v/o and fc1/fc2 with biases, LayerNorms with
        bias. Learned position tables are counted from ``max_position_embeddings`` where the family has them."""
        d = r.first_of("hidden_size", self.HIDDEN)
        dec = self.num_layers(r)
        enc = 0 if not self.has_encoder(r) else r.first_of(
            "encoder_layers", ("encoder_layers", "num_encoder_layers"))
        dec_ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim", "ffn_dim"))
        enc_ffn = r.first_of("encoder_ffn_dim", ("encoder_ffn_dim",)) if enc else 0
        attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
        parts = embeddings(r, d)
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=d, count=4 * attn_blocks),),
                                other_parameters=4 * d * attn_blocks))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=d, out_features=dec_ffn, count=dec), Matrix(in_features=dec_ffn, out_features=d, count=dec),
            Matrix(in_features=d, out_features=enc_ffn, count=enc), Matrix(in_features=enc_ffn, out_features=d, count=enc)),
            other_parameters=(dec_ffn + d) * dec + (enc_ffn + d) * enc))
        parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 2) * 2 * d, tp_sharded=False))
        r.note("BART-style weights: position tables (learned or sinusoidal, per family) are not counted")
        if enc:
            r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": dec_ffn, "qkv_width": 3 * d,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (EncoderDecoderParser,)
