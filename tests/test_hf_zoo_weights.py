"""The weights oracle: kvplan's parameter count against transformers' own, model type by model type.

tools/hf_zoo_weights.py built every generation model type of the installed transformers (its config class's
defaults, shrunk as tools/hf_zoo.py shrinks them) on the meta device and counted what a checkpoint holds:
parameters once each (tied weights once) and the buffers the state dict saves. tests/data/hf_zoo_weights.json
keeps the counts and the configs. A model type kvplan miscounts
or refuses is listed in tests/data/hf_zoo_weights_misses.json with the reason; a new miss fails, and
so does a listed one that is now exact (the list only shrinks).
"""

from __future__ import annotations

import pytest
from hf_oracle import MISSES, RECORDS, compare_weights, counted, load

pytestmark = pytest.mark.skipif(not RECORDS["weights"].exists(),
                                reason="tests/data/hf_zoo_weights.json absent (tools/hf_zoo_weights.py)")

DOC, EXPECTED_MISSES = load("weights") if RECORDS["weights"].exists() else ({"records": {}}, {})
COUNTED = counted(DOC) if DOC["records"] else {}


@pytest.mark.parametrize("model_type", sorted(COUNTED))
def test_weights_match_transformers(model_type: str) -> None:
    outcome = compare_weights(model_type, COUNTED[model_type])
    if model_type in EXPECTED_MISSES:
        assert not outcome.exact, (f"{model_type} now counts exactly ({outcome.measured_bytes:,} parameters): "
                                   f"remove it from {MISSES['weights'].name}")
    else:
        assert outcome.exact, f"{model_type}: {outcome.reason}"


def test_weights_misses_name_counted_model_types() -> None:
    stale = sorted(set(EXPECTED_MISSES) - set(COUNTED))
    assert not stale, f"{MISSES['weights'].name} lists model types transformers did not count: {stale}"
    exact = len(COUNTED) - len(EXPECTED_MISSES)
    print(f"\nweights exact on {exact} of {len(COUNTED)} counted model types "
          f"(transformers {DOC.get('transformers_version')})")


def test_each_weights_miss_says_its_cause() -> None:
    # tests/hf_oracle.py's WEIGHT_MISS_CAUSES: what kvplan does not model, for every listed miss
    uncaused = sorted(t for t, reason in EXPECTED_MISSES.items() if "; cause: " not in reason)
    assert not uncaused, f"add a cause to WEIGHT_MISS_CAUSES in tests/hf_oracle.py for {uncaused}"
