"""kvplan capacity: budgets per engine (vLLM's profiled budget against published logs), blocks/tokens/
concurrency/context, TP, windows, a config without a maximum context, exit codes."""

from __future__ import annotations

import json

import pytest

from kvplan.api import load_geometry
from kvplan.budget import VLLM_LOGIT_ROWS, VLLM_NON_TORCH_BYTES, activation_bytes, model_shape
from kvplan.calc import estimate
from kvplan.capacity_types import CapacityInputs
from kvplan.cli import app
from kvplan.engines.vllm import default_max_num_seqs, marlin_mxfp4_extra_bytes
from kvplan.fit import plan_capacity
from kvplan.gpus import custom_gpu, lookup
from kvplan.modelref import load_raw_config
from kvplan.models import count_weights
from kvplan.units import GiB, MiB, cdiv

from conftest import BF16, FP16, KV

LLAMA8B = "meta-llama/Llama-3.1-8B"
LLAMA8B_PER_TOKEN_LAYER = KV * 8 * 128 * BF16  # K+V * kv_heads * head_dim * bf16 = 4096
LLAMA8B_LAYERS = 32
LLAMA8B_WEIGHTS = 8_030_261_248 * BF16
VLLM_BS = 16


def plan(model: str, **inputs: object):
    config, _source, model_id = load_raw_config(model)
    geometry = load_geometry(model).model_geometry
    try:
        weights = count_weights(config, model_id=model_id)
    except Exception:
        weights = None
    inputs.setdefault("gpu", lookup("H100"))
    return plan_capacity(geometry, weights, CapacityInputs(**inputs))  # type: ignore[arg-type]


# ---- vLLM's published log lines (vllm#10517) ----------------------------------------------------
def test_vllm_log_numbers_from_kv_budget() -> None:
    cap = plan(LLAMA8B, engine="vllm", max_model_len=20000, kv_budget_bytes=int(3.8125 * GiB))
    page = VLLM_BS * LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS  # one block over all layers: 2 MiB
    assert cap.num_blocks == int(3.8125 * GiB) // page == 1952
    assert cap.max_tokens == 1952 * VLLM_BS == 31_232
    assert cap.max_concurrency == 1952 / cdiv(20000, VLLM_BS)
    assert f"{cap.max_concurrency:.2f}" == "1.56"
    assert cap.max_concurrent_requests == 1


def test_vllm_log_numbers_at_29000_tokens() -> None:
    budget = 1478 * VLLM_BS * LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS  # logged as 2.89 GiB
    cap = plan(LLAMA8B, engine="vllm", max_model_len=29000, kv_budget_bytes=budget)
    assert (cap.num_blocks, cap.max_tokens) == (1478, 23_648)
    assert f"{cap.max_concurrency:.2f}" == "0.82"
    assert not cap.fits and cap.max_context_len == 23_648
    assert any("--max-model-len 23648" in s for s in cap.suggestions)


