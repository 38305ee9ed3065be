"""The pre-norm decoder with gated (SwiGLU/GeGLU) MLPs, generically: Llama's layout, which most
families share with small differences (biases, q/k norms, extra norms, MoE placement).

A family parser subclasses :class:`DecoderParser` and says its differences through
:meth:`~DecoderParser.decoder_layout`, :meth:`~DecoderParser.attention_weights` and
:meth:`~DecoderParser.moe_layout`; the MoE placements several families share are read here by
their config keys (every layer, ``decoder_sparse_step``, ``first_k_dense_replace``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, layer_indices, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


@dataclass(frozen=True, kw_only=True, slots=True)
class DecoderLayout:
    """How one family's decoder differs from Llama's in the tensors it holds."""

    qkv_bias: bool = False
    """q/k/v biases whatever the config says (Qwen2)."""
    o_bias: bool = True
    """``attention_bias`` also biases o_proj (not in Qwen2)."""
    qk_norm: bool = False
    """RMSNorm on q and k per head (Qwen3, Gemma 3)."""
    qk_norm_whole: bool = False
    """The q and k norms span all heads (OLMo 2/3, OLMoE): ``(heads + kv_heads) * head_dim`` per layer."""
    gated_mlp: bool = True
    """False: an up and a down projection only (Apertus' xIELU, Arcee's ReLU^2)."""
    norm_bias: bool = False
    """LayerNorms with a bias (PhiMoE): twice the norm parameters."""
    lm_head_bias: bool = False
    """An lm_head bias when the config's ``lm_head_bias`` is true (PhiMoE)."""
    mlp_act_parameters: int = 0
    """Learned activation parameters per MLP (Apertus' xIELU: alpha_p, alpha_n, beta, eps)."""
    attention_sinks: bool = False
    """One learned sink logit per head (gpt-oss)."""
    norms_per_layer: int = 2
    """Gemma 2/3 add post-attention and post-MLP norms: 4."""
    norm_weights: bool = True
    """False: the LayerNorms have no learned weights (OLMo 1)."""
    qk_norm_weights: bool = True
    """False: ``use_qk_norm`` is a weightless L2 norm (Llama 4)."""
    expert_bias: bool = False
    """Biases on every expert's projections (gpt-oss)."""
    shared_expert_gate: bool = False
    """A sigmoid gate on the shared expert (Qwen2-MoE)."""
    router_bias: bool = False
    """A router bias or DeepSeek-V3's ``e_score_correction_bias``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeLayout:
    layers: list[int]
    """Indices of the layers whose MLP is a mixture of experts."""
    experts: int | None
    top_k: int | None
    expert_size: int | None
    shared_size: int | None


NO_MOE = MoeLayout(layers=[], experts=None, top_k=None, expert_size=None, shared_size=None)


class DecoderParser(ArchParser):
    """A family whose weights follow the pre-norm gated decoder (Llama, Mistral, Qwen, Gemma, DeepSeek...)."""

    #: The config key that counts multi-token-prediction layers (noted, not counted).
    MTP_KEY: ClassVar[str] = "num_nextn_predict_layers"

    def decoder_layout(self, model_type: str) -> DecoderLayout:
        return DecoderLayout()

    def attention_weights(
        self, r: ConfigReader, model_type: str, hidden: int, layers: int, heads: int
    ) -> tuple[list[Matrix], int, int]:
        """(matrices, other parameters, q+k+v width) of every layer's attention: GQA by default."""
        layout = self.decoder_layout(model_type)
        kv_heads = self.kv_heads(r, heads)
        head_dim = self.head_dim(r, heads)
        q, kv = heads * head_dim, kv_heads * head_dim
        attention = [Matrix(in_features=hidden, out_features=q, count=layers),
                     Matrix(in_features=hidden, out_features=kv, count=2 * layers),
                     Matrix(in_features=q, out_features=hidden, count=layers)]
        other = 0
        if layout.qkv_bias or r.raw("attention_bias") is True or r.raw("use_qkv_bias") is True \
                or r.raw("qkv_bias") is True:
            other += (q + 2 * kv) * layers
            # ``attention_out_bias`` (Seed-OSS), when the config has it, says whether o_proj has one
            o_bias = r.raw("attention_out_bias") is True if r.has("attention_out_bias") else layout.o_bias
            if r.raw("attention_bias") is True and o_bias:
                other += hidden * layers  # o_proj bias
        if layout.qk_norm or layout.qk_norm_whole or (r.flag("use_qk_norm", False) and layout.qk_norm_weights):
            # one RMSNorm per head dim, or (``qk_norm_type`` "per_layer", MiniMax-M2) over all q and k heads
            per_layer = layout.qk_norm_whole or r.raw("qk_norm_type") == "per_layer"
            other += ((heads + kv_heads) * head_dim if per_layer else 2 * head_dim) * layers
        if layout.attention_sinks:
            other += heads * layers
        return attention, other, q + 2 * kv

    def moe_layout(self, r: ConfigReader, model_type: str, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
        """Which layers are MoE, with how many experts of which size: none by default."""
        return NO_MOE

    def dense_mlp_size(self, r: ConfigReader, model_type: str, intermediate: int) -> int:
        return intermediate

    def needs_dense_width(self, model_type: str) -> bool:
        """Whether the config must name ``intermediate_size`` (False: every layer is MoE, the key may be absent)."""
        return True

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layers", "num_layers"))
        heads = r.first_of("num_attention_heads", ("num_attention_heads", "n_heads"))
        layout = self.decoder_layout(model_type)
        attention, attn_other, qkv_width = self.attention_weights(r, model_type, hidden, layers, heads)
        parts = embeddings(r, hidden, lm_head_bias=layout.lm_head_bias and r.raw("lm_head_bias") is True)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=attn_other))

        inner_keys = ("intermediate_size", "ffn_hidden_size")
        # a model whose every layer is MoE of its own expert size may have no intermediate_size (Solar Open)
        intermediate = r.first_of("intermediate_size", inner_keys, required=False)
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok", "experts_per_token", "moe_topk"))
        moe = self.moe_layout(r, model_type, layers, intermediate, top_k)
        dense_layers = layers - len(moe.layers)
        if intermediate is None and (dense_layers or moe.expert_size is None):
            intermediate = r.first_of("intermediate_size", inner_keys)  # raises: required
        dense_size = self.dense_mlp_size(r, model_type, intermediate)
        mlp_bias = r.raw("mlp_bias") is True
        if dense_layers:
            ups = 2 if layout.gated_mlp else 1
            parts.append(WeightPart(
                name="mlp",
                matrices=(Matrix(in_features=hidden, out_features=dense_size, count=ups * dense_layers),
                          Matrix(in_features=dense_size, out_features=hidden, count=dense_layers)),
                other_parameters=((ups * dense_size + hidden) * dense_layers if mlp_bias else 0)
                + layout.mlp_act_parameters * dense_layers,
            ))
        if moe.layers:
            n_moe = len(moe.layers)
            experts, expert_size = moe.experts, moe.expert_size
            assert experts is not None and expert_size is not None
            parts.append(WeightPart(
                name="experts",
                matrices=(Matrix(in_features=hidden, out_features=expert_size, count=2 * experts * n_moe),
                          Matrix(in_features=expert_size, out_features=hidden, count=experts * n_moe)),
                other_parameters=(2 * expert_size + hidden) * experts * n_moe if layout.expert_bias else 0,
            ))
            if moe.shared_size:
                parts.append(WeightPart(
                    name="shared_experts",
                    matrices=(Matrix(in_features=hidden, out_features=moe.shared_size, count=2 * n_moe),
                              Matrix(in_features=moe.shared_size, out_features=hidden, count=n_moe)),
                    other_parameters=hidden * n_moe if layout.shared_expert_gate else 0,
                ))
            parts.append(WeightPart(
                name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=n_moe),),
                other_parameters=experts * n_moe if layout.router_bias else 0, tp_sharded=False))
            r.note(
                f"MoE: {experts} experts of intermediate size {expert_size} in {n_moe} of {layers} layers, all resident"
                + (f"; {moe.top_k} routed per token" if moe.top_k else "")
            )
        norm_size = 2 * hidden if layout.norm_bias else hidden
        if layout.norm_weights:
            parts.append(WeightPart(name="norms", other_parameters=(layout.norms_per_layer * layers + 1) * norm_size,
                                    tp_sharded=False))
        note_mtp(r, self.MTP_KEY)
        if moe.layers and moe.expert_size:
            mlp_width = max(dense_size if dense_layers else 0,
                            (moe.top_k or 1) * moe.expert_size + (moe.shared_size or 0))
        else:
            mlp_width = dense_size
        shape = {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": qkv_width, "vocab_size": vocab_of(r)}
        return count_of(parts, moe.experts if moe.layers else None, moe.top_k if moe.layers else None, shape)


def note_mtp(r: ConfigReader, key: str = "num_nextn_predict_layers") -> None:
    """Multi-token-prediction layers are noted, not counted: engines load them only to draft tokens (no ``key``: the
    family counts them itself)."""
    if not key:
        return
    mtp = r.first_of(key, (key,), required=False, kind="count")
    if mtp:
        r.note(
            f"{key} = {mtp}: the multi-token-prediction module is not counted "
            "(engines load it only for speculative decoding; the Hub checkpoint includes it)"
        )


# ---- MoE placements several families share, read by their config keys ---------------------------
def every_layer_moe(r: ConfigReader, layers: int, intermediate: int, top_k: int | None) -> MoeLayout:
    """Mixtral, gpt-oss: every layer's MLP is ``num_local_experts`` experts of ``intermediate_size``."""
    experts = r.first_of("num_experts", ("num_local_experts", "num_experts"))
    return MoeLayout(layers=list(range(layers)), experts=experts, top_k=top_k, expert_size=intermediate,
                     shared_size=None)


def sparse_step_moe(r: ConfigReader, layers: int, top_k: int | None) -> MoeLayout:
    """Qwen-MoE: experts of ``moe_intermediate_size`` every ``decoder_sparse_step`` layers except
    ``mlp_only_layers``, and a shared expert of ``shared_expert_intermediate_size`` (0: none).

    transformers 5 saves ``num_experts`` as ``num_local_experts`` (Qwen3MoeConfig's attribute_map): both are read."""
    experts = r.first_of("num_experts", ("num_experts", "num_local_experts"))
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    step = r.optional("decoder_sparse_step", ("decoder_sparse_step",)) or 1
    only_mlp = set(layer_indices(r, "mlp_only_layers", r.raw("mlp_only_layers"), layers)) \
        if r.has("mlp_only_layers") else set()
    moe = [i for i in range(layers) if i not in only_mlp and (i + 1) % step == 0]
    shared = r.first_of("shared_expert_intermediate_size", ("shared_expert_intermediate_size",), required=False,
                        kind="count")
    return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=size, shared_size=shared or None)


