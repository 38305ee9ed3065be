"""Gemma 1, 2, 3 and 3n: Gemma 2 alternates local and global layers, Gemma 3 runs five local to one
global, Gemma 3n adds KV sharing across its last layers."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser
from kvplan.specs import LayerSpec, NoCacheSpec


class GemmaParser(DecoderParser):
    family = "gemma"
    model_types = ("gemma",)
    defaults = {
        "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
        "head_dim": 256, "max_position_embeddings": 8192,
    }
    defaults_by_type = {"gemma": {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 24576}}
    weight_types = ("gemma",)


class Gemma2Parser(DecoderParser):
    """Gemma 2: even layers (0, 2, ...) slide, odd layers are global."""

    family = "gemma2"
    model_types = ("gemma2",)
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096,
    }
    defaults_by_type = {"gemma2": {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 9216}}
    weight_types = ("gemma2",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(norms_per_layer=4)  # pre- and post-norms around attention and MLP

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("gemma2 alternates attention: layer i slides when (i + 1) % 2 != 0 (even layers)")
        return [SLIDING if (i + 1) % 2 else FULL for i in range(num_layers)]


class Gemma3Parser(DecoderParser):
    """Gemma 3: ``sliding_window_pattern`` (default 6) -> 5 local layers then 1 global."""

    family = "gemma3"
    model_types = ("gemma3_text", "gemma3")
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
        "sliding_window_pattern": 6,
    }
    defaults_by_type = {"gemma3_text": {"tie_word_embeddings": True, "vocab_size": 262208, "intermediate_size": 9216,
                                        "head_dim": 256}}
    weight_types = ("gemma3_text",)

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(qk_norm=True, norms_per_layer=4)

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        pattern = r.first_of("sliding_window_pattern", ["sliding_window_pattern", "_sliding_window_pattern"])
        r.note(f"layer i is global when (i + 1) % {pattern} == 0, else sliding ({pattern - 1} local : 1 global)")
        return [SLIDING if (i + 1) % pattern else FULL for i in range(num_layers)]


class Gemma3nParser(ArchParser):
    """Gemma 3n: 4 local layers then 1 global; the last ``num_kv_shared_layers`` layers reuse earlier K/V.

    Gemma3nTextConfig builds ``layer_types`` as layer i global when (i + 1) % 5 == 0. Layers from
    ``num_hidden_layers - num_kv_shared_layers`` on read the cache of the last earlier layer of the
    same type and store none of their own (vLLM ``kv_sharing_target_layer_name``; transformers
    DynamicCache drops them: ``layer_types[:-num_kv_shared_layers]``).
    """

    family = "gemma3n"
    model_types = ("gemma3n_text", "gemma3n")
    #: Gemma3nTextConfig defaults.
    defaults = {
        "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 256, "max_position_embeddings": 32768, "sliding_window": 512, "num_kv_shared_layers": 15,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("no layer_types: gemma3n makes layer i global when (i + 1) % 5 == 0, else sliding (4 local : 1 global)")
        return [SLIDING if (i + 1) % 5 else FULL for i in range(num_layers)]

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        specs = super().build_layers(r)
        raw = r.raw("num_kv_shared_layers")
        shared = 0 if raw == 0 else r.first_of("num_kv_shared_layers", ["num_kv_shared_layers"])
        if shared >= len(specs):
            raise ConfigError(
                f"{r.source_name}: {r.prefix}num_kv_shared_layers = {shared} leaves no layer with its own cache "
                f"({len(specs)} layers)",
                "num_kv_shared_layers must be below num_hidden_layers",
            )
        if shared:
            first = len(specs) - shared
            r.note(
                f"num_kv_shared_layers = {shared}: layers {first}-{len(specs) - 1} reuse the K/V of earlier layers "
                "and cache nothing of their own"
            )
            specs[first:] = [NoCacheSpec(reason="reuses the K/V cache of an earlier layer (num_kv_shared_layers)")] * shared
        return specs


PARSERS: tuple[type[ArchParser], ...] = (GemmaParser, Gemma2Parser, Gemma3Parser, Gemma3nParser)