def test_vllm_numbers_through_the_cli(runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--engine", "vllm", "--kv-budget", "3.8125GiB",
                                 "--max-model-len", "20000", "--gpu", "RTX3090", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    cap = report["capacity"]
    assert (cap["num_blocks"], cap["max_tokens"], cap["max_concurrency"]) == (1952, 31_232, 1.5616)
    assert report["budget"]["kv_bytes_per_gpu"] == int(3.8125 * GiB)
    assert report["weights"]["parameters"] == 8_030_261_248 and report["weights"]["bytes"] == LLAMA8B_WEIGHTS
    assert report["inputs"]["gpu_memory_bytes"] == round(23.58 * GiB) and "10517" in report["inputs"]["gpu_memory_source"]
    for dotted in ("capacity.num_blocks", "capacity.max_tokens", "capacity.max_concurrency", "capacity.max_context_len",
                   "capacity.min_tp", "capacity.decode_floor_seconds", "weights.bytes", "weights.parameters",
                   "budget.kv_bytes_per_gpu"):
        section, key = dotted.split(".")
        assert report[section][key] is not None, dotted  # every answer the issue names is filled in
    assert cap["min_tp"] == 1 and cap["decode_floor_seconds"] > 0


# ---- budgets per engine profile --------------------------------------------------------------
H100 = round(79.11 * GiB)  # an H100 80GB as torch.cuda reports it (kvplan/data/gpus.yaml)
RESERVE = 1 * GiB


@pytest.mark.parametrize(
    ("engine", "expected_kv"),
    [
        ("ideal", H100 - LLAMA8B_WEIGHTS - RESERVE),
        ("vllm", int(H100 * 0.9) - LLAMA8B_WEIGHTS - RESERVE),
        ("sglang", int(H100 * 0.88) - LLAMA8B_WEIGHTS - RESERVE),
        ("trtllm", int((H100 - LLAMA8B_WEIGHTS - RESERVE) * 0.9)),
        ("llama.cpp", H100 - LLAMA8B_WEIGHTS - RESERVE),
        ("hf-dynamic", H100 - LLAMA8B_WEIGHTS - RESERVE),
        ("hf-static", H100 - LLAMA8B_WEIGHTS - RESERVE),
    ],
)
def test_budget_per_engine(engine: str, expected_kv: int) -> None:
    cap = plan(LLAMA8B, engine=engine, max_model_len=8192, reserve_bytes=RESERVE)
    assert cap.budget.kv_bytes_per_gpu == expected_kv
    per_token = LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS
    expected_tokens = {
        "vllm": expected_kv // (VLLM_BS * per_token) * VLLM_BS,
        "trtllm": expected_kv // per_token // 32 * 32,  # tokens_per_block 32
        "llama.cpp": expected_kv // per_token // 256 * 256,  # cells pad to 256
    }.get(engine, expected_kv // per_token)
    assert cap.max_tokens == expected_tokens
    assert cap.fits and cap.max_concurrent_requests == expected_kv // (8192 * per_token)


def test_engine_fractions_are_flags() -> None:
    vllm = plan(LLAMA8B, engine="vllm", max_model_len=8192, reserve_bytes=0, gpu_memory_utilization=0.5)
    assert vllm.budget.kv_bytes_per_gpu == int(H100 * 0.5) - LLAMA8B_WEIGHTS
    sglang = plan(LLAMA8B, engine="sglang", max_model_len=8192, mem_fraction_static=0.7)
    assert sglang.budget.kv_bytes_per_gpu == int(H100 * 0.7) - LLAMA8B_WEIGHTS
    trt = plan(LLAMA8B, engine="trtllm", max_model_len=8192, reserve_bytes=0, free_gpu_memory_fraction=0.5)
    assert trt.budget.kv_bytes_per_gpu == int((H100 - LLAMA8B_WEIGHTS) * 0.5)


def test_vllm_default_reserve_is_the_documented_estimate() -> None:
    width = 3 * 14336 + (4096 + 2 * 1024) + 2 * 4096  # gate/up/act + q,k,v + residual
    v0 = plan(LLAMA8B, engine="vllm", max_model_len=8192, engine_version="0.6")
    act = 8192 * width * BF16 + VLLM_LOGIT_ROWS * 128256 * 4  # V0: max_num_batched_tokens 8192, fp32 logits
    assert v0.budget.activation_bytes == act
    assert v0.budget.kv_bytes_per_gpu == int(H100 * 0.9) - LLAMA8B_WEIGHTS - act - VLLM_NON_TORCH_BYTES
    v1 = plan(LLAMA8B, engine="vllm", max_model_len=8192)  # V1: max(dummy forward, dummy sampler)
    sampler = 19 * min(1024, 8192) * 128256 * 4 // 2  # 9.5 fp32 copies of max_num_seqs 1024 (H100) x vocab
    assert v1.budget.activation_bytes == max(8192 * width * BF16, sampler) == sampler
    # vLLM >= 0.20 also subtracts its CUDA graph estimate (profile_cudagraph_memory): kvplan's lower bound is the forward
    # at the largest capture size (min(max_num_seqs 1024 x 2, 512)) + 1 MiB for each further graph (51 + 51 graphs)
    graphs = 512 * width * BF16 + (51 - 1 + 51 - 1) * 2**20
    assert v1.budget.kv_bytes_per_gpu == int(H100 * 0.9) - LLAMA8B_WEIGHTS - sampler - VLLM_NON_TORCH_BYTES - graphs
    v17 = plan(LLAMA8B, engine="vllm", max_model_len=8192, engine_version="0.17")  # graphs captured after the KV cache
    assert v17.budget.kv_bytes_per_gpu == v1.budget.kv_bytes_per_gpu + graphs


def test_vllm_estimate_near_vllm_10517() -> None:
    """RTX 3090 (23.58 GiB), V0 profile over max_model_len tokens: vLLM logged 1952 and 1478 blocks."""
    for tokens, logged in ((20000, 1952), (29000, 1478)):
        cap = plan(LLAMA8B, engine="vllm", gpu=custom_gpu(int(23.58 * GiB), None), max_model_len=tokens,
                   max_num_batched_tokens=tokens)
        assert abs(cap.num_blocks - logged) / logged < 0.04, (tokens, cap.num_blocks)


# ---- context and concurrency boundaries -----------------------------------------------------
def test_max_context_fits_at_n_not_n_plus_1_ideal() -> None:
    budget = 10 * GiB + 12345
    cap = plan(LLAMA8B, engine="ideal", max_model_len=131072, batch=3, kv_budget_bytes=budget)
    per_token = LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS
    assert cap.max_context_len == budget // (3 * per_token)
    geometry = load_geometry(LLAMA8B).model_geometry
    assert estimate(geometry, batch=3, seq_len=cap.max_context_len).kv_cache_bytes <= budget
    assert estimate(geometry, batch=3, seq_len=cap.max_context_len + 1).kv_cache_bytes > budget


def test_max_context_vllm_counts_whole_blocks() -> None:
    cap = plan(LLAMA8B, engine="vllm", max_model_len=20000, batch=2, kv_budget_bytes=int(3.8125 * GiB))
    assert cap.max_context_len == 1952 // 2 * VLLM_BS  # 976 blocks each: fits at 15,616, not at 15,617
    assert cdiv(cap.max_context_len + 1, VLLM_BS) * 2 > 1952


def test_max_concurrent_requests_boundary_sglang() -> None:
    per_request = 8192 * LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS
    cap = plan(LLAMA8B, engine="sglang", max_model_len=8192, kv_budget_bytes=5 * per_request + per_request - 1)
    assert cap.max_concurrent_requests == 5
    cap = plan(LLAMA8B, engine="sglang", max_model_len=8192, kv_budget_bytes=6 * per_request)
    assert cap.max_concurrent_requests == 6


# ---- TP with KV-head replication ----------------------------------------------------------
def test_tp_replicates_kv_heads_beyond_their_count() -> None:
    budget = 4 * GiB
    tp8 = plan(LLAMA8B, engine="vllm", tp=8, max_model_len=20000, kv_budget_bytes=budget)
    tp16 = plan(LLAMA8B, engine="vllm", tp=16, max_model_len=20000, kv_budget_bytes=budget)
    one_head = KV * 1 * 128 * BF16 * LLAMA8B_LAYERS  # 8 KV heads over 8 or 16 ranks: one head per rank
    assert tp8.kv_bytes_per_request == tp16.kv_bytes_per_request == 20000 * one_head
    assert tp16.num_blocks == budget // (VLLM_BS * one_head)
    config, _, _ = load_raw_config(LLAMA8B)
    weights = count_weights(config, model_id=LLAMA8B)
    assert tp16.budget.weights_bytes_per_gpu == weights.bytes_per_gpu(tp=16) < weights.bytes // 8


def test_min_tp_for_70b_at_128k() -> None:
    cap = plan("meta-llama/Llama-3.1-70B", engine="vllm", max_model_len=131072)
    assert not cap.fits and cap.budget.kv_bytes_per_gpu < 0  # 131 GiB of weights on one 80 GiB GPU
    assert (cap.min_tp, cap.min_num_gpus) == (4, 4)
    two = plan("meta-llama/Llama-3.1-70B", engine="vllm", tp=2, max_model_len=131072)
    assert not two.fits  # 65.7 GiB of weights per GPU leave less than the 20 GiB one request needs
    four = plan("meta-llama/Llama-3.1-70B", engine="vllm", tp=4, max_model_len=131072)
    assert four.fits


# ---- MoE and MLA -----------------------------------------------------------------------------
def test_mla_latent_is_replicated_and_moe_weights_shard() -> None:
    cap = plan("deepseek-ai/DeepSeek-V3", engine="vllm", gpu=lookup("H200"), tp=8, max_model_len=4096)
    mla_per_token = 61 * (512 + 64) * BF16  # one latent row per layer, on every rank
    assert cap.kv_bytes_per_request == cdiv(4096, 64) * 64 * mla_per_token  # FlashMLA blocks of 64
    assert cap.block_size == 64
    assert cap.weights is not None and cap.weights.num_experts == 256
    assert cap.budget.weights_bytes_per_gpu == cap.weights.bytes_per_gpu(tp=8)
    assert cap.fits and cap.min_tp == 8  # 673 GB of fp8 weights need eight 141 GiB GPUs


def test_moe_decode_floor_reads_only_routed_experts() -> None:
    cap = plan("Qwen/Qwen3-30B-A3B", engine="vllm", max_model_len=4096, batch=1, kv_budget_bytes=10 * GiB)
    w = cap.weights
    assert w is not None and (w.num_experts, w.experts_per_token) == (128, 8)
    read = w.bytes - w.expert_bytes + w.expert_bytes * 8 // 128
    assert cap.decode_bytes_per_step == read + cap.kv_bytes_needed
    assert cap.decode_floor_seconds == pytest.approx(cap.decode_bytes_per_step / 3.35e12)


def test_decode_floor_dense() -> None:
    cap = plan(LLAMA8B, engine="vllm", max_model_len=8192, batch=4, kv_budget_bytes=20 * GiB)
    step = LLAMA8B_WEIGHTS + 4 * 8192 * LLAMA8B_PER_TOKEN_LAYER * LLAMA8B_LAYERS
    assert cap.decode_bytes_per_step == step
    assert cap.decode_floor_seconds == step / 3_350e9
    assert cap.decode_tokens_per_s == 4 / (step / 3_350e9)


# ---- sliding-window and hybrid models --------------------------------------------------------
def test_gpt_oss_concurrency_counts_window_need() -> None:
    """12 full + 12 sliding (W 128) layers: vLLM groups 12 layers per pool; a sliding layer needs
    cdiv(min(W - 1 + max_num_batched_tokens, T), 16) + 1 blocks, not a whole context."""
    budget = 10 * GiB
    cap = plan("openai/gpt-oss-20b", engine="vllm", max_model_len=32768, kv_budget_bytes=budget)
    page = VLLM_BS * KV * 8 * 64 * FP16  # the config names no dtype: 16-bit
    num_blocks = budget // (page * 12)
    per_request = cdiv(32768, 16) + cdiv(min(128 - 1 + 8192, 32768), 16) + 1
    assert cap.num_blocks == num_blocks
    assert cap.max_concurrency == num_blocks / per_request
    assert cap.max_concurrency > num_blocks / (2 * cdiv(32768, 16))  # not treated as full


def test_gemma3_hybrid_groups_and_ideal_need() -> None:
    budget = 20 * GiB
    cap = plan("google/gemma-3-27b-it", engine="vllm", max_model_len=65536, kv_budget_bytes=budget)
    page = VLLM_BS * KV * 16 * 128 * BF16
    num_blocks = budget // (page * 10)  # 10 global layers set the group size; 52 sliding -> 6 groups
    per_request = cdiv(65536, 16) + 6 * (cdiv(1024 - 1 + 8192, 16) + 1)
    assert cap.num_blocks == num_blocks and cap.max_concurrency == num_blocks / per_request
    ideal = plan("google/gemma-3-27b-it", engine="ideal", max_model_len=65536, kv_budget_bytes=budget)
    per_layer = KV * 16 * 128 * BF16
    assert ideal.kv_bytes_per_request == 10 * 65536 * per_layer + 52 * 1024 * per_layer


def test_mamba_hybrid_weights_counted_and_state_per_request() -> None:
    cap = plan("ai21labs/Jamba-v0.1", engine="vllm", max_model_len=32768, kv_budget_bytes=8 * GiB)
    assert cap.weights is not None and cap.weights.num_experts == 16 and cap.decode_floor_seconds is not None
    assert cap.fits and cap.max_concurrent_requests >= 1
    ideal = plan("ai21labs/Jamba-v0.1", engine="ideal", max_model_len=32768, kv_budget_bytes=8 * GiB)
    d_inner, d_conv, d_state = 2 * 4096, 4, 16
    state = (d_conv - 1) * d_inner * FP16 + d_inner * d_state * FP16  # conv + ssm per Mamba layer, 16-bit
    assert ideal.kv_bytes_per_request == 4 * 32768 * KV * 8 * 128 * FP16 + 28 * state  # 4 attention layers grow


def test_whisper_cross_attention_blocks_do_not_set_the_block_size() -> None:
    budget = 4 * GiB
    cap = plan("openai/whisper-large-v3", engine="vllm", kv_budget_bytes=budget)
    page = VLLM_BS * KV * 20 * 64 * FP16  # decoder self and cross layers share one page size
    assert cap.block_size == VLLM_BS and cap.num_blocks == budget // (page * 32)
    per_request = cdiv(448, VLLM_BS) + cdiv(1500, VLLM_BS)  # self-attention to 448 tokens + 1500 encoder tokens
    assert cap.max_concurrency == cap.num_blocks / per_request


def test_float32_checkpoint_is_served_and_cached_in_16_bits() -> None:
    """gemma-2-9b ships float32: vLLM's --dtype auto loads bf16 weights and its KV auto follows them;
    transformers keeps float32 weights and cache; --dtype float32 restores 4 bytes for vLLM."""
    per_token = 42 * KV * 8 * 256  # layers, K+V, kv heads, head_dim (elements; the window is not reached)
    vllm = plan("google/gemma-2-9b", engine="ideal", max_model_len=4000, kv_budget_bytes=GiB)
    assert (vllm.kv_dtype_name, vllm.kv_bytes_per_request) == ("bf16", 4000 * per_token * BF16)
    assert vllm.weights is not None and vllm.weights.bytes == vllm.weights.parameters * BF16
    assert vllm.checkpoint_dtype == "float32" and "served dtype" in vllm.kv_dtype_source
    hf = plan("google/gemma-2-9b", engine="hf-dynamic", max_model_len=4000, kv_budget_bytes=GiB)
    assert (hf.kv_dtype_name, hf.kv_bytes_per_request) == ("fp32", 4000 * per_token * 4)
    assert hf.weights is not None and hf.weights.bytes == hf.weights.parameters * 4
    forced = plan("google/gemma-2-9b", engine="ideal", max_model_len=4000, kv_budget_bytes=GiB, dtype="float32")
    assert forced.kv_dtype_name == "fp32" and forced.weights is not None
    assert forced.weights.bytes == forced.weights.parameters * 4


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_dtype_reaches_the_kv_dtype(engine: str) -> None:
    """--dtype float32 serves Qwen3-8B (a bfloat16 checkpoint) in float32, and --kv-dtype auto follows the
    model dtype as served (vLLM's kv_cache_dtype auto): the served-dtype rule is applied once, with --dtype."""
    layers, kv_heads, head_dim, tokens = 36, 8, 128, 8000  # Qwen3-8B's config
    fp32 = plan("Qwen/Qwen3-8B", engine=engine, max_model_len=tokens, dtype="float32")
    assert fp32.kv_dtype_name == "fp32" and "--dtype float32" in fp32.kv_dtype_source
    assert fp32.kv_bytes_per_request == KV * layers * kv_heads * head_dim * 4 * tokens  # K+V, fp32
    assert fp32.weights is not None and fp32.weights.bytes == fp32.weights.parameters * 4
    default = plan("Qwen/Qwen3-8B", engine=engine, max_model_len=tokens)
    assert default.kv_dtype_name == "bf16" and "served dtype" not in default.kv_dtype_source
    assert default.kv_bytes_per_request == KV * layers * kv_heads * head_dim * BF16 * tokens


def test_dtype_float32_cli_says_fp32_kv(runner) -> None:
    report = _capacity_json(runner, "-m", "Qwen/Qwen3-8B", "--max-model-len", "8k", "--dtype", "float32")
    assert report["capacity"]["kv_bytes_per_request"] == KV * 36 * 8 * 128 * 4 * 8000  # layers, kv heads, head dim
    assert not any("16 bits" in note for note in report["notes"])


# ---- CLI: exit codes and output ------------------------------------------------------------# ---- CLI: exit codes and output ------------------------------------------------------------
def test_require_fit_exit_codes(runner) -> None:
    base = ["capacity", "-m", LLAMA8B, "--gpu", "H100", "--require-fit", "--format", "json"]
    ok = runner.invoke(app, [*base, "--max-model-len", "32k", "--batch", "4"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["capacity"]["fits"] is True
    over = runner.invoke(app, [*base, "--max-model-len", "128k", "--batch", "64"])
    assert over.exit_code == 1, over.output
    assert json.loads(over.stdout)["capacity"]["fits"] is False
    assert "--kv-dtype fp8" in over.stderr
    report_only = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--gpu", "H100", "--max-model-len", "128k",
                                      "--batch", "64", "--format", "json"])
    assert report_only.exit_code == 0  # without --require-fit, not fitting is still a report


@pytest.mark.parametrize(
    "args",
    [["--gpu", "H10"], [], ["--gpu", "H100", "--gpu-memory-utilization", "1.5"], ["--gpu", "H100", "--engine", "foo"],
     ["--gpu", "H100", "--kv-budget", "lots"], ["--gpu-mem", "80GiB", "--gpu-bandwidth", "fast"],
     ["--gpu", "H100", "--dtype", "int3"], ["--gpu", "H100", "--max-model-len", "0"], ["--gpu-mem", "0GiB"]],
)
def test_bad_input_exits_2(runner, args: list[str]) -> None:
    result = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--require-fit", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and "Hint: " in result.stderr and "Traceback" not in result.output


def test_table_and_yaml(runner) -> None:
    table = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--gpu", "H100", "--max-model-len", "32k"])
    assert table.exit_code == 0, table.output
    for phrase in ("KV budget", "KV per request", "max concurrency", "max context", "fits"):
        assert phrase in table.stdout
    assert "decode floor" not in table.stdout and "--verbose" in table.stderr  # the breakdown is --verbose's
    verbose = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--gpu", "H100", "--max-model-len", "32k", "--verbose"])
    for phrase in ("KV budget per GPU", "max concurrency", "decode floor", "KV blocks", "dummy sampler", "fits"):
        assert phrase in verbose.stdout
    yaml_out = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--gpu-mem", "24GiB", "--format", "yaml",
                                   "--max-model-len", "8k", "--weights-bytes", "16GB"])
    assert yaml_out.exit_code == 0, yaml_out.output
    import yaml

    report = yaml.safe_load(yaml_out.stdout)
    assert report["command"] == "capacity" and report["weights"]["bytes"] == 16 * 10**9
    assert report["capacity"]["decode_floor_seconds"] is None  # no bandwidth for a custom GPU
    assert set(report) >= {"schema_version", "kvplan_version", "model", "inputs", "weights", "budget", "capacity", "notes"}


