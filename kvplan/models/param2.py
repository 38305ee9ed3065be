"""Param-2 MoE (``param2moe``, transformers 5.25 Param2MoeConfig, built as Glm4MoeForCausalLM): GLM-4.5's layers
and Llama's GQA cache with Param2MoeConfig's defaults (``head_dim`` 64, per-head q/k norms on, tied embeddings,
one dense first layer, 64 routed and 2 shared experts); ``num_mtp_layers`` prediction layers are not in the
checkpoints."""

from __future__ import annotations

from kvplan.models.base import ArchParser
from kvplan.models.glm import Glm4MoeParser


class Param2MoeParser(Glm4MoeParser):
    """Param-2 MoE: GLM-4.5's MoE decoder (Glm4MoeForCausalLM) with its own config defaults."""

    family = "param2moe"
    model_types = ("param2moe",)
    weight_types = ("param2moe",)
    #: Param2MoeConfig defaults (transformers 5.25), with Glm4MoeConfig's ``first_k_dense_replace``.
    defaults_by_type = {"param2moe": {
        "vocab_size": 128000, "hidden_size": 2048, "intermediate_size": 9216, "num_hidden_layers": 21,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 32768,
        "tie_word_embeddings": True, "moe_intermediate_size": 2048, "num_experts_per_tok": 6,
        "n_shared_experts": 2, "n_routed_experts": 64, "first_k_dense_replace": 1, "use_qk_norm": True,
        "attention_bias": False,
    }}


PARSERS: tuple[type[ArchParser], ...] = (Param2MoeParser,)
