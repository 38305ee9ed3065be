"""Databricks DBRX: MPT-style config keys (``d_model``, ``n_heads``), KV groups in ``attn_config.kv_n_heads``."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader


class DbrxParser(ArchParser):
    """DBRX: ``d_model`` / ``n_heads`` / ``n_layers`` / ``max_seq_len``; KV heads in ``attn_config.kv_n_heads``."""

    family = "dbrx"
    model_types = ("dbrx",)
    #: DbrxConfig defaults (DbrxAttentionConfig: kv_n_heads = 1).
    defaults = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048, "attn_config.kv_n_heads": 1}
    MAX_CONTEXT = ("max_seq_len", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        return r.first_of("num_kv_heads", ["attn_config.kv_n_heads", *self.KV_HEADS])


PARSERS: tuple[type[ArchParser], ...] = (DbrxParser,)
