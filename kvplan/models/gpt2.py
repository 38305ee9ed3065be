"""The GPT-2 lineage: GPT-2, GPT-J, GPT-Neo(X), CodeGen, OPT, BLOOM, BigCode (SantaCoder/StarCoder) and
StarCoder2 -- LayerNorms with bias, non-gated MLPs, learned or rotary positions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.decoder import classic_decoder
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, gqa_attention

#: The classic decoders counted as GPT-2's block with differences (their transformers modeling files):
#: :func:`classic_decoder`'s arguments; :meth:`Gpt2Parser.classic_weights` adds what they cannot say.
CLASSICS: dict[str, dict[str, Any]] = {
    # GPT-Neo: q/k/v without bias, out_proj and the MLP with; learned positions
    "gpt_neo": {"inner_aliases": ("intermediate_size",), "bias": False, "mlp_bias": True,
                "positions": ("max_position_embeddings",)},
    # GPT-NeoX-Japanese: fused q/k/v and MLP without biases; rotary positions
    "gpt_neox_japanese": {"inner_aliases": (), "bias": False, "mlp_bias": False},
    # BioGPT: BART's decoder layer without cross-attention; learned positions offset by 2
    "biogpt": {"inner_aliases": ("intermediate_size",), "positions": ("max_position_embeddings",),
               "position_offset": 2},
    # GPT-1: post-norm blocks, learned positions, no final LayerNorm
    "openai-gpt": {"inner_aliases": (), "positions": ("n_positions",)},
    # CTRL: sinusoidal positions (not kept), MLP width dff
    "ctrl": {"inner_aliases": ("dff",)},
}

#: GPT-J's block: CodeGen keeps it (its q/k/v fused in one projection of the same size).
GPTJ_LIKE = ("gptj", "codegen")


class Gpt2Parser(ArchParser):
    family = "gpt2"
    model_types = ("gpt2", "gptj", "gpt_neo", "codegen", "gpt_neox", "gpt_neox_japanese", "opt", "bloom",
                   "starcoder2", "biogpt", "openai-gpt", "ctrl")
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "gpt2": {"n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "tie_word_embeddings": True},
        "gptj": {"n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16, "tie_word_embeddings": False},
        "gpt_neox": {"max_position_embeddings": 2048, "hidden_size": 6144, "num_hidden_layers": 44,
                     "num_attention_heads": 64, "tie_word_embeddings": False},
        "opt": {"max_position_embeddings": 2048, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12, "tie_word_embeddings": True},
        "bloom": {"tie_word_embeddings": True},
        #: Starcoder2Config defaults of the keys weight counting reads.
        "starcoder2": {"tie_word_embeddings": True, "use_bias": True},
        # the config classes of the other classics (transformers 5.24): the keys weight counting reads
        "gpt_neo": {"tie_word_embeddings": True}, "biogpt": {"tie_word_embeddings": True},
        "gpt_neox_japanese": {"tie_word_embeddings": True, "intermediate_multiple_size": 4},
        "openai-gpt": {"tie_word_embeddings": True, "n_positions": 512},
        "ctrl": {"tie_word_embeddings": True},
    }
    weight_types = ("gpt2", "gptj", "codegen", "gpt_neox", "opt", "bloom", "starcoder2", *CLASSICS)
    #: Where each family keeps its MLP width (4 x hidden when absent).
    _INNER: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "gpt2": ("n_inner",), "gptj": ("n_inner",), "codegen": ("n_inner",), "gpt_neox": ("intermediate_size",), "opt": ("ffn_dim",), "bloom": (),
    }

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        if model_type == "starcoder2":
            return self.starcoder2_weights(r)
        if model_type in CLASSICS:
            return self.classic_weights(r, model_type)
        # GPT-J and CodeGen: one LayerNorm per layer (parallel attention and MLP), no attention biases, an
        # lm_head bias;
        # BLOOM: a LayerNorm on the word embeddings; GPT-2 and OPT: learned positions (OPT's offset by 2).
        return classic_decoder(
            r, model_type, inner_aliases=self._INNER[model_type], bias=model_type not in GPTJ_LIKE, mlp_bias=True,
            norms_per_layer=1 if model_type in GPTJ_LIKE else 2, lm_head_bias=model_type in GPTJ_LIKE,
            embedding_norm=model_type == "bloom",
            positions={"gpt2": ("n_positions",), "opt": ("max_position_embeddings",)}.get(model_type, ()),
            position_offset=2 if model_type == "opt" else 0,
        )

    def classic_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """A :data:`CLASSICS` member: GPT-2's block as :func:`classic_decoder` reads it, then the member's own
        differences: GPT-Neo's bias on out_proj only; GPT-NeoX-Japanese's single ``dense_bias`` (last layer) and
        MLP of ``intermediate_multiple_size`` x hidden; GPT-1's missing final LayerNorm; CTRL's lm_head bias."""
        inner = None
        if model_type == "gpt_neox_japanese":
            multiple = r.first_of("intermediate_multiple_size", ("intermediate_multiple_size",))
            inner = hidden_of(r) * multiple
            r.note(f"MLP width is intermediate_multiple_size x hidden_size = {inner}")
        counted = classic_decoder(r, model_type, inner=inner, **CLASSICS[model_type])
        hidden, layers = counted.hidden_size, r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layer",
                                                                                 "num_layers"))
        extra = {"gpt_neo": ("attention", hidden * layers), "gpt_neox_japanese": ("attention", hidden),
                 "openai-gpt": ("norms", -2 * hidden), "ctrl": ("norms", vocab_of(r))}.get(model_type)
        parts = counted.parts
        if extra:
            name, value = extra
            parts = [replace(p, other_parameters=p.other_parameters + value) if p.name == name else p
                     for p in parts]
        return replace(counted, parts=parts)

    def starcoder2_weights(self, r: ConfigReader) -> WeightCount:
        """StarCoder2: GQA attention and a c_fc/c_proj MLP, with biases (use_bias), LayerNorms with bias."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = hidden // heads
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        bias = switch(r, "use_bias", True)
        q, kv = heads * head_dim, kv_heads * head_dim
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, layers)),
                                other_parameters=(q + 2 * kv + hidden) * layers if bias else 0))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=inner, count=layers),
            Matrix(in_features=inner, out_features=hidden, count=layers)),
            other_parameters=(inner + hidden) * layers if bias else 0))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * 2 * hidden, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": q + 2 * kv,
                                           "vocab_size": vocab_of(r)})


class GptBigCodeParser(ArchParser):
    family = "gpt_bigcode"
    model_types = ("gpt_bigcode",)
    defaults = {"n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "multi_query": True}
    defaults_by_type = {"gpt_bigcode": {"tie_word_embeddings": True}}
    weight_types = ("gpt_bigcode",)

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.flag("multi_query", True):
            r.record("num_kv_heads", 1, r.where("multi_query"))
            return 1
        r.record("num_kv_heads", heads, "derived: multi_query is false, so num_kv_heads = num_attention_heads")
        return heads

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        # multi-query: one K and one V head of head_dim unless multi_query is false
        multi_query = r.raw("multi_query") is not False
        return classic_decoder(r, model_type, inner_aliases=("n_inner",),
                               kv_width=(lambda hidden, head_dim: head_dim) if multi_query else None,
                               positions=("n_positions",))


PARSERS: tuple[type[ArchParser], ...] = (Gpt2Parser, GptBigCodeParser)
