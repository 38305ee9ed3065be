"""The vision part of a multimodal config's weights: the tower of ``vision_config`` (vision_towers.py) and the
projector into the language model (vision_projectors.py), reported separately as ``weights.vision_*``. A tower
kvplan has no layout for is counted as a plain ViT and said to be approximate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.models.base import ConfigReader
from kvplan.models.tensors import Matrix, WeightPart
from kvplan.models.vision_projectors import PROJECTORS
from kvplan.models.vision_towers import (
    DEFAULT_VISION_TYPE,
    EXTRA_TOWERS,
    TOWER_COPIES,
    TOWERS,
    VISION_TYPE_OF,
    tower_weights,
)


def vision_weights(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
    """The vision tower of ``outer["vision_config"]`` and its projector into the language model."""
    outer_type = str(outer.get("model_type", ""))
    vision = outer["vision_config"]
    vtype = VISION_TYPE_OF.get(outer_type) or str(vision.get("model_type") or DEFAULT_VISION_TYPE.get(outer_type, ""))
    layout = TOWERS.get(vtype)
    if layout is None or outer_type not in PROJECTORS:
        return plain_vit_weights(outer, text, text_hidden=text_hidden)
    v = ConfigReader(vision, source_name=text.source_name, prefix="vision_config.", defaults=layout.defaults,
                     defaults_name=vtype)
    tower, hidden = tower_weights(v, layout)
    copies = TOWER_COPIES.get(outer_type, 1)
    if copies > 1:
        tower = WeightPart(name=tower.name, vision=True, other_parameters=copies * tower.other_parameters,
                           matrices=tuple(Matrix(in_features=m.in_features, out_features=m.out_features,
                                                 count=copies * m.count) for m in tower.matrices))
    projector = PROJECTORS[outer_type](v, outer, hidden, text_hidden, layout)
    extra = [EXTRA_TOWERS[outer_type](v, outer)] if outer_type in EXTRA_TOWERS else []
    for note in v.notes:
        text.note(note)
    layers = next((p.value for p in v.provenance if p.field == "num_hidden_layers"), None)
    size = f", {layers} layers" if layers else ""
    text.note(f"vision tower ({layout.name}{size}) reported separately as weights.vision_*")
    return [tower, *extra, projector]


def plain_vit_weights(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
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
