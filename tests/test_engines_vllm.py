"""vLLM's profile (vllm v1/kv_cache_interface.py, v1/core/kv_cache_utils.py): blocks, sliding windows, MLA, hybrid Mamba pages, TP."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.units import GiB, cdiv
from tests.conftest import BF16, FP16, KV
from tests.engine_runs import run


def test_vllm_full_attention_rounds_to_blocks_of_16() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20000).kv_cache_bytes == cdiv(20000, 16) * 16 * per_token
    assert run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20001).kv_cache_bytes == 1251 * 16 * per_token


def test_vllm_sliding_window_holds_w_minus_1_plus_batched_tokens_plus_a_block() -> None:
    seq, window = 32768, 4096
    per_token = 32 * KV * 8 * 128 * BF16
    default = run("mistralai__Mistral-7B-v0.1", "vllm", seq_len=seq)
    assert default.kv_cache_bytes == (cdiv(min(window - 1 + 8192, seq), 16) + 1) * 16 * per_token
    small = run("mistralai__Mistral-7B-v0.1", "vllm", seq_len=seq, max_num_batched_tokens=2048)
    assert small.kv_cache_bytes == (cdiv(window - 1 + 2048, 16) + 1) * 16 * per_token


def test_vllm_gpt_oss_20b_sliding_and_full_layers() -> None:
    seq = 32768
    per_layer_token = KV * 8 * 64 * FP16  # the config names no dtype: 16-bit
    sliding_tokens = (cdiv(min(128 - 1 + 8192, seq), 16) + 1) * 16
    est = run("openai__gpt-oss-20b", "vllm", seq_len=seq)
    assert est.kv_cache_bytes == (12 * sliding_tokens + 12 * seq) * per_layer_token


def test_vllm_deepseek_v3_tp8_uses_blocks_of_64_and_replicates() -> None:
    seq = 5000
    per_rank = 61 * cdiv(seq, 64) * 64 * (512 + 64) * BF16
    est = run("deepseek-ai__DeepSeek-V3", "vllm", seq_len=seq, tp=8)
    assert est.kv_cache_bytes_per_gpu == per_rank
    assert est.kv_cache_bytes == 8 * per_rank


def test_vllm_llama_3_1_70b_tp16() -> None:
    seq = 32000
    per_rank = 80 * cdiv(seq, 16) * 16 * KV * 1 * 128 * BF16
    est = run("meta-llama__Llama-3.1-70B", "vllm", seq_len=seq, tp=16)
    assert (est.kv_cache_bytes_per_gpu, est.kv_cache_bytes) == (per_rank, 16 * per_rank)


def test_vllm_hybrid_mamba_pages_set_the_attention_block() -> None:
    seq = 4096
    attn_token = KV * 8 * 128 * FP16  # Jamba names no dtype: fp16
    mamba_page = (3 * 8192 + 8192 * 16) * FP16  # 311,296 B
    block = 16 * cdiv(mamba_page, 16 * attn_token)  # 80 tokens
    est = run("ai21labs__Jamba-v0.1", "vllm", seq_len=seq)
    assert block == 80
    assert est.kv_cache_bytes == 4 * cdiv(seq, block) * block * attn_token + 28 * block * attn_token
    assert any("padded from 311,296 to 327,680" in note for note in est.notes)


def test_vllm_whisper_cross_attention_in_blocks() -> None:
    per_token = 32 * KV * 20 * 64 * FP16
    est = run("openai__whisper-large-v3", "vllm", seq_len=448)
    assert est.kv_cache_bytes == (448 + cdiv(1500, 16) * 16) * per_token


def test_vllm_int8_per_token_head_scales() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, kv_dtype="int8")
    assert est.kv_cache_bytes == seq * 32 * KV * 8 * (128 + 4)  # int8 values + float32 scale per head


def test_vllm_contradictions() -> None:
    with pytest.raises(InputError, match="does not support --block-size 12"):
        run("meta-llama__Llama-3.1-8B", "vllm", seq_len=4096, block_size=12)
    with pytest.raises(InputError, match="q8_0"):
        run("meta-llama__Llama-3.1-8B", "vllm", seq_len=4096, kv_dtype="q8_0")
    est = run("meta-llama__Llama-3.1-8B", "vllm", batch=8, seq_len=4096, max_num_seqs=4)
    assert any("--max-num-seqs 4" in note for note in est.notes)
    mla = run("deepseek-ai__DeepSeek-V3", "vllm", seq_len=4096, block_size=16)
    assert any("force block size 64" in note for note in mla.notes)


@pytest.mark.parametrize(("tp", "ok"), [(1, True), (2, True), (8, True), (16, True), (3, False), (12, False), (32, True)])
def test_vllm_refuses_tp_sizes_that_do_not_divide_the_kv_heads(tp: int, ok: bool) -> None:
    seq = 4096
    if ok:
        est = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)
        assert est.kv_cache_bytes_per_gpu == 32 * seq * KV * max(1, 8 // tp) * 128 * BF16
    else:
        with pytest.raises(InputError, match=f"vLLM cannot split 8 KV heads over --tensor-parallel-size {tp}"):
            run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("tp", "ok"), [(8, True), (16, True), (32, True), (24, False), (64, False)])
def test_tp_must_divide_the_query_heads(engine: str, tp: int, ok: bool) -> None:
    """Llama-3.1-8B: 32 query heads, 8 KV heads; tp 24 replicates the KV heads evenly (24 % 8 == 0) but leaves
    32 query heads uneven, which vLLM (verify_with_parallel_config) and SGLang (LlamaAttention) refuse."""
    if ok:
        est = run("meta-llama__Llama-3.1-8B", engine, seq_len=4096, tp=tp)
        assert est.kv_cache_bytes_per_gpu > 0
    else:
        with pytest.raises(InputError, match=f"cannot split 32 query heads over --tensor-parallel-size {tp}"):
            run("meta-llama__Llama-3.1-8B", engine, seq_len=4096, tp=tp)
# ---- prefix caching on hybrid models: mamba_cache_mode "align" -------------------------------------------------
# https://github.com/noonghunna/club-3090/issues/652 (vLLM 0.24.0, Qwen3.6-35B-A3B NVFP4 = Qwen3.5-35B-A3B's cache
# geometry, fp8 KV, RTX 5090, max_model_len 131072, non-default args {... 'enable_prefix_caching': True ...}):
#   [gpu_worker.py:508] Available KV cache memory: 6.01 GiB
#   [kv_cache_utils.py:2146] GPU KV cache size: 569,878 tokens
#   [kv_cache_utils.py:2147] Maximum concurrency for 131,072 tokens per request: 4.35x
# and noonghunna/club-3090#612 (the same server, 5.98 GiB): 567,978 tokens, 4.33x.
QWEN35_ATTN_TOKEN = KV * 2 * 256 * 1  # K+V * kv heads * head dim * fp8 = 1,024 B per layer
QWEN35_GDN_PAGE = 3 * (2 * 16 * 128 + 32 * 128) * BF16 + 32 * 128 * 128 * 4  # conv (d_conv-1, 2*H_k*d_k + H_v*d_v) bf16 + ssm fp32
QWEN35_BLOCK = 16 * cdiv(QWEN35_GDN_PAGE, 16 * QWEN35_ATTN_TOKEN)  # attention page >= Mamba page: 2,096 tokens


def _qwen35_capacity(budget: int, version: str, caching: bool | None):
    import kvplan
    from tests.conftest import shared_config_path

    return kvplan.capacity(str(shared_config_path("Qwen__Qwen3.5-35B-A3B")), kv_dtype="fp8", max_model_len=131072,
                           kv_budget=budget, engine_version=version, enable_prefix_caching=caching).capacity


@pytest.mark.parametrize(("budget_gib", "tokens", "concurrency"), [(6.01, 569_878, "4.35"), (5.98, 567_978, "4.33")])
def test_club_3090_652_prefix_caching_holds_two_state_pages(budget_gib, tokens, concurrency) -> None:
    assert (QWEN35_GDN_PAGE, QWEN35_BLOCK) == (2_146_304, 2096)
    page = QWEN35_BLOCK * QWEN35_ATTN_TOKEN  # = the Mamba page: one block of one layer
    budget = int(budget_gib * GiB)
    num_blocks = budget // (page * 10)  # 10 attention + 30 GDN layers: 4 groups of 10 share 10 tensors
    per_request = cdiv(131072, QWEN35_BLOCK) + 3 * 2  # attention blocks + 3 GDN groups x 2 pages (align mode)
    assert (num_blocks, per_request) == ((300, 69) if budget_gib == 6.01 else (299, 69))
    cap = _qwen35_capacity(budget, "0.24", True)
    assert (cap.num_blocks, cap.max_concurrency) == (num_blocks, num_blocks / per_request)
    assert int(num_blocks / per_request * 131072) == tokens
    assert cap.engine_log["lines"][1:] == [f"GPU KV cache size: {tokens:,} tokens",
                                           f"Maximum concurrency for 131,072 tokens per request: {concurrency}x"]
    assert any("mamba_cache_mode 'align'" in n for n in cap.notes)


def test_prefix_caching_default_for_hybrid_models_by_version() -> None:
    """Opt-in before 0.28 (arg_utils "keep it opt-in for now"), on from 0.28; --no-enable-prefix-caching: 1 page."""
    budget = int(6.01 * GiB)
    one_page = 300 / (cdiv(131072, QWEN35_BLOCK) + 3)  # 66 blocks per request: kvplan's old answer, 4.55x
    assert _qwen35_capacity(budget, "0.24", None).max_concurrency == one_page
    assert _qwen35_capacity(budget, "0.27", None).max_concurrency == one_page
    assert _qwen35_capacity(budget, "0.28", None).max_concurrency == 300 / 69
    assert _qwen35_capacity(budget, "0.33", False).max_concurrency == one_page
    # before 0.14 vLLM had no align mode (vllm#30877): one page, and a note says why
    old = _qwen35_capacity(budget, "0.11", True)
    assert old.max_concurrency == one_page and any("no 'align' Mamba cache mode" in n for n in old.notes)


def test_prefix_caching_leaves_attention_only_models_alone() -> None:
    plain = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20000)
    cached = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=20000, enable_prefix_caching=True)
    assert cached.kv_cache_bytes == plain.kv_cache_bytes == cdiv(20000, 16) * 16 * 32 * KV * 8 * 128 * BF16


# ---- the derived budget of early V1 (vLLM 0.7 with VLLM_USE_V1=1) ------------------------------------------------
# vllm-project/vllm PR #12569 ("[V1][Log] Add max request concurrency log to V1"), as its description logs it:
#   VLLM_USE_V1=1 vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --max-model-len 2048
#       --gpu-memory-utilization 0.98
#   INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB
#   INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381
#   INFO 01-30 03:19:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x
PR12569_WEIGHTS = int(67.7229 * GiB)  # vLLM's "GB" is bytes / 2**30
PR12569_BLOCKS, PR12569_CONCURRENCY = 1381, 10.79


def test_vllm_12569_early_v1_budget_terms_and_their_honest_range() -> None:
    """Early V1 (0.7) under ``vllm serve``: max_num_batched_tokens 2048 (arg_utils._override_v1_engine_args); its
    profile run peaks at the dummy forward or the logits of those rows (no sampler yet); determine_available_memory
    counts the whole device's non-torch memory, the CUDA context included. The derived budget gives more blocks
    than the log; the range kvplan prints reaches down to the logged figures, and --kv-budget gives them exactly."""
    import kvplan
    from kvplan.engines.vllm import VLLM_CUDA_CONTEXT_BYTES, VLLM_EARLY_V1_UNSEEN_BYTES

    cap = kvplan.capacity("meta-llama/Llama-3.1-70B", gpu="H100", weights_bytes=PR12569_WEIGHTS,
                          gpu_memory_utilization=0.98, max_model_len=2048, engine_version="0.7-v1").capacity
    terms = {t.name: t.bytes for t in cap.budget.terms}
    forward = 2048 * (3 * 28672 + 10240 + 2 * 8192) * BF16  # tokens x (3 x mlp + qkv + 2 x hidden) x bf16
    logits = 2048 * (128256 + 8192) * BF16  # tokens x (vocab logits + hidden states) x bf16
    assert terms == {"dummy forward": forward, "dummy logits": logits, "CUDA context": 300 * 1000**2,
                     "non-torch memory": 256 * 1024**2}
    page = 16 * 80 * KV * 8 * 128 * BF16  # block * layers * K+V * kv heads * head dim * bf16 = 5 MiB
    usable = int(84_943_715_697 * 0.98)  # H100 79.11 GiB x gpu_memory_utilization
    kv = usable - PR12569_WEIGHTS - max(forward, logits) - VLLM_CUDA_CONTEXT_BYTES - 256 * 1024**2
    assert cap.num_blocks == kv // page == 1793
    low = (kv - VLLM_EARLY_V1_UNSEEN_BYTES) // page
    assert cap.num_blocks_range == (low, 1793) and low <= PR12569_BLOCKS <= 1793
    conc_low, conc_high = cap.max_concurrency_range
    assert conc_low == low * 16 / 2048 and round(conc_low, 2) <= PR12569_CONCURRENCY <= conc_high
    assert cap.engine_log["lines"][0] == "# GPU blocks: 1793"
    assert any("vllm PR #12569" in n and "up to 2.05 GiB less" in n for n in cap.notes)
    # with the logged budget the concurrency rule is exact
    logged = kvplan.capacity("meta-llama/Llama-3.1-70B", kv_budget=PR12569_BLOCKS * page, max_model_len=2048,
                             engine_version="0.7-v1").capacity
    assert logged.engine_log["lines"] == ["# GPU blocks: 1381", "Maximum concurrency for 2048 tokens per request: 10.79x"]
    assert logged.num_blocks_range is None  # a given budget has no reach


def test_derived_range_is_said_in_one_line(runner) -> None:
    from kvplan.cli import app

    result = runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--weights-bytes",
                                 str(PR12569_WEIGHTS), "--gpu-memory-utilization", "0.98", "--max-model-len", "2048",
                                 "--engine-version", "0.7-v1"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    row = [line for line in result.stdout.splitlines() if line.strip().startswith("range")]
    assert len(row) == 1 and "10.73-14.01x" in row[0] and "1,373-1,793 blocks" in row[0]


# ---- the maximum context vLLM derives (ModelConfig._get_and_verify_max_len) -------------------------------------
QWEN3_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}  # Qwen3's model card


@pytest.mark.parametrize("key", ["rope_scaling", "rope_parameters"])  # transformers 4 and 5 spellings
def test_vllm_applies_yarn_to_the_maximum_context(tmp_path, key) -> None:
    """issue 26 item 4: a yarn factor 4 over 32,768 is vLLM's 131,072; the ideal formula keeps the config's length."""
    import json

    import kvplan
    from tests.conftest import shared_config

    config = {**shared_config("Qwen__Qwen3-8B"), "max_position_embeddings": 32768, "rope_scaling": None,
              key: {**QWEN3_YARN, "rope_theta": 1_000_000.0}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    vllm = kvplan.capacity(str(path), kv_budget="10GiB")
    assert vllm.capacity.max_model_len == 32768 * 4 == 131_072  # original_max_position_embeddings x factor
    assert f"{key}.original_max_position_embeddings 32,768 x {key}.factor 4 (yarn" in vllm.capacity.max_model_len_source
    assert kvplan.estimate(str(path), engine="vllm").seq_len == 131_072
    assert kvplan.estimate(str(path), engine="ideal").seq_len == 32768


def test_vllm_leaves_llama3_and_gemma3_lengths_alone() -> None:
    """llama3/su/longrope factors are not applied, and Gemma-3's 131,072 is already scaled (linear factor 8)."""
    import kvplan
    from tests.conftest import shared_config_path

    assert kvplan.estimate(str(shared_config_path("meta-llama__Llama-3.1-8B")), engine="vllm").seq_len == 131_072
    assert kvplan.estimate(str(shared_config_path("google__gemma-3-27b-it")), engine="vllm").seq_len == 131_072


