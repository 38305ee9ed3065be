"""SGLang's profile (SGLang 0.5.23 mem_cache/pool_configurator.py): the SWA pool beside the full pool."""

from __future__ import annotations

from kvplan.units import GiB
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


# ---- NSA (DeepSeek-V3.2): pages of 64, the latent pool's extra page -----------------------------------------------
def _v32_config(tmp_path) -> str:
    import json

    from tests.conftest import shared_config

    config = {**shared_config("deepseek-ai__DeepSeek-V3"), "model_type": "deepseek_v32", "index_head_dim": 128,
              "index_n_heads": 64, "index_topk": 2048}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_sglang_nsa_pool_pages_of_64_with_the_extra_page(tmp_path) -> None:
    """DeepSeek-V3.2 at --tp 8 --dp 8 --enable-dp-attention, fp8, 1,462,784 tokens: SGLang prints "KV size: 54.52 GB"
    (latent only, before sglang#11309) and "65.49 GB" (with the indexer). NSATokenToKVPool asserts page_size 64: the
    latent buffer has N + 64 rows (MLATokenToKVPool) and the indexer (N + 64 + 1) // 64 pages of 64 x 132 B."""
    import kvplan

    n, page, layers = 1_462_784, 64, 61
    latent_row, index_row = 656, 128 + 128 // 128 * 4  # fp8_ds_mla row; fp8 key + one fp32 scale per 128 values
    latent = (n + page) * latent_row * layers
    index = (n + page + 1) // page * page * index_row * layers
    assert (f"{latent / GiB:.2f}", f"{(latent + index) / GiB:.2f}") == ("54.52", "65.49")
    cap = kvplan.capacity(_v32_config(tmp_path), engine="sglang", tp=8, dp=8, enable_dp_attention=True,
                          kv_dtype="fp8", kv_budget=n * (latent_row + index_row) * layers).capacity
    log = cap.engine_log
    assert cap.block_size == page and log["max_total_num_tokens"] == n
    assert (log["latent_size_bytes"], log["index_size_bytes"]) == (latent, index)
    assert log["lines"] == [f"KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: {n}, KV size: 65.49 GB"]
    assert any("KV size: 54.52 GB (with the indexer: 65.49 GB)" in note for note in cap.notes)
    assert any("page_size 64" in note for note in cap.notes)
