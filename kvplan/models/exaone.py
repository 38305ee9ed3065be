"""LG EXAONE: EXAONE 3.x (``exaone``: Llama's cache and layers), EXAONE 4.0 and 4.5's language model (``exaone4``,
``exaone4_5_text``), which interleave sliding and global layers, and K-EXAONE (``exaone_moe``)."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser, MoeLayout, mlp_types_moe
from kvplan.models.llama import LlamaParser


class ExaoneParser(LlamaParser):
    """EXAONE 3.x (``exaone``): Llama's cache and layers."""

    model_types = ("exaone",)
    weight_types = ("exaone",)
    WINDOWLESS = frozenset({"exaone"})


class Exaone4Parser(DecoderParser):
    """EXAONE 4.0: ``layer_types`` when present, else ``sliding_window_pattern`` (default 4: 3 local, 1 global).

    Exaone4Config builds ``layer_types`` from an integer pattern: layer i is global when
    (i + 1) % pattern == 0; a null ``sliding_window`` means no local layers. A string pattern
    ("LLLG") is documented there but not expanded by its code, so kvplan asks for ``layer_types``.
    """

    family = "exaone4"
    #: ``exaone4_5_text``: EXAONE 4.5's language model as first released; Exaone4_5_Config reads it as ``exaone4``
    #: (transformers 5.25 configuration_exaone4_5.py).
    model_types = ("exaone4", "exaone4_5_text")
    #: Exaone4Config defaults.
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 2048, "sliding_window": 4096, "sliding_window_pattern": 4,
        "vocab_size": 102400, "intermediate_size": 16384, "tie_word_embeddings": False,
    }
    weight_types = ("exaone4", "exaone4_5_text")

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        """Per-head q/k RMSNorms; the two norms per layer come after attention and after the MLP."""
        return DecoderLayout(qk_norm=True)

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if "sliding_window" in r.config and r.config["sliding_window"] is None:
            r.note("sliding_window is null: every layer is full attention")
            return [FULL] * num_layers
        if isinstance(r.raw("sliding_window_pattern"), str):
            raise ConfigError(
                f"{r.source_name}: sliding_window_pattern is the string {r.raw('sliding_window_pattern')!r} and the "
                "config has no layer_types",
                'add layer_types (one "sliding_attention" or "full_attention" per layer) or an integer '
                "sliding_window_pattern",
            )
        period = r.first_of("sliding_window_pattern", ["sliding_window_pattern"])
        r.note(f"layer i is global when (i + 1) % {period} == 0, else sliding ({period - 1} local : 1 global)")
        return [SLIDING if (i + 1) % period else FULL for i in range(num_layers)]


class ExaoneMoeParser(DecoderParser):
    """K-EXAONE (``exaone_moe``, ExaoneMoeConfig in transformers 5.24): EXAONE 4.0's attention (per-head q/k
    norms, no biases), dense MLPs in the first ``first_k_dense_replace`` layers (or per ``mlp_layer_types``), then
    ``num_experts`` experts of ``moe_intermediate_size``, ``num_shared_experts`` shared ones and a router
    correction bias."""

    family = "exaone_moe"
    model_types = ("exaone_moe",)
    weight_types = ("exaone_moe",)
    defaults_by_type = {"exaone_moe": {"tie_word_embeddings": False, "first_k_dense_replace": 1, "num_experts": 64,
                                       "moe_intermediate_size": 1024, "num_shared_experts": 1}}

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, router_bias=True)

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("num_shared_experts", ("num_shared_experts",), kind="count")
        return mlp_types_moe(r, layers, experts=r.first_of("num_experts", ("num_experts",)), top_k=top_k,
                             expert_size=size, shared_size=shared * size or None)


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ: dict[str, str] = {}

PARSERS: tuple[type[ArchParser], ...] = (ExaoneParser, Exaone4Parser, ExaoneMoeParser)
