"""XLM (``xlm``, Facebook's cross-lingual LM): a post-norm stack of multi-head attention and a GELU MLP with
learned positions and language embeddings, named ``emb_dim`` / ``n_heads`` / ``n_layers``.

XLMWithLMHeadModel generates with a cache (transformers modeling_xlm.py): every layer keeps K and V of all
``n_heads`` heads of ``emb_dim // n_heads``. Its ``prepare_inputs_for_generation`` appends ``mask_token_id`` to
each step's input and the model predicts that masked slot, so the cache holds one token more than the text. The
causal-LM checkpoints (``causal: true``, xlm-clm-*) are real decoders; the masked-LM ones (``causal: false``,
the config class's default) still generate through the same cache, with bidirectional attention over the prompt.
vLLM, SGLang, TensorRT-LLM and llama.cpp do not run XLM; kvplan prices its plain layers for them.
"""

from __future__ import annotations

from typing import ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, switch, tied
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import LayerSpec

#: The XLM head that generates; the others (sequence classification, QA, ...) run the encoder once.
GENERATING_ARCHITECTURE = "XLMWithLMHeadModel"


class XlmParser(ArchParser):
    family = "xlm"
    model_types = ("xlm",)
    weight_types = model_types
    #: XLMConfig's defaults (transformers 5.25) of the keys the cache and the weight count read.
    defaults = {"emb_dim": 2048, "n_layers": 12, "n_heads": 16, "max_position_embeddings": 512, "vocab_size": 30145,
                "n_langs": 1, "use_lang_emb": True, "asm": False, "tie_word_embeddings": True}
    sliding_window_applies = False
    LAYERS: ClassVar[tuple[str, ...]] = ("n_layers", "num_hidden_layers")
    HEADS: ClassVar[tuple[str, ...]] = ("n_heads", "num_attention_heads")
    HIDDEN: ClassVar[tuple[str, ...]] = ("emb_dim", "hidden_size")
    KV_HEADS: ClassVar[tuple[str, ...]] = ()
    HEAD_DIM: ClassVar[tuple[str, ...]] = ()

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        archs = r.outer.get("architectures") or r.raw("architectures")
        arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
        causal = r.raw("causal") is True
        if arch not in (None, GENERATING_ARCHITECTURE) and not causal:
            raise ConfigError(
                f"{r.source_name}: model_type 'xlm' with architecture {arch} is an encoder (causal is not true); "
                "it keeps no KV cache",
                f"kvplan sizes the cache of {GENERATING_ARCHITECTURE}, the XLM head that generates: pass its config",
            )
        layers = super().build_layers(r)
        mask = r.raw("mask_token_id")
        r.record("hf_added_tokens", 1, f"derived: {GENERATING_ARCHITECTURE}.prepare_inputs_for_generation appends "
                                       "mask_token_id to every step's input")
        r.note(f"XLM generates by predicting a mask token ({GENERATING_ARCHITECTURE}.prepare_inputs_for_generation, "
               f"transformers modeling_xlm.py, appends mask_token_id{f' = {mask}' if isinstance(mask, int) else ''}): "
               "the transformers engines (hf-dynamic, hf-static) cache 1 more token than the text; vLLM, SGLang, "
               "TensorRT-LLM and llama.cpp do not run XLM")
        if not causal:
            r.note("causal is not true (a masked-LM checkpoint, XLMConfig's default): transformers still generates "
                   "through the cache, but the prompt's K/V were computed with bidirectional attention")
        return layers

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """XLMWithLMHeadModel: word and position embeddings (language embeddings when ``n_langs`` > 1 and
        ``use_lang_emb``), the embedding LayerNorm; per layer q/k/v/out (biased), a LayerNorm, the MLP of
        ``4 * emb_dim`` (biased) and a LayerNorm; the prediction layer's bias over the vocabulary, its weight tied
        to the embeddings unless ``tie_word_embeddings`` is false."""
        dim = r.first_of("hidden_size", self.HIDDEN)
        layers = self.num_layers(r)
        vocab = r.first_of("vocab_size", ("vocab_size", "n_words"))
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        if switch(r, "asm", False):
            raise ConfigError(f"{r.source_name}: asm is true: kvplan does not count XLM's adaptive-softmax head",
                              "pass --weights-bytes SIZE (the checkpoint's size)")
        langs = r.first_of("n_langs", ("n_langs",))
        lang_rows = langs if langs > 1 and switch(r, "use_lang_emb", True) else 0
        inner = 4 * dim  # XLMModel: hidden_dim = emb_dim * 4
        parts = [
            WeightPart(name="embed_tokens", matrices=(Matrix(in_features=dim, out_features=vocab),)),
            WeightPart(name="position_embeddings", other_parameters=(positions + lang_rows) * dim),
            WeightPart(name="attention", matrices=(Matrix(in_features=dim, out_features=dim, count=4 * layers),),
                       other_parameters=4 * dim * layers),
            WeightPart(name="mlp", matrices=(Matrix(in_features=dim, out_features=inner, count=layers),
                                             Matrix(in_features=inner, out_features=dim, count=layers)),
                       other_parameters=(inner + dim) * layers),
            WeightPart(name="norms", other_parameters=2 * dim * (2 * layers + 1), tp_sharded=False),
            WeightPart(name="lm_head", other_parameters=vocab,
                       matrices=() if tied(r) else (Matrix(in_features=dim, out_features=vocab),)),
        ]
        return count_of(parts, None, None, {"hidden_size": dim, "mlp_width": inner, "qkv_width": 3 * dim,
                                            "vocab_size": vocab})

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        r.record("num_kv_heads", heads, "derived: XLM's MultiHeadAttention keeps K/V of every one of n_heads heads")
        return heads


PARSERS: tuple[type[ArchParser], ...] = (XlmParser,)
