"""ViT (``vit``) as the encoder of a ``vision-encoder-decoder`` (TrOCR, Donut-style): weights only, no cache.

ViTModel (transformers, as ``AutoModel`` builds an encoder): a class token, learned positions for the
``(image_size // patch_size)^2 + 1`` tokens and a patch convolution with bias; per layer two LayerNorms, q/k/v
(biased by ``qkv_bias``), the attention output and the MLP (both biased); a final LayerNorm and the pooler
(a dense layer to ``pooler_output_size``, default the hidden size, with bias).
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, switch
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class VitParser(ArchParser):
    """A ViT image encoder, counted for the composite models that nest one; it caches nothing itself."""

    family = "vit"
    model_types = ()
    weight_types = ("vit",)
    #: ViTConfig defaults (transformers 5.24).
    defaults = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "image_size": 224,
                "patch_size": 16, "num_channels": 3, "qkv_bias": True}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        patch, channels = r.first_of("patch_size", ("patch_size",)), r.first_of("num_channels", ("num_channels",))
        tokens = (r.first_of("image_size", ("image_size",)) // patch) ** 2 + 1
        pooled = r.optional("pooler_output_size", ("pooler_output_size",)) or h
        qkv_bias = 3 * h if switch(r, "qkv_bias", True) else 0
        parts = [
            WeightPart(name="vision_tower", vision=True, matrices=(
                Matrix(in_features=channels * patch * patch, out_features=h),
                Matrix(in_features=h, out_features=h, count=4 * layers),
                Matrix(in_features=h, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=h, count=layers),
                Matrix(in_features=h, out_features=pooled)),
                # patch bias, class token, positions; per layer biases and two LayerNorms; final LayerNorm, pooler bias
                other_parameters=h + h + tokens * h + (qkv_bias + h + inner + h + 4 * h) * layers + 2 * h + pooled),
        ]
        r.note(f"ViT encoder ({layers} layers, {tokens} tokens per image) reported as weights.vision_*")
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h,
                                            "vocab_size": 0})

    def encoder_output_len(self, r: ConfigReader) -> int:
        """ViTModel's last hidden state: one token per patch of the ``image_size`` image (an int, or [height,
        width]) cut into ``patch_size`` squares, plus the class token (modeling_vit.py ViTEmbeddings)."""
        sizes = []
        for key in ("image_size", "patch_size"):
            value = r.first_of(key, (key,), kind="any")
            pair = [value, value] if not isinstance(value, list) else value
            if len(pair) != 2:
                raise ConfigError(f"{r.source_name}: {r.prefix}{key} must be an integer or [height, width], "
                                  f"got {value!r}"[:300], "fix the config or pass --set")
            sizes.append([r.check(key, v, "int") for v in pair])
        (height, width), (patch_h, patch_w) = sizes
        patches = (height // patch_h) * (width // patch_w)
        value = patches + 1
        r.record("encoder_len", value, f"derived: {r.prefix}(image_size // patch_size)^2 + 1 class token")
        r.note(f"cross-attention holds one image: ({height} // {patch_h}) x ({width} // {patch_w}) = {patches} patches "
               f"+ 1 class token = {value} encoder tokens ({r.prefix}image_size, {r.prefix}patch_size)")
        return value


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"vit": "an image encoder: it keeps no cache"}

PARSERS: tuple[type[ArchParser], ...] = (VitParser,)
