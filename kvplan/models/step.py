"""StepFun Step-3.7-Flash: GQA with per-head q/k norms and a head-wise output gate, sliding and full
layers, fine-grained MoE with a shared expert after ``first_k_dense_replace`` dense layers.

Cache: ``layer_types`` (Step3p7TextConfig: all ``full_attention`` when absent; legacy Hub lists padded with
``num_nextn_predict_layers`` MTP entries are cut to the layers), ``sliding_window`` for the sliding layers, the
same ``num_key_value_heads`` x ``head_dim`` in both kinds (``num_sliding_attention_heads`` are query heads only).
This module also counts the language model's weights (transformers Step3p7 text model).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, layer_indices
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout
from kvplan.models.tensors import Matrix


class Step3p7Parser(DecoderParser):
    """``step3p5`` is the model_type Step3p7TextConfig saves in a step3p7 config's text_config (transformers 5.25
    registers it so, and the vision config as ``step3p5_vision``)."""

    model_types = ("step3p7", "step3p7_text", "step3p5")
    #: Step3p7TextConfig defaults of the keys weight counting reads.
    defaults_by_type = {t: {"tie_word_embeddings": False, "share_expert_dim": 1280} for t in ("step3p7", "step3p5")}
    weight_types = ("step3p7", "step3p5")

    def kinds_from_layer_types(self, r: ConfigReader, types: Any, num_layers: int, *, key: str = "layer_types"
                               ) -> list[str]:
        mtp = r.raw("num_nextn_predict_layers")
        if isinstance(types, list) and isinstance(mtp, int) and mtp > 0 and len(types) == num_layers + mtp:
            r.note(f"{key} lists {len(types)} entries: the last {mtp} are the MTP layers' (num_nextn_predict_layers), "
                   "not cached at inference")
            types = types[:num_layers]
        return super().kinds_from_layer_types(r, types, num_layers, key=key)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, router_bias=True)  # the router's correction bias (use_moe_router_bias)

    def attention_weights(
        self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
    ) -> tuple[list[Matrix], int, int]:
        attention, other, width = super().attention_weights(r, model_type, hidden, layers, heads)
        attention.append(Matrix(in_features=hidden, out_features=heads, count=layers))  # g_proj: one gate per head
        return attention, other, width

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        experts = r.first_of("num_experts", ("num_experts", "n_routed_experts", "moe_num_experts"))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        enum = r.raw("moe_layers_enum")
        kinds = r.raw("mlp_layer_types")
        if isinstance(kinds, list):  # transformers 5's form ("sparse" / "dense"; legacy lists padded with MTP layers)
            r.check("mlp_layer_types", kinds, "list")
            if len(kinds) < layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types has {len(kinds)} entries for {layers} "
                                  "layers", "one 'sparse' or 'dense' per layer")
            moe = [i for i in range(layers) if kinds[i] == "sparse"]
        elif isinstance(enum, (str, list)):
            items = [i.strip() for i in enum.split(",") if i.strip()] if isinstance(enum, str) else enum
            if isinstance(enum, str) and not all(i.isdigit() and len(i) < 7 for i in items):
                raise ConfigError(f"{r.source_name}: {r.prefix}moe_layers_enum must be comma-separated layer "
                                  f"indices, got {enum!r}"[:300], "fix the config")
            moe = sorted(layer_indices(r, "moe_layers_enum", [int(i) if isinstance(i, str) else i for i in items],
                                       layers))
        elif r.has("first_k_dense_replace"):
            first_dense = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
            moe = list(range(first_dense, layers))
        else:
            r.note("no mlp_layer_types, moe_layers_enum or first_k_dense_replace: Step3p7TextConfig makes layers 3 "
                   "and up MoE")
            moe = list(range(min(3, layers), layers))
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), required=False, kind="count")
        if shared is None:  # not a Step3p7TextConfig key: Step3p7SparseMoeBlock always holds one shared expert
            shared = 1
            r.note("n_shared_experts is not in the config: Step3p7SparseMoeBlock holds one shared expert of "
                   "share_expert_dim")
        shared_size = shared * r.first_of("share_expert_dim", ("share_expert_dim",)) if shared else None
        return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=size, shared_size=shared_size)


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"step3p7_text": "not counted under this name: a step3p7 config's weights are counted under step3p7"}

PARSERS: tuple[type[ArchParser], ...] = (Step3p7Parser,)
