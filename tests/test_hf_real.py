"""Real Hub configs (../shared/hf_configs), shrunk without changing their cache geometry and measured with
transformers by tools/hf_zoo.py --real: kvplan ``--engine hf-dynamic`` must give the same bytes.

Expected misses live in tests/data/hf_real_misses.json (file stem -> reason): a new miss fails, and
so does a listed one that now matches.
"""

from __future__ import annotations

import pytest
from hf_oracle import MISSES, RECORDS, compare, load, measured

pytestmark = pytest.mark.skipif(not RECORDS["real"].exists(),
                                reason="tests/data/hf_real.json absent (tools/hf_zoo.py --real)")

DOC, EXPECTED_MISSES = load("real") if RECORDS["real"].exists() else ({"records": {}}, {})
MEASURED = measured(DOC)


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_hf_dynamic_matches_transformers_on_real_config(name: str) -> None:
    outcome = compare(name, MEASURED[name])
    if name in EXPECTED_MISSES:
        assert not outcome.exact, f"{name} is now exact ({outcome.measured_bytes:,} B): remove it from {MISSES['real'].name}"
    else:
        assert outcome.exact, f"{name}: {outcome.reason}"


def test_real_misses_list_names_measured_configs() -> None:
    stale = sorted(set(EXPECTED_MISSES) - set(MEASURED))
    assert not stale, f"{MISSES['real'].name} lists configs with no measurement: {stale}"
