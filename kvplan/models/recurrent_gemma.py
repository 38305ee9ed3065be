"""Google RecurrentGemma (Griffin): ``block_types`` repeated over the layers, ``recurrent`` (RG-LRU) or
``attention`` (local attention over ``attention_window_size`` tokens, ``num_key_value_heads`` heads of
``hidden_size // num_attention_heads``).

A recurrent layer keeps a temporal-conv state of ``conv1d_width - 1`` inputs of ``lru_width`` channels
(model dtype) and the RG-LRU state of ``lru_width`` values in float32 (transformers
``RecurrentGemmaRecurrentBlock``). transformers holds both on the module rather than in the Cache object,
so a measurement of the Cache alone sees only the attention layers; the memory is the same.

Weights (transformers RecurrentGemma): recurrent layers hold biased x/y/out projections to and from ``lru_width``,
a temporal convolution with bias, the RG-LRU's recurrent parameter and block-diagonal input and recurrent gates
(``num_attention_heads`` blocks); attention layers GQA with a biased o_proj; every layer a biased GeGLU MLP of
``intermediate_size // 2`` and two RMSNorms; the embedding is tied.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import SLIDING, STATE, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


class RecurrentGemmaParser(ArchParser):
    """block_types: RG-LRU state (conv + float32 recurrent) or local attention over attention_window_size."""

    family = "recurrent_gemma"
    model_types = ("recurrent_gemma",)
    #: RecurrentGemmaConfig defaults (``lru_width`` None means ``hidden_size``; ``num_key_value_heads`` None
    #: means ``num_attention_heads``).
    defaults = {"num_hidden_layers": 26, "hidden_size": 2560, "num_attention_heads": 10, "attention_window_size": 2048,
                "conv1d_width": 4, "block_types": ["recurrent", "recurrent", "attention"], "vocab_size": 256000,
                "intermediate_size": 3 * 2560, "tie_word_embeddings": True}
    weight_types = ("recurrent_gemma",)
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ()
    MAX_CONTEXT = ()

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        blocks = r.first_of("block_types", ("block_types",), kind="list")
        if not blocks or any(b not in ("recurrent", "attention") for b in blocks):
            raise ConfigError(f"{r.source_name}: {r.prefix}block_types must list 'recurrent' or 'attention' blocks",
                              "e.g. [\"recurrent\", \"recurrent\", \"attention\"]")
        r.note(f"block_types {blocks} repeat over the {num_layers} layers; attention layers are local "
               "(attention_window_size)")
        return [SLIDING if blocks[i % len(blocks)] == "attention" else STATE for i in range(num_layers)]

    def sliding_window(self, r: ConfigReader) -> int:
        return r.first_of("sliding_window", ("attention_window_size",))

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        width = r.optional("lru_width", ("lru_width",))
        if width is None:
            width = r.first_of("hidden_size", ("hidden_size",))
            r.note(f"lru_width is not set: the RecurrentGemma default is hidden_size = {width}")
        conv = r.first_of("conv1d_width", ("conv1d_width",))
        return StateSpec(mixer="rg_lru", shapes=(("conv", (conv - 1, width)), ("rnn", (width,))), fp32_tensors=("rnn",))


    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        n_rec = self.layer_kinds(r, layers).count(STATE)
        n_attn = layers - n_rec
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = r.first_of("head_dim", ("head_dim",), required=False, use_defaults=False) or hidden // heads
        width = r.optional("lru_width", ("lru_width",)) or hidden
        conv = r.first_of("conv1d_width", ("conv1d_width",))
        q, kv = heads * head_dim, kv_heads * head_dim
        attention = [Matrix(in_features=hidden, out_features=q, count=n_attn),
                     Matrix(in_features=hidden, out_features=kv, count=2 * n_attn),
                     Matrix(in_features=q, out_features=hidden, count=n_attn),
                     Matrix(in_features=hidden, out_features=width, count=2 * n_rec),  # linear_x, linear_y
                     Matrix(in_features=width, out_features=hidden, count=n_rec)]  # linear_out
        other = hidden * n_attn + ((q + 2 * kv) * n_attn if r.raw("attention_bias") is True else 0)
        # x/y/out biases, conv kernel + bias, recurrent_param, the two block-diagonal gates with biases
        other += (2 * width + hidden + width * conv + width + width + 2 * (width * width // heads + width)) * n_rec
        inner = r.first_of("intermediate_size", ("intermediate_size",)) // 2
        parts = embeddings(r, hidden)
        parts += [WeightPart(name="attention", matrices=tuple(attention), other_parameters=other),
                  WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                                                   Matrix(in_features=inner, out_features=hidden, count=layers)),
                             other_parameters=(2 * inner + hidden) * layers),
                  WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False)]
        r.note(f"RecurrentGemma: {n_rec} RG-LRU and {n_attn} local-attention layers; MLP width intermediate_size // 2 "
               f"= {inner}")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": q + 2 * kv,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (RecurrentGemmaParser,)
