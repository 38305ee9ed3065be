"""`capacity.engine_log`: each engine's start-up KV lines, reproduced from published logs.

Every expected line below is quoted from the log named beside it; the budget that reproduces it
is written as arithmetic over the engine's own block formula. No GPU is given: ``--kv-budget`` is
all these answers need (issue 12).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.cli import app
from kvplan.units import GiB

from conftest import BF16, KV

LLAMA8B = "meta-llama/Llama-3.1-8B"
LLAMA8B_TOKEN = KV * 32 * 8 * 128 * BF16  # K+V * layers * kv heads * head dim * bf16 = 131,072 B


def capacity_json(runner, *args: str) -> dict:
    result = runner.invoke(app, ["capacity", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def write_config(tmp_path: Path, name: str, **config: object) -> str:
    path = tmp_path / name / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(config))
    return str(path)


# ---- vLLM -----------------------------------------------------------------------------------------
def test_gpt_oss_120b_legacy_token_line_without_a_gpu(runner) -> None:
    # The gpt-oss-120b log line (vLLM 0.10-0.20, hybrid allocator, a user's start-up log):
    #   Available KV cache memory: 5.38 GiB / GPU KV cache size: 78,384 tokens
    # The logged 5.38 GiB is rounded: 5.38 * 2**30 B gives 9,793 blocks (78,336 tokens). 78,384 tokens =
    # 4,899 * 16 needs 9,798 or 9,799 blocks, i.e. a budget in [5.38225, 5.38335) GiB.
    page = 16 * 8 * (64 + 64) * BF16  # block * kv heads * (K + V head dim) * bf16 = 32,768 B per layer
    group_size = 18  # 18 full + 18 sliding layers: two groups of 18 share 18 tensors
    budget = 9798 * page * group_size  # = 5,779,095,552 B
    assert budget == 5_779_095_552
    report = capacity_json(runner, "-m", "openai/gpt-oss-120b", "--kv-budget", str(budget), "--engine-version", "0.11")
    log = report["capacity"]["engine_log"]
    assert log["lines"] == [
        "Available KV cache memory: 5.38 GiB",
        "GPU KV cache size: 78,384 tokens",
        "Maximum concurrency for 131,072 tokens per request: 1.12x",
    ]
    assert log["num_blocks"] == 9798
    assert log["gpu_kv_cache_tokens"] == 9798 // 2 * 16 == 78_384  # num_blocks // num_kv_cache_groups * block_size
    # the true capacity stays beside it: every layer has 9,798 blocks of 16 token slots
    assert report["capacity"]["max_tokens"] == 9798 * 16 == 156_768
    assert report["inputs"]["gpu"] is None and report["capacity"]["decode_floor_seconds"] is None
    assert any("decode floor" in n for n in report["notes"])


def test_gpt_oss_120b_current_vllm_prints_concurrency_times_length(runner) -> None:
    # vLLM >= 0.21: int(max_concurrency * max_model_len); one merged line from 0.28 (kv_cache_utils.py).
    budget = 9798 * 16 * 8 * (64 + 64) * BF16 * 18
    full_blocks = 131072 // 16  # full layers hold the whole context
    sliding_blocks = -(-(128 - 1 + 8192) // 16) + 1  # cdiv(W - 1 + max_num_batched_tokens, bs) + 1
    concurrency = 9798 / (full_blocks + sliding_blocks)
    report = capacity_json(runner, "-m", "openai/gpt-oss-120b", "--kv-budget", str(budget))
    tokens = int(concurrency * 131072)
    assert tokens == 147_393
    assert report["capacity"]["engine_log"]["version"] == "0.33"
    assert report["capacity"]["engine_log"]["lines"] == [
        "Available KV cache memory: 5.38 GiB",
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for 131,072 tokens per request: {concurrency:.2f}x",
    ]
    assert report["capacity"]["engine_log"]["max_concurrency"] == round(concurrency, 4)
    assert any("78,384 tokens in 0.10-0.20" in n for n in report["notes"])


def test_vllm_10517_v0_lines_without_a_gpu(runner) -> None:
    # https://github.com/vllm-project/vllm/issues/10517 (vLLM V0, Llama-3.1-8B-Instruct, RTX 3090):
    #   # GPU blocks: 1952, # CPU blocks: 2048 / Maximum concurrency for 20000 tokens per request: 1.56x
    # kv_cache_size=3.81GiB is rounded; 1952 blocks of 16 * 131,072 B = 3.8125 GiB.
    block = 16 * LLAMA8B_TOKEN
    report = capacity_json(runner, "-m", "meta-llama/Llama-3.1-8B-Instruct", "--kv-budget", "3.8125GiB",
                           "--max-model-len", "20000", "--engine-version", "0.6.4")
    assert report["capacity"]["engine_log"]["lines"] == [
        f"# GPU blocks: {int(3.8125 * GiB) // block}, # CPU blocks: {4 * GiB // block}",  # swap space 4 GiB
        "Maximum concurrency for 20000 tokens per request: 1.56x",
    ]
    assert report["capacity"]["engine_log"]["num_blocks"] == 1952 and report["capacity"]["engine_log"]["gpu_kv_cache_tokens"] == 1952 * 16


def test_vllm_10517_v0_does_not_fit_at_29000(runner) -> None:
    # Same issue at --max-model-len 29000: "# GPU blocks: 1478" / "0.82x" and
    # "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in
    # KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when
    # initializing the engine."
    report = capacity_json(runner, "-m", "meta-llama/Llama-3.1-8B-Instruct", "--kv-budget",
                           str(1478 * 16 * LLAMA8B_TOKEN), "--max-model-len", "29000", "--engine-version", "0.6")
    lines = report["capacity"]["engine_log"]["lines"]
    assert lines[0].startswith("# GPU blocks: 1478, ")
    assert lines[1] == "Maximum concurrency for 29000 tokens per request: 0.82x"
    assert lines[2] == (
        "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
        "(23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )


def test_lmcache_1739_qwen3_14b_v1_lines(runner, tmp_path) -> None:
    # https://github.com/LMCache/LMCache/issues/1739 (vLLM 0.10.2/0.11, Qwen3-14B, max_model_len 32768):
    #   Available KV cache memory: 6.51 GiB / GPU KV cache size: 42,656 tokens /
    #   Maximum concurrency for 32,768 tokens per request: 1.30x
    # Qwen3-14B's published config: 40 layers, 8 KV heads, head_dim 128, bfloat16.
    path = write_config(tmp_path, "qwen3-14b", model_type="qwen3", architectures=["Qwen3ForCausalLM"],
                        hidden_size=5120, num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                        num_hidden_layers=40, intermediate_size=17408, vocab_size=151936,
                        max_position_embeddings=40960, torch_dtype="bfloat16")
    block = 16 * KV * 40 * 8 * 128 * BF16  # 2,621,440 B over all layers
    budget = int(6.51 * GiB)
    report = capacity_json(runner, "-m", path, "--kv-budget", str(budget), "--max-model-len", "32768",
                           "--engine-version", "0.11")
    assert budget // block == 2666
    assert report["capacity"]["engine_log"]["lines"] == [
        "Available KV cache memory: 6.51 GiB",
        "GPU KV cache size: 42,656 tokens",
        "Maximum concurrency for 32,768 tokens per request: 1.30x",
    ]


def test_vllm_13596_thousands_separators(runner) -> None:
    # https://github.com/vllm-project/vllm/pull/13596: "GPU KV cache size: 2,042,016 tokens" /
    # "Maximum concurrency for 2,048 tokens per request: 997.08x" (127,626 blocks of 16).
    report = capacity_json(runner, "-m", LLAMA8B, "--kv-budget", str(127_626 * 16 * LLAMA8B_TOKEN),
                           "--max-model-len", "2048", "--engine-version", "0.21")
    assert report["capacity"]["engine_log"]["lines"][1:] == [
        "GPU KV cache size: 2,042,016 tokens",
        "Maximum concurrency for 2,048 tokens per request: 997.08x",
    ]


@pytest.mark.parametrize(("version", "gib"), [("0.11", "1.70"), ("0.14", "1.7"), ("0.33", "1.7")])
def test_vllm_gib_format_by_version(runner, version, gib) -> None:
    # %.2f up to 0.12; format_gib = str(round(x, 2)) from 0.14 (vllm/utils/mem_utils.py): "1.7 GiB".
    report = capacity_json(runner, "-m", LLAMA8B, "--kv-budget", str(int(1.7 * GiB)), "--max-model-len", "4096",
                           "--engine-version", version)
    assert report["capacity"]["engine_log"]["lines"][0] == f"Available KV cache memory: {gib} GiB"


def test_vllm_not_enough_kv_error_text(runner) -> None:
    # check_enough_kv_cache_memory's ValueError (0.27+ text, as in vllm#44376): needed for one request
    # at 131,072 tokens is 131,072 * 131,072 B = 16 GiB; 2 GiB fit 16,384 tokens.
    report = capacity_json(runner, "-m", LLAMA8B, "--kv-budget", "2GiB", "--max-model-len", "131072")
    assert report["capacity"]["engine_log"]["lines"] == [
        "Available KV cache memory: 2.0 GiB",
        "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (2.0 GiB). Based on the available memory, the estimated maximum "
        f"model length is {2 * GiB // LLAMA8B_TOKEN}. Try increasing `gpu_memory_utilization` (which also controls CPU "
        "memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
    ]
    assert report["capacity"]["engine_log"]["gpu_kv_cache_tokens"] is None


# ---- SGLang ---------------------------------------------------------------------------------------
def test_sglang_21348_qwen3_235b_k_and_v_sizes(runner, tmp_path) -> None:
    # https://github.com/vllm-project/vllm/issues/21348 (SGLang, Qwen3-235B-A22B-FP8, --tp 4):
    #   KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB
    # Published config: 94 layers, 4 KV heads (1 per rank at tp 4), head_dim 128, bf16 KV.
    path = write_config(tmp_path, "qwen3-235b", model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"],
                        hidden_size=4096, num_attention_heads=64, num_key_value_heads=4, head_dim=128,
                        num_hidden_layers=94, intermediate_size=12288, moe_intermediate_size=1536, num_experts=128,
                        num_experts_per_tok=8, vocab_size=151936, max_position_embeddings=40960,
                        torch_dtype="bfloat16")
    cell = 94 * 1 * (128 + 128) * BF16  # layers * heads per rank * (K + V) * bf16 = 48,128 B per token
    report = capacity_json(runner, "-m", path, "--engine", "sglang", "--tp", "4", "--kv-budget", str(367_404 * cell),
                           "--max-model-len", "32768", "--engine-version", "0.4.9")
    log = report["capacity"]["engine_log"]
    k_bytes = 94 * (367_404 + 1) * 1 * 128 * BF16  # layers * (#tokens + page_size) * heads * head dim * bf16
    assert log["lines"] == ["KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"]
    assert (log["max_total_num_tokens"], log["k_size_bytes"], log["v_size_bytes"]) == (367_404, k_bytes, k_bytes)


def test_sglang_0_5_23_prints_the_dtype(runner) -> None:
    # memory_pool.py::_finalize_allocation_log (0.5.23): "... is allocated. dtype: {dtype}, #tokens: ..."
    report = capacity_json(runner, "-m", LLAMA8B, "--engine", "sglang", "--kv-budget", str(1000 * LLAMA8B_TOKEN),
                           "--max-model-len", "512")
    assert report["capacity"]["engine_log"]["lines"][0].startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, ")


# ---- TensorRT-LLM ---------------------------------------------------------------------------------
def test_trtllm_dynamo_llama_8b_allocated_line(runner) -> None:
    # ai-dynamo TensorRT-LLM example (1x H100, Llama-3.1-8B bf16):
    #   Number of tokens per block: 64. / [MemUsageChange] Allocated 26.91 GiB for max tokens in paged KV cache (220480).
    blocks = 220_480 // 64
    report = capacity_json(runner, "-m", LLAMA8B, "--engine", "trtllm", "--block-size", "64", "--kv-budget",
                           str(blocks * 64 * LLAMA8B_TOKEN), "--max-model-len", "8192")
    assert report["capacity"]["engine_log"]["lines"] == [
        "[TensorRT-LLM][INFO] Number of tokens per block: 64.",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 26.91 GiB for max tokens in paged KV cache (220480).",
    ]
    assert report["capacity"]["engine_log"]["allocated_bytes"] == 220_480 * LLAMA8B_TOKEN


def test_trtllm_qwen_1_5b_lab_notes(runner) -> None:
    # A published TensorRT-LLM lab write-up, Qwen2.5-1.5B bf16, fraction 0.45:
    #   Allocated 7.31 GiB for max tokens in paged KV cache (273792)
    # Qwen2-1.5B has the same KV geometry: 28 layers * K+V * 2 heads * 128 * bf16 = 28,672 B per token.
    per_token = 28 * KV * 2 * 128 * BF16
    report = capacity_json(runner, "-m", "Qwen/Qwen2-1.5B-Instruct", "--engine", "trtllm", "--kv-budget",
                           str(273_792 * per_token), "--max-model-len", "4096")
    assert report["capacity"]["engine_log"]["lines"][1].endswith("Allocated 7.31 GiB for max tokens in paged KV cache (273792).")


# ---- llama.cpp ------------------------------------------------------------------------------------
def test_llamacpp_llama2_7b_f16_4096(runner) -> None:
    # Published llama.cpp logs (older builds), Llama-2-7B f16, n_ctx 4096:
    #   KV self size  = 2048.00 MiB, K (f16): 1024.00 MiB, V (f16): 1024.00 MiB
    # The current names (llama-kv-cache.cpp @ 0c1e57098) with the same numbers:
    report = capacity_json(runner, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "--kv-budget", "8GiB",
                           "-c", "4096", "-np", "1")
    k_mib = 32 * 32 * 128 * 2 * 4096 // 2**20  # layers * heads * head dim * f16 * cells
    assert report["capacity"]["engine_log"]["lines"] == [
        f"llama_kv_cache:      CUDA0 KV buffer size = {2 * k_mib:8.2f} MiB",
        f"llama_kv_cache: size = {2 * k_mib:7.2f} MiB (  4096 cells,  32 layers,  1/1 seqs), "
        f"K (f16): {k_mib:7.2f} MiB, V (f16): {k_mib:7.2f} MiB",
    ]
    assert k_mib == 1024


def test_llamacpp_deepseek_v4_flash_compressor_state_lines(runner) -> None:
    """DeepSeek-V4-Flash at -c 393216 -np 4 -kvu (ggml-org/llama.cpp#22319's flags): llama_kv_cache_dsv4 makes three
    llama_dsv4_comp_state after its caches (src/llama-kv-cache-dsv4.cpp in llama-cpp-python 0.3.36), each a float32
    kv and a score tensor of n_embd_state x state_size per layer and stream (the states never unify), and logs them."""
    from conftest import shared_config, shared_config_path

    config = shared_config("deepseek-ai__DeepSeek-V4-Flash")
    report = capacity_json(runner, "-m", str(shared_config_path("deepseek-ai__DeepSeek-V4-Flash")), "--engine",
                           "llama.cpp", "--kv-budget", "40GiB", "-c", "393216", "-np", "4", "-kvu")
    log = report["capacity"]["engine_log"]
    states = {c["name"]: c for c in log["llama_caches"] if c["name"].endswith("_state")}
    ratios = config["compress_ratios"][:config["num_hidden_layers"]]  # the MTP layer's entry is not cached
    head, index, streams, f32 = config["head_dim"], config["index_head_dim"], 4, 4  # -np 4
    csa_layers, hca_layers = ratios.count(4), ratios.count(128)
    assert (csa_layers, hca_layers) == (21, 20)
    expected = {  # name: (ratio, state_size rows, n_embd_state width, layers)
        "csa_state": (4, 2 * 4, 2 * head, csa_layers),  # state_size 2*DSV4_CSA_RATIO, n_embd_state 2*n_embd_head_k
        "hca_state": (128, 128, head, hca_layers),  # state_size DSV4_HCA_RATIO, n_embd_state n_embd_head_k
        "lid_state": (4, 2 * 4, 2 * index, csa_layers),  # the lightning indexer's, on the CSA layers
    }
    total = 0
    for name, (ratio, rows, width, layers) in expected.items():
        state = states[name]
        tensor = rows * width * f32 * streams * layers  # one of kv, score
        assert (state["ratio"], state["cells"], state["width"], state["layers"], state["seqs"]) == (
            ratio, rows, width, layers, streams)
        assert state["k_bytes"] == state["v_bytes"] == tensor and (state["k_type"], state["v_type"]) == ("f32", "f32")
        short = name.removesuffix("_state")
        buffer = f"llama_dsv4_comp_state:      CUDA0 DSV4 {short} state buffer size = {2 * tensor / 2**20:8.2f} MiB"
        size = (f"llama_dsv4_comp_state: {short} ratio = {ratio}, state = {rows} x {width}, streams = {streams}, "
                f"rs_seq = 0, layers = {layers}, size = {2 * tensor / 2**20:7.2f} MiB")
        at = log["lines"].index(buffer)
        assert log["lines"][at + 1] == size
        total += 2 * tensor
    assert total == 48_824_320  # kvplan's dsv4_state_bytes over the model, counted in its KV bytes
    assert log["lines"][-9:][::3] == ["llama_kv_cache_dsv4: creating DSV4 CSA compressor state",
                                     "llama_kv_cache_dsv4: creating DSV4 HCA compressor state",
                                     "llama_kv_cache_dsv4: creating DSV4 lightning-indexer compressor state"]
    assert log["lines"][-1].endswith("layers = 21, size =    1.31 MiB")  # 8 x 256 x 4 B x 4 streams x 21 x 2
    from kvplan.report.schema import report_schema

    pytest.importorskip("jsonschema").validate(report, report_schema())


def test_llamacpp_deepseek_v4_short_view_keeps_the_size_lines(runner) -> None:
    """DeepSeek-V4's 24 lines: the short view keeps each cache's and state's size line (5 caches, 3 states) and says
    how many it left out; --verbose prints every line."""
    from conftest import shared_config_path

    args = ["capacity", "-m", str(shared_config_path("deepseek-ai__DeepSeek-V4-Flash")), "--engine", "llama.cpp",
            "--kv-budget", "40GiB", "-c", "393216", "-np", "4", "-kvu"]
    short = runner.invoke(app, args, env={"COLUMNS": "200"})
    verbose = runner.invoke(app, [*args, "--verbose"], env={"COLUMNS": "200"})
    assert short.exit_code == verbose.exit_code == 0, short.output
    sizes = [line for line in short.stdout.splitlines() if "size =" in line]
    assert len(sizes) == 5 + 3 and not any("buffer size" in line for line in sizes)
    assert "... 16 more lines (--verbose)" in short.stdout  # 1 + 3 + 3 creating DSV4, 2 iSWA, 4 + 3 buffer lines
    assert "DSV4 hca state buffer size" in verbose.stdout and "more lines (--verbose)" not in verbose.stdout


@pytest.mark.parametrize(("gpu", "device"), [("H100", "CUDA0"), ("MI300X", "ROCm0"), ("M3-Max", "MTL0")])
def test_llamacpp_buffer_names_its_backend(runner, gpu: str, device: str) -> None:
    """llama.cpp names a KV buffer by its ggml backend: CUDA (NVIDIA), ROCm (a HIP build), MTL (Metal)."""
    report = capacity_json(runner, "-m", "meta-llama/Llama-2-7b-hf", "--engine", "llama.cpp", "--gpu", gpu,
                           "-c", "4096", "-np", "1")
    k_mib = 32 * 32 * 128 * 2 * 4096 // 2**20  # layers * heads * head dim * f16 * cells
    assert report["capacity"]["engine_log"]["lines"][0] == f"llama_kv_cache: {device:>10} KV buffer size = {2 * k_mib:8.2f} MiB"


def test_llamacpp_gemma3_iswa_server_defaults(runner) -> None:
    # llama-server defaults (-np auto = 4 slots, kv_unified), gemma-3-27b, -c 32768 (llama-server's log):
    # base 32768 cells for 10 global layers; SWA GGML_PAD(min(32768, 1024 * 4 + 512), 256) = 4608 cells.
    report = capacity_json(runner, "-m", "google/gemma-3-27b-it", "--engine", "llama.cpp", "--kv-budget", "40GiB",
                           "-c", "32768", "-np", "4", "-kvu")
    lines = report["capacity"]["engine_log"]["lines"]
    assert lines[0] == "llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells"
    assert lines[2] == ("llama_kv_cache: size = 2560.00 MiB ( 32768 cells,  10 layers,  4/1 seqs), "
                        "K (f16): 1280.00 MiB, V (f16): 1280.00 MiB")
    assert lines[3] == "llama_kv_cache_iswa: creating     SWA KV cache, size = 4608 cells"
    assert lines[5] == ("llama_kv_cache: size = 1872.00 MiB (  4608 cells,  52 layers,  4/1 seqs), "
                        "K (f16):  936.00 MiB, V (f16):  936.00 MiB")
    swa = report["capacity"]["engine_log"]["llama_caches"][1]
    assert swa["cells"] == 4608 and swa["k_bytes"] == 52 * 16 * 128 * 2 * 4608  # layers * heads * d * f16 * cells


@pytest.mark.parametrize(("split", "first"), [(None, 17), ("3,1", 25)])
def test_llamacpp_per_device_buffers(runner, split, first) -> None:
    # llama-model.cpp::load_tensors: 33 slots (32 layers + output); layer il goes to GPU0 while
    # il / 33 < share of GPU0: even split -> layers 0..16 (17), -ts 3,1 -> il / 33 < 0.75 -> 0..24 (25).
    args = ["-m", LLAMA8B, "--engine", "llama.cpp", "--kv-budget", "40GiB", "--max-model-len", "4096"]
    args += ["--pp", "2"] if split is None else ["-ts", split]
    buffers = capacity_json(runner, *args)["capacity"]["engine_log"]["buffers"]
    per_layer = 4096 * LLAMA8B_TOKEN // 32  # one layer's K+V for 4096 cells
    assert buffers == [{"device": "CUDA0", "bytes": first * per_layer}, {"device": "CUDA1", "bytes": (32 - first) * per_layer}]


def test_engine_log_keys_are_always_present(runner) -> None:
    keys = None
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp", "ideal", "hf-dynamic"):
        log = capacity_json(runner, "-m", LLAMA8B, "--engine", engine, "--kv-budget", "8GiB", "--max-model-len",
                            "4096")["capacity"]["engine_log"]
        assert keys is None or list(log) == keys
        keys = list(log)
    assert log["lines"] == [] and log["engine"] == "hf-dynamic"


def test_derived_vllm_budget_says_how_uncertain_it_is(runner) -> None:
    # vllm#27508: gpt-oss-120b, one H100, --gpu-memory-utilization 0.95 --max-num-batched-tokens 1024 logged
    # "Available KV cache memory: 1.71 GiB"; kvplan's derived budget cannot see the Marlin weights or MoE
    # workspaces, so it must say so (and name the flag that pins it).
    derived = capacity_json(runner, "-m", "openai/gpt-oss-120b", "--gpu", "H100", "--gpu-memory-utilization", "0.95",
                            "--max-num-batched-tokens", "1024")
    assert any(n.startswith("vLLM KV budget derived (up to ") and "--kv-budget" in n for n in derived["notes"])
    given = capacity_json(runner, "-m", "openai/gpt-oss-120b", "--kv-budget", "1.71GiB")
    assert not any("KV budget derived" in n for n in given["notes"])


def test_sglang_hybrid_swa_logs_the_full_and_the_swa_pool(runner) -> None:
    """``SWAKVPool`` (sglang 0.5.23 mem_cache/swa_memory_pool.py): sub-pools labelled Full and SWA, each
    ``N + page_size`` rows over its own layers; the SWA pool holds int(full * swa_full_tokens_ratio 0.8)."""
    report = capacity_json(runner, "-m", "openai/gpt-oss-20b", "--engine", "sglang", "--kv-budget", "10GiB",
                           "--max-model-len", "8192", "--kv-dtype", "bf16")
    row = 8 * 64 * BF16  # K (or V) of one token in one layer: kv heads * head dim * bf16 = 1,024 B
    cell = 12 * KV * row + 0.8 * 12 * KV * row  # 12 full layers + 0.8 x 12 sliding layers (W = 128)
    full = int(10 * GiB // cell)
    swa = int(full * 0.8)
    log = report["capacity"]["engine_log"]
    assert report["capacity"]["max_tokens"] == log["max_total_num_tokens"] == full
    assert log["lines"] == [
        f"Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: {full}, "
        f"K size: {12 * (full + 1) * row / GiB:.2f} GB, V size: {12 * (full + 1) * row / GiB:.2f} GB",
        f"SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: {swa}, "
        f"K size: {12 * (swa + 1) * row / GiB:.2f} GB, V size: {12 * (swa + 1) * row / GiB:.2f} GB",
    ]
    assert log["k_size_bytes"] == 12 * (full + 1) * row + 12 * (swa + 1) * row


@pytest.mark.parametrize(("engine", "tp"), [("vllm", 2), ("sglang", 2), ("llama.cpp", 1), ("trtllm", 2)])
def test_engine_log_from_capacity_groups_equals_a_fresh_estimate(engine: str, tp: int) -> None:
    """capacity builds engine_log from its own priced layer groups; the same block comes from a fresh estimate."""
    from kvplan import api
    from kvplan.calc import estimate
    from kvplan.capacity_types import CapacityInputs
    from kvplan.engine_log import engine_log, pool_facts
    from kvplan.fit import plan_capacity
    from kvplan.gpus import lookup

    loaded = api.load_geometry("google/gemma-2-9b")
    weights, _notes = api.model_weights(loaded, engine=engine)
    inputs = CapacityInputs(gpu=lookup("H100"), engine=engine, tp=tp, max_model_len=32768, batch=3)
    cap = plan_capacity(loaded.model_geometry, weights, inputs)
    assert engine_log(cap)[0] == cap.engine_log
    est = estimate(cap.geometry, batch=3, seq_len=32768, kv_dtype="auto", deployment=cap.deployment)
    assert pool_facts(cap, (est.groups, est.kv_dtype)) == pool_facts(cap)
