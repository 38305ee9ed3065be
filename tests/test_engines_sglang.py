"""SGLang's profile (SGLang 0.5.23 mem_cache/pool_configurator.py): the SWA pool beside the full pool."""

from __future__ import annotations

from tests.conftest import BF16, KV
from tests.engine_runs import run


def test_sglang_swa_pool_is_a_fixed_ratio_of_the_full_pool() -> None:
    seq = 32768
    per_token = KV * 8 * 256 * BF16
    est = run("google__gemma-3-12b-it", "sglang", seq_len=seq)
    swa_pool = int(seq * 0.8)  # swa_full_tokens_ratio 0.8 of the full pool
    assert est.kv_cache_bytes == (8 * seq + 40 * swa_pool) * per_token
    half = run("google__gemma-3-12b-it", "sglang", seq_len=seq, swa_full_tokens_ratio=0.5)
    assert half.kv_cache_bytes == (8 * seq + 40 * seq // 2) * per_token


def test_sglang_short_requests_make_the_swa_need_grow_the_full_pool() -> None:
    seq, page = 600, 1
    per_token = KV * 8 * 256 * BF16
    swa_need = min(seq, 1024) + page  # 601 SWA tokens
    full = max(seq, -(-swa_need * 10 // 8))  # ceil(601 / 0.8) = 752 > 600
    est = run("google__gemma-3-12b-it", "sglang", seq_len=seq)
    assert est.kv_cache_bytes == (8 * full + 40 * int(full * 0.8)) * per_token
