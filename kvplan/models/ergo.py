"""Ergo (``ergo``, transformers 5.25 ErgoConfig): every ``global_attention_every_n_layers``-th layer attends to the
whole context, the others to the last ``sliding_window`` tokens; a dense ReLU^2 MLP in the first
``num_dense_blocks`` layers, then routed experts with a per-expert output norm and a shared expert.

Cache: ``layer_types`` when the config has it, else ErgoConfig's rule (layer i full when
``(i + 1) % global_attention_every_n_layers == 0``); GQA with head_dim = hidden_size // num_attention_heads
(ErgoAttention reads no ``head_dim`` key). Weights follow modeling_ergo.py: a fused qkv projection, per-head q/k
norms, four norms and two residual gates (a vector of hidden_size each) per layer, un-gated (up/down) MLPs and
experts, a float32 router with a correction bias, an untied lm_head.
"""

from __future__ import annotations

from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import mlp_types_moe
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts


class ErgoParser(ArchParser):
    """Ergo: sliding layers with a full one every ``global_attention_every_n_layers``; ReLU^2 MLPs, normed experts."""

    family = "ergo"
    model_types = ("ergo",)
    weight_types = ("ergo",)
    #: ErgoConfig defaults (transformers 5.25).
    defaults = {
        "vocab_size": 262144, "hidden_size": 8192, "num_hidden_layers": 64, "num_attention_heads": 64,
        "num_key_value_heads": 8, "first_dense_intermediate_size": 32768, "num_dense_blocks": 1,
        "moe_intermediate_size": 4096, "shared_intermediate_size": 8192, "num_experts": 256,
        "num_experts_per_tok": 8, "max_position_embeddings": 524288, "sliding_window": 512,
        "global_attention_every_n_layers": 4, "tie_word_embeddings": False,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        period = r.first_of("global_attention_every_n_layers", ("global_attention_every_n_layers",))
        r.note(f"no layer_types: ErgoConfig makes layer i full attention when (i + 1) % {period} == 0, the rest "
               f"sliding")
        return [SLIDING if (i + 1) % period else FULL for i in range(num_layers)]

    def sliding_window(self, r: ConfigReader) -> int:
        return r.first_of("sliding_window", ("sliding_window", "local_attention_window"))

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        hidden = hidden_of(r)
        value = hidden // heads
        r.note(f"head_dim = hidden_size // num_attention_heads = {hidden} // {heads} = {value} (ErgoAttention)")
        return value

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        qkv = (heads + 2 * kv_heads) * head_dim
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=qkv, count=layers),
            Matrix(in_features=heads * head_dim, out_features=hidden, count=layers)),
            other_parameters=2 * head_dim * layers))  # q_norm, k_norm
        if not r.has("mlp_layer_types"):
            r.note("no mlp_layer_types: ErgoConfig makes the first num_dense_blocks layers dense, the rest MoE")
        experts = r.first_of("num_experts", ("num_experts",))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("shared_intermediate_size", ("shared_intermediate_size",))
        dense_first = r.first_of("num_dense_blocks", ("num_dense_blocks",), kind="count")
        moe = mlp_types_moe(r, layers, experts=experts, top_k=top_k, expert_size=size, shared_size=shared) \
            if r.has("mlp_layer_types") else None
        moe_layers = moe.layers if moe else list(range(min(dense_first, layers), layers))
        n_moe, n_dense = len(moe_layers), layers - len(moe_layers)
        dense = r.first_of("first_dense_intermediate_size", ("first_dense_intermediate_size",))
        if n_dense:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=dense, count=n_dense),
                Matrix(in_features=dense, out_features=hidden, count=n_dense))))
        if n_moe:
            parts += experts_parts(hidden, size, experts, n_moe, gated=False, shared_size=shared, router_bias=True)
            # one output RMSNorm per expert and one on the shared expert
            parts.append(WeightPart(name="expert_norms", other_parameters=(experts + 1) * hidden * n_moe,
                                    tp_sharded=False))
            r.note(f"MoE: {experts} experts of intermediate size {size} in {n_moe} of {layers} layers, all resident; "
                   f"{top_k} routed per token")
        # input, post-attention, pre- and post-feedforward norms, two residual gates; the final norm
        parts.append(WeightPart(name="norms", other_parameters=(6 * layers + 1) * hidden, tp_sharded=False))
        width = max(dense if n_dense else 0, (top_k or 1) * size + shared if n_moe else 0)
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None,
                        {"hidden_size": hidden, "mlp_width": width, "qkv_width": qkv, "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (ErgoParser,)
