"""π0.5 (``pi05``, transformers 5.25 PI05Config): a vision-language-action model. A PaliGemma under ``vlm_config``
(its Gemma decoder at ``vlm_config.text_config``, whose K/V is the model's cache, and a SigLIP tower) and an action
expert under ``dit_config``, a smaller Gemma-shaped stack that attends over the decoder's cache and keeps none.

Cache: read through ``vlm_config.text_config`` by its own family (kvplan.models.nesting.decoder_key_of). Weights
follow modeling_pi05.py: the PaliGemma as ``AutoModel`` builds it (no lm_head), then the action expert's layers
(q/k/v/o projections, biased when ``attention_bias``; a gated MLP of ``intermediate_size``), each of its RMSNorms an
adaptive one whose scale, shift and gate come from a biased linear layer of hidden_size -> 3 x hidden_size (two per
layer and the final norm), no embedding table; the action and time projections (``max_action_dim`` <-> the expert's
width, two time MLP layers, all biased).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, hidden_of, switch
from kvplan.models.registry import WEIGHT_REGISTRY
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, gqa_attention
from kvplan.models.vision import vision_weights

#: PI05Config's sub-configs when the file leaves them out (``sub_configs_defaults``, transformers 5.25): a given
#: ``vlm_config`` or ``dit_config`` replaces these whole and falls back on its own config class's defaults.
DEFAULT_SUB_CONFIGS: dict[str, dict[str, Any]] = {
    "vlm_config": {
        "model_type": "paligemma", "projection_dim": 2048, "image_token_id": 257152,
        "text_config": {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
                        "intermediate_size": 16384, "num_attention_heads": 8, "num_key_value_heads": 1,
                        "vocab_size": 257152},
        "vision_config": {"model_type": "siglip_vision_model", "intermediate_size": 4304, "hidden_size": 1152,
                          "patch_size": 14, "image_size": 224, "num_hidden_layers": 27, "num_attention_heads": 16,
                          "vocab_size": 257152, "vision_use_head": False},
    },
    "dit_config": {"model_type": "gemma", "hidden_size": 1024, "num_hidden_layers": 18, "intermediate_size": 4096,
                   "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256},
}


def _sub_config(r: ConfigReader, key: str) -> dict[str, Any]:
    value = r.raw(key)
    if isinstance(value, Mapping):
        return dict(value)
    if r.has(key):
        raise ConfigError(f"{r.source_name}: {r.prefix}{key} must be an object (a nested config)",
                          f"fix {key} in the config")
    r.note(f"{key} is not in the config; the PI05Config default ({DEFAULT_SUB_CONFIGS[key]['model_type']})")
    return DEFAULT_SUB_CONFIGS[key]


def _reader(config: Mapping[str, Any], r: ConfigReader, prefix: str) -> tuple[ArchParser, ConfigReader, str]:
    """The weight parser of a nested config's own ``model_type``, and a reader with that type's defaults."""
    model_type = str(config.get("model_type") or "")
    parser = (WEIGHT_REGISTRY.get(model_type) or ArchParser)()
    return parser, ConfigReader(config, source_name=r.source_name, prefix=f"{r.prefix}{prefix}", outer=config,
                                defaults=parser.defaults_for(model_type), defaults_name=model_type or "generic"), model_type


def _merge(r: ConfigReader, sub: ConfigReader) -> None:
    r.provenance += sub.provenance
    for note in sub.notes:
        r.note(note)


class PI05Parser(ArchParser):
    """π0.5: PaliGemma (no lm_head) plus the action expert and its action/time projections."""

    family = "pi05"
    model_types = ()
    weight_types = ("pi05",)
    #: PI05Config defaults (transformers 5.25) of the top-level keys the weight count reads.
    defaults = {"max_action_dim": 32}

    def vlm_weights(self, r: ConfigReader) -> tuple[list[WeightPart], WeightCount]:
        """PaliGemmaModel (``AutoModel`` of ``vlm_config``): its language model without an lm_head, its tower."""
        vlm = _sub_config(r, "vlm_config")
        text = vlm.get("text_config")
        if not isinstance(text, Mapping) or not isinstance(vlm.get("vision_config"), Mapping):
            raise ConfigError(f"{r.source_name}: {r.prefix}vlm_config needs its text_config and vision_config",
                              "give vlm_config both nested configs, as PI05Config writes them")
        parser, t, text_type = _reader(text, r, "vlm_config.text_config.")
        counted = parser.count_weights(t, text_type)
        hidden = counted.hidden_size or hidden_of(t)
        tower = parser.vision_weights(vlm, t, hidden)
        if tower is None:
            tower = vision_weights(vlm, t, text_hidden=hidden)
        _merge(r, t)
        r.note(f"vlm_config: the {vlm.get('model_type') or 'vision-language'} model without an lm_head "
               f"(language model {text_type or 'unknown'})")
        return [p for p in counted.parts if p.name != "lm_head"] + tower, counted

    def expert_weights(self, r: ConfigReader) -> tuple[list[WeightPart], int]:
        """The action expert (PI05ActionExpertModel over ``dit_config``) and its width."""
        dit = _sub_config(r, "dit_config")
        _parser, d, _ = _reader(dit, r, "dit_config.")
        hidden = hidden_of(d)
        layers = self.num_layers(d)
        heads = d.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(d, heads)
        head_dim = self.head_dim(d, heads)
        inner = d.first_of("intermediate_size", ("intermediate_size",))
        bias = (heads + 2 * kv_heads) * head_dim + hidden if switch(d, "attention_bias", False) else 0
        adaptive_norms = 2 * layers + 1  # before attention and MLP in every layer; the final norm
        parts = [
            WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, layers)),
                       other_parameters=bias * layers),
            WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=inner, count=2 * layers),
                                             Matrix(in_features=inner, out_features=hidden, count=layers))),
            WeightPart(name="adaptive_norms", matrices=(
                Matrix(in_features=hidden, out_features=3 * hidden, count=adaptive_norms),),
                other_parameters=3 * hidden * adaptive_norms, tp_sharded=False),
        ]
        _merge(r, d)
        r.note(f"dit_config: the action expert ({layers} layers of width {hidden}, adaptive RMSNorms, no embedding "
               "table) keeps no cache: it attends over the language model's")
        return parts, hidden

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        parts, lm = self.vlm_weights(r)
        expert, width = self.expert_weights(r)
        action = r.first_of("max_action_dim", ("max_action_dim",))
        parts += expert
        # action_in_proj, time_mlp_in, time_mlp_out, action_out_proj: every one biased
        parts.append(WeightPart(name="action_projections", matrices=(
            Matrix(in_features=action, out_features=width), Matrix(in_features=width, out_features=width, count=2),
            Matrix(in_features=width, out_features=action)), other_parameters=3 * width + action))
        return count_of(parts, lm.num_experts, lm.experts_per_token,
                        {"hidden_size": lm.hidden_size, "mlp_width": lm.mlp_width, "qkv_width": lm.qkv_width,
                         "vocab_size": lm.vocab_size})


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"pi05": "its cache is its language model's, read at vlm_config.text_config by that model's family"}

PARSERS: tuple[type[ArchParser], ...] = (PI05Parser,)
