"""Moonshot Kimi Linear: Kimi Delta Attention layers and MLA full-attention layers.

Kimi K2 / K2.5 are DeepSeek-V3's architecture and are read by deepseek.py.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.models.base import FULL, STATE, ArchParser, ConfigReader
from kvplan.specs import StateSpec


class KimiLinearParser(ArchParser):
    """Kimi Linear: Kimi Delta Attention (KDA) layers and MLA full-attention layers.

    ``linear_attn_config.kda_layers`` lists the KDA layers **1-based** (KimiLinearConfig.is_kda_layer:
    ``layer_idx + 1 in kda_layers``); the others are full attention, MLA when ``kv_lora_rank`` is set.
    A KDA layer keeps short-convolution states for q, k and v, ``(conv - 1, num_heads * head_dim)`` each,
    and a ``(num_heads, head_dim, head_dim)`` recurrent state that vLLM keeps in float32
    (``kda_state_shape`` / ``kda_state_dtype``).
    """

    family = "kimi_linear"
    model_types = ("kimi_linear",)
    _KDA = "linear_attn_config.kda_layers"

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        kda = r.first_of("kda_layers", [self._KDA], kind="list")
        bad = [i for i in kda if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= num_layers]
        if bad:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}{self._KDA} holds {bad[0]!r}, not a 1-based layer number in 1..{num_layers}",
                "kda_layers numbers layers from 1 (KimiLinearConfig.is_kda_layer)",
            )
        r.record("layer_types", f"KDA at 1-based {sorted(set(kda))}", r.where(self._KDA))
        r.note(f"{self._KDA} is 1-based: layer i is KDA when i + 1 is listed; the others are full attention")
        return [STATE if i + 1 in kda else FULL for i in range(num_layers)]

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        heads = r.first_of("kda_num_heads", ["linear_attn_config.num_heads"])
        head_dim = r.first_of("kda_head_dim", ["linear_attn_config.head_dim"])
        conv = r.first_of("kda_conv_kernel", ["linear_attn_config.short_conv_kernel_size"])
        if conv < 2:
            raise ConfigError(
                f"{r.source_name}: {r.prefix}linear_attn_config.short_conv_kernel_size must be at least 2, got {conv}",
                "fix the config",
            )
        return StateSpec(
            mixer="kda",
            shapes=(("conv", (conv - 1, 3 * heads * head_dim)), ("ssm", (heads, head_dim, head_dim))),
            fp32_tensors=("ssm",),
        )


PARSERS: tuple[type[ArchParser], ...] = (KimiLinearParser,)
