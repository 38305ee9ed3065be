"""CPM-Ant (cpmant.py)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers_meta import check_lm_count

#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("cpmant", {}),
    ("cpmant fewer prompts", {"prompt_types": 8, "segment_types": 8, "num_hidden_layers": 4}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)
