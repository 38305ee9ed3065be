"""AllenAI OLMo: OLMo 1, 2 and 3 (``olmo``, ``olmo2``, ``olmo3``), OLMoE and FlexOlmo (``olmoe``, ``flex_olmo``): Llama's
cache and layers, with q/k norms over all heads from OLMo 2 on. OLMo-Hybrid (gated DeltaNet layers) is read in
deltanet.py.
"""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, MoeLayout, every_layer_moe
from kvplan.models.llama import LlamaParser


class OlmoParser(LlamaParser):
    """OLMo 1: LayerNorms without learned weights. OLMo 2/3 and OLMoE: q/k RMSNorms over all heads; OLMo 2/3 norm
    after attention and MLP instead of before. OLMoE and FlexOlmo: ``num_experts`` experts of
    ``intermediate_size`` in every layer (FlexOlmo with OLMo 2's norms)."""

    model_types = ("olmo", "olmo2", "olmo3", "olmoe", "flex_olmo")
    weight_types = ("olmo", "olmo2", "olmo3", "olmoe", "flex_olmo")
    defaults_by_type = {"olmo2": {"tie_word_embeddings": False},
                        "flex_olmo": {"tie_word_embeddings": False, "num_experts": 7}}
    LAYOUTS = {"olmo": DecoderLayout(norm_weights=False),
               "olmo2": DecoderLayout(qk_norm_whole=True), "olmo3": DecoderLayout(qk_norm_whole=True),
               "olmoe": DecoderLayout(qk_norm_whole=True), "flex_olmo": DecoderLayout(qk_norm_whole=True)}
    #: OLMo 3 has a sliding window; the others' config classes have none.
    WINDOWLESS = frozenset({"olmo", "olmo2", "olmoe"})

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        if model_type in ("olmoe", "flex_olmo"):
            return every_layer_moe(r, layers, intermediate, top_k)
        return super().moe_layout(r, model_type, layers, intermediate, top_k)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (OlmoParser,)
