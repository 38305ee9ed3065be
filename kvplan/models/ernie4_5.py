"""Baidu ERNIE 4.5: the dense and MoE language models (``ernie4_5``, ``ernie4_5_moe``), which keep Llama's cache
and layers (MoE between ``moe_layer_start_index`` and ``moe_layer_end_index``), and the language model of
ERNIE 4.5 VL (``ernie4_5_vl_moe_text``), whose MoE layers hold a text and a vision expert group.
ERNIE 1-3 (``ernie``) are BERT-style encoders read in bert.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import DecoderLayout, MoeLayout
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention


class Ernie45Parser(LlamaParser):
    """ERNIE 4.5 (``ernie4_5``, ``ernie4_5_moe``): Llama's cache and layers; the MoE members' experts in every
    ``moe_layer_interval``-th layer of a range, with shared experts and a router correction bias."""

    model_types = ("ernie4_5", "ernie4_5_moe")
    weight_types = ("ernie4_5", "ernie4_5_moe")
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    # ERNIE 4.5 MoE: a router correction bias (``moe_statics``) per MoE layer
    LAYOUTS = {"ernie4_5_moe": DecoderLayout(router_bias=True)}
    WINDOWLESS = frozenset({"ernie4_5", "ernie4_5_moe"})

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        return ernie_moe(r, layers) if model_type == "ernie4_5_moe" else super().moe_layout(
            r, model_type, layers, intermediate, top_k)


def ernie_moe(r: ConfigReader, layers: int) -> MoeLayout:
    """ERNIE 4.5: ``moe_num_experts`` experts of ``moe_intermediate_size`` in every ``moe_layer_interval``-th
    layer from ``moe_layer_start_index`` to ``moe_layer_end_index`` (inclusive), plus
    ``moe_num_shared_experts`` shared experts of the same size."""
    experts = r.first_of("num_experts", ("moe_num_experts",))
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    interval = r.optional("moe_layer_interval", ("moe_layer_interval",)) or 1
    start = r.first_of("moe_layer_start_index", ("moe_layer_start_index",), required=False, kind="count") or 0
    end = r.optional("moe_layer_end_index", ("moe_layer_end_index",))
    end = layers - 1 if end is None or end < 0 else end
    moe = [i for i in range(layers) if (i + 1) % interval == 0 and start <= i <= end]
    shared = r.first_of("moe_num_shared_experts", ("moe_num_shared_experts",), required=False, kind="count")
    top_k = r.optional("num_experts_per_tok", ("moe_k",))
    return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=size, shared_size=shared * size if shared else None)



class Ernie45VLMoeTextParser(ArchParser):
    """ERNIE 4.5 VL MoE's language model (``ernie4_5_vl_moe_text``): GQA, and per ``mlp_layer_types`` a dense
    MLP of ``intermediate_size`` or two expert groups (text experts of ``moe_intermediate_size[0]``, vision
    experts of ``[1]``, each ``moe_num_experts`` with a router and a correction bias) beside
    ``moe_num_shared_experts`` shared experts of the text size fused into one MLP."""

    family = "ernie4_5"
    model_types = ("ernie4_5_vl_moe_text",)
    weight_types = ("ernie4_5_vl_moe_text",)
    #: Ernie4_5_VLMoeTextConfig's defaults (transformers 5.24) of the keys weight counting reads.
    defaults_by_type = {"ernie4_5_vl_moe_text": {
        "vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
        "num_attention_heads": 20, "num_key_value_heads": 4, "tie_word_embeddings": True, "use_bias": False,
        "moe_intermediate_size": [1536, 512], "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2}}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        if r.flag("use_bias", False):
            raise ConfigError(f"{r.source_name}: {r.prefix}use_bias = true: kvplan counts ERNIE 4.5 VL without biases",
                              "pass --weights-bytes SIZE (the checkpoint's size)")
        types = r.first_of("mlp_layer_types", ("mlp_layer_types",), required=False, kind="list")
        if types is None:
            types = ["dense"] + ["sparse"] * (layers - 1)
            r.note("mlp_layer_types is not in the config; the ernie4_5_vl_moe_text default: layer 0 dense, the rest MoE")
        if len(types) != layers:
            raise ConfigError(f"{r.source_name}: mlp_layer_types has {len(types)} entries for {layers} layers",
                              "fix the config")
        n_moe = types.count("sparse")
        n_dense = layers - n_moe
        sizes = r.first_of("moe_intermediate_size", ("moe_intermediate_size",), kind="list")
        if len(sizes) != 2 or not all(isinstance(x, int) and x > 0 for x in sizes):
            raise ConfigError(f"{r.source_name}: moe_intermediate_size must be [text, vision] sizes, got {sizes!r}",
                              "fix the config")
        experts = r.first_of("num_experts", ("moe_num_experts",))
        top_k = r.first_of("num_experts_per_tok", ("moe_k",))
        shared = r.first_of("moe_num_shared_experts", ("moe_num_shared_experts",), kind="count")
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        intermediate = r.first_of("intermediate_size", ("intermediate_size",))
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, layers))))
        if n_dense:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=2 * n_dense),
                Matrix(in_features=intermediate, out_features=hidden, count=n_dense))))
        if n_moe:
            for size, share in ((sizes[0], shared * sizes[0]), (sizes[1], 0)):
                parts += experts_parts(hidden, size, experts, n_moe, shared_size=share or None, router_bias=True)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"ERNIE 4.5 VL: {n_moe} MoE layers of {experts} text and {experts} vision experts (all resident)")
        shape = {"hidden_size": hidden, "mlp_width": max(top_k * sizes[0] + shared * sizes[0], intermediate),
                 "qkv_width": (heads + 2 * kv_heads) * head_dim, "vocab_size": vocab_of(r)}
        return count_of(parts, experts if n_moe else None, top_k if n_moe else None, shape)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (Ernie45Parser, Ernie45VLMoeTextParser)