def first_k_dense_moe(r: ConfigReader, layers: int, top_k: int | None) -> MoeLayout:
    """DeepSeek-MoE and its descendants: ``n_routed_experts`` experts in layers from
    ``first_k_dense_replace`` on (every ``moe_layer_freq``-th), plus ``n_shared_experts`` of the same size."""
    experts = r.optional("num_experts", ("n_routed_experts",))
    if not experts:
        return NO_MOE
    size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
    first_dense = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), required=False, kind="count") or 0
    freq = r.optional("moe_layer_freq", ("moe_layer_freq",)) or 1
    moe = [i for i in range(layers) if i >= first_dense and i % freq == 0]
    shared = r.first_of("n_shared_experts", ("n_shared_experts",), required=False, kind="count")
    return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=size, shared_size=(shared * size if shared else None))


def mlp_types_moe(r: ConfigReader, layers: int, *, experts: int, top_k: int | None, expert_size: int,
                  shared_size: int | None) -> MoeLayout:
    """MoE in the layers ``mlp_layer_types`` marks ``sparse`` (``dense`` for the rest), else from
    ``first_k_dense_replace`` on: the per-layer list transformers 5 config classes derive from that key."""
    if r.has("mlp_layer_types"):
        kinds = r.first_of("mlp_layer_types", ("mlp_layer_types",), kind="list")
        if len(kinds) < layers or not set(kinds[:layers]) <= {"dense", "sparse"}:
            raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types must give dense or sparse per layer",
                              f"one entry per layer ({layers})")
        moe = [i for i in range(layers) if kinds[i] == "sparse"]
    else:
        first = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
        moe = list(range(min(first, layers), layers))
    return MoeLayout(layers=moe, experts=experts, top_k=top_k, expert_size=expert_size, shared_size=shared_size)


