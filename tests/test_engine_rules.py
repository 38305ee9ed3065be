"""The house rule: the calculator never branches on an engine's name; each engine's rules live in its
profile (kvplan/engines/<engine>.py) as methods and class attributes."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from kvplan.adjust import Deployment
from kvplan.api import load_geometry
from kvplan.calc import estimate
from kvplan.deployment_checks import KNOB_FLAGS
from kvplan.engines import ENGINES, get_engine
from kvplan.models import served_dtype

ROOT = Path(__file__).resolve().parents[1] / "kvplan"
#: Modules that compute (not render or parse logs): no engine name may be compared in them.
CALCULATOR = ("calc.py", "fit.py", "capacity_types.py", "budget.py", "engine_log.py", "dp.py", "layouts.py",
              "models/storage.py")
NAMES = "|".join(re.escape(n) for n in ENGINES)
NAME_TEST = re.compile(r"""(==|!=|\bin\b)\s*\(?["'](""" + NAMES + r""")["']""")


@pytest.mark.parametrize("module", CALCULATOR)
def test_the_calculator_never_compares_an_engine_name(module: str) -> None:
    text = (ROOT / module).read_text()
    hits = [line.strip() for line in text.splitlines() if NAME_TEST.search(line)]
    assert not hits, hits


def test_every_engine_knob_has_one_owner_and_a_flag() -> None:
    owners = {field: [n for n, cls in ENGINES.items() if field in cls.knobs] for field in KNOB_FLAGS}
    assert owners == {"max_num_batched_tokens": ["vllm"], "ubatch_size": ["llama.cpp"], "kv_unified": ["llama.cpp"],
                      "swa_full_tokens_ratio": ["sglang"], "max_cache_len": ["hf-static"],
                      "cache_type_v": ["llama.cpp"]}
    assert all(f in {f.name for f in fields(Deployment)} for cls in ENGINES.values() for f in cls.knobs)


def test_an_ignored_knob_names_the_engine_that_reads_it() -> None:
    geometry = load_geometry("meta-llama/Llama-3.1-8B").model_geometry
    est = estimate(geometry, batch=1, seq_len=4096, deployment=Deployment(engine="sglang", max_num_batched_tokens=512))
    assert "--max-num-batched-tokens is ignored: it applies to --engine vllm, not sglang" in est.notes


def test_profile_traits() -> None:
    assert [n for n, cls in ENGINES.items() if cls.plain_formula] == ["ideal"]
    assert [n for n, cls in ENGINES.items() if cls.keeps_checkpoint_dtype] == ["hf-dynamic", "hf-static"]
    assert [n for n, cls in ENGINES.items() if cls.block_pool] == ["vllm"]
    assert [n for n, cls in ENGINES.items() if cls.splits_layers] == ["llama.cpp"]
    assert served_dtype("float32", engine=get_engine("hf-static")) == (
        "float32", "the checkpoint's dtype (hf-static loads it as stored)")
    assert served_dtype("float32", engine=get_engine("sglang"))[0] == "bfloat16"


def test_engines_with_a_transient_say_so() -> None:
    """calc prices the transient peak only for engines flagged ``transient_peaks``: every engine that
    overrides prefill_bytes or peak_extra_bytes carries the flag, and no other does."""
    from kvplan.engines.base import EngineProfile

    for name in ENGINES:
        profile = type(get_engine(name))
        overrides = any(getattr(profile, method) is not getattr(EngineProfile, method)
                        for method in ("prefill_bytes", "peak_extra_bytes"))
        assert profile.transient_peaks == overrides, name
