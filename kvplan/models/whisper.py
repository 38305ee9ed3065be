"""OpenAI Whisper: a convolutional audio encoder and a text decoder with cross-attention."""

from __future__ import annotations

from kvplan.models.bart import EncoderDecoderParser
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class WhisperParser(EncoderDecoderParser):
    family = "whisper"
    model_types = ("whisper",)
    defaults = {"max_source_positions": 1500, "max_target_positions": 448}
    #: WhisperConfig defaults of the keys weight counting reads.
    defaults_by_type = {"whisper": {"tie_word_embeddings": True, "num_mel_bins": 80, "max_source_positions": 1500,
                                    "max_target_positions": 448}}
    weight_types = ("whisper",)
    MAX_CONTEXT = ("max_target_positions",)
    ENCODER_LEN = ("max_source_positions",)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Whisper: conv front end and learned positions, encoder and decoder layers (q, v, o with bias; k
        without), LayerNorms with bias, decoder cross-attention, proj_out tied to the token embedding.
        ``WhisperForCausalLM`` holds the decoder alone (its layers keep their cross-attention weights)."""
        d = hidden_of(r)
        enc = r.first_of("encoder_layers", ("encoder_layers",)) if self.has_encoder(r) else 0
        dec = r.first_of("decoder_layers", ("decoder_layers",))
        enc_ffn = r.first_of("encoder_ffn_dim", ("encoder_ffn_dim",)) if enc else 0
        dec_ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim",))
        tgt = r.first_of("max_target_positions", ("max_target_positions",))
        attn_blocks = enc + 2 * dec
        parts = embeddings(r, d)
        src = r.first_of("max_source_positions", ("max_source_positions",)) if enc else 0
        parts.append(WeightPart(name="position_embeddings", other_parameters=(src + tgt) * d))
        if enc:
            mels = r.first_of("num_mel_bins", ("num_mel_bins",))
            parts.append(WeightPart(name="conv", other_parameters=mels * d * 3 + d + d * d * 3 + d))
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=d, count=4 * attn_blocks),),
                                other_parameters=3 * d * attn_blocks))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=d, out_features=enc_ffn, count=enc), Matrix(in_features=enc_ffn, out_features=d, count=enc),
            Matrix(in_features=d, out_features=dec_ffn, count=dec), Matrix(in_features=dec_ffn, out_features=d, count=dec)),
            other_parameters=(enc_ffn + d) * enc + (dec_ffn + d) * dec))
        parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 1 + (1 if enc else 0)) * 2 * d,
                                tp_sharded=False))
        if enc:
            r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, None, None,
                        {"hidden_size": d, "mlp_width": dec_ffn, "qkv_width": 3 * d, "vocab_size": vocab_of(r)})

PARSERS: tuple[type[ArchParser], ...] = (WhisperParser,)
