"""Decoder-only transformer families whose layers all cache K and V the same way.

Defaults are the architectures' own (their transformers config classes), used only for keys a
sparse config omits, and always noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.arch.base import FULL, SLIDING, ArchParser, ConfigReader
from kvplan.errors import ConfigError
from kvplan.specs import FullAttentionSpec, LayerSpec, NoCacheSpec, SlidingWindowSpec


class LlamaParser(ArchParser):
    family = "llama"
    model_types = ("llama", "internlm2", "internlm3", "baichuan", "stablelm", "olmo", "olmo2", "olmo3",
                   "cohere", "glm", "glm4", "glm4_moe", "granite", "granitemoe", "exaone", "deepseek",
                   "yi", "aquila", "mistral_nemo", "arcee", "smollm3", "ernie4_5", "ernie4_5_moe",
                   "hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan", "seed_oss", "apertus", "minimax_m2", "dbrx_text", "nemotron",
                   "olmoe", "arctic", "glm4_moe_lite", "ministral3", "phi3small", "granite_moe",
                   "persimmon", "qwen", "orion", "xverse")
    defaults: ClassVar[Mapping[str, Any]] = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "max_position_embeddings": 2048,
    }

    def defaults_for(self, model_type: str) -> Mapping[str, Any]:
        # Only the Llama class's defaults are known to kvplan; other members read complete configs.
        return self.defaults if model_type == "llama" else {}


class MistralParser(ArchParser):
    family = "mistral"
    model_types = ("mistral", "ministral")
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
    }


class MixtralParser(ArchParser):
    family = "mixtral"
    model_types = ("mixtral",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
    }


class QwenParser(ArchParser):
    """Qwen2/2.5/3 (+MoE): windows only when ``use_sliding_window``, only for layers >= max_window_layers."""

    family = "qwen"
    model_types = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_5_vl_text",
                   "qwen2_vl_text", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_text", "qwen3_vl_moe_text")
    defaults = {"use_sliding_window": False, "max_window_layers": 28, "max_position_embeddings": 32768}

    def pattern_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        if not r.flag("use_sliding_window", False):
            if r.has("sliding_window"):
                r.note("use_sliding_window is false: sliding_window is ignored, every layer is full attention")
            return [FULL] * num_layers
        if not r.has("sliding_window"):
            return [FULL] * num_layers
        first = r.first_of("max_window_layers", ["max_window_layers"])
        r.note(f"use_sliding_window is true: layers {first} and above slide (max_window_layers = {first})")
        return [SLIDING if index >= first else FULL for index in range(num_layers)]


class PhiParser(ArchParser):
    family = "phi"
    model_types = ("phi", "phi3", "phimoe", "phi4")
    defaults = {}


class GemmaParser(ArchParser):
    family = "gemma"
    model_types = ("gemma",)
    defaults = {
        "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
        "head_dim": 256, "max_position_embeddings": 8192,
    }


class Gpt2Parser(ArchParser):
    family = "gpt2"
    model_types = ("gpt2", "gptj", "gpt_neo", "codegen", "gpt_neox", "gpt_neox_japanese", "opt", "bloom",
                   "starcoder2", "biogpt", "xglm")
    defaults: ClassVar[Mapping[str, Any]] = {}
    _DEFAULTS_BY_TYPE: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "gpt2": {"n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12},
        "gptj": {"n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16},
        "gpt_neox": {"max_position_embeddings": 2048, "hidden_size": 6144, "num_hidden_layers": 44,
                     "num_attention_heads": 64},
        "opt": {"max_position_embeddings": 2048, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12},
    }

    def defaults_for(self, model_type: str) -> Mapping[str, Any]:
        return self._DEFAULTS_BY_TYPE.get(model_type, {})


class GptBigCodeParser(ArchParser):
    family = "gpt_bigcode"
    model_types = ("gpt_bigcode",)
    defaults = {"n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "multi_query": True}

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.flag("multi_query", True):
            r.record("num_kv_heads", 1, r.where("multi_query"))
            return 1
        r.record("num_kv_heads", heads, "derived: multi_query is false, so num_kv_heads = num_attention_heads")
        return heads


class FalconParser(ArchParser):
    """Falcon: ``new_decoder_architecture`` uses ``num_kv_heads`` groups; otherwise ``multi_query`` (default true) = 1 head."""

    family = "falcon"
    model_types = ("falcon", "RefinedWeb", "RefinedWebModel")
    defaults = {
        "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
        "max_position_embeddings": 2048,
    }

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.raw("new_decoder_architecture") is True:
            value = r.optional("num_kv_heads", self.KV_HEADS)
            if value is None:
                r.record("num_kv_heads", heads, "derived: new_decoder_architecture without num_kv_heads")
                r.note("new_decoder_architecture without num_kv_heads: num_kv_heads = num_attention_heads")
                return heads
            r.note(
                "new_decoder_architecture: counted with num_kv_heads groups as vLLM caches them "
                "(transformers 5.x caches K/V broadcast to every query head, num_attention_heads / num_kv_heads times more)"
            )
            # NOTE: read by the hf-dynamic/hf-static engine profiles (modeling_falcon broadcast_to before caching).
            r.record("hf_cached_kv_heads", heads,
                     "transformers modeling_falcon: new_decoder_architecture broadcasts K/V to num_attention_heads")
            return value
        multi_query = r.raw("multi_query")
        if multi_query is True:
            r.record("num_kv_heads", 1, r.where("multi_query"))
            r.note("multi_query is true: one KV head (MQA)")
            return 1
        if multi_query is False:
            r.record("num_kv_heads", heads, "derived: multi_query is false, so num_kv_heads = num_attention_heads")
            return heads
        value = r.optional("num_kv_heads", self.KV_HEADS)
        if value is not None:
            return value
        r.record("num_kv_heads", 1, "default of falcon: multi_query = true")
        r.note("multi_query is not in the config; using the falcon default multi_query = true: one KV head")
        return 1


class MptParser(ArchParser):
    family = "mpt"
    model_types = ("mpt",)
    defaults = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048}
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


class ChatGlmParser(ArchParser):
    """ChatGLM2/3 and GLM-4 (remote code): ``multi_query_group_num`` KV heads when ``multi_query_attention``."""

    family = "chatglm"
    model_types = ("chatglm",)
    defaults = {
        "num_layers": 28, "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 128,
        "seq_length": 2048, "multi_query_attention": False, "multi_query_group_num": 1,
    }
    MAX_CONTEXT = ("seq_length", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.flag("multi_query_attention", False):
            return r.first_of("num_kv_heads", ["multi_query_group_num"])
        r.record("num_kv_heads", heads, "derived: multi_query_attention is false, so num_kv_heads = num_attention_heads")
        return heads

    def head_dim(self, r: ConfigReader, heads: int) -> int:
        value = r.optional("head_dim", ["kv_channels", "head_dim"])
        return value if value is not None else super().head_dim(r, heads)


class DbrxParser(ArchParser):
    """DBRX: ``d_model`` / ``n_heads`` / ``n_layers`` / ``max_seq_len``; KV heads in ``attn_config.kv_n_heads``."""

    family = "dbrx"
    model_types = ("dbrx",)
    #: DbrxConfig defaults (DbrxAttentionConfig: kv_n_heads = 1).
    defaults = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048, "attn_config.kv_n_heads": 1}
    MAX_CONTEXT = ("max_seq_len", "max_position_embeddings")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        return r.first_of("num_kv_heads", ["attn_config.kv_n_heads", *self.KV_HEADS])


class NemotronNasParser(ArchParser):
    """Nemotron NAS / DeciLM (Llama-3.x-Nemotron-51B/49B/253B): one ``block_configs`` entry per layer.

    A layer's attention is absent when ``attention.no_op`` or ``attention.replace_with_linear`` is true
    (no cache); otherwise it has ``num_attention_heads // attention.n_heads_in_group`` KV heads
    (vLLM ``nemotron_nas``; DeciLMConfig). ``num_key_value_heads`` is not used by these checkpoints.
    """

    family = "nemotron_nas"
    model_types = ("nemotron-nas",)

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
            if isinstance(window, int) and not isinstance(window, bool) and window > 0:
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
