"""NVIDIA Nemotron: Nemotron-H (Mamba-2, attention, MLP and MoE blocks by ``hybrid_override_pattern``), the
NAS-pruned Llama-3.x-Nemotron (DeciLM ``block_configs``) and Nemotron-4 / Minitron (``nemotron``: Llama's cache)."""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.errors import ConfigError
from kvplan.models.base import (
    FULL,
    NONE,
    STATE,
    ArchParser,
    ConfigReader,
    embeddings,
    hidden_of,
    switch,
    vocab_of,
    with_config_ssm_dtype,
)
from kvplan.models.decoder import DecoderLayout
from kvplan.models.llama import LlamaParser
from kvplan.models.mamba import mamba2_state
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts, gqa_attention
from kvplan.specs import FullAttentionSpec, LayerSpec, NoCacheSpec, SlidingWindowSpec, StateSpec


class NemotronHParser(ArchParser):
    """Nemotron-H: ``hybrid_override_pattern`` with M = Mamba-2, * = attention, - = MLP, E = MoE."""

    family = "nemotron_h"
    model_types = ("nemotron_h",)
    #: NemotronHConfig defaults of the keys weight counting reads.
    defaults_by_type = {"nemotron_h": {"tie_word_embeddings": False, "use_conv_bias": True, "use_bias": False,
                                       "mlp_bias": False, "attention_bias": False}}
    weight_types = ("nemotron_h",)
    HEAD_DIM = ("head_dim", "attention_head_dim")
    _KINDS = {"M": STATE, "*": FULL, "-": NONE, "E": NONE}

    #: transformers 5.x ``layers_block_type`` names -> the legacy pattern symbols.
    _BLOCK_SYMBOLS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-",
                      "moe": "E"}

    def pattern(self, r: ConfigReader) -> str:
        """The block pattern: ``hybrid_override_pattern``, or transformers 5.x ``layers_block_type`` as symbols."""
        blocks = r.raw("layers_block_type")
        if not r.has("hybrid_override_pattern") and isinstance(blocks, list):
            unknown = sorted({str(b) for b in blocks} - set(self._BLOCK_SYMBOLS))
            if unknown:
                raise ConfigError(f"{r.source_name}: unknown block type(s) {unknown} in {r.prefix}layers_block_type",
                                  f"kvplan knows {', '.join(sorted(self._BLOCK_SYMBOLS))}")
            r.record("hybrid_override_pattern", "from layers_block_type", r.where("layers_block_type"))
            return "".join(self._BLOCK_SYMBOLS[b] for b in blocks)
        return r.first_of("hybrid_override_pattern", ["hybrid_override_pattern", "layers_block_type"], kind="str")

    def num_layers(self, r: ConfigReader) -> int:
        if r.has("num_hidden_layers"):
            return super().num_layers(r)
        pattern = self.pattern(r)
        key = "hybrid_override_pattern" if r.has("hybrid_override_pattern") else "layers_block_type"
        r.record("num_hidden_layers", len(pattern), f"derived: len({r.prefix}{key})")
        r.note(f"num_hidden_layers is not in the config; derived from {key}: {len(pattern)} blocks")
        return len(pattern)

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        pattern = self.pattern(r)
        if len(pattern) != num_layers:
            raise ConfigError(
                f"{r.source_name}: hybrid_override_pattern has {len(pattern)} symbols for {num_layers} layers",
                "make the pattern one symbol per layer",
            )
        unknown = sorted(set(pattern) - set(self._KINDS))
        if unknown:
            raise ConfigError(
                f"{r.source_name}: unknown symbol(s) {''.join(unknown)!r} in hybrid_override_pattern",
                "kvplan knows M (Mamba-2), * (attention), - (MLP) and E (MoE)",
            )
        return [self._KINDS[symbol] for symbol in pattern]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return with_config_ssm_dtype(r, mamba2_state(
            r.first_of("mamba_num_heads", ["mamba_num_heads"]),
            r.first_of("mamba_head_dim", ["mamba_head_dim"]),
            r.first_of("n_groups", ["n_groups"]),
            r.first_of("conv_kernel", ["conv_kernel"]),
            r.first_of("ssm_state_size", ["ssm_state_size", "state_size"]),
        ))

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Nemotron-H: one mixer per block from hybrid_override_pattern: M = Mamba-2, * = attention,
        - = MLP (up/down, squared ReLU), E = MoE; each block has one RMSNorm."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        pattern = self.pattern(r)
        if len(pattern) != layers or set(pattern) - set("M*-E"):
            raise ConfigError(f"{r.source_name}: hybrid_override_pattern {pattern!r} does not describe {layers} layers",
                              "use one of M, *, -, E per layer")
        n_m, n_a, n_mlp, n_e = (pattern.count(s) for s in "M*-E")
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        parts = embeddings(r, hidden)
        attn_bias = (heads + 2 * kv_heads) * head_dim + hidden if switch(r, "attention_bias", False) else 0
        parts.append(WeightPart(name="attention", matrices=tuple(gqa_attention(hidden, heads, kv_heads, head_dim, n_a)),
                                other_parameters=attn_bias * n_a))
        qkv_width = (heads + 2 * kv_heads) * head_dim
        if n_m:
            n_heads = r.first_of("mamba_num_heads", ("mamba_num_heads",))
            d_head = r.first_of("mamba_head_dim", ("mamba_head_dim",))
            groups = r.first_of("n_groups", ("n_groups",))
            d_state = r.first_of("ssm_state_size", ("ssm_state_size", "state_size"))
            conv = r.first_of("conv_kernel", ("conv_kernel",))
            d_inner = n_heads * d_head
            conv_dim = d_inner + 2 * groups * d_state
            in_out = 2 * d_inner + 2 * groups * d_state + n_heads
            vectors = conv_dim * conv + (conv_dim if switch(r, "use_conv_bias", True) else 0) + 3 * n_heads + d_inner
            if switch(r, "use_bias", False):
                vectors += in_out + hidden
            parts.append(WeightPart(name="mamba", matrices=(
                Matrix(in_features=hidden, out_features=in_out, count=n_m),
                Matrix(in_features=d_inner, out_features=hidden, count=n_m)), other_parameters=vectors * n_m))
            qkv_width = max(qkv_width, in_out)
        intermediate = r.first_of("intermediate_size", ("intermediate_size",)) if n_mlp else 0
        if n_mlp:
            bias = (intermediate + hidden) * n_mlp if switch(r, "mlp_bias", False) else 0
            parts.append(WeightPart(name="mlp", matrices=(
                Matrix(in_features=hidden, out_features=intermediate, count=n_mlp),
                Matrix(in_features=intermediate, out_features=hidden, count=n_mlp)), other_parameters=bias))
        experts = top_k = None
        width = intermediate
        if n_e:
            experts = r.first_of("num_experts", ("n_routed_experts", "num_experts"))
            top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
            size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
            shared = r.optional("moe_shared_expert_intermediate_size", ("moe_shared_expert_intermediate_size",))
            latent = r.optional("moe_latent_size", ("moe_latent_size",))
            if latent:
                # NOTE: latent MoE (Nemotron-3 Super, transformers NemotronHMoE): the routed experts work in
                # moe_latent_size, between a down (fc1_latent_proj) and an up (fc2_latent_proj) projection;
                # the shared expert and the router stay at hidden_size.
                moe = experts_parts(latent, size, experts, n_e, gated=False, router_bias=True)
                parts += [m for m in moe if m.name == "experts"]
                parts += [p for p in experts_parts(hidden, size, experts, n_e, gated=False, shared_size=shared,
                                                   router_bias=True) if p.name != "experts"]
                bias = (latent + hidden) * n_e if switch(r, "mlp_bias", False) else 0
                parts.append(WeightPart(name="latent_projections", matrices=(
                    Matrix(in_features=hidden, out_features=latent, count=n_e),
                    Matrix(in_features=latent, out_features=hidden, count=n_e)), other_parameters=bias))
                r.note(f"latent MoE: {experts} routed experts of {size} work in moe_latent_size = {latent}, "
                       f"not hidden_size = {hidden}")
            else:
                parts += experts_parts(hidden, size, experts, n_e, gated=False, shared_size=shared, router_bias=True)
            width = max(width, (top_k or 1) * size + (shared or 0))
        parts.append(WeightPart(name="norms", other_parameters=(layers + 1) * hidden, tp_sharded=False))
        r.note(f"Nemotron-H: {n_m} Mamba-2, {n_a} attention, {n_mlp} MLP and {n_e} MoE blocks")
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": qkv_width,
                                                "vocab_size": vocab_of(r)})


