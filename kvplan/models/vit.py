"""ViT (``vit``) and DeiT (``deit``) as the encoder of a ``vision-encoder-decoder`` (TrOCR, Donut-style): weights
and the encoder length, no cache of their own.

ViTModel (transformers, as ``AutoModel`` builds an encoder): a class token, learned positions for the
``(image_size // patch_size)^2 + 1`` tokens and a patch convolution with bias; per layer two LayerNorms, q/k/v
(biased by ``qkv_bias``), the attention output and the MLP (both biased); a final LayerNorm and the pooler
(a dense layer to ``pooler_output_size``, default the hidden size, with bias). DeiTModel is the same with a
distillation token beside the class token (modeling_deit.py DeiTEmbeddings): two tokens ahead of the patches.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, switch
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of

#: Tokens ahead of the patches: the class token (ViT), and DeiT's distillation token.
LEADING_TOKENS = {"vit": ("class",), "deit": ("class", "distillation")}


def _pair(r: ConfigReader, key: str) -> tuple[int, int]:
    """``image_size`` or ``patch_size``: an int, or [height, width] (as ViTEmbeddings accepts both)."""
    value = r.first_of(key, (key,), kind="any")
    pair = [value, value] if not isinstance(value, list) else value
    if len(pair) != 2:
        raise ConfigError(f"{r.source_name}: {r.prefix}{key} must be an integer or [height, width], got {value!r}"[:300],
                          "fix the config or pass --set")
    return r.check(key, pair[0], "int"), r.check(key, pair[1], "int")


class VitParser(ArchParser):
    """A ViT-style image encoder, counted for the composite models that nest one; it caches nothing itself."""

    family = "vit"
    model_types = ()
    weight_types = tuple(LEADING_TOKENS)
    #: ViTConfig defaults (transformers 5.25; DeiTConfig has the same).
    defaults = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "image_size": 224,
                "patch_size": 16, "num_channels": 3, "qkv_bias": True}

    @staticmethod
    def _tokens(r: ConfigReader) -> tuple[int, int, tuple[str, ...]]:
        """(patches, patches + leading tokens, the leading tokens' names)."""
        (height, width), (patch_h, patch_w) = _pair(r, "image_size"), _pair(r, "patch_size")
        leading = LEADING_TOKENS.get(str(r.raw("model_type")), LEADING_TOKENS["vit"])
        patches = (height // patch_h) * (width // patch_w)
        return patches, patches + len(leading), leading

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        patch_h, patch_w = _pair(r, "patch_size")
        channels = r.first_of("num_channels", ("num_channels",))
        _patches, tokens, leading = self._tokens(r)
        pooled = r.optional("pooler_output_size", ("pooler_output_size",)) or h
        qkv_bias = 3 * h if switch(r, "qkv_bias", True) else 0
        parts = [
            WeightPart(name="vision_tower", vision=True, matrices=(
                Matrix(in_features=channels * patch_h * patch_w, out_features=h),
                Matrix(in_features=h, out_features=h, count=4 * layers),
                Matrix(in_features=h, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=h, count=layers),
                Matrix(in_features=h, out_features=pooled)),
                # patch bias, class (and distillation) token, positions; per layer biases and two LayerNorms; final
                # LayerNorm, pooler bias
                other_parameters=h + len(leading) * h + tokens * h + (qkv_bias + h + inner + h + 4 * h) * layers
                + 2 * h + pooled),
        ]
        r.note(f"{model_type} encoder ({layers} layers, {tokens} tokens per image) reported as weights.vision_*")
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h,
                                            "vocab_size": 0})

    def encoder_output_len(self, r: ConfigReader) -> int:
        """The encoder's last hidden state: one token per patch of the ``image_size`` image (an int, or [height,
        width]) cut into ``patch_size`` squares, plus the class token (and DeiT's distillation token)."""
        patches, value, leading = self._tokens(r)
        names = " and ".join(f"{name} token" for name in leading)
        r.record("encoder_len", value, f"derived: {r.prefix}(image_size // patch_size)^2 + {len(leading)} ({names})")
        r.note(f"cross-attention holds one image: {patches} patches of {r.prefix}image_size / {r.prefix}patch_size + "
               f"the {names} = {value} encoder tokens")
        return value


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {t: "an image encoder: it keeps no cache" for t in LEADING_TOKENS}

PARSERS: tuple[type[ArchParser], ...] = (VitParser,)