def test_num_gpus_sets_tp(runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--num-gpus", "4",
                                 "--max-model-len", "32k", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inputs"]["tp"] == 4
    too_many = runner.invoke(app, ["capacity", "-m", LLAMA8B, "--gpu", "H100", "--num-gpus", "2", "--tp", "4"])
    assert too_many.exit_code == 2


def test_activation_estimate_scales_with_tp() -> None:
    config, _, _ = load_raw_config(LLAMA8B)
    w = count_weights(config, model_id=LLAMA8B)
    assert activation_bytes(w, tokens=1024, logit_rows=0, tp=2) == activation_bytes(w, tokens=1024, logit_rows=0, tp=1) // 2
    assert MiB * 256 == VLLM_NON_TORCH_BYTES


@pytest.mark.parametrize(
    "args",
    [
        ["-m", LLAMA8B, "--gpu", "H100"],
        ["-m", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--max-model-len", "8k"],
        ["-m", "ai21labs/Jamba-v0.1", "--gpu-mem", "80GiB", "--kv-budget", "20GiB", "--max-model-len", "32k"],
        ["-m", "llava-hf/llava-1.5-7b-hf", "--gpu", "L4", "--engine", "llama.cpp", "--batch", "64"],
    ],
)
def test_capacity_reports_validate_against_the_schema(runner, args: list[str]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from kvplan.report.schema import report_schema

    result = runner.invoke(app, ["capacity", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    validator = jsonschema.Draft202012Validator(report_schema())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(json.loads(result.stdout))]
    assert not errors, errors[:5]
    gpus = runner.invoke(app, ["gpus", "--format", "json"])
    assert not list(validator.iter_errors(json.loads(gpus.stdout)))


def test_llamacpp_no_room_suggests_the_gpus_it_needs(runner) -> None:
    """llama.cpp splits layers over GPUs (no tensor parallelism): when the weights leave no KV memory, the
    suggestion names the GPU count the report's min_num_gpus found, not a tensor-parallel size of 1."""
    args = ["capacity", "-m", "meta-llama/Llama-3.1-70B", "--gpu", "RTX4090", "--engine", "llama.cpp",
            "-c", "32768", "-np", "2", "--format", "json"]
    report = json.loads(runner.invoke(app, args).stdout)
    gpus = report["capacity"]["min_num_gpus"]
    assert gpus > 1 and report["capacity"]["min_tp"] == 1
    assert report["suggestions"][0].endswith(f"use more GPUs (--pp {gpus})")
    table = runner.invoke(app, args[:-2], env={"COLUMNS": "200"}).stdout
    assert f"use more GPUs ({gpus} GPUs with the layers split (-ts, -sm layer))" in table


def test_kv_budget_without_gpu_leaves_out_what_the_gpu_decides(runner) -> None:
    base = ["capacity", "-m", "meta-llama/Llama-3.1-8B", "-s", "4k"]
    report = json.loads(runner.invoke(app, [*base, "--kv-budget", "20GiB", "-f", "json"]).stdout)
    assert report["capacity"]["min_tp"] is None and report["capacity"]["min_num_gpus"] is None
    table = runner.invoke(app, [*base, "--kv-budget", "20GiB", "--verbose"], env={"COLUMNS": "200"}).stdout
    assert "needs --gpu: the weights against the GPU's memory decide it" in table
    zero = runner.invoke(app, [*base, "--kv-budget", "0"], env={"COLUMNS": "200"})
    assert zero.exit_code == 0 and "but --kv-budget is 0" in zero.stdout  # exit 1 only with --require-fit
    over = json.loads(runner.invoke(app, [*base, "--kv-budget", "200GiB", "--gpu", "H100", "-f", "json"]).stdout)
    assert any(n.startswith("WARNING: --kv-budget 200.00 GiB is more than the whole H100") for n in over["notes"])


def test_capacity_answers_do_not_depend_on_what_ran_before() -> None:
    """No state is kept between calls: the same question after others gives the same report."""
    from kvplan.api import capacity

    runs = [capacity(LLAMA8B, gpu="H100", tp=tp, max_model_len="128k", batch=batch).to_dict()
            for tp, batch in ((1, 8), (2, 4), (1, 8))]
    assert runs[0] == runs[2] != runs[1]


# ---- vLLM's profiled KV budget: weights as loaded, the profile run's peak (dummy forward vs dummy sampler),
# non-torch memory and CUDA graphs, per --engine-version; checked against published start-up logs --------
GPT_OSS = "openai/gpt-oss-120b"
# gpt-oss-120b: 36 layers x 128 experts, expert intermediate 2880, hidden 2880, vocab 201,088
OSS_EXPERTS, OSS_I, OSS_H, OSS_VOCAB = 36 * 128, 2880, 2880, 201_088


def test_marlin_mxfp4_padding_is_the_loaded_size_of_vllm_23278() -> None:
    config, _s, model_id = load_raw_config(GPT_OSS)
    w = count_weights(config, model_id=model_id)
    # gate+up (2I x H) and down (H x I): 4-bit values + one e8m0 scale per 32 (17/32 B per value), bf16 biases
    assert w.expert_bytes == OSS_EXPERTS * (3 * OSS_I * OSS_H * 17 // 32 + (2 * OSS_I + OSS_H) * 2)
    padded = 2944 * 3072  # Mxfp4MoEMethod (Marlin): intermediate to a multiple of 128, hidden to 256
    extra = marlin_mxfp4_extra_bytes(model_shape(w))
    assert extra == w.expert_bytes * padded // (OSS_I * OSS_H) - w.expert_bytes
    # vllm#23278 (vLLM 0.10.1, H100, Marlin): "Model loading took 65.9651 GiB"
    assert abs((w.bytes + extra) / GiB - 65.9651) < 0.1
    config, _s, model_id = load_raw_config(LLAMA8B)
    assert marlin_mxfp4_extra_bytes(model_shape(count_weights(config, model_id=model_id))) == 0  # bf16: unpadded


def test_max_num_seqs_default_follows_get_batch_defaults() -> None:
    assert default_max_num_seqs(int(79.11 * GiB), "H100-SXM-80GB") == 1024
    assert default_max_num_seqs(int(79.15 * GiB), "A100-SXM-80GB") == 256  # A100s keep the small defaults
    assert default_max_num_seqs(int(23.58 * GiB), "RTX-3090") == 256


def test_gpt_oss_120b_on_h100_vllm_27508() -> None:
    """https://github.com/vllm-project/vllm/issues/27508: `vllm serve openai/gpt-oss-120b
    --gpu-memory-utilization 0.95 --max-num-batched-tokens 1024`, one H100, vLLM 0.11.0:
    `Available KV cache memory: 1.71 GiB` (kvplan used to derive 13.86 GiB)."""
    cap = plan(GPT_OSS, engine="vllm", gpu_memory_utilization=0.95, max_num_batched_tokens=1024,
               engine_version="0.11")
    b = cap.budget
    sampler = 19 * 1024 * OSS_VOCAB * 4 // 2  # 9.5 fp32 copies of min(max_num_seqs 1024, 1024) x vocab
    assert b.activation_bytes == sampler  # the sampler's sort is the peak, not the 1,024-token forward
    terms = {t.name: t.bytes for t in b.terms}
    assert terms["dummy sampler"] == sampler and terms["non-torch memory"] == VLLM_NON_TORCH_BYTES == 256 * MiB
    assert b.kv_bytes_per_gpu == (int(lookup("H100").memory_bytes * 0.95) - b.weights_bytes_per_gpu
                                  - terms["weights load padding"] - sampler - VLLM_NON_TORCH_BYTES)
    assert abs(b.kv_bytes_per_gpu / GiB - 1.71) < 0.02
    assert cap.engine_log["lines"][0] == "Available KV cache memory: 1.72 GiB"
    # 0.11 has no CUDA graph term, so the budget can only be larger (other kernels), never smaller
    assert (f"vLLM KV budget derived (up to {b.uncertainty_bytes / GiB:.2f} GiB more): --kv-budget takes its logged "
            "'Available KV cache memory'; docs/concepts/engines.md") in cap.notes


def test_gpt_oss_120b_on_h100_vllm_23278_defaults() -> None:
    """https://github.com/vllm-project/vllm/issues/23278 (vLLM 0.10.1, H100, default flags:
    utilization 0.9, max_num_batched_tokens 8192): `Available KV cache memory: -2.14 GiB`."""
    cap = plan(GPT_OSS, engine="vllm", engine_version="0.10.1")
    assert abs(cap.budget.kv_bytes_per_gpu / GiB - -2.14) < 0.15
    assert cap.engine_log["lines"][1].startswith("No available memory for the cache blocks")


@pytest.mark.parametrize(("tokens", "logged"), [(20000, 1952), (29000, 1478)])
def test_llama_8b_rtx_3090_vllm_10517_keeps_its_accuracy(tokens: int, logged: int) -> None:
    """https://github.com/vllm-project/vllm/issues/10517 (V0, RTX 3090 23.58 GiB): 1952 and 1478 blocks.
    The V0 rule is unchanged (within 4 %, as before); the V1 profile run (max_num_seqs 256 on a 3090,
    peak = the 20,000/29,000-token forward, not the sampler) lands within 2 %."""
    for version, tolerance in (("0.6", 0.04), ("0.17", 0.02)):
        cap = plan(LLAMA8B, engine="vllm", gpu=custom_gpu(int(23.58 * GiB), None), max_model_len=tokens,
                   max_num_batched_tokens=tokens, engine_version=version)
        assert abs(cap.num_blocks - logged) / logged < tolerance, (version, cap.num_blocks)
    # From 0.20 vLLM also subtracts its CUDA graph estimate (V0 captured graphs after allocating the KV cache): the
    # default (0.33) budget is lower by exactly kvplan's graph term, 256 x 2 = 512-token forward + 1 MiB per graph
    now = plan(LLAMA8B, engine="vllm", gpu=custom_gpu(int(23.58 * GiB), None), max_model_len=tokens,
               max_num_batched_tokens=tokens)
    graphs = next(t.bytes for t in now.budget.terms if t.name == "CUDA graphs")
    width = 3 * 14336 + (4096 + 2 * 1024) + 2 * 4096  # gate/up/act + q,k,v + residual
    assert graphs == 512 * width * 2 + (51 - 1 + 35 - 1) * 2**20  # PIECEWISE 51 (to 512), FULL 35 (to max_num_seqs 256)


def test_reserve_replaces_every_derived_term() -> None:
    cap = plan(GPT_OSS, engine="vllm", reserve_bytes=GiB, gpu_memory_utilization=0.95)
    assert cap.budget.terms == () and cap.budget.reserve_bytes == GiB
    assert cap.budget.kv_bytes_per_gpu == int(lookup("H100").memory_bytes * 0.95) - cap.budget.weights_bytes_per_gpu - GiB


# ---- no maximum context in the config and no --max-model-len: a fixed-state model is answered at any
# length; an attention model at the longest request that fits ------------------------------------------
def _capacity_json(runner, *args: str) -> dict:
    result = runner.invoke(app, ["capacity", "--gpu", "H200", "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_attention_model_is_sized_at_the_longest_request_that_fits(runner) -> None:
    report = _capacity_json(runner, "--model", "bigscience/bloom-560m")
    cap, inputs = report["capacity"], report["inputs"]
    per_token = 2 * 24 * 16 * 64 * 2  # K+V, layers, heads (MHA), head dim, fp16
    tokens = inputs["max_model_len"]
    assert cap["kv_bytes_per_request"] == tokens * per_token
    # the longest: one more vLLM block (16 tokens) would not fit the KV room
    assert tokens * per_token <= cap["kv_bytes_available"] < (tokens + cap["block_size"]) * per_token
    assert cap["max_context_len"] == tokens and cap["max_context_limit"] == "memory"
    assert "no maximum context" in inputs["max_model_len_source"]
    assert any("no length given" in n for n in report["notes"])


def test_state_only_model_answers_at_any_length(runner) -> None:
    plain = _capacity_json(runner, "--model", "state-spaces/mamba-2.8b-hf")
    long = _capacity_json(runner, "--model", "state-spaces/mamba-2.8b-hf", "--max-model-len", "1m")
    # the per-request state does not grow: the same bytes and concurrency as at a million tokens
    assert plain["capacity"]["kv_bytes_per_request"] == long["capacity"]["kv_bytes_per_request"] > 0
    assert plain["capacity"]["max_concurrent_requests"] == long["capacity"]["max_concurrent_requests"] > 1
    assert plain["capacity"]["max_context_limit"] == "any length"
    assert any("fixed state per request" in n for n in plain["notes"])
    assert plain["weights"]["source"] == "config"


def test_model_too_big_for_one_gpu_still_answers(runner) -> None:
    report = _capacity_json(runner, "--model", "zai-org/GLM-4.5")
    assert report["capacity"]["fits"] is False and report["capacity"]["min_num_gpus"] > 1
    assert any("not one token of KV fits" in n for n in report["notes"])
    tp8 = _capacity_json(runner, "--model", "zai-org/GLM-4.5", "--tp", "8")
    assert tp8["capacity"]["fits"] is True and tp8["inputs"]["max_model_len"] > 4096


def test_a_named_maximum_is_unchanged(runner) -> None:
    report = _capacity_json(runner, "--model", "meta-llama/Llama-3.1-8B")
    assert report["inputs"]["max_model_len"] == 131072
    assert report["inputs"]["max_model_len_source"].startswith("model maximum context")
