"""AI21 Jamba: attention every ``attn_layer_period`` layers, Mamba-1 elsewhere; MoE every ``expert_layer_period``."""

from __future__ import annotations

import math

from kvplan.models.base import _MISSING, FULL, STATE, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.mamba import mamba1_mixer, mamba1_state
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention
from kvplan.specs import StateSpec


class JambaParser(ArchParser):
    """Jamba: attention iff i % attn_layer_period == attn_layer_offset; Mamba-1 elsewhere."""

    family = "jamba"
    model_types = ("jamba",)
    defaults = {
        "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
        "mamba_expand": 2, "max_position_embeddings": 262144,
    }
    #: JambaConfig defaults of the keys weight counting reads.
    defaults_by_type = {"jamba": {"tie_word_embeddings": False, "expert_layer_period": 2, "expert_layer_offset": 1,
                                  "num_experts": 16, "num_experts_per_tok": 2, "mamba_conv_bias": True,
                                  "mamba_proj_bias": False}}
    weight_types = ("jamba",)

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        period = r.first_of("attn_layer_period", ["attn_layer_period"])
        offset = r.first_of("attn_layer_offset", ["attn_layer_offset"])
        r.note(f"attention layers are i % {period} == {offset}; the others keep a Mamba state")
        return [FULL if i % period == offset else STATE for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        expand = r.first_of("mamba_expand", ["mamba_expand"])
        hidden = r.first_of("hidden_size", self.HIDDEN)
        return mamba1_state(
            expand * hidden, r.first_of("mamba_d_conv", ["mamba_d_conv"]), r.first_of("mamba_d_state", ["mamba_d_state"])
        )

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Jamba: attention in layers i % attn_layer_period == attn_layer_offset, Mamba-1 elsewhere; MoE MLP
        in layers i % expert_layer_period == expert_layer_offset, a dense MLP elsewhere."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        period = r.first_of("attn_layer_period", ("attn_layer_period",))
        offset = r.first_of("attn_layer_offset", ("attn_layer_offset",))
        e_period = r.first_of("expert_layer_period", ("expert_layer_period",))
        e_offset = r.first_of("expert_layer_offset", ("expert_layer_offset",))
        n_attn = sum(1 for i in range(layers) if i % period == offset)
        n_moe = sum(1 for i in range(layers) if i % e_period == e_offset)
        d_inner = r.first_of("mamba_expand", ("mamba_expand",)) * hidden
        d_state = r.first_of("mamba_d_state", ("mamba_d_state",))
        d_conv = r.first_of("mamba_d_conv", ("mamba_d_conv",))
        rank = r.raw("mamba_dt_rank")
        # NOTE: JambaConfig's mamba_dt_rank "auto" (its default) is ceil(hidden_size / 16).
        if rank is not _MISSING and rank != "auto":
            rank = r.check("mamba_dt_rank", rank, "int")
        dt_rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else math.ceil(hidden / 16)
        if not isinstance(rank, int):
            r.note(f"mamba_dt_rank auto = ceil(hidden_size / 16) = {dt_rank}")
        intermediate = r.first_of("intermediate_size", ("intermediate_size",))
        experts = r.first_of("num_experts", ("num_experts",))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, n_attn))))
        parts.append(mamba1_mixer(r, hidden, layers - n_attn, d_inner=d_inner, d_state=d_state, d_conv=d_conv,
                                   dt_rank=dt_rank, conv_bias=switch(r, "mamba_conv_bias", True),
                                   proj_bias=switch(r, "mamba_proj_bias", False), inner_norms=dt_rank + 2 * d_state))
        if layers - n_moe:
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - n_moe)),
                Matrix(in_features=intermediate, out_features=hidden, count=layers - n_moe))))
        parts += experts_parts(hidden, intermediate, experts, n_moe)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"Jamba: {n_attn} attention and {layers - n_attn} Mamba layers; {experts} experts in {n_moe} of {layers} "
               "layers, all resident")
        shape = {"hidden_size": hidden, "mlp_width": max(intermediate, (top_k or 1) * intermediate),
                 "qkv_width": max((heads + 2 * kv_heads) * head_dim, 2 * d_inner), "vocab_size": vocab_of(r)}
        return count_of(parts, experts, top_k, shape)


PARSERS: tuple[type[ArchParser], ...] = (JambaParser,)
