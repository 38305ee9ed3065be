"""MosaicML MPT: ALiBi positions, fused Wqkv with optional KV groups (``attn_config.kv_n_heads``)."""

from __future__ import annotations

from kvplan.models.base import _MISSING, ArchParser, ConfigReader, embeddings, hidden_of, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of


class MptParser(ArchParser):
    family = "mpt"
    model_types = ("mpt",)
    defaults = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048}
    defaults_by_type = {"mpt": {"tie_word_embeddings": True, "no_bias": True}}
    weight_types = ("mpt",)
    MAX_CONTEXT = ("max_seq_len", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        attn_type = r.raw("attn_config.attn_type")
        if attn_type == "multiquery_attention":
            r.record("num_kv_heads", 1, r.where("attn_config.attn_type"))
            return 1
        if attn_type == "multihead_attention":
            r.record("num_kv_heads", heads, r.where("attn_config.attn_type"))
            return heads
        value = r.optional("num_kv_heads", ["attn_config.kv_n_heads", *self.KV_HEADS])
        if value is not None:
            return value
        return super().kv_heads(r, heads)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """MPT: fused Wqkv (attn_config.kv_n_heads for GQA), up/down MLP of expansion_ratio x d_model, ALiBi
        (no position embeddings, as transformers' MptModel), LayerNorms without bias when no_bias."""
        hidden = hidden_of(r)
        layers = r.first_of("num_hidden_layers", ("n_layers",))
        heads = r.first_of("num_attention_heads", ("n_heads",))
        head_dim = hidden // heads
        kv_heads = r.optional("num_kv_heads", ("attn_config.kv_n_heads",)) or heads
        ratio = r.raw("expansion_ratio")
        if ratio is not _MISSING:
            ratio = r.check("expansion_ratio", ratio, "ratio")
        else:
            ratio = 4
            r.note("expansion_ratio is not in the config; the MPT default is 4")
        inner = int(ratio * hidden)
        bias = not switch(r, "no_bias", True)
        qkv = hidden + 2 * kv_heads * head_dim
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=qkv, count=layers),
            Matrix(in_features=hidden, out_features=hidden, count=layers)),
            other_parameters=(qkv + hidden) * layers if bias else 0))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=inner, count=layers),
            Matrix(in_features=inner, out_features=hidden, count=layers)),
            other_parameters=(inner + hidden) * layers if bias else 0))
        ln = 2 * hidden if bias else hidden
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * ln, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": qkv,
                                           "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (MptParser,)
