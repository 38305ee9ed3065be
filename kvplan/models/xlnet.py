"""XLNet (``xlnet``, transformers XLNetConfig): a Transformer-XL-style stack with two-stream relative attention; its
cache (``mems``) is read by the generic rules (``n_layer``, ``n_head``, ``d_model``).

Weights follow modeling_xlnet.py (XLNetLMHeadModel): the word embedding and a mask embedding; per layer the q, k, v,
o and relative-position r projections (``d_model`` x ``n_head`` x ``d_head`` each, no biases), the r_r, r_s and r_w
biases and the segment embedding (two rows) of ``n_head`` x ``d_head``, a LayerNorm, the feed-forward (layer_1 and
layer_2 with biases, a LayerNorm); the LM head's bias (its weight is the word embedding's when tied).
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, tied
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class XlnetParser(ArchParser):
    """XLNet's weights."""

    family = "xlnet"
    model_types = ()
    weight_types = ("xlnet",)
    #: XLNetConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 32000, "d_model": 1024, "n_layer": 24, "n_head": 16, "d_inner": 4096,
                "tie_word_embeddings": True}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        d = r.first_of("hidden_size", ("d_model", "hidden_size"))
        layers = r.first_of("num_hidden_layers", ("n_layer", "num_hidden_layers"))
        heads = r.first_of("num_attention_heads", ("n_head", "num_attention_heads"))
        head_dim = r.optional("head_dim", ("d_head",))
        if head_dim is None:
            head_dim = d // heads
            r.note(f"d_head is not in the config: XLNetConfig's d_model // n_head = {head_dim}")
        inner = r.first_of("intermediate_size", ("d_inner", "intermediate_size"))
        vocab = r.first_of("vocab_size", ("vocab_size", "n_token"))
        width = heads * head_dim
        parts = [
            WeightPart(name="embed_tokens", matrices=(Matrix(in_features=d, out_features=vocab),), other_parameters=d),
            # q, k, v, o, r; the r_r, r_s, r_w biases and two segment-embedding rows per layer
            WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=width, count=5 * layers),),
                       other_parameters=(3 + 2) * width * layers),
            WeightPart(name="mlp", matrices=(Matrix(in_features=d, out_features=inner, count=layers),
                                             Matrix(in_features=inner, out_features=d, count=layers)),
                       other_parameters=(inner + d) * layers),
            WeightPart(name="norms", other_parameters=2 * 2 * d * layers, tp_sharded=False),
            WeightPart(name="lm_head", matrices=() if tied(r) else (Matrix(in_features=d, out_features=vocab),),
                       other_parameters=vocab),
        ]
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": inner, "qkv_width": 3 * width,
                                            "vocab_size": vocab})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"xlnet": "MHA in every layer (n_layer, n_head, d_model): the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (XlnetParser,)
