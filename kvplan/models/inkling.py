"""Thinking Machines Inkling (``inkling_text``, ``inkling2_text``, ``inkling2_loop_text`` and their
multimodal wrappers): every layer is attention plus short convolutions.

``layer_types`` names each layer ``hybrid_sliding`` (sliding-window attention of
``sliding_window_size`` tokens with the ``swa_*`` heads and head dim) or ``hybrid`` (full attention
with ``num_key_value_heads`` x ``head_dim``). Every layer also keeps four short-convolution states
of ``conv_kernel_size`` inputs each, in float32 whatever the model dtype (transformers runs the
convolutions in float32): on K and on V (the layer's K/V width) and before attention and the MLP
(``hidden_size``). Inkling-2-Loop runs layers ``loop_layer_index_start`` to ``loop_layer_index_end``
``loop_num_passes`` times, each pass with caches of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader
from kvplan.specs import FullAttentionSpec, LayerSpec, SlidingWindowSpec, StateSpec

_SLIDING, _FULL = "hybrid_sliding", "hybrid"


class InklingParser(ArchParser):
    """hybrid_sliding (swa_* heads) / hybrid (full) attention, four float32 short-conv states per layer."""

    family = "inkling"
    model_types = ("inkling_text", "inkling2_text", "inkling2_loop_text")
    #: InklingTextConfig defaults; Inkling2's differ where ``defaults_by_type`` says. ``layer_types``
    #: defaults to ``hybrid`` every sixth layer (``(i + 1) % 6 == 0``), ``hybrid_sliding`` otherwise.
    defaults = {"num_hidden_layers": 66, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
                "swa_num_key_value_heads": 16, "swa_head_dim": 128, "sliding_window_size": 512, "conv_kernel_size": 4,
                "hidden_size": 6144, "max_position_embeddings": 131072}
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "inkling2_text": {"num_hidden_layers": 48, "num_attention_heads": 48, "swa_num_key_value_heads": 8,
                          "sliding_window_size": 1024, "hidden_size": 4608, "max_position_embeddings": 1048576},
        "inkling2_loop_text": {"num_hidden_layers": 24, "num_attention_heads": 24, "swa_num_key_value_heads": 8,
                               "sliding_window_size": 1024, "hidden_size": 2304, "max_position_embeddings": 1048576,
                               "loop_layer_index_start": 6, "loop_layer_index_end": 18, "loop_num_passes": 3},
    }
    KV_HEADS = ("num_key_value_heads",)
    HEAD_DIM = ("head_dim",)

    def layer_types(self, r: ConfigReader, num_layers: int) -> list[str]:
        types = r.raw("layer_types")
        if not r.has("layer_types"):
            r.note("layer_types is not in the config; the Inkling default: hybrid every sixth layer, hybrid_sliding "
                   "otherwise")
            return [_FULL if (i + 1) % 6 == 0 else _SLIDING for i in range(num_layers)]
        r.check("layer_types", types, "list")
        if len(types) != num_layers or any(t not in (_SLIDING, _FULL) for t in types):
            raise ConfigError(
                f"{r.source_name}: {r.prefix}layer_types must hold {num_layers} entries of {_SLIDING!r} or {_FULL!r}",
                "one entry per layer",
            )
        return list(types)

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        types = self.layer_types(r, num_layers)
        hidden = r.first_of("hidden_size", ("hidden_size",))
        kernel = r.first_of("conv_kernel_size", ("conv_kernel_size", "sconv_kernel_size"))
        full = swa = None
        if _FULL in types:
            heads, dim = r.first_of("num_kv_heads", self.KV_HEADS), r.first_of("head_dim", self.HEAD_DIM)
            full = FullAttentionSpec(num_kv_heads=heads, head_size=dim, head_size_v=dim)
        if _SLIDING in types:
            heads = r.first_of("swa_num_kv_heads", ("swa_num_key_value_heads",))
            dim = r.first_of("swa_head_dim", ("swa_head_dim",))
            window = r.first_of("sliding_window", ("sliding_window_size", "sliding_window"))
            swa = SlidingWindowSpec(num_kv_heads=heads, head_size=dim, head_size_v=dim, sliding_window=window)
        attention: list[LayerSpec] = []
        states: list[LayerSpec] = []
        for kind in types:
            spec = full if kind == _FULL else swa
            assert spec is not None
            attention.append(spec)
            kv = spec.num_kv_heads * spec.head_size  # type: ignore[attr-defined]
            names = ("conv_k", "conv_v", "conv_attn", "conv_mlp")
            # NOTE: (kernel - 1, channels) as vLLM sizes a short conv; transformers keeps all ``kernel`` inputs.
            states.append(StateSpec(mixer="short_conv", shapes=tuple(zip(names, ((kernel - 1, kv), (kernel - 1, kv),
                                    (kernel - 1, hidden), (kernel - 1, hidden)), strict=True)), fp32_tensors=names))
        r.note(f"Inkling: every layer keeps attention K/V and four float32 short-convolution states of "
               f"conv_kernel_size = {kernel} inputs (K, V, pre-attention, pre-MLP)")
        passes = r.optional("loop_num_passes", ("loop_num_passes",)) if r.defaults_name == "inkling2_loop_text" else None
        if passes and passes > 1:
            start = r.first_of("loop_layer_index_start", ("loop_layer_index_start",))
            end = min(r.first_of("loop_layer_index_end", ("loop_layer_index_end",)), num_layers)
            if start < end:
                r.note(f"loop_num_passes = {passes}: layers {start}..{end - 1} run {passes} times, each pass with "
                       f"caches of its own ({(passes - 1) * (end - start)} extra layer caches)")
                attention += attention[start:end] * (passes - 1)
                states += states[start:end] * (passes - 1)
        return attention + states

    def max_context(self, r: ConfigReader) -> int | None:
        return r.optional("max_context_tokens", ("max_position_embeddings",))


PARSERS: tuple[type[ArchParser], ...] = (InklingParser,)
