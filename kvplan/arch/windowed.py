"""Families that interleave local (sliding or chunked) and global attention layers."""

from __future__ import annotations

from kvplan.arch.base import CHUNKED, FULL, SLIDING, ArchParser, ConfigReader
from kvplan.errors import ConfigError
from kvplan.specs import LayerSpec, NoCacheSpec


class Gemma2Parser(ArchParser):
    """Gemma 2: even layers (0, 2, ...) slide, odd layers are global."""

    family = "gemma2"
    model_types = ("gemma2",)
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("gemma2 alternates attention: layer i slides when (i + 1) % 2 != 0 (even layers)")
        return [SLIDING if (i + 1) % 2 else FULL for i in range(num_layers)]


class Gemma3Parser(ArchParser):
    """Gemma 3: ``sliding_window_pattern`` (default 6) -> 5 local layers then 1 global."""

    family = "gemma3"
    model_types = ("gemma3_text", "gemma3")
    defaults = {
        "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
        "sliding_window_pattern": 6,
    }

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


class Cohere2Parser(Gemma3Parser):
    """Command-R7B / Command-A: 3 sliding layers then 1 global (``sliding_window_pattern`` 4)."""

    family = "cohere2"
    model_types = ("cohere2",)
    defaults = {"max_position_embeddings": 8192, "sliding_window": 4096, "sliding_window_pattern": 4}


class GptOssParser(ArchParser):
    """gpt-oss: ``layer_types`` when present, else alternating (even layers slide, window 128)."""

    family = "gpt_oss"
    model_types = ("gpt_oss",)
    defaults = {
        "num_hidden_layers": 36, "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 64, "sliding_window": 128, "max_position_embeddings": 131072,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("no layer_types: gpt-oss alternates, even layers slide")
        return [SLIDING if (i + 1) % 2 else FULL for i in range(num_layers)]


class Llama4Parser(ArchParser):
    """Llama 4: RoPE layers use chunked local attention (chunk ``attention_chunk_size``), NoPE layers are global."""

    family = "llama4"
    model_types = ("llama4_text", "llama4")
    defaults = {
        "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 4096 * 32, "no_rope_layer_interval": 4,
    }

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.has("attention_chunk_size"):
            r.note("attention_chunk_size is not set: every layer is full attention")
            return [FULL] * num_layers
        if r.has("no_rope_layers"):
            flags = r.check("no_rope_layers", r.raw("no_rope_layers"), "list")
            if len(flags) != num_layers:
                raise ConfigError(
                    f"{r.source_name}: no_rope_layers has {len(flags)} entries for {num_layers} layers",
                    "make no_rope_layers one 0/1 entry per layer",
                )
            r.record("layer_types", "no_rope_layers", r.where("no_rope_layers"))
            r.note("layers with no_rope_layers[i] = 1 (RoPE) use chunked attention; NoPE layers are global")
        else:
            interval = r.first_of("no_rope_layer_interval", ["no_rope_layer_interval"])
            flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
            r.note(f"layer i is global (NoPE) when (i + 1) % {interval} == 0, else chunked local attention")
        return [CHUNKED if flag else FULL for flag in flags]


class Exaone4Parser(ArchParser):
    """EXAONE 4.0: ``layer_types`` when present, else ``sliding_window_pattern`` (default 4: 3 local, 1 global).

    Exaone4Config builds ``layer_types`` from an integer pattern: layer i is global when
    (i + 1) % pattern == 0; a null ``sliding_window`` means no local layers. A string pattern
    ("LLLG") is documented there but not expanded by its code, so kvplan asks for ``layer_types``.
    """

    family = "exaone4"
    model_types = ("exaone4",)
    #: Exaone4Config defaults.
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 2048, "sliding_window": 4096, "sliding_window_pattern": 4,
    }

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
