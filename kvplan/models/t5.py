"""Google T5 (and mT5, UMT5, LongT5, Switch): ``d_kv`` head dim, relative position buckets, an encoder and a decoder."""

from __future__ import annotations

from kvplan.models.bart import EncoderDecoderParser
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


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
    #: The config classes' defaults of the keys weight counting reads.
    defaults_by_type = {
        "t5": {"tie_word_embeddings": True, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32},
        "mt5": {"tie_word_embeddings": False, "feed_forward_proj": "gated-gelu", "relative_attention_num_buckets": 32},
        "umt5": {"tie_word_embeddings": True, "feed_forward_proj": "gated-gelu", "relative_attention_num_buckets": 32},
        "longt5": {"tie_word_embeddings": True, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32,
                   "encoder_attention_type": "local"},
        "switch_transformers": {"tie_word_embeddings": True, "feed_forward_proj": "relu",
                                "relative_attention_num_buckets": 32, "num_experts": 8, "num_sparse_encoder_layers": 3,
                                "num_sparse_decoder_layers": 3, "router_bias": False},
    }
    weight_types = ("t5", "mt5", "umt5", "longt5", "switch_transformers")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        r.record("num_kv_heads", heads, "derived: T5 attention is multi-head, num_kv_heads = num_heads")
        return heads

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """T5 family: encoder and decoder stacks (decoder layers add cross-attention), bias-free projections,
        RMS LayerNorms, one shared embedding; relative position buckets in the first self-attention of each
        stack (UMT5: in every self-attention; LongT5 transient-global adds a global bucket table and a norm per
        encoder layer); Switch Transformers swap some layers' MLP for experts."""
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
        gated = proj.startswith("gated") and model_type != "switch_transformers"
        buckets = r.first_of("relative_attention_num_buckets", ("relative_attention_num_buckets",)) * heads
        inner = heads * d_kv
        attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
        bias_tables = enc + dec if model_type == "umt5" else 2
        norms = (2 * enc + 3 * dec + 2) * d_model
        if model_type == "longt5" and r.first_of("encoder_attention_type", ("encoder_attention_type",),
                                                  kind="str") == "transient-global":
            bias_tables += 1  # global_relative_attention_bias in the first encoder layer
            norms += enc * d_model  # global_input_layer_norm in every encoder layer
        parts = embeddings(r, d_model)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=d_model, out_features=inner, count=3 * attn_blocks),
            Matrix(in_features=inner, out_features=d_model, count=attn_blocks)),
            other_parameters=bias_tables * buckets))
        sparse = switch_sparse_layers(r, enc, dec) if model_type == "switch_transformers" else (0, 0)
        dense = enc + dec - sum(sparse)
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=d_model, out_features=d_ff, count=(2 if gated else 1) * dense),
            Matrix(in_features=d_ff, out_features=d_model, count=dense))))
        experts = top_k = None
        if sum(sparse):
            experts, n = r.first_of("num_experts", ("num_experts",)), sum(sparse)
            top_k = 1
            parts.append(WeightPart(name="experts", matrices=(
                Matrix(in_features=d_model, out_features=d_ff, count=experts * n),
                Matrix(in_features=d_ff, out_features=d_model, count=experts * n))))
            parts.append(WeightPart(name="router", matrices=(Matrix(in_features=d_model, out_features=experts, count=n),),
                                    other_parameters=experts * n if switch(r, "router_bias", False) else 0,
                                    tp_sharded=False))
            r.note(f"Switch MoE: {experts} experts in {sparse[0]} encoder and {sparse[1]} decoder layers, all resident; "
                   "1 routed per token")
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, experts, top_k, {"hidden_size": d_model, "mlp_width": d_ff * (2 if gated else 1),
                                                "qkv_width": 3 * inner, "vocab_size": vocab_of(r)})


def switch_sparse_layers(r: ConfigReader, enc: int, dec: int) -> tuple[int, int]:
    """Switch Transformers' MoE layers per stack, as SwitchTransformersConfig places them: step = layers //
    ``num_sparse_*_layers`` (layers when 0), layer i sparse when step is 1 or i % step == 1. A saved
    ``*_sparse_step`` (transformers 5 writes it) wins: the class sets it from its keyword arguments after
    deriving it."""
    counts = []
    for stack, layers in (("encoder", enc), ("decoder", dec)):
        step_key = f"{stack}_sparse_step"
        if r.has(step_key):
            step = r.first_of(step_key, (step_key,), kind="count")
        else:
            key = f"num_sparse_{stack}_layers"
            n = r.first_of(key, (key,), kind="count")
            step = layers // n if n else layers
        counts.append(sum(1 for i in range(layers) if step > 0 and (step == 1 or i % step == 1)))
    return counts[0], counts[1]


PARSERS: tuple[type[ArchParser], ...] = (T5Parser,)
