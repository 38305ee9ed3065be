"""`kvplan capacity --compare-log`: real start-up log excerpts (sources beside each) read back and put
beside kvplan's prediction for the same model and flags."""

from __future__ import annotations

import json

import pytest

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.logparse import parse_log
from kvplan.units import GiB, MiB

from conftest import BF16, KV

LLAMA8B_TOKEN = KV * 32 * 8 * 128 * BF16  # K+V * layers * kv heads * head dim * bf16

# vLLM 0.10-0.20 hybrid allocator, gpt-oss-120b (a user's start-up log). The prefixes are
# vLLM 0.11's (vllm#27508's log shows the same "(EngineCore_DP0 pid=...) INFO ... [gpu_worker.py:298]" form).
GPT_OSS_LOG = """\
(EngineCore_DP0 pid=6880) INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV cache memory: 5.38 GiB
(EngineCore_DP0 pid=6880) INFO 10-31 15:07:50 [kv_cache_utils.py:1087] GPU KV cache size: 78,384 tokens
(EngineCore_DP0 pid=6880) INFO 10-31 15:07:50 [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 1.12x
"""
# https://github.com/vllm-project/vllm/issues/10517 (V0, Llama-3.1-8B-Instruct, RTX 3090, max_model_len 20000)
VLLM_10517_LOG = """\
INFO 11-21 02:35:24 worker.py:232] Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90
INFO 11-21 02:35:24 gpu_executor.py:113] # GPU blocks: 1952, # CPU blocks: 2048
INFO 11-21 02:35:24 gpu_executor.py:117] Maximum concurrency for 20000 tokens per request: 1.56x
"""
# https://github.com/LMCache/LMCache/issues/1739 (vLLM 0.10.2/0.11, Qwen3-14B, max_model_len 32768)
LMCACHE_1739_LOG = """\
(EngineCore_0 pid=1234) INFO [gpu_worker.py:298] Available KV cache memory: 6.51 GiB
(EngineCore_0 pid=1234) INFO [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens
(EngineCore_0 pid=1234) INFO [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 1.30x
"""
# https://github.com/vllm-project/vllm/issues/21348 (SGLang, Qwen3-235B-A22B-FP8, --tp 4)
SGLANG_21348_LOG = "[2025-07-22 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB\n"
# https://github.com/sgl-project/sglang/pull/11309 (DeepSeek-V3.2-Exp, --tp 8 --dp 8 --enable-dp-attention)
SGLANG_11309_LOG = "[2025-10-07 23:17:19 DP0 TP0] KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB\n"
# https://github.com/ggml-org/llama.cpp/issues/22319 (DeepSeek-V4 GGUF, 4 slots unified): an empty base cache
LLAMA_22319_LOG = """\
llama_kv_cache_iswa: creating non-SWA KV cache, size = 393216 cells
llama_kv_cache: size =    0.00 MiB (393216 cells,   0 layers,  4/1 seqs), K (f16):    0.00 MiB, V (f16):    0.00 MiB
"""
# TensorRT-LLM docs/source/reference/memory.md (FAQ; Llama, fp8 KV, H100)
TRT_DOCS_LOG = """\
[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, available: 70.48 GiB
[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060
[TensorRT-LLM][INFO] Number of tokens per block: 64.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).
"""