# ---- tensor parallelism: the pool is the minimum over ranks -----------------------------------------------------
def test_kv_budget_per_rank_sizes_the_pool_by_the_smallest_rank() -> None:
    """vLLM (V0 and V1) takes the minimum of the workers' blocks and SGLang the minimum over TP ranks, while a log
    often quotes one rank's budget: --kv-budget takes one budget per rank (vLLM's global order, stage-major)."""
    import kvplan

    tp4_page = 16 * 80 * KV * (8 // 4) * 128 * BF16  # block * layers * K+V * kv heads per rank * head dim * bf16
    cap = kvplan.capacity("meta-llama/Llama-3.1-70B", tp=4, max_model_len=8192,
                          kv_budget="10GiB,9.5GiB,10GiB,10GiB").capacity
    assert cap.num_blocks == int(9.5 * GiB) // tp4_page == 7782  # rank 1 decides
    assert cap.inputs.kv_budget_bytes == int(9.5 * GiB)
    assert cap.num_blocks == kvplan.capacity("meta-llama/Llama-3.1-70B", tp=4, max_model_len=8192,
                                             kv_budget=int(9.5 * GiB)).capacity.num_blocks
    # tp 2 x pp 2: stage 0 (ranks 0, 1) has 9.5 GiB at most, stage 1 (ranks 2, 3) 12 GiB; each stage holds 40 layers
    stage_page = 16 * 40 * KV * (8 // 2) * 128 * BF16
    staged = kvplan.capacity("meta-llama/Llama-3.1-70B", tp=2, pp=2, max_model_len=8192,
                             kv_budget=["10GiB", "9.5GiB", "12GiB", "12GiB"]).capacity
    assert staged.num_blocks == min(int(9.5 * GiB) // stage_page, 12 * GiB // stage_page) == 7782


def test_kv_budget_per_rank_needs_one_per_rank() -> None:
    import kvplan

    with pytest.raises(InputError, match="lists 3 budgets for tp 4 x pp 1 = 4 ranks"):
        kvplan.capacity("meta-llama/Llama-3.1-70B", tp=4, kv_budget="10GiB,9GiB,9GiB")


# ---- pipeline parallelism: each stage's own weights, room and layers ---------------------------------------------
# Llama-3.1-8B (config.json): vocab 128256, hidden 4096, 8 of 32 heads for K/V, head_dim 128, MLP 14336, 32 layers.
L8_VOCAB, L8_HIDDEN, L8_KV_WIDTH, L8_MLP, L8_LAYERS = 128256, 4096, 8 * 128, 14336, 32
L8_EMBED = L8_VOCAB * L8_HIDDEN * BF16  # embed_tokens, and lm_head (untied) the same size
L8_LAYER = (L8_HIDDEN * (L8_HIDDEN + 2 * L8_KV_WIDTH) + L8_HIDDEN * L8_HIDDEN + 3 * L8_HIDDEN * L8_MLP) * BF16  # qkv, o, MLP
L8_NORMS = (2 * L8_LAYERS + 1) * L8_HIDDEN * BF16  # two per layer + the final norm, split with the layers


def _stage_weights(layers: list[int], *, first: int, last: int) -> list[int]:
    return [n * L8_LAYER + L8_NORMS * n // L8_LAYERS + (first if s == 0 else 0) + (last if s == len(layers) - 1 else 0)
            for s, n in enumerate(layers)]


def test_pp3_stages_hold_their_layers_embeddings_and_lm_head_and_the_fewest_blocks_win() -> None:
    """vLLM get_pp_indices splits 32 layers over 3 stages as [11, 11, 10] (the extra layers go to the stages before
    the last); stage 0 holds embed_tokens, stage 2 the lm_head and the only sampler (profile_run samples
    ``if get_pp_group().is_last_rank``); each worker sizes blocks by its own room and layers and V1's
    get_kv_cache_configs keeps the fewest."""
    import kvplan
    from kvplan.gpus import lookup

    cap = kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", pp=3, max_model_len=8192).capacity
    layers = [11, 11, 10]
    weights = _stage_weights(layers, first=L8_EMBED, last=L8_EMBED)
    assert [s.num_layers for s in cap.stages] == layers
    assert [s.weights_bytes_per_gpu for s in cap.stages] == weights
    rooms = [s.kv_budget_bytes for s in cap.stages]
    usable = int(lookup("H100").memory_bytes * 0.9)
    # stages 0 and 1 reserve the same (no sampler): their rooms differ by their weights alone
    assert usable - weights[0] - rooms[0] == usable - weights[1] - rooms[1]
    forward = 8192 * (3 * L8_MLP + (L8_HIDDEN + 2 * L8_KV_WIDTH) + 2 * L8_HIDDEN) * BF16  # max_num_batched_tokens 8192
    sampler = 19 * min(1024, 8192) * L8_VOCAB * 4 // 2  # 9.5 float32 copies of max_num_seqs x vocab logits
    assert (usable - weights[2] - rooms[2]) - (usable - weights[0] - rooms[0]) == sampler - forward
    page = 16 * L8_KV_WIDTH * KV * BF16  # block * kv heads * head dim * K+V * bf16, per layer
    blocks = [room // (page * n) for room, n in zip(rooms, layers)]
    assert [s.num_blocks for s in cap.stages] == blocks
    assert cap.num_blocks == min(blocks) == blocks[0]  # 11 layers and the embeddings: stage 0 has the fewest
    assert cap.limiting_rank == 0 and cap.budget.kv_bytes_per_gpu == rooms[0]
    assert cap.max_concurrency == blocks[0] / cdiv(8192, 16)
    assert any("rank 0 sizes the pool" in n for n in cap.notes)


def test_pp_tied_embeddings_sit_on_the_first_and_the_last_stage() -> None:
    """A tied model's last stage builds its own embed_tokens for the lm_head (vLLM: ``is_first_rank or
    (tie_word_embeddings and is_last_rank)``): Llama-3.2-1B (tied, 16 layers, hidden 2048, vocab 128256)."""
    import kvplan

    cap = kvplan.capacity("meta-llama/Llama-3.2-1B", gpu="H100", pp=2, max_model_len=8192).capacity
    embed = 128256 * 2048 * BF16
    layer = (2048 * (2048 + 2 * 8 * 64) + 2048 * 2048 + 3 * 2048 * 8192) * BF16
    norms = (2 * 16 + 1) * 2048 * BF16
    assert [s.weights_bytes_per_gpu for s in cap.stages] == [embed + 8 * layer + norms * 8 // 16] * 2


def test_pp_tp_ranks_of_a_stage_are_alike_and_split_the_stage() -> None:
    """tp 2 x pp 2: each stage's two ranks hold half of its matrices (norms whole) and one room; ranks 0-1, 2-3."""
    import kvplan

    cap = kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", tp=2, pp=2, max_model_len=8192).capacity
    assert [s.ranks for s in cap.stages] == [(0, 1), (2, 3)]
    assert [s.num_layers for s in cap.stages] == [16, 16]
    norms = L8_NORMS * 16 // L8_LAYERS  # replicated, not split over tp
    assert [s.weights_bytes_per_gpu for s in cap.stages] == [
        cdiv(L8_EMBED, 2) + cdiv(16 * L8_LAYER, 2) + norms, cdiv(16 * L8_LAYER, 2) + norms + cdiv(L8_EMBED, 2)]
    assert cap.limiting_rank in (0, 2)


def test_sglang_pp_gives_extra_layers_to_the_last_stages_and_every_rank_the_least_room() -> None:
    """SGLang get_pp_indices: [10, 11, 11]; get_available_gpu_memory(distributed=True) all-reduces the least free
    memory over the world group, so the pool is that room over the busiest stage's layers."""
    import kvplan

    cap = kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", pp=3, max_model_len=8192, engine="sglang").capacity
    layers = [10, 11, 11]
    weights = _stage_weights(layers, first=L8_EMBED, last=L8_EMBED)
    assert [s.num_layers for s in cap.stages] == layers
    assert [s.weights_bytes_per_gpu for s in cap.stages] == weights
    assert cap.limiting_rank == 2  # 11 layers and the lm_head: the most weights, the least room
    least = min(s.kv_budget_bytes for s in cap.stages)
    assert cap.budget.kv_bytes_per_gpu == least == cap.budget.usable_bytes - weights[2]
    per_request = 8192 * 11 * L8_KV_WIDTH * KV * BF16  # tokens * busiest stage's layers * kv width * K+V * bf16
    assert cap.max_concurrency == least / per_request


def test_capacity_table_names_the_limiting_rank_within_20_lines(runner) -> None:
    from kvplan.cli import app

    result = runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--pp", "3",
                                 "--max-model-len", "8192"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "limiting rank" in result.stdout and "rank 0" in result.stdout and "stage 0 of 3" in result.stdout
    assert len(result.stdout.splitlines()) <= 20
    report = __import__("json").loads(runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                                                          "--pp", "3", "--max-model-len", "8192", "-f", "json"]).stdout)
    assert report["capacity"]["limiting_rank"] == 0
    assert [s["num_layers"] for s in report["capacity"]["stages"]] == [11, 11, 10]


def test_pp_multimodal_encoder_on_every_vllm_stage_and_the_first_sglang_stage() -> None:
    """vLLM builds a model's vision tower on every pipeline rank (no PPMissingLayer for it); SGLang's Qwen2.5-VL
    builds it ``if self.pp_group.is_first_rank``: llava-1.5-7b's last stage differs by the tower and projector."""
    import kvplan

    vllm = kvplan.capacity("llava-hf/llava-1.5-7b-hf", gpu="H100", pp=2, max_model_len=4096).capacity
    sglang = kvplan.capacity("llava-hf/llava-1.5-7b-hf", gpu="H100", pp=2, max_model_len=4096, engine="sglang").capacity
    vision = vllm.weights.vision_bytes
    assert vision > 0
    assert vllm.stages[0].weights_bytes_per_gpu == sglang.stages[0].weights_bytes_per_gpu
    assert vllm.stages[1].weights_bytes_per_gpu - sglang.stages[1].weights_bytes_per_gpu == vision