# ---- the GPT-2-style block -------------------------------------------------------------------------
def classic_decoder(
    r: ConfigReader,
    model_type: str,
    *,
    inner_aliases: tuple[str, ...],
    kv_width: Callable[[int, int], int] | None = None,
    bias: bool = True,
    mlp_bias: bool | None = None,
    norms_per_layer: int = 2,
    lm_head_bias: bool = False,
    embedding_norm: bool = False,
    positions: tuple[str, ...] = (),
    position_offset: int = 0,
    inner: int | None = None,
) -> WeightCount:
    """GPT-2-style blocks: LayerNorms with bias, a non-gated MLP (4 x hidden unless the family names
    its width), a fused or split q/k/v of ``hidden + 2 * kv_width(hidden, head_dim)``, biases on most
    projections; ``positions`` names the learned position table's length, when there is one."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layer", "num_layers"))
    heads = r.first_of("num_attention_heads", ("num_attention_heads", "n_head", "num_heads"))
    head_dim = hidden // heads
    ln = 2 * hidden  # LayerNorm weight + bias
    if inner is None:  # ``inner``: the width a family derives itself (GPT-NeoX-Japanese)
        inner = r.optional("intermediate_size", inner_aliases) if inner_aliases else None
    if not inner:
        inner = 4 * hidden
        r.note(f"MLP width is 4 x hidden_size = {inner} ({model_type} default)")
    kv = kv_width(hidden, head_dim) if kv_width else hidden
    attn = [Matrix(in_features=hidden, out_features=hidden + 2 * kv, count=layers),
            Matrix(in_features=hidden, out_features=hidden, count=layers)]
    mlp = [Matrix(in_features=hidden, out_features=inner, count=layers),
           Matrix(in_features=inner, out_features=hidden, count=layers)]
    parts = embeddings(r, hidden, lm_head_bias=lm_head_bias)
    parts += [
        WeightPart(name="attention", matrices=tuple(attn),
                   other_parameters=(hidden + 2 * kv + hidden) * layers if bias else 0),
        WeightPart(name="mlp", matrices=tuple(mlp),
                   other_parameters=(inner + hidden) * layers if (bias if mlp_bias is None else mlp_bias) else 0),
        WeightPart(name="norms", other_parameters=(norms_per_layer * layers + 1) * ln + (ln if embedding_norm else 0),
                   tp_sharded=False),
    ]
    if positions:
        count = r.first_of("max_position_embeddings", positions) + position_offset
        parts.append(WeightPart(name="position_embeddings", other_parameters=count * hidden))
    shape = {"hidden_size": hidden, "mlp_width": inner, "qkv_width": hidden + 2 * kv, "vocab_size": vocab_of(r)}
    return count_of(parts, None, None, shape)
