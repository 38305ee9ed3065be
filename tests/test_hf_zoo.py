"""The zoo: kvplan ``--engine hf-dynamic`` against what transformers really caches, model type by model type.

tools/hf_zoo.py built every generation model type of the installed transformers from its own config
defaults (shrunk, cache geometry kept), ran generate() and measured the cache; tests/data/hf_zoo.json
keeps the records. A model type kvplan misses must be listed in tests/data/hf_zoo_misses.json with
its reason; a new miss fails, and so does a listed one that now matches (the list only shrinks).
"""

from __future__ import annotations

import pytest
from hf_oracle import DTYPES, MISSES, RECORDS, cache_tokens, compare, kvplan_hf_dynamic, load, measured

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
    """Each record's layers add up to its total, and its cache holds the tokens ``cache_tokens`` says (generate() never
    feeds the last new token back), plus the tokens kvplan says the model's transformers code adds (provenance
    ``hf_added_tokens``: CPM-Ant's prompt, XLM's mask token)."""
    for model_type, record in MEASURED.items():
        assert record["total_bytes"] == sum(layer["bytes"] for layer in record["layers"]), model_type
        # None for pure state caches (no token axis)
        asked = cache_tokens(record)[0]
        if record.get("cache_tokens") and model_type not in EXPECTED_MISSES and record["cache_tokens"] != asked:
            _code, report = kvplan_hf_dynamic(record["config"], batch=record["batch"], seq_len=asked,
                                              kv_dtype=DTYPES[record["dtype"]], encoder_len=cache_tokens(record)[1])
            assert not isinstance(report, str), (model_type, report)
            added = next((p["value"] for p in report["provenance"] if p["field"] == "hf_added_tokens"), 0)
            assert record["cache_tokens"] == asked + added, (model_type, record["cache_tokens"], asked, added)
    exact = len(MEASURED) - len(EXPECTED_MISSES)
    print(f"\nhf-dynamic exact on {exact} of {len(MEASURED)} measured model types "
          f"({len(DOC['records'])} generation model types in transformers {DOC.get('transformers_version')}; "
          f"{len(DOC['records']) - len(MEASURED)} not buildable from their defaults)")
