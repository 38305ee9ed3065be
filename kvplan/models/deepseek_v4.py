"""DeepSeek-V4 (``deepseek_v4``): compressed-sparse, heavily compressed and sliding-only attention layers over
one shared K=V head, hyper-connections, hash-routed then top-k routed MoE. Its cache layout and its weights."""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, embeddings, hidden_of, vocab_of
from kvplan.models.decoder import DecoderParser, note_mtp
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of, experts_parts
from kvplan.specs import CompressedSparseSpec, HeavilyCompressedSpec, LayerSpec, SharedKVSlidingSpec


class DeepseekV4Parser(DecoderParser):
    """DeepSeek-V4 (``deepseek_v4``): one shared K/V head with a q LoRA and a grouped low-rank output,
    attention sinks; per layer a sliding window only (ratio 0), a compressed-sparse compressor with its
    lightning indexer (ratio 4) or a heavily compressed one (ratio 128); hyper-connections of ``hc_mult``
    streams around attention and MoE; MoE in every layer (hash-routed in the first ``num_hash_layers``).

    Cache: every layer keeps a ``sliding_window`` of one K=V row of ``head_dim``; a compressed layer also keeps
    one entry per ``compress_rates[type]`` tokens (and, CSA, an ``index_head_dim`` indexer key per entry).
    Layer types from ``layer_types``, else the Hub's per-layer ``compress_ratios`` (entries past the layers are
    the MTP layers'), else DeepseekV4Config's default schedule (transformers 5.24 configuration_deepseek_v4.py).
    """

    family = "deepseek_v4"
    model_types = ("deepseek_v4",)
    weight_types = ("deepseek_v4",)
    #: DeepseekV4Config defaults (transformers 5.24) of the keys the cache and weight count read.
    defaults = {"head_dim": 512, "sliding_window": 128, "index_head_dim": 128, "index_n_heads": 64,
                "num_hidden_layers": 43, "max_position_embeddings": 1048576, "tie_word_embeddings": False,
                # DeepseekV4Config.default_num_hash_layers: the first 3 MoE layers hash-routed (no mlp_layer_types)
                "num_hash_layers": 3}
    CSA, HCA, SWA = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"
    DEFAULT_RATES = {CSA: 4, HCA: 128}

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        layers = self.num_layers(r)
        types = self._layer_types(r, layers)
        rates = self._rates(r)
        head = r.first_of("head_dim", ("head_dim",))
        window = r.first_of("sliding_window", ("sliding_window",))
        index = r.first_of("index_head_dim", ("index_head_dim",)) if self.CSA in types else 0
        specs: dict[str, LayerSpec] = {
            self.SWA: SharedKVSlidingSpec(head_size=head, sliding_window=window, compress_ratio=0),
            self.CSA: CompressedSparseSpec(head_size=head, sliding_window=window, compress_ratio=rates[self.CSA],
                                           index_head_size=index, overlap=True),
            self.HCA: HeavilyCompressedSpec(head_size=head, sliding_window=window, compress_ratio=rates[self.HCA]),
        }
        counts = {t: types.count(t) for t in (self.SWA, self.CSA, self.HCA)}
        r.note(f"DeepSeek-V4 attention: one K=V row of head_dim {head} per token in a {window}-token window in every "
               f"layer; {counts[self.CSA]} compressed-sparse layers add one entry per {rates[self.CSA]} tokens with an "
               f"indexer key of {index}, {counts[self.HCA]} heavily compressed layers one entry per {rates[self.HCA]} "
               f"tokens, {counts[self.SWA]} layers the window only")
        return [specs[t] for t in types]

    def _rates(self, r: ConfigReader) -> dict[str, int]:
        rates = dict(self.DEFAULT_RATES)
        given = r.raw("compress_rates")
        if isinstance(given, Mapping):
            rates.update({k: r.check(f"compress_rates.{k}", v, "int") for k, v in given.items() if k in rates})
        else:
            r.note(f"compress_rates is not in the config; using the deepseek_v4 architecture default {rates}")
        for key, name in (("compress_rate_csa", self.CSA), ("compress_rate_hca", self.HCA)):
            if r.has(key):  # legacy top-level overrides, folded in as DeepseekV4Config.__post_init__ does
                rates[name] = r.first_of(key, (key,))
        return rates

    def _layer_types(self, r: ConfigReader, layers: int) -> list[str]:
        """Each layer's attention type: ``layer_types``, else the Hub's ``compress_ratios`` (0 sliding, the CSA
        rate, the HCA rate; entries past the layers are the MTP layers'), else the config class's default."""
        allowed = (self.SWA, self.CSA, self.HCA)
        if r.has("layer_types"):
            types = r.first_of("layer_types", ("layer_types",), kind="list")
            if len(types) < layers or not set(types[:layers]) <= set(allowed):
                raise ConfigError(f"{r.source_name}: {r.prefix}layer_types does not give one DeepSeek-V4 attention "
                                  f"type per layer", f"use {', '.join(allowed)}")
            return list(types[:layers])
        if r.has("compress_ratios"):
            ratios = r.first_of("compress_ratios", ("compress_ratios",), kind="list")
            by_ratio = {0: self.SWA, **{rate: name for name, rate in self._rates(r).items()}}
            if len(ratios) < layers or not set(ratios[:layers]) <= set(by_ratio):
                raise ConfigError(f"{r.source_name}: {r.prefix}compress_ratios does not give one ratio per layer "
                                  f"from {sorted(by_ratio)}", "use 0 (sliding only) or a rate of compress_rates")
            if len(ratios) > layers:
                r.note(f"compress_ratios has {len(ratios)} entries for {layers} layers: the last "
                       f"{len(ratios) - layers} are the multi-token-prediction layers', not cached at inference")
            return [by_ratio[x] for x in ratios[:layers]]
        r.note("neither layer_types nor compress_ratios is in the config: DeepseekV4Config's default schedule "
               "(2 heavily compressed layers, then compressed-sparse and heavily compressed alternating)")
        return [self.HCA] * min(layers, 2) + [self.CSA if i % 2 else self.HCA for i in range(max(layers - 2, 0))]

    def _hash_layers(self, r: ConfigReader, layers: int) -> int:
        """How many MoE layers route by a token -> experts table: ``mlp_layer_types`` (``hash_moe`` / ``moe``
        per layer, as transformers 5 saves it), else the legacy ``num_hash_layers`` (first N), else the default."""
        if r.has("mlp_layer_types"):
            kinds = r.first_of("mlp_layer_types", ("mlp_layer_types",), kind="list")
            if len(kinds) < layers or not set(kinds[:layers]) <= {"hash_moe", "moe"}:
                raise ConfigError(f"{r.source_name}: {r.prefix}mlp_layer_types does not give hash_moe or moe per layer",
                                  "one entry per layer: hash_moe (hash-routed) or moe (top-k routed)")
            return kinds[:layers].count("hash_moe")
        return min(layers, r.first_of("num_hash_layers", ("num_hash_layers",), kind="count"))

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        head_dim = r.first_of("head_dim", ("head_dim",))
        q_rank = r.first_of("q_lora_rank", ("q_lora_rank",))
        o_rank = r.first_of("o_lora_rank", ("o_lora_rank",))
        o_groups = r.first_of("o_groups", ("o_groups",))
        types = self._layer_types(r, layers)
        rates = self._rates(r)
        n_csa, n_hca = types.count(self.CSA), types.count(self.HCA)
        m_csa, m_hca = rates[self.CSA], rates[self.HCA]
        index_dim = r.first_of("index_head_dim", ("index_head_dim",))
        index_heads = r.first_of("index_n_heads", ("index_n_heads",))
        q = heads * head_dim
        attention = [Matrix(in_features=hidden, out_features=q_rank, count=layers),
                     Matrix(in_features=q_rank, out_features=q, count=layers),
                     Matrix(in_features=hidden, out_features=head_dim, count=layers),  # the shared K/V head
                     Matrix(in_features=q // o_groups, out_features=o_rank, count=o_groups * layers),  # o_a, grouped
                     Matrix(in_features=o_groups * o_rank, out_features=hidden, count=layers),  # o_b
                     # compressors: kv and gate projections (CSA at twice the width), the CSA indexer's own
                     Matrix(in_features=hidden, out_features=2 * head_dim, count=2 * n_csa),
                     Matrix(in_features=hidden, out_features=head_dim, count=2 * n_hca),
                     Matrix(in_features=hidden, out_features=2 * index_dim, count=2 * n_csa),
                     Matrix(in_features=q_rank, out_features=index_heads * index_dim, count=n_csa),
                     Matrix(in_features=hidden, out_features=index_heads, count=n_csa)]
        # q_a/kv norms, sinks; compressor position biases and norms
        other = (q_rank + head_dim + heads) * layers + n_csa * (m_csa * 2 * head_dim + head_dim) \
            + n_hca * (m_hca * head_dim + head_dim) + n_csa * (m_csa * 2 * index_dim + index_dim)
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
        streams = r.first_of("hc_mult", ("hc_mult",))
        mix = (2 + streams) * streams
        parts.append(WeightPart(name="hyper_connections", matrices=(
            Matrix(in_features=streams * hidden, out_features=mix, count=2 * layers),
            Matrix(in_features=streams * hidden, out_features=streams)),
            other_parameters=(mix + 3) * 2 * layers + streams + 1, tp_sharded=False))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        experts = r.first_of("num_experts", ("n_routed_experts",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.first_of("n_shared_experts", ("n_shared_experts",), kind="count")
        hashed = self._hash_layers(r, layers)
        parts += experts_parts(hidden, size, experts, layers, shared_size=shared * size or None)
        # the top-k routers' correction bias; the hash routers' token -> experts table
        parts.append(WeightPart(name="router_tables", other_parameters=experts * (layers - hashed)
                                + vocab_of(r) * (top_k or 0) * hashed, tp_sharded=False))
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        r.note(f"DeepSeek-V4: {n_csa} compressed-sparse, {n_hca} heavily compressed and "
               f"{layers - n_csa - n_hca} sliding-only attention layers; {experts} experts per layer, all resident")
        note_mtp(r, self.MTP_KEY)
        return count_of(parts, experts, top_k, {"hidden_size": hidden, "mlp_width": (top_k or 1) * size + shared * size,
                                                "qkv_width": q + head_dim, "vocab_size": vocab_of(r)})



PARSERS: tuple[type[ArchParser], ...] = (DeepseekV4Parser,)