class NemotronNasParser(ArchParser):
    """Nemotron NAS / DeciLM (Llama-3.x-Nemotron-51B/49B/253B): one ``block_configs`` entry per layer.

    A layer's attention is absent when ``attention.no_op`` or ``attention.replace_with_linear`` is true
    (no cache); otherwise it has ``num_attention_heads // attention.n_heads_in_group`` KV heads
    (vLLM ``nemotron_nas``; DeciLMConfig). ``num_key_value_heads`` is not used by these checkpoints.
    """

    family = "nemotron_nas"
    model_types = ("nemotron-nas",)
    weight_types = ("nemotron-nas",)
    #: DeciLMConfig (a LlamaConfig): the default the weight count reads.
    defaults_by_type = {"nemotron-nas": {"tie_word_embeddings": False}}

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        blocks = r.first_of("block_configs", ["block_configs"], kind="list")
        if len(blocks) != num_layers:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}block_configs has {len(blocks)} entries but the model has {num_layers} layers",
                "make block_configs one entry per layer",
            )
        heads = r.first_of("num_attention_heads", self.HEADS)
        head_size = self.head_dim(r, heads)
        specs: list[LayerSpec] = []
        for index, block in enumerate(blocks):
            attention = block.get("attention") if isinstance(block, Mapping) else None
            if not isinstance(attention, Mapping):
                raise ConfigError(
                    f"{r.source_name}: {r.prefix}block_configs[{index}].attention is missing",
                    "each block_configs entry needs an attention object",
                )
            if attention.get("no_op") is True or attention.get("replace_with_linear") is True:
                specs.append(NoCacheSpec(reason="attention is a no-op or a linear layer in this block"))
                continue
            key = f"block_configs[{index}].attention.n_heads_in_group"
            group = attention.get("n_heads_in_group")
            if isinstance(group, float) and group.is_integer():
                group = int(group)
            if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
                raise ConfigError(
                    f"{r.source_name}: {r.prefix}{key} must be a positive integer, got {group!r}",
                    "an attention block needs n_heads_in_group (or no_op / replace_with_linear true)",
                )
            if heads % group:
                raise ConfigError(
                    f"{r.source_name}: {heads} attention heads are not a multiple of {r.prefix}{key} = {group}",
                    "check num_attention_heads and n_heads_in_group",
                )
            kv = heads // group
            window = attention.get("window_length")
            if window is not None:
                window = r.check(f"block_configs[{index}].attention.window_length", window, "int")
            if window is not None:
                specs.append(SlidingWindowSpec(num_kv_heads=kv, head_size=head_size, head_size_v=head_size,
                                               sliding_window=window))
            else:
                specs.append(FullAttentionSpec(num_kv_heads=kv, head_size=head_size, head_size_v=head_size))
        attn = [s for s in specs if not isinstance(s, NoCacheSpec)]
        r.record("layer_types", f"{len(attn)} attention, {num_layers - len(attn)} without attention",
                 r.where("block_configs"))
        r.note(
            "block_configs: KV heads per layer = num_attention_heads // attention.n_heads_in_group; "
            f"{num_layers - len(attn)} layer(s) with attention no_op / replace_with_linear cache nothing"
        )
        return specs


    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """DeciLM (the Hub's modeling_decilm.py, as vLLM's nemotron_nas.py loads it), block by block: an attention
        block is an input RMSNorm and Llama's q/k/v/o with ``num_attention_heads // n_heads_in_group`` KV heads, or
        the norm and one hidden x hidden Linear (``replace_with_linear``), or nothing (``no_op``); an FFN block is a
        post-attention RMSNorm and a SwiGLU MLP of ``ffn_mult``'s width (2 * ffn_mult * hidden / 3 rounded up to a
        multiple of 256), or the norm and a Linear, or nothing."""
        hidden = hidden_of(r)
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        head_dim = self.head_dim(r, heads)
        blocks = r.first_of("block_configs", ["block_configs"], kind="list")
        if len(blocks) != layers:
            raise ConfigError(f"{r.source_name}: {r.prefix}block_configs has {len(blocks)} entries but the model has "
                              f"{layers} layers", "make block_configs one entry per layer")
        specs = self.build_layers(r)  # the blocks' attention, read and checked as the cache reads them
        attention: list[Matrix] = []
        mlp: list[Matrix] = []
        norms = hidden  # the final norm
        widest = qkv_width = 0
        for index, block in enumerate(blocks):
            attn = block.get("attention") if isinstance(block, Mapping) else None
            ffn = block.get("ffn") if isinstance(block, Mapping) else None
            if not isinstance(attn, Mapping) or not isinstance(ffn, Mapping):
                raise ConfigError(f"{r.source_name}: {r.prefix}block_configs[{index}] needs attention and ffn objects",
                                  "each block_configs entry holds attention and ffn")
            if attn.get("no_op") is not True:
                norms += hidden
                if attn.get("replace_with_linear") is True:
                    attention.append(Matrix(in_features=hidden, out_features=hidden))
                else:
                    spec = specs[index]
                    assert isinstance(spec, (FullAttentionSpec, SlidingWindowSpec))
                    kv = spec.num_kv_heads  # num_attention_heads // n_heads_in_group
                    attention += gqa_attention(hidden, heads, kv, head_dim, 1)
                    qkv_width = max(qkv_width, (heads + 2 * kv) * head_dim)
            if ffn.get("no_op") is not True:
                norms += hidden
                if ffn.get("replace_with_linear") is True:
                    mlp.append(Matrix(in_features=hidden, out_features=hidden))
                else:
                    mult = r.check(f"block_configs[{index}].ffn.ffn_mult", ffn.get("ffn_mult"), "ratio")
                    inner = int(2 * mult * hidden / 3)
                    inner += -inner % 256  # DeciLM's _ffn_mult_to_intermediate_size: up to a multiple of 256
                    mlp += [Matrix(in_features=hidden, out_features=inner, count=2),
                            Matrix(in_features=inner, out_features=hidden)]
                    widest = max(widest, inner)
        parts = embeddings(r, hidden)
        parts += [WeightPart(name="attention", matrices=tuple(attention)),
                  WeightPart(name="mlp", matrices=tuple(mlp)),
                  WeightPart(name="norms", other_parameters=norms, tp_sharded=False)]
        r.note("block_configs: each layer's attention (GQA, a Linear or none) and MLP (ffn_mult's width, a Linear or "
               "none) counted as DeciLM builds them")
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": widest, "qkv_width": qkv_width,
                                            "vocab_size": vocab_of(r)})


class NemotronParser(LlamaParser):
    """Nemotron-4 / Minitron (``nemotron``, NemotronConfig): Llama's cache and attention (``attention_bias`` on
    q/k/v/o), a non-gated squared-ReLU MLP (``mlp_bias``), LayerNorm1P with a bias."""

    model_types = ("nemotron",)
    weight_types = ("nemotron",)
    defaults_by_type = {"nemotron": {"tie_word_embeddings": False}}
    WINDOWLESS = frozenset({"nemotron"})

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout(gated_mlp=False, norm_bias=True)


PARSERS: tuple[type[ArchParser], ...] = (NemotronHParser, NemotronNasParser, NemotronParser)