def compare(runner, tmp_path, log: str, *args: str) -> dict:
    path = tmp_path / "startup.log"
    path.write_text(log)
    result = runner.invoke(app, ["capacity", *args, "--compare-log", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rows(report: dict) -> dict[str, dict]:
    return {r["figure"]: r for r in report["log_comparison"]["rows"]}


# ---- parsing ----------------------------------------------------------------------------------------
def test_parse_vllm_lines_ignore_prefixes() -> None:
    parsed = parse_log(GPT_OSS_LOG)
    assert parsed.engine == "vllm" and parsed.version_hint is None  # two lines, %.2f: 0.10-0.27, undecided
    assert [(f.figure, f.value, f.line_no) for f in parsed.figures] == [
        ("available_kv_bytes", 5.38 * GiB, 1), ("gpu_kv_cache_tokens", 78_384, 2), ("max_concurrency", 1.12, 3)]


def test_parse_vllm_versions_from_the_line_forms() -> None:
    assert parse_log(VLLM_10517_LOG).version_hint == "0.6"  # '# GPU blocks' is V0
    merged = "INFO GPU KV cache size: 147,393 tokens, Maximum concurrency for 131,072 tokens per request: 1.12x"
    assert parse_log(merged).version_hint == "0.33"  # one merged line: 0.28 and later
    assert parse_log("Available KV cache memory: 1.7 GiB").version_hint == "0.21"  # format_gib: 0.13 and later


def test_parse_sglang_llamacpp_and_trtllm() -> None:
    sglang = parse_log(SGLANG_11309_LOG)
    assert sglang.engine == "sglang"
    assert [(f.figure, f.text) for f in sglang.figures] == [("max_total_num_tokens", "975424"), ("kv_size_bytes", "43.67")]
    llama = parse_log(LLAMA_22319_LOG)
    assert llama.engine == "llama.cpp"
    assert {f.figure: f.text for f in llama.figures}["cache0:cells"] == "393216"
    trt = parse_log(TRT_DOCS_LOG)
    assert {f.figure: f.value for f in trt.figures} == {
        "tokens_per_block": 64, "allocated_bytes": 63.44 * GiB, "paged_kv_max_tokens": 259_840}
    assert 4060 * 64 == 259_840  # primary blocks * tokens per block


def test_parse_refuses_a_log_without_kv_lines() -> None:
    with pytest.raises(InputError, match="none of the KV cache lines"):
        parse_log("INFO starting server on port 8000\n")


# ---- comparing ----------------------------------------------------------------------------------------
def test_gpt_oss_log_explained_without_a_gpu(runner, tmp_path) -> None:
    # The budget comes from the log (5.38 GiB, rounded); kvplan's default vLLM (0.33) prints
    # concurrency x max_model_len, so the token line differs and the cause names the version and the
    # exact budget: 78,384 = 9,798 // 2 groups * 16, and 9,798 blocks * 589,824 B = 5,779,095,552 B.
    report = compare(runner, tmp_path, GPT_OSS_LOG, "-m", "openai/gpt-oss-120b")
    by = rows(report)
    assert by["available_kv_bytes"]["match"] and by["max_concurrency"]["match"]
    tokens = by["gpu_kv_cache_tokens"]
    assert not tokens["match"]
    assert "pass --engine-version 0.11" in tokens["cause"]
    assert "stands for 9,784-9,803 blocks" in tokens["cause"]
    assert f"pass --kv-budget {9798 * 16 * 8 * 128 * BF16 * 18}" in tokens["cause"]  # blocks * page * group size


def test_gpt_oss_log_matches_with_the_flags_the_cause_names(runner, tmp_path) -> None:
    report = compare(runner, tmp_path, GPT_OSS_LOG, "-m", "openai/gpt-oss-120b", "--engine-version", "0.11",
                     "--kv-budget", "5779095552")
    assert report["log_comparison"]["differs"] == 0 and report["log_comparison"]["matches"] == 3


def test_vllm_10517_v0_log_matches(runner, tmp_path) -> None:
    report = compare(runner, tmp_path, VLLM_10517_LOG, "-m", "meta-llama/Llama-3.1-8B-Instruct", "--kv-budget",
                     "3.8125GiB", "--max-model-len", "20000")
    by = rows(report)
    assert by["num_blocks"]["match"] and by["max_concurrency"]["match"], by
    assert report["inputs"]["engine_version"] == "0.6"


def test_lmcache_1739_matches_from_the_logged_budget(runner, tmp_path) -> None:
    config = tmp_path / "qwen3-14b" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 5120, "num_attention_heads": 40,
        "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 40, "intermediate_size": 17408,
        "vocab_size": 151936, "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}))
    report = compare(runner, tmp_path, LMCACHE_1739_LOG, "-m", str(config), "--max-model-len", "32768")
    assert report["log_comparison"]["differs"] == 0, report["log_comparison"]
    # int(6.51 GiB) // (16 * 40 layers * K+V * 8 heads * 128 * bf16) = 2666 blocks -> 42,656 tokens
    assert report["capacity"]["engine_log"]["num_blocks"] == int(6.51 * GiB) // (16 * 40 * KV * 8 * 128 * BF16) == 2666


def test_sglang_log_difference_names_the_budget(runner, tmp_path) -> None:
    # vllm#21348's SGLang line against Llama-3.1-8B with a 20 GiB budget: #tokens differ, cause = budget.
    report = compare(runner, tmp_path, SGLANG_21348_LOG, "-m", "meta-llama/Llama-3.1-8B", "--engine", "sglang",
                     "--kv-budget", "20GiB", "--max-model-len", "8192")
    by = rows(report)
    assert by["max_total_num_tokens"]["predicted"] == str(20 * GiB // LLAMA8B_TOKEN)
    assert "--mem-fraction-static" in by["max_total_num_tokens"]["cause"]


def test_trtllm_docs_log_matches_with_fp8_and_64_token_blocks(runner, tmp_path) -> None:
    # The docs do not name the model; its 256 KiB per token gives 259,840 * 262,144 B = 63.44 GiB. With
    # Llama-2-13B at fp8 and the same pool size the token count and block size match, the GiB do not.
    assert f"{259_840 * 256 * 1024 / GiB:.2f}" == "63.44"
    per_token = 40 * KV * 40 * 128 * 1  # layers * K+V * kv heads * head dim * fp8 = 409,600 B
    report = compare(runner, tmp_path, TRT_DOCS_LOG, "-m", "meta-llama/Llama-2-13b-hf",
                     "--engine", "trtllm", "--kv-dtype", "fp8", "--block-size", "64", "--kv-budget",
                     str(259_840 * per_token), "--max-model-len", "4096")
    by = rows(report)
    assert by["paged_kv_max_tokens"]["match"] and by["tokens_per_block"]["match"]
    assert not by["allocated_bytes"]["match"]  # 259,840 * 409,600 B is not the docs' 63.44 GiB (256 KiB/token)
    assert by["allocated_bytes"]["predicted"] == f"{259_840 * per_token / GiB:.2f}"


def test_llamacpp_log_compared_by_cache(runner, tmp_path) -> None:
    log = ("llama_kv_cache:      CUDA0 KV buffer size =  2048.00 MiB\n"
           "llama_kv_cache: size = 2048.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 1024.00 MiB, "
           "V (f16): 1024.00 MiB\n")
    report = compare(runner, tmp_path, log, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "--kv-budget",
                     "8GiB", "-c", "4096", "-np", "1")
    assert report["log_comparison"]["differs"] == 0, report["log_comparison"]
    q8 = compare(runner, tmp_path, log.replace("K (f16)", "K (q8_0)"), "-m", "meta-llama/Llama-2-7b-hf", "--engine",
                 "llama.cpp", "--kv-budget", "8GiB", "-c", "4096", "-np", "1")
    assert "--kv-dtype q8_0" in rows(q8)["cache0:k_type"]["cause"]
    assert 32 * 32 * 128 * 2 * 4096 == 1024 * MiB  # layers * heads * head dim * f16 * cells


def test_compare_log_refuses_another_engines_log(runner, tmp_path) -> None:
    path = tmp_path / "sglang.log"
    path.write_text(SGLANG_11309_LOG)
    result = runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--kv-budget", "8GiB",
                                 "--compare-log", str(path)])
    assert result.exit_code == 2
    assert "is a sglang log, but --engine is vllm" in result.output and "--engine sglang" in result.output


# https://github.com/noonghunna/club-3090/issues/652 (vLLM 0.24.0, Qwen3.6-35B-A3B, fp8 KV, RTX 5090)
CLUB_3090_652_LOG = """\
(APIServer pid=1) INFO 07-09 02:56:25 [api_utils.py:273] non-default args: {'trust_remote_code': True, 'dtype': 'bfloat16', 'max_model_len': 131072, 'quantization': 'modelopt', 'kv_cache_dtype': 'fp8', 'enable_prefix_caching': True, 'max_num_batched_tokens': 8192, 'max_num_seqs': 1, 'enable_chunked_prefill': True}
(EngineCore pid=107) INFO 07-09 02:56:41 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with config: model='~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4'
(EngineCore pid=107) INFO 07-09 02:58:11 [gpu_worker.py:508] Available KV cache memory: 6.01 GiB
(EngineCore pid=107) INFO 07-09 02:58:11 [kv_cache_utils.py:2146] GPU KV cache size: 569,878 tokens
(EngineCore pid=107) INFO 07-09 02:58:11 [kv_cache_utils.py:2147] Maximum concurrency for 131,072 tokens per request: 4.35x
"""


def test_club_3090_652_log_names_its_version_and_prefix_caching(runner, tmp_path) -> None:
    from conftest import shared_config_path

    parsed = parse_log(CLUB_3090_652_LOG)
    assert (parsed.version, parsed.prefix_caching) == ("0.24.0", True)
    report = compare(runner, tmp_path, CLUB_3090_652_LOG, "-m", str(shared_config_path("Qwen__Qwen3.5-35B-A3B")),
                     "--kv-dtype", "fp8", "--max-model-len", "131072")
    assert report["log_comparison"]["differs"] == 0
    assert [r["predicted"] for r in report["log_comparison"]["rows"]] == ["6.01", "569,878", "4.35"]
    assert report["inputs"]["engine_version"] == "0.24.0"
    assert any("enable_prefix_caching=True" in n for n in report["notes"])


# ---- the cause a difference names -------------------------------------------------------------------
def test_llamacpp_buffer_padding_is_not_the_layer_split(runner, tmp_path) -> None:
    """ik_llama.cpp PR #370 logs its two CUDA KV buffers as 816.02 / 782.02 MiB for 816.00 / 782.00 MiB of K/V
    tensors: the backend aligns each tensor's allocation. The same 0.02 MiB here, on one device."""
    per_device = 32 * KV * 32 * 128 * 2 * 4096  # layers * K+V * kv heads * head dim * f16 * cells = 2048 MiB
    log = (f"llama_kv_cache:      CUDA0 KV buffer size =  {per_device / MiB + 0.02:.2f} MiB\n"
           "llama_kv_cache: size = 2048.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 1024.00 MiB, "
           "V (f16): 1024.00 MiB\n")
    report = compare(runner, tmp_path, log, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "-c", "4096",
                     "-np", "1")
    buffer = rows(report)["buffer:CUDA0"]
    assert (buffer["logged"], buffer["predicted"]) == ("2048.02", "2048.00")
    assert buffer["cause"].startswith("backend padding, not the layer split")
    # 64 MiB off is a layer (2 of 32 layers' K/V): the layer split, as before
    moved = compare(runner, tmp_path, log.replace("2048.02 MiB\n", "1984.00 MiB\n", 1), "-m", "meta-llama/Llama-2-7b-hf",
                    "--engine", "llama.cpp", "-c", "4096", "-np", "1")
    assert rows(moved)["buffer:CUDA0"]["cause"].startswith("the layer split")


def test_llamacpp_log_needs_no_gpu_or_budget(runner, tmp_path) -> None:
    """issue 22: llama.cpp sizes its cache by -c and -np, so a llama.cpp log is compared with no --gpu/--kv-budget."""
    log = ("llama_kv_cache: size = 2048.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 1024.00 MiB, "
           "V (f16): 1024.00 MiB\n")
    report = compare(runner, tmp_path, log, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "-c", "4096")
    assert report["log_comparison"]["differs"] == 0
    assert report["inputs"]["kv_budget_bytes"] == int(2 * (1024 + 0.005) * MiB)  # K + V, each at its rounding's top
    assert any("llama.cpp sizes its cache by -c and -np" in n for n in report["notes"])


def _llama_context_log(n_ctx: int, slots: int, unified: bool) -> str:
    """A llama.cpp start-up log of Llama-2-7b (32 layers, 32 KV heads, head dim 128, f16 cache), in the line forms
    of src/llama-context.cpp (n_seq_max, n_ctx, n_ctx_seq, kv_unified) and src/llama-kv-cache.cpp (size = ...)."""
    mib = KV * 32 * 32 * 128 * 2 * n_ctx / MiB  # K+V, layers, kv heads, head dim, f16: every cell of every slot
    streams = 1 if unified else slots
    return (f"llama_context: n_seq_max             = {slots}\n"
            f"llama_context: n_ctx                 = {n_ctx}\n"
            f"llama_context: n_ctx_seq             = {n_ctx if unified else n_ctx // slots}\n"
            "llama_context: n_batch               = 2048\n"
            f"llama_context: kv_unified            = {'true' if unified else 'false'}\n"
            f"llama_kv_cache:      CUDA0 KV buffer size = {mib:8.2f} MiB\n"
            f"llama_kv_cache: size = {mib:7.2f} MiB ({n_ctx // streams:6d} cells,  32 layers, {slots:2d}/{streams} seqs), "
            f"K (f16): {mib / 2:7.2f} MiB, V (f16): {mib / 2:7.2f} MiB\n")


@pytest.mark.parametrize(("slots", "unified"), [(1, False), (4, False), (4, True)])
def test_llamacpp_log_context_is_read_when_none_is_given(runner, tmp_path, slots: int, unified: bool) -> None:
    """issue 21: without -c, --compare-log sizes the context the llama.cpp log ran with (n_ctx = 8192), not the
    model's maximum (Llama-2-7b: 4096), so every figure compares like for like."""
    report = compare(runner, tmp_path, _llama_context_log(8192, slots, unified), "-m", "meta-llama/Llama-2-7b-hf",
                     "--engine", "llama.cpp")
    assert report["log_comparison"]["differs"] == 0, report["log_comparison"]
    log = report["capacity"]["engine_log"]
    assert log["buffers"][0]["bytes"] == KV * 32 * 32 * 128 * 2 * 8192  # K+V, layers, kv heads, head dim, f16
    assert log["llama_caches"][0]["cells"] == (8192 if unified else 8192 // slots)
    assert any("-c 8192: the log's n_ctx (line 2)" in n for n in report["notes"])
    assert any(f"-np {slots}: the log's n_seq_max (line 1)" in n for n in report["notes"])
    assert any("--kv-unified: the log's kv_unified" in n for n in report["notes"]) == unified


def test_llamacpp_log_context_does_not_override_c(runner, tmp_path) -> None:
    """-c given: it is sized as given, and the log's own 8192 cells show as the difference."""
    report = compare(runner, tmp_path, _llama_context_log(8192, 1, False), "-m", "meta-llama/Llama-2-7b-hf",
                     "--engine", "llama.cpp", "-c", "4096")
    assert report["capacity"]["engine_log"]["llama_caches"][0]["cells"] == 4096
    assert report["log_comparison"]["differs"] > 0
    assert not any("the log's n_ctx" in n for n in report["notes"])


def test_budget_rounding_named_only_when_it_can_explain_the_gap(runner, tmp_path) -> None:
    """The club-3090#652 log read without --enable-prefix-caching: 6.01 GiB +- 0.005 is 299-301 blocks, 4.53x-4.56x
    at 66 blocks a request, never the logged 4.35x: the cause is the blocks a request needs, not the rounding."""
    from conftest import shared_config_path

    log = CLUB_3090_652_LOG.replace("'enable_prefix_caching': True, ", "")
    report = compare(runner, tmp_path, log, "-m", str(shared_config_path("Qwen__Qwen3.5-35B-A3B")), "--kv-dtype", "fp8",
                     "--max-model-len", "131072", "--engine-version", "0.24")
    cause = rows(report)["max_concurrency"]["cause"]
    assert rows(report)["max_concurrency"]["predicted"] == f"{300 / 66:.2f}" == "4.55"
    assert cause.startswith("not the budget") and "--enable-prefix-caching" in cause
    # the logged budget's rounding does explain a neighbouring figure: 299 / 66 = 4.53x
    near = compare(runner, tmp_path, log.replace("4.35x", "4.53x"), "-m", str(shared_config_path("Qwen__Qwen3.5-35B-A3B")),
                   "--kv-dtype", "fp8", "--max-model-len", "131072", "--engine-version", "0.24")
    assert rows(near)["max_concurrency"]["cause"].startswith("rounding of the logged 6.01 GiB")


# https://github.com/vllm-project/vllm/pull/12569 (vLLM 0.7 with VLLM_USE_V1=1, Llama-3.1-70B w8a8, util 0.98,
# max-model-len 2048), as its description logs it: early V1 prints V0's block line without its CPU blocks.
VLLM_12569_LOG = """\
INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB
INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381
INFO 01-30 03:19:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x
"""


def test_vllm_12569_early_v1_log_is_not_read_as_v0(runner, tmp_path) -> None:
    parsed = parse_log(VLLM_12569_LOG)
    assert parsed.version_hint == "0.7-v1"
    assert parse_log(VLLM_10517_LOG).version_hint == "0.6"  # V0 prints '# GPU blocks: N, # CPU blocks: C'
    assert parse_log("Initializing a V1 LLM engine (v0.7.3) with config: model=...\n# GPU blocks: 9").version == "0.7.3-v1"
    page = 16 * 80 * KV * 8 * 128 * BF16  # block * layers * K+V * kv heads * head dim * bf16 = 5 MiB
    report = compare(runner, tmp_path, VLLM_12569_LOG, "-m", "meta-llama/Llama-3.1-70B", "--max-model-len", "2048",
                     "--kv-budget", str(1381 * page))
    assert report["inputs"]["engine_version"] == "0.7-v1"
    assert report["capacity"]["engine_log"]["lines"] == ["# GPU blocks: 1381",
                                                         "Maximum concurrency for 2048 tokens per request: 10.79x"]
    assert report["log_comparison"]["differs"] == 0
    assert f"{1381 * 16 / 2048:.2f}" == "10.79"  # num_blocks * block_size / max_model_len


def test_vllm_12569_derived_budget_names_its_range_and_the_budget_that_pins_it(runner, tmp_path) -> None:
    """With a GPU and no budget, kvplan derives one; the differing blocks and concurrency are put beside the range
    kvplan prints, and the --kv-budget of the logged blocks is given (which then matches: the test above)."""
    page = 16 * 80 * KV * 8 * 128 * BF16  # block * layers * K+V * kv heads * head dim * bf16 = 5 MiB
    report = compare(runner, tmp_path, VLLM_12569_LOG, "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                     "--weights-bytes", str(int(67.7229 * 2**30)), "--gpu-memory-utilization", "0.98",
                     "--max-model-len", "2048")
    by = rows(report)
    low, high = report["capacity"]["num_blocks_range"]
    assert low <= 1381 <= high
    assert f"within the {low:,}-{high:,} blocks" in by["num_blocks"]["cause"]
    assert f"pass --kv-budget {1381 * page} (1381 blocks x {page:,} B)" in by["num_blocks"]["cause"]
    assert "within the" in by["max_concurrency"]["cause"] and "(the range row)" in by["max_concurrency"]["cause"]


# https://github.com/NVIDIA/TensorRT-LLM/issues/1400 (TensorRT-LLM 0.8, a smoothquant 7B engine on an A100)
TRT_1400_LOG = """\
[TensorRT-LLM][INFO] [MemUsageChange] TensorRT-managed allocation in IExecutionContext creation: CPU +0, GPU +0, now: CPU 0, GPU 6683 (MiB)
[TensorRT-LLM][INFO] Allocate 69524783104 bytes for k/v cache.
[TensorRT-LLM][INFO] Using 132608 tokens in paged KV cache.
"""


def test_trtllm_1400_v0_8_lines_are_read_and_match(runner, tmp_path) -> None:
    parsed = parse_log(TRT_1400_LOG)
    assert (parsed.engine, parsed.version_hint) == ("trtllm", "0.8")
    per_token = 32 * KV * 32 * 128 * 2  # layers * K+V * kv heads * head dim * fp16 = 512 KiB (Llama-2-7B geometry)
    assert 132_608 * per_token == 69_524_783_104
    report = compare(runner, tmp_path, TRT_1400_LOG, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "trtllm")
    assert report["inputs"]["kv_budget_bytes"] == 69_524_783_104  # the pool the log allocated, no GPU needed
    assert report["capacity"]["engine_log"]["lines"] == [
        "[TensorRT-LLM][INFO] Allocate 69524783104 bytes for k/v cache.",
        "[TensorRT-LLM][INFO] Using 132608 tokens in paged KV cache."]
    assert report["log_comparison"]["matches"] == 2 and report["log_comparison"]["differs"] == 0


def test_llamacpp_deepseek_v4_compressor_state_lines_are_compared(runner, tmp_path) -> None:
    """llama_dsv4_comp_state's lines (src/llama-kv-cache-dsv4.cpp, llama-cpp-python 0.3.36's llama.cpp), written in its
    format for DeepSeek-V4-Flash at -c 393216 -np 4 -kvu: each state's rows x width, streams, layers and size."""
    from conftest import shared_config, shared_config_path

    config = shared_config("deepseek-ai__DeepSeek-V4-Flash")
    head, index, streams, f32 = config["head_dim"], config["index_head_dim"], 4, 4  # the states never unify
    csa, hca = 21, 20  # compress_ratios' 4s and 128s over the 43 layers
    csa_size = 2 * 8 * (2 * head) * f32 * streams * csa  # kv + score, 2 x 4 rows of 2 x head_dim
    hca_size = 2 * 128 * head * f32 * streams * hca
    lid_size = 2 * 8 * (2 * index) * f32 * streams * csa
    log = (f"llama_dsv4_comp_state: csa ratio = 4, state = 8 x {2 * head}, streams = 4, rs_seq = 0, layers = {csa}, "
           f"size = {csa_size / MiB:7.2f} MiB\n"
           f"llama_dsv4_comp_state: hca ratio = 128, state = 128 x {head}, streams = 1, rs_seq = 0, layers = {hca}, "
           f"size = {hca_size / 4 / MiB:7.2f} MiB\n"  # as a build that unified the states would print it
           f"llama_dsv4_comp_state: lid ratio = 4, state = 8 x {2 * index}, streams = 4, rs_seq = 0, layers = {csa}, "
           f"size = {lid_size / MiB:7.2f} MiB\n")
    report = compare(runner, tmp_path, log, "-m", str(shared_config_path("deepseek-ai__DeepSeek-V4-Flash")),
                     "--engine", "llama.cpp", "-c", "393216", "-np", "4", "-kvu", "--kv-budget", "40GiB")
    by = rows(report)
    assert (by["state:csa:cells"]["predicted"], by["state:csa:width"]["predicted"]) == ("8", "1024")
    assert by["state:csa:size"]["logged"] == by["state:csa:size"]["predicted"] == "5.25"
    assert by["state:lid:size"]["predicted"] == "1.31" and by["state:lid:layers"]["match"]
    assert (by["state:hca:seqs"]["logged"], by["state:hca:seqs"]["predicted"]) == ("1", "4")
    assert (by["state:hca:size"]["logged"], by["state:hca:size"]["predicted"]) == ("10.00", "40.00")
    assert report["log_comparison"]["differs"] == 2 and report["log_comparison"]["matches"] == 13
    assert "one per sequence (-np) even under -kvu" in by["state:hca:seqs"]["cause"]


def test_llamacpp_22319_deepseek_v4_raw_cache_holds_no_layers(runner, tmp_path) -> None:
    """ggml-org/llama.cpp#22319 (DeepSeek-V4, -c 393216 -np 4 -kvu): llama_kv_cache_dsv4's raw iSWA cache logs its
    non-SWA part with the whole context and 0 layers; every layer is windowed (src/llama-kv-cache-dsv4.cpp)."""
    from conftest import shared_config_path

    report = compare(runner, tmp_path, LLAMA_22319_LOG, "-m", str(shared_config_path("deepseek-ai__DeepSeek-V4-Flash")),
                     "--engine", "llama.cpp", "-c", "393216", "-np", "4", "-kvu")
    by = rows(report)
    assert (by["cache0:cells"]["predicted"], by["cache0:layers"]["predicted"]) == ("393216", "0")
    # NOTE: the one difference is the build: llama.cpp (as vendored in llama-cpp-python 0.3.36) keeps one
    # stream per sequence for DeepSeek-V4 even under -kvu; the thread's build unified the raw cache.
    n_seq_max = 4  # -np 4
    assert (by["cache0:seqs"]["logged"], by["cache0:seqs"]["predicted"]) == (f"{n_seq_max}/1", f"{n_seq_max}/{n_seq_max}")
    assert "version difference" in by["cache0:seqs"]["cause"] and "0 bytes either way" in by["cache0:seqs"]["cause"]
    assert report["log_comparison"]["differs"] == 1
    caches = {c["name"]: c for c in report["capacity"]["engine_log"]["llama_caches"]}
    kv_size = 393216  # -kvu: n_ctx_seq = n_ctx, and each of the 4 streams gets it (the DSV4 caches never unify)
    swa_cells = -(-min(kv_size, 128 + 512) // 256) * 256  # GGML_PAD(min(kv_size, n_swa + n_ubatch), 256) = 768
    assert caches["swa"]["cells"] == swa_cells and caches["swa"]["layers"] == 43
    assert caches["swa"]["k_bytes"] == swa_cells * 4 * 43 * 512 * 2  # cells * streams * layers * head_dim * f16
    assert (caches["csa"]["cells"], caches["csa"]["layers"]) == (kv_size // 4, 21)  # GGML_PAD(cdiv(kv_size, 4), 256)
    assert (caches["hca"]["cells"], caches["hca"]["layers"]) == (kv_size // 128, 20)
    assert caches["lid"]["k_bytes"] == kv_size // 4 * 4 * 21 * 128 * 2  # lightning-indexer keys of 128
    # NOTE: the excerpt shows one empty cache of the five: its 0.00 MiB is not the budget; llama.cpp's own
    # allocation for -c/-np is, and a note says so.
    assert report["capacity"]["fits"] and report["inputs"]["kv_budget_bytes"] == report["capacity"]["kv_bytes_needed"]
    assert any(n.startswith("KV budget: the log shows 1 cache line(s)") for n in report["notes"])
