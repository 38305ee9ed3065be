"""Tencent Hunyuan: Hunyuan dense (``hunyuan_v1_dense``), Hunyuan-A13B (``hunyuan_v1_moe``) and Hy3 (``hy_v3``).

All keep Llama's GQA cache (the Llama rules read the v1 types'; the generic rules read ``hy_v3``'s) and count
GQA attention with per-head q/k RMSNorms; the MoE members add experts and a shared expert. HY-V4 (MLA,
hyper-connections) is DeepSeek-like and lives in deepseek.py.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import NO_MOE, DecoderLayout, MoeLayout
from kvplan.models.llama import LlamaParser


class HunyuanParser(LlamaParser):
    """``hunyuan_v1_dense`` (HunYuanDenseV1Config): Llama's layers with per-head q/k RMSNorms.
    ``hunyuan_v1_moe`` (HunYuanMoEV1Config): every layer's MLP is ``num_experts`` experts of
    ``intermediate_size`` plus a shared MLP of the same width, its router without bias.
    ``hy_v3`` (HYV3Config): dense or MoE per ``mlp_layer_types`` (default: a dense first layer), experts of
    ``moe_intermediate_size``, ``num_shared_experts`` shared experts, a router correction bias."""

    model_types = ("hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan", "hy_v3")
    weight_types = ("hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3")
    #: The config classes' defaults (transformers 5.24) of the keys the count reads.
    defaults_by_type = {
        "hunyuan_v1_moe": {"num_experts": 1, "moe_topk": 1, "tie_word_embeddings": False},
        "hy_v3": {"num_experts": 192, "num_experts_per_tok": 8, "num_shared_experts": 1, "moe_intermediate_size": 1536,
                  "tie_word_embeddings": False},
    }

    WINDOWLESS = frozenset({"hunyuan_v1_dense", "hunyuan_v1_moe"})

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, router_bias=model_type == "hy_v3")

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type == "hunyuan_v1_dense":
            return NO_MOE
        experts = r.first_of("num_experts", ("num_experts", "num_local_experts"), kind="any")
        if isinstance(experts, list) or isinstance(r.raw("moe_topk"), list):
            raise ConfigError(f"{r.source_name}: per-layer num_experts or moe_topk lists are not counted",
                              "transformers' HunYuanMoEV1Experts needs one num_experts for every layer too")
        experts = r.check("num_experts", experts, "int")
        if model_type == "hunyuan_v1_moe":
            top_k = r.first_of("num_experts_per_tok", ("moe_topk", "num_experts_per_tok"))
            return MoeLayout(layers=list(range(layers)), experts=experts, top_k=top_k, expert_size=intermediate,
                             shared_size=intermediate)
        if r.has("mlp_layer_types"):
            kinds = r.first_of("mlp_layer_types", ("mlp_layer_types",), kind="list")
            if len(kinds) < layers or not set(kinds[:layers]) <= {"dense", "sparse"}:
                raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must give dense or sparse per layer",
                                  f"one entry per layer ({layers})")
        else:
            r.note("mlp_layer_types is not in the config: HYV3Config's default, a dense first layer, MoE after it")
            kinds = ["dense"] * min(1, layers) + ["sparse"] * max(layers - 1, 0)
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("num_shared_experts", ("num_shared_experts",), kind="count")
        return MoeLayout(layers=[i for i in range(layers) if kinds[i] == "sparse"], experts=experts, top_k=top_k,
                         expert_size=size, shared_size=shared * size or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}
#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"hunyuan": "remote code (transformers has hunyuan_v1_dense and hunyuan_v1_moe): not counted"}

PARSERS: tuple[type[ArchParser], ...] = (HunyuanParser,)
