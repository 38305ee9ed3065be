"""Engine profiles reproduce what each engine allocates (FACTS b.1-b.6, c, h)."""

from __future__ import annotations

import json

import pytest

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.engines import ENGINES, get_engine
from kvplan.errors import InputError
from kvplan.models import parse_config
from kvplan.units import MiB, cdiv
from tests.conftest import BF16, FP16, FP32, KV, REPO_ROOT, make_config, shared_config


def geometry(name: str):
    """A real Hub config: the bundled copy in model_configs/ when there is one, else ../shared/hf_configs."""
    bundled = REPO_ROOT / "model_configs" / f"{name}.json"
    config = json.loads(bundled.read_text()) if bundled.is_file() else shared_config(name)
    return parse_config(config, model_id=name.replace("__", "/"))


def run(name: str, engine: str, *, kv_dtype: str = "auto", batch: int = 1, seq_len: int | None = None, **knobs):
    return estimate(geometry(name), batch=batch, seq_len=seq_len, kv_dtype=kv_dtype,
                    deployment=Deployment(engine=engine, **knobs))


def test_every_profile_is_registered_and_unknown_names_fail() -> None:
    assert set(ENGINES) == {"ideal", "vllm", "sglang", "trtllm", "llama.cpp", "hf-dynamic", "hf-static"}
    assert get_engine("llamacpp").name == "llama.cpp"
    with pytest.raises(InputError, match="not a known engine"):
        get_engine("ollama")


# ---- llama.cpp: FACTS (c) published numbers ---------------------------------------------------------
def test_llama_2_7b_in_llama_cpp_at_4096_is_2048_mib() -> None:
    est = run("meta-llama__Llama-2-7b-hf", "llama.cpp", seq_len=4096)
    assert est.kv_cache_bytes == KV * 4096 * 32 * 32 * 128 * FP16 == 2048 * MiB


@pytest.mark.parametrize(("dtype", "mib"), [("q8_0", 1088), ("q4_0", 576), ("q5_1", 768)])
def test_llama_2_7b_quantized_caches(dtype: str, mib: int) -> None:
    assert run("meta-llama__Llama-2-7b-hf", "llama.cpp", seq_len=4096, kv_dtype=dtype).kv_cache_bytes == mib * MiB


def test_q8_0_on_64_layers_8_kv_heads_8192_cells_is_1088_mib() -> None:
    g = parse_config(make_config(num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8,
                                 hidden_size=8192), model_id="64x8")
    est = estimate(g, seq_len=8192, kv_dtype="q8_0", deployment=Deployment(engine="llama.cpp"))
    k_bytes = 64 * 8192 * (8 * 128 // 32) * 34  # layers, cells, q8_0 blocks per row, bytes per block
    assert k_bytes == 544 * MiB
    assert est.kv_cache_bytes == 2 * k_bytes == 1088 * MiB


def test_llama_cpp_pads_cells_to_256_per_stream() -> None:
    per_cell = 32 * KV * 8 * 128 * FP16  # f16 is llama.cpp's default even for bf16 weights
    one = run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=1000)
    assert one.kv_cache_bytes == 1024 * per_cell
    assert one.kv_dtype.name == "fp16"
    three = run("meta-llama__Llama-3.1-8B", "llama.cpp", batch=3, seq_len=1000)
    # NOTE: n_ctx = pad(3000, 256) = 3072; each of 3 streams gets pad(3072 // 3, 256) = 1024 cells.
    assert three.kv_cache_bytes == 3 * 1024 * per_cell
    unified = run("meta-llama__Llama-3.1-8B", "llama.cpp", batch=3, seq_len=1000, kv_unified=True)
    assert unified.kv_cache_bytes == 3072 * per_cell


def test_llama_cpp_swa_cells_on_gemma_3() -> None:
    seq, window = 32768, 1024
    per_cell = KV * 8 * 256 * FP16
    swa_cells = cdiv(min(seq, window * 1 + 512), 256) * 256  # n_swa * n_seq + n_ubatch, padded: 1536
    est = run("google__gemma-3-12b-it", "llama.cpp", seq_len=seq)
    assert est.kv_cache_bytes == (8 * seq + 40 * swa_cells) * per_cell
    swa_full = run("google__gemma-3-12b-it", "llama.cpp", seq_len=seq, no_window=True)
    assert swa_full.kv_cache_bytes == 48 * seq * per_cell


