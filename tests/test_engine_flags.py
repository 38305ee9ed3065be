"""Engine flags as users type them (kvplan/engine_flags.py and the flags it reads): vLLM's token-count suffixes,
llama.cpp's -c/-np, -ctk/-ctv, --swa-full and -kvu, DeepSeek without MLA, and vLLM's CUDA-graph term in the
derived budget.

Sources are cited at each test; line numbers drift between versions, so functions are named."""

from __future__ import annotations

import json

import pytest

from kvplan.cli import app
from kvplan.engine_flags import vllm_human_int, vllm_tokens
from kvplan.errors import InputError


def _json(runner, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ---- 6. token-count suffixes: vLLM's human_readable_int ----------------------------------------
# vllm/utils/argparse_utils.py::human_readable_int (vLLM 0.33; arg_utils.py in 0.10.1.1):
# re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])"), lower-case decimal (int(float(n) * 1000**i)),
# upper-case binary (int(n) * 1024**i, decimals refused).
@pytest.mark.parametrize(("text", "tokens"), [
    ("32k", 32 * 1000), ("32K", 32 * 1024), ("25.6k", 25600), ("1m", 1000**2), ("1M", 1024**2),
    ("131072", 131072),
])
def test_vllm_reads_suffixes_decimal_lower_binary_upper(text: str, tokens: int) -> None:
    assert vllm_human_int(text) == tokens
    assert vllm_tokens(text, "--max-model-len")[0] == tokens


def test_vllm_refuses_decimals_with_binary_suffixes() -> None:
    assert vllm_human_int("1.5K") is None
    with pytest.raises(InputError, match="vLLM refuses decimals with binary suffixes like K"):
        vllm_tokens("1.5K", "--max-model-len")


def test_a_plain_integer_needs_no_note() -> None:
    assert vllm_tokens("32000", "--max-model-len") == (32000, None)


def test_max_model_len_follows_vllm_and_says_so_in_every_command(runner) -> None:
    cap = _json(runner, "capacity", "-m", "meta-llama/Llama-3.1-8B", "--kv-budget", "10GiB", "--max-model-len", "32k")
    assert cap["inputs"]["max_model_len"] == 32 * 1000
    assert any(n.startswith("--max-model-len 32k = 32,000 tokens, as vLLM reads it") and "32K would be 32,768" in n
               for n in cap["notes"])
    est = _json(runner, "estimate", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "32K")
    assert est["inputs"]["seq_len"] == 32 * 1024
    assert est["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 32 * 1024  # K+V, layers, kv heads, dim, bf16
    assert any(n.startswith("--max-model-len 32K = 32,768 tokens, as vLLM reads it") for n in est["notes"])
    # kvplan's own --seq-len keeps k = 1024 and says nothing about vLLM
    own = _json(runner, "capacity", "-m", "meta-llama/Llama-3.1-8B", "--kv-budget", "10GiB", "--seq-len", "32k")
    assert own["inputs"]["max_model_len"] == 32 * 1024
    assert not any("vLLM reads it" in n for n in own["notes"])


def test_max_num_batched_tokens_follows_vllm(runner) -> None:
    # gpt-oss sliding layers (W = 128, vLLM block 16) hold cdiv(min(W - 1 + mnbt, T), 16) + 1 blocks
    # (SlidingWindowSpec.max_memory_usage_bytes): mnbt 2k = 2,000 -> cdiv(2127, 16) + 1 = 134 blocks; 2K -> 138
    def sliding_tokens(mnbt: str) -> int:
        est = _json(runner, "estimate", "-m", "openai/gpt-oss-120b", "--engine", "vllm", "--seq-len", "32k",
                    "--max-num-batched-tokens", mnbt)
        assert any(n.startswith(f"--max-num-batched-tokens {mnbt} = ") for n in est["notes"])
        return next(g["tokens_held"] for g in est["layers"] if g["kind"] == "sliding_window")

    assert sliding_tokens("2k") == (-(-(128 - 1 + 2000) // 16) + 1) * 16
    assert sliding_tokens("2K") == (-(-(128 - 1 + 2048) // 16) + 1) * 16


def test_llama_cpp_c_with_a_suffix_is_refused_not_guessed(runner) -> None:
    # common/arg.cpp: int flags go through std::stoi, which stops at the suffix: llama.cpp reads "-c 16k" as 16 cells
    result = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--engine", "llama.cpp", "--kv-budget", "10GiB", "-c", "16k"])
    assert result.exit_code == 2, result.output
    assert "llama.cpp reads -c with std::stoi, which stops at the first non-digit (16)" in result.stderr
    assert "-c 16384" in result.stderr


# ---- 1. llama.cpp -ctk/-ctv: K and V types apart ----------------------------------------------
# common/arg.cpp kv_cache_types (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1); ggml block sizes:
# q8_0 32 values in 34 B, q4_0 18, q4_1 20, q5_0 22, q5_1 24, iq4_nl 18; f16/bf16 2 B and f32 4 B per value.
LLAMA8B = "meta-llama/Llama-3.1-8B"  # 32 layers, 8 KV heads, head size 128
ROW = 8 * 128  # values of one token's K (or V) in one layer


def _llama_log(runner, *flags: str) -> dict:
    return _json(runner, "capacity", "-m", LLAMA8B, "--engine", "llama.cpp", "--kv-budget", "20GiB", *flags)


@pytest.mark.parametrize(("ctv", "ggml", "v_row_bytes"), [
    ("f16", "f16", ROW * 2), ("bf16", "bf16", ROW * 2), ("f32", "f32", ROW * 4), ("q8_0", "q8_0", ROW // 32 * 34),
    ("q4_0", "q4_0", ROW // 32 * 18), ("q4_1", "q4_1", ROW // 32 * 20), ("q5_0", "q5_0", ROW // 32 * 22),
    ("q5_1", "q5_1", ROW // 32 * 24), ("iq4_nl", "iq4_nl", ROW // 32 * 18),
])
def test_k_and_v_types_are_sized_apart(runner, ctv: str, ggml: str, v_row_bytes: int) -> None:
    report = _llama_log(runner, "-c", "32768", "-np", "4", "-kvu", "-ctk", "q8_0", "-ctv", ctv)
    k = 32 * 32768 * (ROW // 32 * 34)  # layers, cells (-c over all slots, unified), q8_0 row
    v = 32 * 32768 * v_row_bytes
    # src/llama-kv-cache.cpp: "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB"
    assert report["capacity"]["engine_log"]["lines"][-1] == (
        f"llama_kv_cache: size = {(k + v) / 2**20:7.2f} MiB ( 32768 cells,  32 layers,  4/1 seqs), "
        f"K (q8_0): {k / 2**20:7.2f} MiB, V ({ggml}): {v / 2**20:7.2f} MiB")
    cache = report["capacity"]["engine_log"]["llama_caches"][0]
    assert (cache["k_type"], cache["k_bytes"], cache["v_type"], cache["v_bytes"]) == ("q8_0", k, ggml, v)
    assert report["capacity"]["kv_bytes_per_request"] == (k + v) // 4  # one slot of 32768 / 4 = 8192 tokens
    assert report["capacity"]["kv_bytes_needed"] == k + v
    quantised_v = ctv not in ("f16", "bf16", "f32")
    assert any("a quantised V cache" in n and "-fa auto turns it on" in n for n in report["notes"]) == quantised_v


def test_k_q8_0_v_f16_line(runner) -> None:
    report = _llama_log(runner, "-c", "32768", "-np", "4", "-kvu", "-ctk", "q8_0", "-ctv", "f16")
    assert report["capacity"]["engine_log"]["lines"][-1] == ("llama_kv_cache: size = 3136.00 MiB ( 32768 cells,  32 layers,  4/1 "
                                                 "seqs), K (q8_0): 1088.00 MiB, V (f16): 2048.00 MiB")


def test_gpt_oss_20b_q8_0_base_cache_as_logged() -> None:
    # A user's llama.cpp-runner log (Ollama server.log, OLLAMA_KV_CACHE_TYPE=q8_0, flash attention on, 131072
    # context, one slot), quoted in a public project's notes (stored copy, no repository named):
    # "llama_kv_cache: size = 1632.00 MiB (131072 cells, 12 layers, 1/1 seqs), K (q8_0): 816.00 MiB, V (q8_0): 816.00 MiB"
    import kvplan

    cap = kvplan.capacity("openai/gpt-oss-20b", engine="llama.cpp", kv_budget="10GiB", ctx_size=131072, parallel=1,
                          kv_dtype="q8_0", cache_type_v="q8_0")
    k = 12 * 131072 * (8 * 64 // 32 * 34)  # 12 full layers, cells, 8 KV heads x 64 in q8_0 blocks
    assert k == 816 * 2**20
    assert "llama_kv_cache: size = 1632.00 MiB (131072 cells,  12 layers,  1/1 seqs), K (q8_0):  816.00 MiB, " \
           "V (q8_0):  816.00 MiB" in cap.engine_log["lines"]


def test_estimate_says_the_v_type_as_an_adjustment(runner) -> None:
    est = _json(runner, "estimate", "-m", LLAMA8B, "--engine", "llama.cpp", "-s", "4096", "-ctv", "q4_0")
    k, v = 32 * 4096 * ROW * 2, 32 * 4096 * (ROW // 32 * 18)  # f16 K (llama.cpp's default), q4_0 V
    assert est["totals"]["kv_cache_bytes"] == k + v
    step = next(a for a in est["adjustments"] if a["name"] == "cache_type_v")
    assert (step["before_bytes"], step["after_bytes"]) == (2 * k, k + v)
    assert est["inputs"]["kv_dtype"] == "fp16" and "V cache q4_0 (--cache-type-v)" in est["inputs"]["kv_dtype_source"]


def test_other_engines_say_they_ignore_ctv(runner) -> None:
    est = _json(runner, "estimate", "-m", LLAMA8B, "--engine", "vllm", "-s", "4096", "-ctv", "q4_0")
    assert est["totals"]["kv_cache_bytes"] == 2 * 32 * 4096 * ROW * 2
    assert "--cache-type-v is ignored: it applies to --engine llama.cpp, not vllm" in est["notes"]


def test_llama_cpp_refuses_what_it_refuses(runner) -> None:
    # llama_init_from_model: "model does not support different K (%s) and V (%s) cache types" for MLA models
    mla = runner.invoke(app, ["estimate", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "llama.cpp", "-s", "4k",
                              "-ctk", "q8_0", "-ctv", "f16"])
    assert mla.exit_code == 2 and "refuses different K (q8_0) and V (f16) cache types for an MLA model" in mla.stderr
    bad = runner.invoke(app, ["estimate", "-m", LLAMA8B, "--engine", "llama.cpp", "-ctv", "fp8"])
    assert bad.exit_code == 2 and "does not support --cache-type-v fp8_e4m3" in bad.stderr


# ---- 2. llama.cpp --swa-full ------------------------------------------------------------------
# src/llama-kv-cache-iswa.cpp (llama.cpp @ 0c1e57098): size_swa = GGML_PAD(min(size_base, n_swa * (unified ? n_seq_max
# : 1) + n_ubatch), 256); with --swa-full: WARN "using full-size SWA cache (ref: ...)" and size_swa = size_base.
def test_gpt_oss_120b_swa_full_as_logged(runner) -> None:
    # LM Studio server log, 2025-08-12, openai/gpt-oss-120b MXFP4 GGUF on an M4 Max, llama.cpp Metal backend 1.44.0
    # (class names of mid-2025: llama_kv_cache_unified[_iswa]), context 4096, one slot, full-size SWA cache
    # (stored copy in the search index; no repository named):
    logged = [
        "llama_kv_cache_unified_iswa: using full-size SWA cache (ref: "
        "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)",
        "llama_kv_cache_unified_iswa: creating non-SWA KV cache, size = 4096 cells",
        "llama_kv_cache_unified: size =  144.00 MiB (  4096 cells,  18 layers,  1/1 seqs), K (f16):   72.00 MiB, "
        "V (f16):   72.00 MiB",
        "llama_kv_cache_unified_iswa: creating     SWA KV cache, size = 4096 cells",
        "llama_kv_cache_unified: size =  144.00 MiB (  4096 cells,  18 layers,  1/1 seqs), K (f16):   72.00 MiB, "
        "V (f16):   72.00 MiB",
    ]
    assert 18 * 4096 * 8 * 64 * 2 == 72 * 2**20  # layers, cells, KV heads x head size, f16
    report = _json(runner, "capacity", "-m", "openai/gpt-oss-120b", "--engine", "llama.cpp", "--kv-budget", "10GiB",
                   "-c", "4096", "-np", "1", "--swa-full")
    ours = [line for line in report["capacity"]["engine_log"]["lines"] if "KV buffer size" not in line]
    assert ours == [line.replace("_unified", "") for line in logged]
    assert report["capacity"]["kv_bytes_per_request"] == 2 * 72 * 2**20 * 2


def test_gpt_oss_120b_swa_cache_without_swa_full(runner) -> None:
    report = _json(runner, "capacity", "-m", "openai/gpt-oss-120b", "--engine", "llama.cpp", "--kv-budget", "10GiB",
                   "-c", "4096", "-np", "1")
    cells = -(-min(4096, 128 * 1 + 512) // 256) * 256  # min(n_ctx, n_swa + n_ubatch) padded to 256 = 768
    swa = 18 * cells * 8 * 64 * 2 * 2  # layers, cells, K+V rows of f16
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells" in report["capacity"]["engine_log"]["lines"]
    assert report["capacity"]["engine_log"]["lines"][-1] == (f"llama_kv_cache: size = {swa / 2**20:7.2f} MiB (   768 cells,  18 "
                                                 "layers,  1/1 seqs), K (f16):   13.50 MiB, V (f16):   13.50 MiB")
    assert not any("full-size" in line for line in report["capacity"]["engine_log"]["lines"])


def test_gemma_3_27b_swa_cells_with_four_unified_slots(runner) -> None:
    # gemma-3-27b: 62 layers, 52 sliding (W = 1024) + 10 global, 16 KV heads x 128, f16 (llama.cpp's default)
    def lines(*extra: str) -> list[str]:
        return _json(runner, "capacity", "-m", "google/gemma-3-27b-it", "--engine", "llama.cpp", "--kv-budget", "40GiB",
                     "-c", "32768", "-np", "4", "-kvu", *extra)["capacity"]["engine_log"]["lines"]

    row = 16 * 128 * 2
    swa_cells = -(-min(32768, 1024 * 4 + 512) // 256) * 256  # unified: n_swa * n_seq_max + n_ubatch = 4608
    base, swa, full = 10 * 32768 * row, 52 * swa_cells * row, 52 * 32768 * row
    default = lines()
    assert f"llama_kv_cache_iswa: creating     SWA KV cache, size = {swa_cells} cells" in default
    assert default[-1] == (f"llama_kv_cache: size = {2 * swa / 2**20:7.2f} MiB (  4608 cells,  52 layers,  4/1 seqs), "
                           f"K (f16): {swa / 2**20:7.2f} MiB, V (f16): {swa / 2**20:7.2f} MiB")
    assert (2 * base, 2 * swa) == (2560 * 2**20, 1872 * 2**20)
    swa_full = lines("--swa-full")
    assert swa_full[0].startswith("llama_kv_cache_iswa: using full-size SWA cache")
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 32768 cells" in swa_full
    assert swa_full[-1].endswith(f"K (f16): {full / 2**20:7.2f} MiB, V (f16): {full / 2**20:7.2f} MiB")


def test_swa_full_is_no_window_in_estimate(runner) -> None:
    args = ["estimate", "-m", "google/gemma-3-27b-it", "--engine", "llama.cpp", "-s", "32k"]
    assert _json(runner, *args, "--swa-full")["totals"] == _json(runner, *args, "--no-window")["totals"]
    assert _json(runner, *args, "--swa-full")["totals"]["kv_cache_bytes"] == 62 * 32768 * 16 * 128 * 2 * 2


# ---- 3. llama.cpp -kvu (unified KV) -----------------------------------------------------------
# llama-context.cpp: unified -> n_ctx_seq = n_ctx, one stream; else n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) per
# stream; the summary prints "%2u/%u seqs" = n_seq_max / n_stream.
def test_kvu_one_pool_or_one_stream_per_slot_as_logged(runner) -> None:
    # llama-server probe logs of Llama-2-7B (32 layers, 32 KV heads x 128), -c 5120 -np 10, q8_0 K and V, quoted in a
    # public notes file (stored copy, no repository named):
    #   "llama_kv_cache: size = 1360.00 MiB (   512 cells,  32 layers, 10/10 seqs), K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB"
    #   "llama_kv_cache: size = 1360.00 MiB (  5120 cells,  32 layers, 10/1 seqs),  K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB"
    k = 32 * 5120 * (32 * 128 // 32 * 34)  # layers, cells in all, q8_0 row
    assert k == 680 * 2**20

    def summary(*extra: str) -> str:
        return _json(runner, "capacity", "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "--kv-budget", "10GiB",
                     "-c", "5120", "-np", "10", "-ctk", "q8_0", "-ctv", "q8_0", *extra)["capacity"]["engine_log"]["lines"][-1]

    tail = "K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB"
    assert summary() == f"llama_kv_cache: size = 1360.00 MiB (   512 cells,  32 layers, 10/10 seqs), {tail}"
    assert summary("-kvu") == f"llama_kv_cache: size = 1360.00 MiB (  5120 cells,  32 layers, 10/1 seqs), {tail}"


def test_kvu_pads_the_pool_once_not_per_slot(runner) -> None:
    # -c 3000 -np 3: per slot PAD(1000, 256) = 1024 cells x 3 streams; unified PAD(3000, 256) = 3072 cells, 1 stream
    def need(*extra: str) -> int:
        return _json(runner, "estimate", "-m", LLAMA8B, "--engine", "llama.cpp", "-s", "1000", "-b", "3",
                     *extra)["totals"]["kv_cache_bytes"]

    per_cell = 32 * 2 * ROW * 2  # layers, K+V, row, f16
    assert need() == 3 * 1024 * per_cell
    assert need("-kvu") == 3072 * per_cell


# ---- 5. vLLM's CUDA-graph term in the derived budget ------------------------------------------
# vllm/v1/worker/gpu_worker.py::determine_available_memory (0.20-0.33): available = requested - non_kv_cache_memory
# - cudagraph_memory_estimate_applied (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default "1" in the 0.20.0 wheel);
# gpu_model_runner.py::profile_cudagraph_memory logs "Profiling CUDA graph memory: PIECEWISE=n (largest=s), FULL=...".
@pytest.mark.parametrize(("max_num_seqs", "logged"), [
    # published vLLM logs (stored copies): Qwen3.5-4B on vLLM 0.22 with default max_num_seqs 256 (a 48 GB GPU) ...
    (256, ((51, 512), (35, 256))),
    # ... and three more start-ups with max_num_seqs 128, 32 and 8
    (128, ((35, 256), (19, 128))), (32, ((11, 64), (7, 32))), (8, ((5, 16), (4, 8))),
])
def test_cuda_graph_counts_as_vllm_logs_them(max_num_seqs: int, logged: tuple) -> None:
    from kvplan.engines.vllm import cudagraph_sizes

    piecewise, full = cudagraph_sizes(max_num_seqs, 8192, "H100")
    assert ((len(piecewise), max(piecewise)), (len(full), max(full))) == logged


def test_vllm_budget_subtracts_the_graph_term_from_0_20_and_says_how_uncertain(runner) -> None:
    def budget(version: str) -> dict:
        return _json(runner, "capacity", "-m", LLAMA8B, "--gpu", "H100", "--max-model-len", "8192",
                     "--engine-version", version)

    old, new = budget("0.17"), budget("0.20")
    graphs = next(t for t in new["budget"]["terms"] if t["name"] == "CUDA graphs")
    assert not any(t["name"] == "CUDA graphs" for t in old["budget"]["terms"])
    width = 3 * 14336 + (4096 + 2 * 1024) + 2 * 4096  # Llama-3.1-8B: gate/up/act + q,k,v + residual
    assert graphs["bytes"] == 512 * width * 2 + (51 - 1 + 51 - 1) * 2**20  # max_num_seqs 1024 on an H100
    assert old["budget"]["kv_bytes_per_gpu"] - new["budget"]["kv_bytes_per_gpu"] == graphs["bytes"]
    assert "profile_cudagraph_memory" in graphs["source"] and new["budget"]["formula"].endswith("CUDA graph estimate")
    # vLLM measures its graph estimate on the GPU; published 'Estimated CUDA graph memory' lines run up to 1.97 GiB
    note = next(n for n in new["notes"] if n.startswith("vLLM KV budget derived"))
    assert f"(up to {1.97 - graphs['bytes'] / 2**30:.1f} GiB less, " in note
    assert "GiB less" not in next(n for n in old["notes"] if n.startswith("vLLM KV budget derived"))  # no graph term


# ---- 4. DeepSeek with MLA off ------------------------------------------------------------------
# DeepSeek-V3: 61 layers, 128 heads, qk_nope_head_dim 128 + qk_rope_head_dim 64 = 192, v_head_dim 128, latent 512 + 64.
V3 = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize(("engine", "v_dim"), [
    ("ideal", 128),
    # vllm/transformers_utils/model_arch_config_convertor.py::get_head_size: VLLM_MLA_DISABLE -> qk_nope + qk_rope;
    # vllm/model_executor/models/deepseek_v2.py (the MHA path) pads V to qk_head_dim before self.attn(q, k, v)
    ("vllm", 192),
    # llama.cpp: a deepseek2 GGUF without attention.key_length_mla has n_embd_head_k 192, n_embd_head_v 128
    ("llama.cpp", 128),
    # transformers < 5.15 DeepseekV3Attention cached the expanded key_states (192) and value_states (128)
    ("hf-dynamic", 128),
])
def test_no_mla_caches_per_head_k_and_v(runner, engine: str, v_dim: int) -> None:
    est = _json(runner, "estimate", "-m", V3, "--engine", engine, "-s", "4096", "--no-mla")
    assert est["totals"]["kv_cache_bytes"] == 61 * 4096 * 128 * (192 + v_dim) * 2  # layers, tokens, heads, K+V, bf16/f16
    latent = _json(runner, "estimate", "-m", V3, "--engine", engine, "-s", "4096")["totals"]["kv_cache_bytes"]
    assert latent < est["totals"]["kv_cache_bytes"]
    assert any(n.startswith("--no-mla: MLA off") for n in est["notes"])


def test_no_mla_kv_heads_shard_over_tp_in_capacity(runner) -> None:
    # with MLA off, vLLM's 128 KV heads split over tp (the latent is replicated instead)
    cap = _json(runner, "capacity", "-m", V3, "--engine", "vllm", "--kv-budget", "20GiB", "-tp", "8",
                "--max-model-len", "4096", "--no-mla")
    assert cap["capacity"]["kv_bytes_per_request"] == 61 * 4096 * (128 // 8) * (192 + 192) * 2


def test_no_mla_refusals(runner) -> None:
    sglang = runner.invoke(app, ["estimate", "-m", V3, "--engine", "sglang", "--no-mla"])
    assert sglang.exit_code == 2 and "SGLang has no switch that turns MLA off" in sglang.stderr
    llama = runner.invoke(app, ["estimate", "-m", LLAMA8B, "--no-mla"])
    assert llama.exit_code == 2 and "has no MLA layers" in llama.stderr


def test_explain_log_names_the_v_type_flag(runner, tmp_path) -> None:
    # a llama.cpp line in the printf format of src/llama-kv-cache.cpp, with q8_0 K and f16 V (the arithmetic above)
    log = tmp_path / "llama.log"
    log.write_text("llama_kv_cache: size = 3136.00 MiB ( 32768 cells,  32 layers,  4/1 seqs), "
                   "K (q8_0): 1088.00 MiB, V (f16): 2048.00 MiB\n")
    base = ["capacity", "-m", LLAMA8B, "--engine", "llama.cpp", "--kv-budget", "20GiB", "-c", "32768", "-np", "4",
            "-kvu", "--compare-log", str(log)]
    same = _json(runner, *base, "-ctk", "q8_0", "-ctv", "f16")["log_comparison"]
    assert same["differs"] == 0 and same["matches"] >= 4
    rows = _json(runner, *base, "--kv-dtype", "q8_0")["log_comparison"]["rows"]
    v_row = next(r for r in rows if r["figure"].endswith("v_type"))
    assert (v_row["logged"], v_row["predicted"], v_row["cause"]) == ("f16", "q8_0", "the V cache type: pass -ctv f16")


def test_ctk_alone_keeps_llamacpp_f16_v(runner) -> None:
    """llama.cpp's -ctk sets the K type only; V keeps its default f16 (common/arg.cpp: cache_type_v defaults to
    GGML_TYPE_F16). --kv-dtype sets both; giving both spellings of the K type is refused."""
    tokens, layers, kv_heads, head_dim = 8192, 32, 8, 128  # Llama-3.1-8B
    k_q8 = tokens * layers * kv_heads * head_dim * 34 // 32  # q8_0: 34 B per block of 32
    v_f16 = tokens * layers * kv_heads * head_dim * 2
    args = ["estimate", "-m", LLAMA8B, "--engine", "llama.cpp", "-s", "8192", "--format", "json"]
    assert _json(runner, *args, "-ctk", "q8_0")["totals"]["kv_cache_bytes"] == k_q8 + v_f16
    assert _json(runner, *args, "--kv-dtype", "q8_0")["totals"]["kv_cache_bytes"] == 2 * k_q8
    both = runner.invoke(app, [*args, "--kv-dtype", "q8_0", "-ctk", "q4_0"])
    assert both.exit_code == 2 and "both set the K type" in both.output
    fa = runner.invoke(app, args[:-2] + ["-ctk", "q8_0"])
    assert "needs flash attention" not in fa.stderr  # V is f16: no flash-attention rule


@pytest.mark.parametrize(("args", "phrase"), [
    (["capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--cpu-offload-gb", "nan"],
     "--cpu-offload-gb nan is not a non-negative number of GiB"),
    (["capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--cpu-offload-gb", "inf"],
     "--cpu-offload-gb inf is not a non-negative number of GiB"),
    (["capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "sglang", "--enable-prefix-caching"],
     "--enable-prefix-caching is vLLM's flag, but --engine is sglang"),
    (["estimate", "meta-llama/Llama-3.1-8B", "-s", "4k", "--no-enable-prefix-caching"],
     "--enable-prefix-caching is vLLM's flag, but --engine is ideal"),
    (["recommend", "meta-llama/Llama-3.1-8B", "--max-model-len", "8k", "--kv-dtype", "q9"],
     "--kv-dtype 'q9' is not a known KV dtype"),
])
def test_a_flag_kvplan_cannot_use_is_exit_2_not_a_traceback_or_a_silent_answer(runner, args, phrase) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert phrase in " ".join(result.output.split())
    assert "Traceback" not in result.output
