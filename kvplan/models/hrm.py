"""HRM-Text (``hrm_text``, transformers 5.25 HrmTextConfig): a hierarchical recurrent language model. Two stacks of
``num_layers_per_stack`` decoder layers (a low-level ``L_module`` and a high-level ``H_module``) are run in cycles
(``H_cycles`` x (``L_cycles`` + 1) attention calls per layer), each call with a cache slot of its own: the saved
``num_hidden_layers`` is that inflated count, which the generic rules read.

Weights follow modeling_hrm_text.py: per layer MHA q/k/v/o and a sigmoid output gate (hidden -> heads x head_dim),
biased by ``attention_bias``, a gated MLP biased by ``mlp_bias``, RMSNorms without weights; the learned initial
low-level state ``z_L_init``; an embedding and an untied lm_head.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class HrmTextParser(ArchParser):
    """HRM-Text's weights: two stacks of gated-attention layers and the initial low-level state."""

    family = "hrm"
    model_types = ()
    weight_types = ("hrm_text",)
    #: HrmTextConfig defaults (transformers 5.25) of the keys the count reads.
    defaults = {"vocab_size": 151808, "hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 16,
                "num_attention_heads": 12, "head_dim": 128, "attention_bias": False, "mlp_bias": False,
                "tie_word_embeddings": False}
    #: The two stacks: L_module and H_module.
    STACKS = 2

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        per_stack = r.optional("num_layers_per_stack", ("num_layers_per_stack",))
        if per_stack is None:
            per_stack = r.first_of("num_hidden_layers", ("num_hidden_layers",))
            r.note("num_layers_per_stack is not in the config: HrmTextConfig takes num_hidden_layers as the layers "
                   f"of each stack ({per_stack})")
        layers = self.STACKS * per_stack
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        width = heads * self.head_dim(r, heads)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        attention_bias = (4 * width + hidden) * layers if switch(r, "attention_bias", False) else 0
        mlp_bias = (2 * inner + hidden) * layers if switch(r, "mlp_bias", False) else 0
        parts = embeddings(r, hidden)
        parts += [
            WeightPart(name="attention", matrices=(
                Matrix(in_features=hidden, out_features=width, count=4 * layers),  # q, k, v, gate
                Matrix(in_features=width, out_features=hidden, count=layers)), other_parameters=attention_bias),
            WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                                             Matrix(in_features=inner, out_features=hidden, count=layers)),
                       other_parameters=mlp_bias),
            WeightPart(name="norms", other_parameters=hidden, tp_sharded=False),  # z_L_init (its norms: no weight)
        ]
        r.note(f"HRM: two stacks (L and H) of {per_stack} layers with an output gate each; RMSNorms without weights")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": 3 * width,
                                            "vocab_size": vocab_of(r)})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"hrm_text": "MHA in every cache slot (num_hidden_layers counts them): the generic rules read it"}

PARSERS: tuple[type[ArchParser], ...] = (HrmTextParser,)
