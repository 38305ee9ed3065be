"""Cohere: Command-R (``cohere``: Llama's cache, one LayerNorm per layer), Command-R7B / Command-A (``cohere2``),
which interleave sliding and global layers as Gemma 3 does, and Command-A MoE (``cohere2_moe``)."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout
from kvplan.models.gemma import Gemma3Parser
from kvplan.models.llama import LlamaParser


class CohereParser(LlamaParser):
    """Command-R (``cohere``): Llama's cache; one LayerNorm (weight only) per layer, attention and MLP in parallel
    on its output."""

    model_types = ("cohere",)
    weight_types = ("cohere",)
    defaults_by_type = {"cohere": {"tie_word_embeddings": True}}
    LAYOUTS = {"cohere": DecoderLayout(norms_per_layer=1)}
    WINDOWLESS = frozenset({"cohere"})


class Cohere2Parser(Gemma3Parser):
    """Command-R7B / Command-A: 3 sliding layers then 1 global (``sliding_window_pattern`` 4)."""

    family = "cohere2"
    model_types = ("cohere2",)
    weight_types = ("cohere2",)
    defaults = {"max_position_embeddings": 8192, "sliding_window": 4096, "sliding_window_pattern": 4}

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        """One LayerNorm (weight only) per layer: attention and MLP run in parallel on its output."""
        return DecoderLayout(norms_per_layer=1)


class Cohere2MoeParser(DecoderParser):
    """Command-A MoE (``cohere2_moe``, Cohere2MoeConfig in transformers 5.24): one weight-only LayerNorm per
    layer, dense MLPs of ``prefix_dense_intermediate_size`` (else ``intermediate_size``) where ``mlp_layer_types``
    says ``dense`` (default: the first ``first_k_dense_replace``, 0), else ``num_experts`` experts of
    ``intermediate_size`` and ``num_shared_experts`` shared ones.
    """

    family = "cohere2_moe"
    model_types = ("cohere2_moe",)
    weight_types = ("cohere2_moe",)
    defaults_by_type = {"cohere2_moe": {"tie_word_embeddings": True, "num_experts": 8, "num_shared_experts": 0,
                                       "first_k_dense_replace": 0}}

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(norms_per_layer=1)

    def dense_mlp_size(self, r: ConfigReader, model_type: str, intermediate: int) -> int:
        return r.optional("prefix_dense_intermediate_size", ("prefix_dense_intermediate_size",)) or intermediate

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if r.has("mlp_layer_types"):
            kinds = r.first_of("mlp_layer_types", ("mlp_layer_types",), kind="list")
            if len(kinds) < layers or not set(kinds[:layers]) <= {"dense", "sparse"}:
                raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must give dense or sparse per layer",
                                  f"one entry per layer ({layers})")
        else:
            first = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
            kinds = ["dense" if i < first else "sparse" for i in range(layers)]
        experts = r.first_of("num_experts", ("num_experts",))
        shared = r.first_of("num_shared_experts", ("num_shared_experts",), kind="count")
        return MoeLayout(layers=[i for i in range(layers) if kinds[i] == "sparse"], experts=experts, top_k=top_k,
                         expert_size=intermediate, shared_size=shared * intermediate or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (CohereParser, Cohere2Parser, Cohere2MoeParser)