def test_llama_cpp_recurrent_states_are_float32() -> None:
    seq = 4096
    state = (3 * 8192 + 8192 * 16) * FP32  # Jamba mamba: conv (d_conv - 1) * d_inner + ssm d_inner * d_state
    est = run("ai21labs__Jamba-v0.1", "llama.cpp", batch=2, seq_len=seq)
    assert est.kv_cache_bytes == 2 * (4 * seq * KV * 8 * 128 * FP16 + 28 * state)


def test_llama_cpp_refuses_what_it_cannot_do() -> None:
    with pytest.raises(InputError, match="does not support --kv-dtype fp8_e4m3"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, kv_dtype="fp8")
    with pytest.raises(InputError, match="splits layers"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, tp=2)
    with pytest.raises(InputError, match="no beam search"):
        run("meta-llama__Llama-3.1-8B", "llama.cpp", seq_len=4096, beams=2)


# ---- vLLM ------------------------------------------------------------------------------------------
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


# ---- SGLang ----------------------------------------------------------------------------------------
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


# ---- TensorRT-LLM ----------------------------------------------------------------------------------
def test_trtllm_blocks_of_32_and_windows() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("meta-llama__Llama-3.1-8B", "trtllm", seq_len=1000).kv_cache_bytes == 32 * 32 * per_token
    seq = 4000
    est = run("openai__gpt-oss-20b", "trtllm", seq_len=seq)
    assert est.kv_cache_bytes == (12 * 128 + 12 * cdiv(seq, 32) * 32) * KV * 8 * 64 * FP16


def test_trtllm_gives_each_rank_cdiv_heads() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "trtllm", seq_len=seq, tp=3)
    assert est.kv_cache_bytes_per_gpu == seq * 32 * KV * 3 * 128 * BF16  # cdiv(8, 3) = 3 heads


# ---- Hugging Face ----------------------------------------------------------------------------------
def test_hf_dynamic_sliding_storage_is_w_and_w_minus_1_with_beams() -> None:
    seq, window = 8192, 4096
    per_token = 32 * KV * 8 * 128 * BF16
    assert run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=seq).kv_cache_bytes == window * per_token
    beams = run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=seq, beams=2)
    assert beams.kv_cache_bytes == 2 * (window - 1) * per_token


def test_hf_dynamic_peak_adds_one_layers_k_and_the_prefill_view() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", batch=2, seq_len=seq)
    one_k = 2 * seq * 8 * 128 * BF16
    assert est.peak_bytes == est.kv_cache_bytes + one_k
    prefill = run("mistralai__Mistral-7B-v0.1", "hf-dynamic", seq_len=8192, prompt_len=6000)
    # NOTE: right after prefill every sliding layer keeps the whole 6000-token prompt alive.
    assert prefill.peak_bytes == 32 * 6000 * KV * 8 * 128 * BF16 + 4096 * 8 * 128 * BF16


def test_hf_dynamic_mamba_state_keeps_a_float32_ssm() -> None:
    seq = 1000
    state = 8192 * 4 * FP16 + 8192 * 16 * FP32  # conv d_inner * d_conv in fp16, ssm d_inner * d_state fp32
    est = run("ai21labs__Jamba-v0.1", "hf-dynamic", batch=2, seq_len=seq)
    assert est.kv_cache_bytes == 2 * (4 * seq * KV * 8 * 128 * FP16 + 28 * state)


def test_hf_quantized_cache_int4_with_residual() -> None:
    seq, prompt, residual, group = 4096, 4000, 128, 64
    t_res = (seq - prompt) % residual  # 96 tokens in full precision
    n = (seq - t_res) * 8 * 128  # quantized values per K (or V) per layer
    per_kv = t_res * 8 * 128 * BF16 + n * 4 // 8 + 2 * (n // group) * BF16
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, kv_dtype="int4", prompt_len=prompt)
    assert est.kv_cache_bytes == 32 * KV * per_kv
    # NOTE: each step dequantizes a whole layer and concatenates: two full-precision copies of one layer.
    assert est.peak_bytes == est.kv_cache_bytes + 2 * seq * KV * 8 * 128 * BF16


