"""Gemma 1, 2, 3 and 3n: Gemma 2 alternates local and global layers, Gemma 3 runs five local to one
global, Gemma 3n adds KV sharing across its last layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, SLIDING, ArchParser, ConfigReader
from kvplan.models.decoder import DecoderLayout, DecoderParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, embeddings, hidden_of, vocab_of
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
        "vocab_size": 262400, "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256,
        "intermediate_size": 16384, "altup_num_inputs": 4, "laurel_rank": 64, "tie_word_embeddings": True,
    }
    weight_types = ("gemma3n_text",)

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

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Gemma 3n's text model (transformers Gemma3nTextModel): per-layer input embeddings and their
        projections, AltUp (``altup_num_inputs`` streams) and LAuReL blocks, q/k norms, five RMSNorms per
        layer; the KV-sharing layers hold no k/v projections."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        raw = r.raw("num_kv_shared_layers")
        shared = 0 if raw == 0 else r.first_of("num_kv_shared_layers", ["num_kv_shared_layers"])
        own_kv = layers - shared
        per_layer = r.first_of("hidden_size_per_layer_input", ("hidden_size_per_layer_input",))
        per_layer_vocab = r.first_of("vocab_size_per_layer_input", ("vocab_size_per_layer_input",))
        streams = r.first_of("altup_num_inputs", ("altup_num_inputs",))
        rank = r.first_of("laurel_rank", ("laurel_rank",))
        sizes = r.raw("intermediate_size")
        if isinstance(sizes, list):
            if len(sizes) != layers:
                raise ConfigError(f"{r.source_name}: {r.prefix}intermediate_size has {len(sizes)} entries for "
                                  f"{layers} layers", "make intermediate_size one width per layer, or one number")
            sizes = [r.check("intermediate_size", size, "int") for size in sizes]
        else:
            sizes = [r.first_of("intermediate_size", ("intermediate_size",))] * layers
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="per_layer_embeddings", matrices=(
            Matrix(in_features=per_layer_vocab, out_features=layers * per_layer),  # embed_tokens_per_layer
            Matrix(in_features=hidden, out_features=layers * per_layer),  # per_layer_model_projection
            Matrix(in_features=hidden, out_features=per_layer, count=layers),  # per_layer_input_gate
            Matrix(in_features=per_layer, out_features=hidden, count=layers)),  # per_layer_projection
            other_parameters=per_layer))
        q, kv = heads * head_dim, kv_heads * head_dim
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=q, count=layers),
            Matrix(in_features=hidden, out_features=kv, count=2 * own_kv),
            Matrix(in_features=q, out_features=hidden, count=layers)),
            other_parameters=head_dim * (layers + own_kv)))  # q_norm everywhere, k_norm with own K/V
        parts.append(WeightPart(name="mlp", matrices=tuple(
            m for size in sizes for m in (Matrix(in_features=hidden, out_features=size, count=2),
                                          Matrix(in_features=size, out_features=hidden)))))
        # AltUp: stream projections in and out; per layer the router, its norm, the prediction and correction
        # coefficients and the output scale. LAuReL: a rank-``laurel_rank`` residual and its norm.
        parts.append(WeightPart(name="altup_laurel", matrices=(
            Matrix(in_features=hidden, out_features=hidden, count=2 * (streams - 1)),
            Matrix(in_features=hidden, out_features=streams, count=layers),
            Matrix(in_features=hidden, out_features=rank, count=layers),
            Matrix(in_features=rank, out_features=hidden, count=layers)),
            other_parameters=(streams ** 3 + streams ** 2 + 2 * hidden) * layers + hidden * layers))
        parts.append(WeightPart(name="norms", other_parameters=(5 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"Gemma 3n: {own_kv} layers with their own K/V projections, {shared} sharing them")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": max(sizes),
                                            "qkv_width": q + 2 * kv, "vocab_size": vocab_of(r)})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        r.note("the vision (timm MobileNetV5) and audio towers of gemma3n are not counted: the config names them "
               "by architecture only")
        return []


PARSERS: tuple[type[ArchParser], ...] = (GemmaParser, Gemma2Parser, Gemma3Parser, Gemma3nParser)
