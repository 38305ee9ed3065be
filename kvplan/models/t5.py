"""Google T5 (and mT5, UMT5, LongT5, Switch): ``d_kv`` head dim, relative position buckets, an encoder and a decoder."""

from __future__ import annotations

from kvplan.models.bart import EncoderDecoderParser
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, embeddings, hidden_of, vocab_of


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
    #: T5Config / MT5Config defaults of the keys weight counting reads.
    defaults_by_type = {
        "t5": {"tie_word_embeddings": True, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32},
        "mt5": {"tie_word_embeddings": False, "feed_forward_proj": "gated-gelu", "relative_attention_num_buckets": 32},
    }
    weight_types = ("t5", "mt5")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        r.record("num_kv_heads", heads, "derived: T5 attention is multi-head, num_kv_heads = num_heads")
        return heads

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """T5 family: encoder and decoder stacks (decoder layers add cross-attention), bias-free projections,
        RMS LayerNorms, relative position buckets in the first layer of each stack, one shared embedding."""
        d_model = hidden_of(r)
        heads = r.first_of("num_attention_heads", ("num_heads",))
        d_kv = r.first_of("head_dim", ("d_kv",))
        d_ff = r.first_of("intermediate_size", ("d_ff",))
        enc = r.first_of("num_encoder_layers", ("num_layers",))
        dec = r.optional("num_decoder_layers", ("num_decoder_layers",)) or enc
        proj = r.raw("feed_forward_proj")
        if not isinstance(proj, str):
            proj = str(r.defaults.get("feed_forward_proj", "relu"))
            r.note(f"feed_forward_proj is not in the config; the {r.defaults_name} default is {proj}")
        gated = proj.startswith("gated")
        buckets = r.optional("relative_attention_num_buckets", ("relative_attention_num_buckets",)) or 32
        inner = heads * d_kv
        attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
        parts = embeddings(r, d_model)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=d_model, out_features=inner, count=3 * attn_blocks),
            Matrix(in_features=inner, out_features=d_model, count=attn_blocks)),
            other_parameters=2 * buckets * heads))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=d_model, out_features=d_ff, count=(2 if gated else 1) * (enc + dec)),
            Matrix(in_features=d_ff, out_features=d_model, count=enc + dec))))
        parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 2) * d_model, tp_sharded=False))
        r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, None, None, {"hidden_size": d_model, "mlp_width": d_ff * (2 if gated else 1),
                                            "qkv_width": 3 * inner, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (T5Parser,)