def test_hf_quantized_cache_fp8_has_one_scale_per_tensor() -> None:
    seq = 4096
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, kv_dtype="fp8")
    assert est.kv_cache_bytes == 32 * KV * (seq * 8 * 128 * 1 + 4)
    # NOTE: update() returns the layer dequantized to bf16; dequantizing V goes through two float32
    # temporaries while the returned K is alive: 2 + 4 + 4 bytes per value of one layer's K/V row.
    assert est.peak_bytes == est.kv_cache_bytes + seq * 8 * 128 * (BF16 + FP32 + FP32)


def test_hf_quantized_cache_refuses_sliding_models() -> None:
    with pytest.raises(InputError, match="only full attention"):
        run("google__gemma-3-12b-it", "hf-dynamic", seq_len=4096, kv_dtype="int4")


def test_hf_static_preallocates_max_cache_len_and_w_for_sliding() -> None:
    per_token = KV * 8 * 256 * BF16
    est = run("google__gemma-3-12b-it", "hf-static", seq_len=100, max_cache_len=2048)
    assert est.kv_cache_bytes == (8 * 2048 + 40 * min(1024, 2048)) * per_token
    assert est.peak_bytes == est.kv_cache_bytes


def test_hf_engines_have_no_blocks() -> None:
    with pytest.raises(InputError, match="not blocks"):
        run("meta-llama__Llama-3.1-8B", "hf-static", seq_len=100, block_size=16)


# ---- CLI -------------------------------------------------------------------------------------------
def test_cli_engine_and_tp_in_json(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-70B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm",
                                 "--tensor-parallel-size", "16", "--kv-cache-dtype", "fp8", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    per_gpu = 80 * 32768 * KV * 1 * 128 * 1
    assert report["totals"]["kv_cache_bytes_per_gpu"] == per_gpu
    assert report["totals"]["kv_cache_bytes"] == 16 * per_gpu
    assert report["inputs"]["engine"] == "vllm" and report["inputs"]["tp"] == 16
    assert [a["name"] for a in report["adjustments"]] == ["engine:vllm", "kv_dtype", "tensor_parallel"]


def test_cli_engine_contradiction_is_exit_2(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-8B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--engine", "llama.cpp", "--kv-dtype", "fp8"])
    assert result.exit_code == 2
    assert "Error: llama.cpp does not support --kv-dtype fp8_e4m3" in result.output
    assert "Hint:" in result.output


# ---- review fixes --------------------------------------------------------------------------------------
def test_falcon_40b_hf_caches_k_v_broadcast_to_every_query_head() -> None:
    # NOTE: FACTS h.9: modeling_falcon (new_decoder_architecture) caches 128 heads, not the 8 KV groups.
    seq = 2048
    gqa = 60 * seq * KV * 8 * 64 * BF16  # layers, tokens, K+V, kv heads, head dim (8192 // 128), bf16
    broadcast = 60 * seq * KV * 128 * 64 * BF16  # num_attention_heads
    assert run("tiiuae__falcon-40b", "vllm", seq_len=seq).kv_cache_bytes == gqa
    assert run("tiiuae__falcon-40b", "ideal", seq_len=seq).kv_cache_bytes == gqa
    for engine in ("hf-dynamic", "hf-static"):
        est = run("tiiuae__falcon-40b", engine, seq_len=seq)
        assert est.kv_cache_bytes == broadcast == 16 * gqa
        assert est.groups[0].spec.num_kv_heads == 128
        assert any("broadcast to all 128 query heads" in note for note in est.notes)
    # NOTE: the measured case of FACTS h.9: B=1, T=23, L=2 -> 1,507,328 B.
    g = parse_config({**json.loads((REPO_ROOT / "model_configs" / "tiiuae__falcon-40b.json").read_text()),
                      "num_hidden_layers": 2}, model_id="falcon-40b-2l")
    measured = estimate(g, seq_len=23, deployment=Deployment(engine="hf-dynamic"))
    assert measured.kv_cache_bytes == 23 * 2 * KV * 128 * 64 * BF16 == 1507328
    # NOTE: multi_query Falcon-7B caches one head in every engine.
    assert run("tiiuae__falcon-7b", "hf-dynamic", seq_len=seq).kv_cache_bytes == 32 * seq * KV * 1 * 64 * BF16


@pytest.mark.parametrize(("tp", "ok"), [(1, True), (2, True), (8, True), (16, True), (3, False), (12, False), (24, True)])
def test_vllm_refuses_tp_sizes_that_do_not_divide_the_kv_heads(tp: int, ok: bool) -> None:
    seq = 4096
    if ok:
        est = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)
        assert est.kv_cache_bytes_per_gpu == 32 * seq * KV * max(1, 8 // tp) * 128 * BF16
    else:
        with pytest.raises(InputError, match=f"vLLM cannot split 8 KV heads over --tensor-parallel-size {tp}"):
            run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=tp)


def test_peak_per_gpu_is_the_largest_ranks_steady_bytes_plus_the_transient() -> None:
    seq = 4096
    one_k = seq * 8 * 128 * BF16  # the torch.cat copy of one layer's K
    est = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq)
    assert (est.peak_bytes, est.peak_bytes_per_gpu) == (est.kv_cache_bytes + one_k, est.kv_cache_bytes + one_k)
    tp2 = run("meta-llama__Llama-3.1-8B", "hf-dynamic", seq_len=seq, tp=2)
    assert tp2.kv_cache_bytes_per_gpu == est.kv_cache_bytes // 2
    assert tp2.peak_bytes_per_gpu == est.kv_cache_bytes // 2 + one_k // 2
    assert tp2.peak_bytes == est.kv_cache_bytes + one_k
    steady = run("meta-llama__Llama-3.1-8B", "vllm", seq_len=seq, tp=2)
    assert steady.peak_bytes_per_gpu == steady.kv_cache_bytes_per_gpu and steady.peak_bytes == steady.kv_cache_bytes


