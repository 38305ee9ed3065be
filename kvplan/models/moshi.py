"""Moshi (Kyutai), its text decoder (``MoshiForCausalLM``): Llama-like layers whose gated MLP is one fused
``fc1`` of ``ffn_dim`` (gate and up halves) and an ``fc2`` from ``ffn_dim // 2``; the embedding has one extra
row. The audio depth decoder and the Mimi codec are not part of the text model. Its cache follows the
generic rules (``sliding_window`` over every layer)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, tied
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, gqa_attention


class MoshiParser(ArchParser):
    family = "moshi"
    model_types = ("moshi",)
    weight_types = model_types
    #: MoshiConfig's defaults of the keys weight counting reads.
    defaults = {"tie_word_embeddings": False}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads, head_dim = self.kv_heads(r, heads), self.head_dim(r, heads)
        ffn = r.first_of("intermediate_size", ("ffn_dim",))
        vocab = r.first_of("vocab_size", ("vocab_size",))
        r.note("Moshi: the text decoder (MoshiForCausalLM) is counted; the depth decoder and the audio codec are not")
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=h, out_features=vocab + 1),))]
        if not tied(r):
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=h, out_features=vocab),)))
        parts += [
            WeightPart(name="attention", matrices=tuple(gqa_attention(h, heads, kv_heads, head_dim, layers))),
            WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=ffn, count=layers),
                                             Matrix(in_features=ffn // 2, out_features=h, count=layers))),
            WeightPart(name="norms", other_parameters=(2 * layers + 1) * h, tp_sharded=False),
        ]
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": ffn, "qkv_width": (heads + 2 * kv_heads)
                                            * head_dim, "vocab_size": vocab})


PARSERS: tuple[type[ArchParser], ...] = (MoshiParser,)
