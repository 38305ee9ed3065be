"""Pure predictions of `kvplan verify` (no torch): layout arithmetic and the CUDA caching allocator."""

from __future__ import annotations

import pytest

from kvplan.api import load_geometry
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.units import GiB, MiB
from kvplan.verify.predict import (
    LAYOUTS,
    plan_verify,
    predict_allocator,
    round_size,
    segment_size,
    window_blocks_peak,
)

from conftest import BF16, FP16, KV

LLAMA_1B = "meta-llama/Llama-3.2-1B"  # 16 layers, 32 query heads, 8 KV heads, head_dim 64, bf16
GPT_OSS = "openai/gpt-oss-20b"  # alternating sliding (W 128) / full, 8 KV heads, head_dim 64


def geo(model: str):
    return load_geometry(model).model_geometry


# ---- allocator (CUDACachingAllocator.cpp) ---------------------------------------------------------------------


def test_round_size_and_segments() -> None:
    assert round_size(1) == 512
    assert round_size(512) == 512
    assert round_size(513) == 2 * 512
    assert segment_size(1 * MiB) == 2 * MiB  # small pool
    assert segment_size(1 * MiB + 512) == 20 * MiB  # 1-10 MiB: one 20 MiB segment
    assert segment_size(10 * MiB - 512) == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB  # >= 10 MiB: rounded to 2 MiB
    assert segment_size(11 * MiB) == 12 * MiB


def test_llama2_7b_static_4096_is_2_gib_allocated_and_reserved() -> None:
    # The caching allocator's worked example: 64 tensors (K and V of 32 layers) of 1 * 32 heads * 4096 * 128 * fp16 = 32 MiB.
    tensor = 1 * 32 * 4096 * 128 * FP16
    assert tensor == 32 * MiB
    pred = predict_allocator([tensor] * 64)
    assert pred.allocated_bytes == pred.reserved_bytes == 64 * 32 * MiB == 2 * GiB


def test_llama2_7b_static_1000_packs_two_tensors_per_20_mib_segment() -> None:
    tensor = 1 * 32 * 1000 * 128 * FP16  # 8,192,000 B: < 10 MiB, so 20 MiB segments
    pred = predict_allocator([tensor] * 64)
    assert pred.allocated_bytes == 64 * tensor  # 500 MiB
    assert pred.segments == 32
    assert pred.reserved_bytes == 32 * 20 * MiB  # 640 MiB


def test_unsplit_tail_counts_as_allocated() -> None:
    # 10.5 MiB -> a 12 MiB segment; the 1.5 MiB tail is split off (> 1 MiB).
    assert predict_allocator([int(10.5 * MiB)]).allocated_bytes == int(10.5 * MiB)
    # 11.25 MiB -> 12 MiB segment; the 0.75 MiB tail stays with the block and counts as allocated.
    pred = predict_allocator([int(11.25 * MiB)])
    assert (pred.allocated_bytes, pred.reserved_bytes) == (12 * MiB, 12 * MiB)


# Measured by `benchmarks/gpu_verify.sh` on one H200 (torch CUDA build, kvplan verify --gpu), 2026-11:
# torch.cuda.memory_allocated / memory_reserved growth with only the cache alive, byte for byte.
H200_MEASURED = [
    ("meta-llama/Llama-2-7b-hf", {"layout": "static", "prompt_len": 4095, "gen_len": 1}, 2_148_532_224, 2_149_580_800),
    ("meta-llama/Llama-2-7b-hf", {"layout": "static", "prompt_len": 999, "gen_len": 1}, 524_550_144, 673_185_792),
    ("meta-llama/Llama-3.1-8B", {"num_layers": 8, "layout": "static", "batch": 8, "prompt_len": 2000, "gen_len": 48},
     537_001_984, 538_968_064),
    ("meta-llama/Llama-3.1-8B", {"num_layers": 8, "layout": "paged", "batch": 8, "prompt_len": 2000, "gen_len": 48},
     536_870_912, 536_870_912),
    ("meta-llama/Llama-3.1-8B", {"num_layers": 8, "layout": "sliding", "batch": 8, "prompt_len": 2000, "gen_len": 48},
     537_001_984, 538_968_064),
    ("meta-llama/Llama-3.1-8B",
     {"num_layers": 8, "layout": "static", "kv_dtype": "fp8", "batch": 8, "prompt_len": 2000, "gen_len": 48},
     268_566_528, 270_532_608),
    ("meta-llama/Llama-3.1-8B", {"layout": "static", "batch": 16, "prompt_len": 4000, "gen_len": 96},
     8_590_983_168, 8_592_031_744),
    ("openai/gpt-oss-20b", {"num_layers": 8, "layout": "sliding", "batch": 8, "prompt_len": 1000, "gen_len": 48},
     77_109_248, 94_371_840),
    ("ai21labs/Jamba-v0.1", {"num_layers": 9, "layout": "static", "batch": 4, "prompt_len": 1000, "gen_len": 32},
     35_791_360, 46_137_344),
    ("deepseek-ai/DeepSeek-V2-Lite",
     {"num_layers": 8, "layout": "paged", "block_size": 64, "batch": 8, "prompt_len": 2000, "gen_len": 48},
     150_994_944, 150_994_944),
]