def test_cli_table_under_tp_says_which_numbers_are_per_gpu(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-70B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm", "--tp", "16"],
                           env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "8 (1/GPU)" in out  # model heads, and what one rank keeps
    assert "16 GPUs (tp 16 × pp 1): KV heads = model (per GPU); per token and size = all GPUs" in out
    assert "the largest GPU holds 1.25 GiB, all GPUs 20.00 GiB" in out  # 80 * 32768 * 2 * 1 * 128 * 2 per rank
    assert "tensor_parallel: 10.00 GiB -> 20.00 GiB (all GPUs)" in out
    report = json.loads(runner.invoke(app, ["estimate", "-m", str(path), "-s", "32k", "--engine", "vllm", "--tp", "16",
                                            "--format", "json"]).stdout)
    layer = report["layers"][0]
    assert (layer["num_kv_heads"], layer["num_kv_heads_per_gpu"]) == (8, 1)
    assert layer["bytes_per_token_per_gpu"] == KV * 1 * 128 * BF16
    assert layer["bytes_per_token"] == 16 * KV * 1 * 128 * BF16  # summed over the 16 ranks
    assert report["totals"]["peak_bytes_per_gpu"] == report["totals"]["kv_cache_bytes_per_gpu"] == 80 * 32768 * 512


def test_cli_no_window_on_a_dense_model_is_exit_0(runner, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shared_config("meta-llama__Llama-3.1-8B")))
    result = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--no-window", "--engine", "vllm"])
    assert result.exit_code == 0, result.output
    bad = runner.invoke(app, ["estimate", "-m", str(path), "-s", "4k", "--prompt-len", "5000"])
    assert bad.exit_code == 2
    assert "Error: --prompt-len 5,000 is longer than the sequence length 4,096" in bad.output and "Hint:" in bad.output


def test_hf_dynamic_gated_delta_net_state_keeps_conv_window_and_fp32_state() -> None:
    from kvplan.adjust import Deployment
    from kvplan.api import load_geometry
    from kvplan.calc import estimate

    geometry, _ = load_geometry("Qwen/Qwen3-Next-80B-A3B-Instruct")
    est = estimate(geometry, seq_len=16, kv_dtype="bf16", deployment=Deployment(engine="hf-dynamic"))
    hk, hv, dk, dv, d_conv, fp16, fp32 = 16, 32, 128, 128, 4, 2, 4  # no torch_dtype in the config: 16-bit
    conv = d_conv * (2 * hk * dk + hv * dv) * fp16  # the whole conv window, not d_conv - 1
    ssm = hv * dk * dv * fp32  # the recurrent state is float32 on the CPU path
    assert est.state_bytes == 36 * (conv + ssm)  # 36 gated-delta-net layers
