"""XLM (``xlm``, transformers XLMConfig): a post-norm BERT-style stack that transformers can run causally (its cache
is read by the generic rules: ``n_layers``, ``n_heads``, ``emb_dim``).

Weights follow modeling_xlm.py (XLMWithLMHeadModel): learned positions, language embeddings when ``n_langs`` > 1 and
``use_lang_emb``, the word embedding and a LayerNorm over them; per layer q/k/v/o with biases, a LayerNorm, an FFN of
4 x ``emb_dim`` with biases, a LayerNorm; the prediction layer's projection (tied to the word embedding by default)
and its bias.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, switch, tied
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class XlmParser(ArchParser):
    """XLM's weights; an adaptive-softmax prediction layer (``asm``) is refused."""

    family = "xlm"
    model_types = ()
    weight_types = ("xlm",)
    #: XLMConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 30145, "emb_dim": 2048, "n_layers": 12, "n_heads": 16, "n_langs": 1,
                "use_lang_emb": True, "max_position_embeddings": 512, "asm": False, "tie_word_embeddings": True}
    #: The FFN width is this many times ``emb_dim`` (XLMModel.hidden_dim).
    FFN_RATIO = 4

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        if switch(r, "asm", False):
            raise ConfigError(f"{r.source_name}: asm = true (an adaptive-softmax prediction layer) is not a layout "
                              "kvplan counts", "pass --weights-bytes SIZE")
        dim = r.first_of("hidden_size", ("emb_dim", "hidden_size"))
        vocab = r.first_of("vocab_size", ("n_words", "vocab_size"))
        layers = r.first_of("num_hidden_layers", ("n_layers", "num_hidden_layers"))
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        langs = r.first_of("n_langs", ("n_langs",))
        lang_rows = langs if langs > 1 and switch(r, "use_lang_emb", True) else 0
        ffn = self.FFN_RATIO * dim
        parts = [
            WeightPart(name="embed_tokens", matrices=(Matrix(in_features=dim, out_features=vocab),)),
            WeightPart(name="position_embeddings", other_parameters=(positions + lang_rows) * dim),
            WeightPart(name="attention", matrices=(Matrix(in_features=dim, out_features=dim, count=4 * layers),),
                       other_parameters=4 * dim * layers),
            WeightPart(name="mlp", matrices=(Matrix(in_features=dim, out_features=ffn, count=layers),
                                             Matrix(in_features=ffn, out_features=dim, count=layers)),
                       other_parameters=(ffn + dim) * layers),
            # the embedding LayerNorm, two per layer (weights and biases)
            WeightPart(name="norms", other_parameters=2 * dim * (1 + 2 * layers), tp_sharded=False),
            # pred_layer.proj: its weight is the word embedding's when tied, its bias its own
            WeightPart(name="lm_head", matrices=() if tied(r) else (Matrix(in_features=dim, out_features=vocab),),
                       other_parameters=vocab),
        ]
        return count_of(parts, None, None, {"hidden_size": dim, "mlp_width": ffn, "qkv_width": 3 * dim,
                                            "vocab_size": vocab})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"xlm": "MHA in every layer (n_layers, n_heads, emb_dim): the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (XlmParser,)
