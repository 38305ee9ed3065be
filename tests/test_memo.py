"""The per-key memos of the check path (calc.estimate, capacity's KV views and min TP, the weights count,
the engine log reading capacity's priced groups) give what the uncached code gives."""

from __future__ import annotations

import pytest

from kvplan import api, calc
from kvplan.adjust import Deployment
from kvplan.capacity import CapacityInputs, plan_capacity
from kvplan.engine_log import engine_log, pool_facts
from kvplan.errors import InputError
from kvplan.gpus import lookup

LLAMA = "meta-llama/Llama-3.1-8B"


def test_estimate_memo_returns_the_same_answer_and_keeps_type_checks() -> None:
    geometry = api.load_geometry(LLAMA).model_geometry
    dep = Deployment(engine="vllm", tp=2)
    first = calc.estimate(geometry, batch=1, seq_len=4096, deployment=dep)
    assert calc.estimate(geometry, batch=1, seq_len=4096, deployment=dep) is first
    assert first == calc._estimate(geometry, batch=1, seq_len=4096, deployment=dep)
    # 2 * 32 * 8 * 128 * 2 bytes a token (K+V, layers, kv heads, head dim, bf16), 4096 tokens, over tp 2
    assert first.kv_cache_bytes_per_gpu == 2 * 32 * 8 * 128 * 2 * 4096 // 2
    with pytest.raises(InputError, match="--batch must be a positive integer"):
        calc.estimate(geometry, batch=True, seq_len=4096, deployment=dep)  # True == 1, but never taken for it
    bare = calc.estimate(geometry, batch=1, seq_len=4096, deployment=dep, adjustments=False)
    assert bare.adjustments == () and first.adjustments
    assert (bare.notes, bare.kv_dtype, bare.groups) == (first.notes, first.kv_dtype, first.groups)


@pytest.mark.parametrize(("engine", "tp"), [("vllm", 2), ("sglang", 2), ("llama.cpp", 1), ("trtllm", 2)])
def test_engine_log_from_capacity_groups_equals_a_fresh_estimate(engine: str, tp: int) -> None:
    loaded = api.load_geometry("google/gemma-2-9b")
    weights, _notes = api.model_weights(loaded, engine=engine)
    inputs = CapacityInputs(gpu=lookup("H100"), engine=engine, tp=tp, max_model_len=32768, batch=3)
    cap = plan_capacity(loaded.model_geometry, weights, inputs)
    # cap.engine_log was built from capacity's own priced groups; without them the estimate runs again
    assert engine_log(cap)[0] == cap.engine_log
    est = calc._estimate(cap.geometry, batch=3, seq_len=32768, kv_dtype="auto", deployment=cap.deployment)
    assert pool_facts(cap, (est.groups, est.kv_dtype)) == pool_facts(cap)


def test_capacity_answers_do_not_depend_on_what_ran_before() -> None:
    from kvplan import capacity as module

    runs = [api.capacity(LLAMA, gpu="H100", tp=tp, max_model_len="128k", batch=batch).to_dict()
            for tp, batch in ((1, 8), (2, 4), (1, 8))]
    assert runs[0] == runs[2]
    module._KVS.clear()
    module._MIN_PARALLEL.clear()
    api._WEIGHTS.clear()
    calc._ESTIMATES.clear()
    assert api.capacity(LLAMA, gpu="H100", tp=1, max_model_len="128k", batch=8).to_dict() == runs[0]
