"""Adept Persimmon (``persimmon``) and Fuyu (``fuyu``: Persimmon with a linear patch embedding).

Persimmon's cache (plain MHA) is read with the Llama rules; its weights are GPT-style blocks (transformers 5.24
modeling_persimmon.py, modeling_fuyu.py).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.models.base import ArchParser, ConfigReader, hidden_of, switch
from kvplan.models.decoder import classic_decoder
from kvplan.models.llama import LlamaParser
from kvplan.models.tensors import Matrix, WeightCount, WeightPart


class PersimmonParser(LlamaParser):
    """Persimmon: a fused q/k/v and o with biases, a squared-ReLU MLP with biases, LayerNorms with biases and, with
    ``qk_layernorm`` (default true), a LayerNorm over each head's q and k. Under Fuyu (the outer config's model_type),
    the image patches enter through one linear layer (``patch_size``^2 x ``num_channels`` -> hidden, with a bias)."""

    model_types = ("persimmon",)
    weight_types = ("persimmon",)
    defaults_by_type = {"persimmon": {"tie_word_embeddings": False, "qk_layernorm": True}}
    WINDOWLESS = frozenset({"persimmon"})

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        counted = classic_decoder(r, model_type, inner_aliases=("intermediate_size",))
        parts = list(counted.parts)
        if switch(r, "qk_layernorm", True):
            heads = r.first_of("num_attention_heads", ("num_attention_heads",))
            layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
            head_dim = hidden_of(r) // heads
            parts.append(WeightPart(name="qk_norms", other_parameters=2 * 2 * head_dim * layers, tp_sharded=False))
        if r.outer.get("model_type") == "fuyu":
            o = ConfigReader(r.outer, source_name=r.source_name)
            patch = o.first_of("patch_size", ("patch_size",))
            channels = o.first_of("num_channels", ("num_channels",))
            hidden = hidden_of(r)
            parts.append(WeightPart(name="projector", vision=True, other_parameters=hidden,
                                    matrices=(Matrix(in_features=patch * patch * channels, out_features=hidden),)))
            r.note(f"Fuyu: image patches enter through one {patch * patch * channels} x {hidden} linear layer "
                   "(reported as weights.vision_*)")
            r.notes += [n for n in o.notes if n not in r.notes]
        return replace(counted, parts=parts)


PARSERS: tuple[type[ArchParser], ...] = (PersimmonParser,)
