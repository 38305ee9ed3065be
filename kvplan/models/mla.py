"""Multi-head latent attention weights, generically: the per-layer MLA toolkit the MLA families count with
(deepseek.py: Mistral Large 4, HY-V4, A.X-K1/K2, dots3-note, LongCat-Flash, MiniCPM3...; glm.py: GLM-5, GLM-4.7-Flash;
mistral.py: Mistral 4), and :func:`mla_decoder_weights`, the DeepSeek-V3 layout those families share.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.base import ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import note_mtp
from kvplan.models.tensors import Tensors, WeightCount, WeightPart, count_of, experts_parts


def per_layer_list(r: ConfigReader, key: str, layers: int, allowed: set[Any], default: list[Any] | None) -> list[Any]:
    """A per-layer list of the config (one entry per layer from ``allowed``), else ``default`` (the config class's
    rule, which the caller notes)."""
    if not r.has(key):
        if default is None:
            r.first_of(key, (key,), kind="list")  # raises: required
        assert default is not None
        return default
    values = r.first_of(key, (key,), kind="list")
    if len(values) < layers or not set(values[:layers]) <= allowed:
        raise ConfigError(f"{r.source_name}: {r.prefix}{key} must give one of {sorted(map(str, allowed))} per layer",
                          f"one entry per layer ({layers})")
    return list(values[:layers])


def mlp_layer_kinds(r: ConfigReader, layers: int) -> list[str]:
    """``dense`` or ``sparse`` per layer: ``mlp_layer_types``, else MoE from ``first_k_dense_replace`` on, every
    ``moe_layer_freq``-th layer (the legacy keys the config classes fold into mlp_layer_types)."""
    if r.has("mlp_layer_types"):
        return per_layer_list(r, "mlp_layer_types", layers, {"dense", "sparse"}, None)
    first = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
    freq = r.first_of("moe_layer_freq", ("moe_layer_freq",))
    return ["sparse" if i >= first and i % freq == 0 else "dense" for i in range(layers)]


def mla_dims(r: ConfigReader) -> dict[str, int]:
    """The MLA dimensions; ``q_lora_rank`` 0 when the config has none (a full q projection)."""
    dims = {key: r.first_of(key, (key,)) for key in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim")}
    dims["qk_rope_head_dim"] = r.first_of("qk_rope_head_dim", ("qk_rope_head_dim",), kind="count")  # 0: no rope part
    dims["q_lora_rank"] = r.optional("q_lora_rank", ("q_lora_rank",)) or 0
    return dims


def add_mla_layer(t: Tensors, hidden: int, heads: int, dims: dict[str, int], *, bias: bool = False,
                  kv_bias: bool | None = None, q_up: tuple[int, int] | None = None) -> None:
    """One MLA attention: q (full, or q_a + norm + q_b), kv_a with the rope key + its norm, kv_b, o.
    ``bias``: q_a, kv_a and o biases (``attention_bias``); ``kv_bias`` overrides it for kv_a; ``q_up``: the
    (in, out) of the projection out of the q LoRA when it is not q_b's (A.X-K2's fused q and gate)."""
    rank, rope, nope, v_dim, q_rank = (dims[k] for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                                          "v_head_dim", "q_lora_rank"))
    kv_bias = bias if kv_bias is None else kv_bias
    if q_rank:
        t.add("attention", hidden, q_rank)
        t.add("attention", *(q_up or (q_rank, heads * (nope + rope))))
        t.vector("attention", q_rank + (q_rank if bias else 0))  # q_a_layernorm (+ q_a bias)
    else:
        t.add("attention", hidden, heads * (nope + rope))
    t.add("attention", hidden, rank + rope)
    t.add("attention", rank, heads * (nope + v_dim))
    t.add("attention", heads * v_dim, hidden)
    t.vector("attention", rank + ((rank + rope) if kv_bias else 0) + (hidden if bias else 0))


def add_indexer(t: Tensors, r: ConfigReader, hidden: int, q_rank: int, *, layer_norm: bool) -> None:
    """The DSA indexer of one layer: wq_b from the q LoRA, wk, a norm on its key (LayerNorm: weight and bias),
    weights_proj scoring its heads."""
    index_dim = r.first_of("index_head_dim", ("index_head_dim",))
    index_heads = r.first_of("index_n_heads", ("index_n_heads",))
    t.add("attention", q_rank, index_heads * index_dim)
    t.add("attention", hidden, index_dim)
    t.add("attention", hidden, index_heads)
    t.vector("attention", (2 if layer_norm else 1) * index_dim)


def finish_mla_moe(r: ConfigReader, t: Tensors, hidden: int, layers: int, heads: int, dims: dict[str, int],
                   n_moe: int, *, router_bias: bool, name: str, extra_norms: int = 0,
                   experts_keys: tuple[str, ...] = ("n_routed_experts", "num_local_experts", "num_experts"),
                   shared_key: str = "",
                   ) -> WeightCount:
    """Embeddings, the dense MLPs of the layers that are not MoE, the MoE layers (routed experts, shared experts
    of ``n_shared_experts * moe_intermediate_size``, the router with its correction bias), the norms."""
    intermediate = r.first_of("intermediate_size", ("intermediate_size",)) if n_moe < layers else 0
    t.add("mlp", hidden, intermediate, 2 * (layers - n_moe))
    t.add("mlp", intermediate, hidden, layers - n_moe)
    if r.raw("mlp_bias") is True:
        t.vector("mlp", (2 * intermediate + hidden) * (layers - n_moe))
    parts = embeddings(r, hidden) + t.parts()
    top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
    experts = size = shared = 0
    if n_moe:
        experts = r.first_of("num_experts", experts_keys)
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        # n_shared_experts of ``shared_key``'s width when the family names one, else of moe_intermediate_size
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count") * (
            r.first_of(shared_key, (shared_key,)) if shared_key else size)
        parts += experts_parts(hidden, size, experts, n_moe, shared_size=shared or None, router_bias=router_bias)
        r.note(f"{name}: {n_moe} MoE layers of {experts} experts (all resident), {layers - n_moe} dense")
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden + extra_norms, tp_sharded=False))
    note_mtp(r)
    q_width = heads * (dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"])
    return count_of(parts, experts or None, top_k if n_moe else None,
                    {"hidden_size": hidden, "mlp_width": max(intermediate, (top_k or 1) * size + shared),
                     "qkv_width": q_width + dims["kv_lora_rank"] + dims["qk_rope_head_dim"], "vocab_size": vocab_of(r)})


def mla_decoder_weights(r: ConfigReader, name: str, *, router_bias: bool, dense_first: str = "",
                        v_head_dim_from_hidden: str = "") -> WeightCount:
    """The DeepSeek-V3 layout under other names: MLA (q LoRA or a full q) in every layer, dense MLPs and MoE
    layers with shared experts per ``mlp_layer_types`` or ``first_k_dense_replace`` (``moe_layer_freq`` is not
    read), or dense only when the config has no ``n_routed_experts``.

    ``router_bias``: the router has DeepSeek-V3's e_score_correction_bias. ``dense_first``: the config class whose
    rule, without ``mlp_layer_types``, is a dense first layer and MoE after it. ``v_head_dim_from_hidden``: the
    config class that derives a missing ``v_head_dim`` as ``hidden_size // num_attention_heads``."""
    hidden = hidden_of(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    if v_head_dim_from_hidden and not r.has("v_head_dim"):
        r.note(f"v_head_dim is not in the config: {v_head_dim_from_hidden} derives hidden_size // "
               f"num_attention_heads = {hidden // heads}")
        r.defaults["v_head_dim"] = hidden // heads
    dims = mla_dims(r)
    bias = r.flag("attention_bias", False)
    if dense_first and not r.has("mlp_layer_types"):
        r.note(f"mlp_layer_types is not in the config: {dense_first}'s default, a dense first layer, MoE after")
        kinds = ["dense"] * min(1, layers) + ["sparse"] * max(layers - 1, 0)
    elif r.has("mlp_layer_types"):
        kinds = mlp_layer_kinds(r, layers)
    elif r.has("n_routed_experts"):  # MoE from first_k_dense_replace on (moe_layer_freq is not read)
        first = r.first_of("first_k_dense_replace", ("first_k_dense_replace",), kind="count")
        kinds = ["sparse" if i >= first else "dense" for i in range(layers)]
    else:
        kinds = ["dense"] * layers
    t = Tensors()
    for _ in range(layers):
        add_mla_layer(t, hidden, heads, dims, bias=bias)
    return finish_mla_moe(r, t, hidden, layers, heads, dims, kinds.count("sparse"), router_bias=router_bias,
                          name=name)
