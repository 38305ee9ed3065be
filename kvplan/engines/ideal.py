"""The ideal formula: no engine's rounding, pools or padding."""

from __future__ import annotations

from kvplan.adjust import Deployment
from kvplan.engines.base import EngineProfile


class IdealProfile(EngineProfile):
    """The formula: full layers T, sliding min(T, W), chunked min(T, C); ``--block-size`` rounds."""

    plain_formula = True

    def pool_block_size(self, sizes: list[int], dep: Deployment) -> int:
        return 1 if dep.block_size is None else max(sizes)

    def compressed_attention_note(self) -> str | None:
        return None
