"""The zoo: kvplan ``--engine hf-dynamic`` against what transformers really caches, model type by model type.

tools/hf_zoo.py built every generation model type of the installed transformers from its own config
defaults (shrunk, cache geometry kept), ran generate() and measured the cache; tests/data/hf_zoo.json
keeps the records. A model type kvplan misses must be listed in tests/data/hf_zoo_misses.json with
its reason; a new miss fails, and so does a listed one that now matches (the list only shrinks).
"""

from __future__ import annotations

import pytest
from hf_oracle import MISSES, RECORDS, cache_tokens, compare, load, measured

pytestmark = pytest.mark.skipif(not RECORDS["zoo"].exists(), reason="tests/data/hf_zoo.json absent (tools/hf_zoo.py)")

DOC, EXPECTED_MISSES = load("zoo") if RECORDS["zoo"].exists() else ({"records": {}}, {})
MEASURED = measured(DOC)


@pytest.mark.parametrize("model_type", sorted(MEASURED))
def test_hf_dynamic_matches_transformers(model_type: str) -> None:
    outcome = compare(model_type, MEASURED[model_type])
    if model_type in EXPECTED_MISSES:
        assert not outcome.exact, (f"{model_type} is now exact ({outcome.measured_bytes:,} B): "
                                   f"remove it from {MISSES['zoo'].name}")
    else:
        assert outcome.exact, f"{model_type}: {outcome.reason}"


def test_misses_list_names_measured_model_types() -> None:
    stale = sorted(set(EXPECTED_MISSES) - set(MEASURED))
    assert not stale, f"{MISSES['zoo'].name} lists model types with no measurement: {stale}"


def test_records_hold_the_tokens_the_adapter_asks_kvplan_for() -> None:
    """Each record's layers add up to its total, and its cache holds the tokens ``cache_tokens`` says (generate() never feeds the last new token back)."""
    for model_type, record in MEASURED.items():
        assert record["total_bytes"] == sum(layer["bytes"] for layer in record["layers"]), model_type
        # None for pure state caches (no token axis); CPM-Ant and XLM add tokens of their own: listed misses
        if record.get("cache_tokens") and model_type not in EXPECTED_MISSES:
            assert record["cache_tokens"] == cache_tokens(record)[0], model_type
    exact = len(MEASURED) - len(EXPECTED_MISSES)
    print(f"\nhf-dynamic exact on {exact} of {len(MEASURED)} measured model types "
          f"({len(DOC['records'])} generation model types in transformers {DOC.get('transformers_version')}; "
          f"{len(DOC['records']) - len(MEASURED)} not buildable from their defaults)")
