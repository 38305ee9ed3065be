"""Vision-language models whose language model attends to the image through cross-attention layers.

Llama 3.2 Vision (``mllama``): the text model's ``cross_attention_layers`` attend to the vision
encoder's output instead of to the text; every other layer is ordinary self-attention. A
cross-attention layer caches K/V of the image tokens, fixed by the image, not by the text length.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.arch.base import ArchParser, ConfigReader, layer_indices
from kvplan.errors import ConfigError
from kvplan.specs import LayerSpec


class MllamaParser(ArchParser):
    """Llama 3.2 Vision: self-attention layers plus cross-attention layers over the image tokens.

    One image is ``max_num_tiles`` tiles of ``(image_size // patch_size)^2`` patches plus a class
    token each (transformers ``MllamaVisionModel.num_patches``; vLLM's largest encoder input for one
    image): 4 x (40^2 + 1) = 6404 tokens for the released models.
    """

    family = "mllama"
    model_types = ("mllama_text_model", "mllama")
    #: MllamaTextConfig defaults.
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 131072, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
    }
    #: MllamaVisionConfig defaults.
    VISION_DEFAULTS: Mapping[str, Any] = {"image_size": 448, "patch_size": 14, "max_num_tiles": 4}

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        cross = self.cross_layers(r, num_layers)
        dims = self.attention_dims(r)
        self_attn, cross_attn = self.full_spec(dims), self.cross_spec(dims)
        r.note(
            f"layers {sorted(cross)} cross-attend to the image tokens (K/V fixed by the image, per image); "
            "the others are self-attention"
        )
        return [cross_attn if i in cross else self_attn for i in range(num_layers)]

    def cross_layers(self, r: ConfigReader, num_layers: int) -> frozenset[int]:
        key = "cross_attention_layers"
        if r.has(key):
            value = r.raw(key)
            source = r.where(key)
        else:
            value = self.defaults[key]
            source = f"default of {r.defaults_name}: {key}"
            r.note(f"{r.prefix}{key} is not in the config; using the {r.defaults_name} architecture default {value}")
        indices = layer_indices(r, key, value, num_layers)
        r.record("cross_attention_layers", sorted(indices), source)
        return indices

    def encoder_len(self, r: ConfigReader) -> int | None:
        vision = r.outer.get("vision_config")
        if vision is not None and not isinstance(vision, Mapping):
            raise ConfigError(f"{r.source_name}: vision_config must be an object", "fix the config")
        vision = vision or {}
        values: dict[str, int] = {}
        for key, default in self.VISION_DEFAULTS.items():
            raw = vision.get(key)
            if raw is None:
                values[key] = default
                r.note(f"vision_config.{key} is not in the config; using the mllama_vision_model default {default}")
                continue
            if isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
                raise ConfigError(
                    f"{r.source_name}: vision_config.{key} must be a positive integer, got {raw!r}",
                    f"fix the config or pass --set vision_config.{key}=VALUE",
                )
            values[key] = raw
        tiles, size, patch = values["max_num_tiles"], values["image_size"], values["patch_size"]
        per_tile = (size // patch) ** 2 + 1
        value = tiles * per_tile
        r.record(
            "encoder_len", value,
            "derived: vision_config.max_num_tiles * ((image_size // patch_size)^2 + 1 class token)",
        )
        r.note(
            f"cross-attention holds one image: {tiles} tiles x {per_tile} tokens ({size} // {patch} = {size // patch}; "
            f"{size // patch}^2 patches + 1 class token) = {value}; pass --encoder-len {value} x N for N images"
        )
        return value
