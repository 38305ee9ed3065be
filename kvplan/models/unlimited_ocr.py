"""Unlimited-OCR's text model (``unlimited_ocr_text``): GQA attention and a DeepSeek-MoE MLP (routed experts,
shared experts of ``n_shared_experts`` x ``moe_intermediate_size``, a bias-free router) in the layers
``mlp_layer_types`` marks ``sparse``. Its cache (reference-sliding layers) is read by the generic rules; this
parser counts weights (transformers 5.24 modeling_unlimited_ocr.py, UnlimitedOcrTextConfig's defaults)."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.decoder import DecoderParser, MoeLayout, mlp_types_moe


class UnlimitedOcrTextParser(DecoderParser):
    family = "unlimited_ocr"
    model_types = ("unlimited_ocr_text",)
    weight_types = ("unlimited_ocr_text",)
    defaults_by_type = {"unlimited_ocr_text": {
        "vocab_size": 129280, "hidden_size": 1280, "intermediate_size": 6848, "num_hidden_layers": 12,
        "num_attention_heads": 10, "num_key_value_heads": 10, "tie_word_embeddings": False, "n_routed_experts": 64,
        "n_shared_experts": 2, "num_experts_per_tok": 6, "moe_intermediate_size": 896, "first_k_dense_replace": 1}}

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
        return mlp_types_moe(r, layers, experts=r.first_of("n_routed_experts", ("n_routed_experts",)), top_k=top_k,
                             expert_size=size, shared_size=shared * size or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (UnlimitedOcrTextParser,)
