"""The ideal formula: no engine's rounding, pools or padding."""

from __future__ import annotations

from kvplan.engines.base import EngineProfile


class IdealProfile(EngineProfile):
    """The formula: full layers T, sliding min(T, W), chunked min(T, C); ``--block-size`` rounds."""

    def compressed_attention_note(self) -> str | None:
        return None
