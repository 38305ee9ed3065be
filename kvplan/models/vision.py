"""Vision towers a multimodal config carries in ``vision_config``: a ViT-style tower (CLIP, SigLIP and
similar) and the projector into the language model, reported separately as ``weights.vision_*``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart


def vision_weights(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
    """A ViT-style vision tower (CLIP, SigLIP and similar) and the projector into the language model."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.")
    hidden = v.first_of("hidden_size", ("hidden_size", "embed_dim", "width"))
    inner = v.first_of("intermediate_size", ("intermediate_size", "mlp_dim"))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers", "depth", "num_layers"))
    patch = v.first_of("patch_size", ("patch_size",))
    image = v.first_of("image_size", ("image_size",))
    channels = v.optional("num_channels", ("num_channels", "in_channels")) or 3
    vtype = str(outer["vision_config"].get("model_type", ""))
    clip = "clip" in vtype
    patches = (image // patch) ** 2 + (1 if clip else 0)
    # per layer: q/k/v/o biases, two LayerNorms (weight + bias), the two MLP biases
    other = (4 * hidden + 2 * 2 * hidden + inner + hidden) * layers
    # position embeddings, CLIP's class embedding or SigLIP's patch bias, and the tower's LayerNorms
    other += patches * hidden + hidden + 2 * 2 * hidden
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                  Matrix(in_features=hidden, out_features=inner, count=layers),
                  Matrix(in_features=inner, out_features=hidden, count=layers),
                  Matrix(in_features=channels * patch * patch, out_features=hidden)),
        other_parameters=other,
    )
    outer_type = str(outer.get("model_type", ""))
    if outer_type.startswith("llava") or outer_type == "vipllava":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),
                                         Matrix(in_features=text_hidden, out_features=text_hidden)),
                               other_parameters=2 * text_hidden)
    elif outer_type == "gemma3":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),), other_parameters=hidden)
    else:
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),))
        text.note(f"vision projector of {outer_type} approximated as one {hidden} x {text_hidden} matrix")
    if not (clip or "siglip" in vtype):
        text.note(f"vision tower {vtype or '(unnamed)'} counted as a plain ViT (approximate)")
    text.note(f"vision tower ({vtype or 'vit'}, {layers} layers) reported separately as weights.vision_*")
    return [tower, projector]