@pytest.mark.parametrize(("model", "kw", "allocated", "reserved"), H200_MEASURED)
def test_allocator_replay_equals_the_h200_measurement(model: str, kw: dict, allocated: int, reserved: int) -> None:
    pred = predict_allocator(plan_verify(geo(model), **kw).allocation_sizes)
    assert (pred.allocated_bytes, pred.reserved_bytes) == (allocated, reserved)


def test_static_rings_count_their_slot_positions() -> None:
    plan = plan_verify(geo(LLAMA_1B), layout="static", num_layers=2, prompt_len=10, gen_len=2)
    slots = 10 + 2
    assert plan.allocation_sizes == (KV * 8 * 64 * slots * BF16 // 2,) * 2 + (slots * 8,) + (8 * 64 * slots * BF16,) * 2 + (slots * 8,)
    assert plan.predicted_bytes == 2 * KV * 8 * 64 * slots * BF16  # positions are bookkeeping, not cache


def test_small_tensors_share_2_mib_segments() -> None:
    pred = predict_allocator([1000] * 4)  # each rounds to 1024
    assert (pred.allocated_bytes, pred.reserved_bytes, pred.segments) == (4 * 1024, 2 * MiB, 1)
    pred = predict_allocator([1 * MiB] * 3)  # two fill a 2 MiB segment exactly, the third opens another
    assert (pred.reserved_bytes, pred.segments) == (4 * MiB, 2)


# ---- layouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["dynamic", "static", "sliding"])
def test_full_attention_layouts_equal_the_ideal_estimate(layout: str) -> None:
    g = geo(LLAMA_1B)
    plan = plan_verify(g, layout=layout, num_layers=2, batch=3, prompt_len=20, gen_len=7)
    rows, layers, heads, dim, tokens = 3, 2, 8, 64, 20 + 7
    assert plan.predicted_bytes == rows * layers * KV * heads * dim * tokens * BF16
    assert plan.predicted_bytes == estimate(plan.geometry, batch=3, seq_len=27).kv_cache_bytes


def test_beams_multiply_rows() -> None:
    plan = plan_verify(geo(LLAMA_1B), num_layers=1, batch=2, beams=4, prompt_len=10, gen_len=2)
    assert plan.predicted_bytes == 2 * 4 * 1 * KV * 8 * 64 * 12 * BF16


def test_windowed_layers_per_layout() -> None:
    g = geo(GPT_OSS)  # layer 0 slides (W 128), layer 1 is full; config has no dtype -> fp16
    prompt, gen, window = 130, 9, 128
    per_token = KV * 8 * 64 * FP16
    seq = prompt + gen
    dynamic = plan_verify(g, layout="dynamic", num_layers=2, prompt_len=prompt, gen_len=gen)
    # W - 1 kept tokens are a view of the W-token concatenation: storage W (transformers cache_utils.py)
    assert [layer.nbytes for layer in dynamic.layers] == [window * per_token, seq * per_token]
    beams = plan_verify(g, layout="dynamic", num_layers=1, prompt_len=prompt, gen_len=gen, beams=2)
    assert beams.predicted_bytes == 2 * (window - 1) * per_token  # the beam reorder copies the W - 1 kept tokens
    prefill_only = plan_verify(g, layout="dynamic", num_layers=1, prompt_len=prompt, gen_len=0)
    assert prefill_only.predicted_bytes == prompt * per_token  # the view keeps the whole prompt alive
    short = plan_verify(g, layout="dynamic", num_layers=1, prompt_len=window - 10, gen_len=9)  # T = W - 1
    assert short.predicted_bytes == (window - 1) * per_token
    edge = plan_verify(g, layout="dynamic", num_layers=1, prompt_len=window - 10, gen_len=11)  # T = W + 1
    assert edge.predicted_bytes == window * per_token
    static = plan_verify(g, layout="static", num_layers=2, prompt_len=prompt, gen_len=gen)
    assert [layer.nbytes for layer in static.layers] == [window * per_token, seq * per_token]
    # a short request: static rings hold min(W, M), the sliding layout always W
    short_static = plan_verify(g, layout="static", num_layers=2, prompt_len=20, gen_len=4)
    short_sliding = plan_verify(g, layout="sliding", num_layers=2, prompt_len=20, gen_len=4)
    assert short_static.layers[0].nbytes == 24 * per_token
    assert short_sliding.layers[0].nbytes == window * per_token
    # sliding at T >= W is the ideal estimate (min(T, W) tokens)
    sliding = plan_verify(g, layout="sliding", num_layers=2, prompt_len=prompt, gen_len=gen)
    assert sliding.predicted_bytes == estimate(sliding.geometry, seq_len=seq).kv_cache_bytes


def test_paged_blocks() -> None:
    g = geo(GPT_OSS)
    plan = plan_verify(g, layout="paged", num_layers=2, batch=2, prompt_len=130, gen_len=9, block_size=16)
    # the window of 128 tokens spans at most cdiv(127, 16) + 1 = 9 blocks; the full layer cdiv(139, 16) = 9
    assert [layer.blocks_per_seq for layer in plan.layers] == [9, 9]
    page = 16 * 8 * 64 * FP16  # one block of K (or V)
    assert plan.predicted_bytes == 2 * (9 + 9) * KV * page


def test_window_blocks_peak_counts_misaligned_windows() -> None:
    assert window_blocks_peak(prompt=4, seq=6, window=128, block_size=16) == 1  # never fills a block
    assert window_blocks_peak(prompt=200, seq=200, window=17, block_size=16) == 2  # positions 184..199
    assert window_blocks_peak(prompt=200, seq=201, window=17, block_size=16) == 2  # 184..200 -> blocks 11, 12
    assert window_blocks_peak(prompt=200, seq=210, window=16, block_size=16) == 2


def test_quantized_codes_scales_and_residual() -> None:
    g = geo(LLAMA_1B)
    plan = plan_verify(g, layout="quantized", num_layers=2, batch=2, prompt_len=20, gen_len=7, kv_dtype="int4",
                       quant_group_size=64, residual_length=4)
    rows, heads, dim, group = 2, 8, 64, 64
    residual = 7 % 4
    quantized = 20 + 7 - residual
    per_tensor = (
        rows * heads * quantized * dim // 2  # int4 codes, two per byte
        + 2 * rows * heads * quantized * (dim // group) * BF16  # scale and zero point per group
        + rows * heads * residual * dim * BF16  # full-precision residual
    )
    assert plan.predicted_bytes == 2 * KV * per_tensor


def test_tp_shards_heads_and_replicates_mla() -> None:
    llama = plan_verify(geo(LLAMA_1B), num_layers=2, prompt_len=10, gen_len=2, tp=2)
    assert llama.layers[0].num_kv_heads == 8 // 2
    assert llama.predicted_bytes == 2 * KV * (8 // 2) * 64 * 12 * BF16
    replicated = plan_verify(geo(LLAMA_1B), num_layers=1, prompt_len=10, gen_len=2, tp=16)
    assert replicated.layers[0].num_kv_heads == 1  # 8 heads < 16 ranks: one head per rank
    mla = plan_verify(geo("deepseek-ai/DeepSeek-V2-Lite"), num_layers=1, prompt_len=10, gen_len=2, tp=4)
    assert mla.predicted_bytes == 1 * (512 + 64) * 12 * BF16  # the latent is whole on every rank


@pytest.mark.parametrize("layout", ["paged", "sliding"])
def test_state_layers_vllm_layouts(layout: str) -> None:
    plan = plan_verify(geo("ai21labs/Jamba-v0.1"), layout=layout, num_layers=5, prompt_len=10, gen_len=2, batch=2)
    d_inner, d_conv, d_state = 2 * 4096, 4, 16
    state = (d_conv - 1) * d_inner * FP16 + d_inner * d_state * FP16  # vLLM: d_conv - 1, model dtype (fp16)
    attention = plan.layers[4].nbytes
    assert plan.predicted_bytes == 2 * 4 * state + attention


@pytest.mark.parametrize("layout", ["dynamic", "static"])
def test_state_layers_hf_layouts(layout: str) -> None:
    plan = plan_verify(geo("ai21labs/Jamba-v0.1"), layout=layout, num_layers=5, prompt_len=10, gen_len=2, batch=2)
    d_inner, d_conv, d_state, fp32 = 2 * 4096, 4, 16, 4
    state = d_conv * d_inner * FP16 + d_inner * d_state * fp32  # transformers: whole window, fp32 ssm (modeling_mamba.py slow path)
    attention = KV * 8 * 128 * 12 * FP16
    assert plan.predicted_bytes == 2 * (4 * state + attention)


def test_bad_inputs() -> None:
    g = geo(LLAMA_1B)
    with pytest.raises(InputError, match="--layers must be between 1 and 16"):
        plan_verify(g, num_layers=17)
    with pytest.raises(InputError, match="int8 or int4"):
        plan_verify(g, layout="quantized", kv_dtype="fp16")
    with pytest.raises(InputError, match="only --layout quantized"):
        plan_verify(g, layout="static", kv_dtype="int4")
    with pytest.raises(InputError, match="--max-cache-len"):
        plan_verify(g, layout="static", prompt_len=10, gen_len=5, max_cache_len=14)
    with pytest.raises(InputError, match="cannot be split over --tp 3"):
        plan_verify(g, tp=3)
    with pytest.raises(InputError, match="windowed|sliding"):
        plan_verify(geo(GPT_OSS), layout="quantized", kv_dtype="int8", num_layers=1)
    with pytest.raises(InputError, match="encoder-decoder"):
        plan_verify(geo("openai/whisper-large-v3"))
    assert set(LAYOUTS) == {"dynamic", "static", "paged", "sliding", "quantized"}


# ---- cross-check with the engine profiles (kvplan/engines/) -------------------------------------


def _engine_bytes(plan, kv_dtype: str = "auto", **deployment) -> int:
    from kvplan.adjust import Deployment

    est = estimate(plan.geometry, batch=plan.batch, seq_len=plan.seq_tokens, kv_dtype=kv_dtype,
                   deployment=Deployment(**deployment))
    return est.kv_cache_bytes_per_gpu


@pytest.mark.parametrize(
    ("model", "layout", "plan_kw", "engine_kw", "kv"),
    [
        (LLAMA_1B, "dynamic", {"batch": 3, "beams": 2}, {"engine": "hf-dynamic", "beams": 2}, "auto"),
        (LLAMA_1B, "static", {"batch": 3, "max_cache_len": 64}, {"engine": "hf-static", "max_cache_len": 64}, "auto"),
        (LLAMA_1B, "paged", {"batch": 3, "block_size": 16}, {"engine": "vllm", "block_size": 16}, "auto"),
        (LLAMA_1B, "quantized", {"batch": 3, "residual_length": 4},
         {"engine": "hf-dynamic", "prompt_len": 20, "quant_group_size": 64, "residual_length": 4}, "int4"),
        (LLAMA_1B, "quantized", {"quant_group_size": 32},
         {"engine": "hf-dynamic", "prompt_len": 20, "quant_group_size": 32, "residual_length": 128}, "int8"),
        (LLAMA_1B, "dynamic", {"tp": 2}, {"engine": "hf-dynamic", "tp": 2}, "auto"),
        ("deepseek-ai/DeepSeek-V2-Lite", "dynamic", {"batch": 2, "tp": 4}, {"engine": "hf-dynamic", "tp": 4}, "auto"),
        ("deepseek-ai/DeepSeek-V2-Lite", "paged", {"batch": 2, "block_size": 64}, {"engine": "vllm", "block_size": 64}, "auto"),
        (GPT_OSS, "static", {"batch": 2, "max_cache_len": 300}, {"engine": "hf-static", "max_cache_len": 300}, "auto"),
        (GPT_OSS, "dynamic", {"batch": 2, "beams": 2}, {"engine": "hf-dynamic", "beams": 2}, "auto"),
        (GPT_OSS, "dynamic", {"batch": 2}, {"engine": "hf-dynamic"}, "auto"),
        ("ai21labs/Jamba-v0.1", "dynamic", {"batch": 2}, {"engine": "hf-dynamic"}, "auto"),
        ("ai21labs/Jamba-v0.1", "static", {"batch": 2, "max_cache_len": 40},
         {"engine": "hf-static", "max_cache_len": 40}, "auto"),
    ],
)
def test_prediction_equals_the_engine_profile(model, layout, plan_kw, engine_kw, kv) -> None:
    plan = plan_verify(geo(model), layout=layout, num_layers=2, prompt_len=20 if model != GPT_OSS else 130,
                       gen_len=7, kv_dtype=kv, **plan_kw)
    assert plan.predicted_bytes == _engine_bytes(plan, kv, **engine_kw)


def test_where_the_decode_differs_from_the_engine_profiles() -> None:
    # vLLM keeps max_num_batched_tokens of slack for sliding layers; the decode's pool holds the live window only.
    paged = plan_verify(geo(GPT_OSS), layout="paged", num_layers=1, batch=2, prompt_len=130, gen_len=7)
    assert _engine_bytes(paged, engine="vllm", block_size=16) > paged.predicted_bytes
