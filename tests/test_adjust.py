"""Deployment adjustments: TP/PP, blocks, beams, prefix sharing, windows, dtype, offload."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.adjust import (
    Deployment,
    Offload,
    deployment_from_flags,
    kv_heads_per_rank,
    parse_offload,
    pp_partitions,
    round_to_blocks,
    shard_for_tp,
    shared_token_slots,
)
from kvplan.calc import estimate
from kvplan.errors import InputError
from kvplan.models import parse_config
from kvplan.specs import FullAttentionSpec, MLASpec, SlidingWindowSpec, StateSpec
from tests.conftest import BF16, FP8, FP16, KV, REPO_ROOT, make_config, shared_config


def geometry(name: str):
    """A real Hub config: the bundled copy in model_configs/ when there is one, else ../shared/hf_configs."""
    bundled = REPO_ROOT / "model_configs" / f"{name}.json"
    config = json.loads(bundled.read_text()) if bundled.is_file() else shared_config(name)
    return parse_config(config, model_id=name.replace("__", "/"))


def adjustments(est) -> dict[str, tuple[int, int]]:
    return {a.name: (a.before_bytes, a.after_bytes) for a in est.adjustments}


# ---- pure pieces ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("layers", "pp", "parts"),
    [(61, 4, [15, 15, 16, 15]), (80, 3, [27, 27, 26]), (32, 2, [16, 16]), (61, 2, [31, 30]), (5, 5, [1] * 5)],
)
def test_pp_partitions_follow_vllm_get_pp_indices(layers: int, pp: int, parts: list[int]) -> None:
    assert pp_partitions(layers, pp) == parts


@pytest.mark.parametrize(
    ("layers", "pp", "parts"), [(32, 3, [10, 11, 11]), (61, 4, [15, 15, 15, 16]), (80, 3, [26, 27, 27]), (32, 2, [16, 16])],
)
def test_pp_partitions_follow_sglang_get_pp_indices(layers: int, pp: int, parts: list[int]) -> None:
    """SGLang (sglang/srt/distributed/utils.py): the extra layers go to the last ``L % pp`` stages."""
    assert pp_partitions(layers, pp, extra_to_last=True) == parts


def test_pp_larger_than_layers_is_an_input_error() -> None:
    with pytest.raises(InputError, match="larger than the model's 2 layers"):
        pp_partitions(2, 4)


@pytest.mark.parametrize(("heads", "tp", "floor", "ceil"), [(8, 16, 1, 1), (8, 2, 4, 4), (8, 3, 3, 3), (12, 8, 2, 2), (1, 8, 1, 1)])
def test_kv_heads_per_rank(heads: int, tp: int, floor: int, ceil: int) -> None:
    assert kv_heads_per_rank(heads, tp) == floor  # vLLM max(1, H // tp)
    assert kv_heads_per_rank(heads, tp, rule="ceil") == ceil  # TensorRT-LLM cdiv(H, tp)


def test_shard_replicates_heads_and_says_so() -> None:
    spec, notes = shard_for_tp(FullAttentionSpec(num_kv_heads=8, head_size=128, head_size_v=128), 16)
    assert spec.num_kv_heads == 1
    assert "replicated 2x" in notes[0]
    _, uneven = shard_for_tp(FullAttentionSpec(num_kv_heads=8, head_size=128, head_size_v=128), 3)
    assert "not divisible" in uneven[0]
    _, partial = shard_for_tp(FullAttentionSpec(num_kv_heads=12, head_size=128, head_size_v=128), 16)
    assert "replicated 1.33333x" in partial[0] and "16 head copies for 12 heads" in partial[0]


def test_mla_latent_is_replicated_on_every_rank() -> None:
    mla = MLASpec(kv_lora_rank=512, qk_rope_head_dim=64)
    spec, notes = shard_for_tp(mla, 8)
    assert spec == mla and "replicated" in notes[0]


def test_mamba2_state_splits_channels_and_replicates_groups() -> None:
    # NOTE: Nemotron-H-56B: d_inner 256 heads * 64 = 16384, n_groups 8, d_state 256, d_conv 4.
    state = StateSpec(mixer="mamba2", shapes=(("conv", (3, 16384 + 2 * 8 * 256)), ("ssm", (256, 64, 256))))
    four, _ = shard_for_tp(state, 4)
    assert dict(four.shapes) == {"conv": (3, (16384 + 2 * 8 * 256) // 4), "ssm": (256 // 4, 64, 256)}
    sixteen, notes = shard_for_tp(state, 16)
    assert dict(sixteen.shapes) == {"conv": (3, (16384 + 2 * 16 * 256) // 16), "ssm": (256 // 16, 64, 256)}
    assert "replicated to 16" in notes[0]


def test_gated_delta_net_state_splits_heads() -> None:
    # NOTE: Qwen3-Next: conv channels 2 * 16 * 128 + 32 * 128 = 8192; ssm (32 heads, 128, 128).
    state = StateSpec(mixer="gated_delta_net", shapes=(("conv", (3, 8192)), ("ssm", (32, 128, 128))))
    spec, notes = shard_for_tp(state, 4)
    assert dict(spec.shapes) == {"conv": (3, 8192 // 4), "ssm": (32 // 4, 128, 128)} and notes == []


def test_round_to_blocks() -> None:
    assert round_to_blocks(1000, 16) == 63 * 16
    assert round_to_blocks(1024, 16) == 1024
    assert round_to_blocks(1000, None) == 1000


def test_shared_token_slots_share_full_prompt_blocks_per_request() -> None:
    bs, batch, beams, prompt, seq = 16, 2, 4, 1000, 1100
    shared = prompt // bs * bs  # 992: the prompt's full blocks, kept once per request
    per_beam = round_to_blocks(seq - shared, bs)  # 108 -> 112
    assert shared_token_slots(seq_len=seq, batch=batch, beams=beams, block_size=bs, prompt_len=prompt,
                              share_prefix=True, shared_prefix_tokens=0) == batch * (shared + beams * per_beam)
    assert shared_token_slots(seq_len=seq, batch=batch, beams=beams, block_size=bs, prompt_len=prompt,
                              share_prefix=False, shared_prefix_tokens=0) == batch * beams * round_to_blocks(seq, bs)


def test_shared_prefix_tokens_are_kept_once_for_the_batch() -> None:
    bs, batch, seq, system = 16, 8, 1000, 500
    once = system // bs * bs  # 496
    assert shared_token_slots(seq_len=seq, batch=batch, beams=1, block_size=bs, prompt_len=None, share_prefix=False,
                              shared_prefix_tokens=system) == once + batch * round_to_blocks(seq - once, bs)


def test_parse_offload() -> None:
    assert parse_offload("0.25") == Offload(fraction=0.25)
    assert parse_offload("layers:8") == Offload(layers=8)
    assert parse_offload(None) is None
    for bad in ("1.5", "layers:x", "half"):
        with pytest.raises(InputError):
            parse_offload(bad)


def test_deployment_from_flags_validates() -> None:
    assert deployment_from_flags(engine="vllm", prompt_len="1k", share_prefix=True).prompt_len == 1024
    with pytest.raises(InputError, match="--share-prefix needs --prompt-len"):
        deployment_from_flags(share_prefix=True)
    with pytest.raises(InputError, match="swa-full-tokens-ratio"):
        deployment_from_flags(swa_full_tokens_ratio=1.5)


# ---- adjustments on real configs (ideal engine unless named) ---------------------------------------
def test_default_estimate_is_unchanged_and_has_no_adjustments() -> None:
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), seq_len=8192)
    assert est.kv_cache_bytes == 8192 * 32 * KV * 8 * 128 * BF16
    assert est.kv_cache_bytes_per_gpu == est.peak_bytes == est.kv_cache_bytes
    assert est.cpu_bytes == 0 and est.adjustments == ()


def test_beams_copy_every_sequence_hf_style() -> None:
    dense = 4096 * 32 * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), batch=2, seq_len=4096, deployment=Deployment(beams=4))
    assert est.kv_cache_bytes == 2 * 4 * dense
    assert adjustments(est)["beams"] == (2 * dense, 2 * 4 * dense)


def test_share_prefix_keeps_the_prompt_once_per_request() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), batch=2, seq_len=1100,
                   deployment=Deployment(beams=4, prompt_len=1000, share_prefix=True))
    # NOTE: ideal engine, no blocks: the whole 1000-token prompt is shared; 100 tokens per beam.
    assert est.kv_cache_bytes == 2 * (1000 + 4 * 100) * per_token
    assert adjustments(est)["share_prefix"] == (2 * 4 * 1100 * per_token, 2 * (1000 + 4 * 100) * per_token)


def test_shared_prefix_tokens_on_vllm_blocks() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), batch=8, seq_len=1000,
                   deployment=Deployment(engine="vllm", shared_prefix_tokens=500))
    assert est.kv_cache_bytes == (496 + 8 * 512) * per_token  # 31 shared blocks; 504 -> 32 blocks each
    assert adjustments(est)["shared_prefix_tokens"] == (8 * 1008 * per_token, (496 + 8 * 512) * per_token)


def test_tp_16_on_llama_3_1_70b_replicates_the_8_kv_heads() -> None:
    seq = 32768
    unsharded = seq * 80 * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-70B"), seq_len=seq, deployment=Deployment(tp=16))
    assert est.kv_cache_bytes_per_gpu == seq * 80 * KV * 1 * 128 * BF16  # one head per rank
    assert est.kv_cache_bytes == 16 * seq * 80 * KV * 1 * 128 * BF16 == 2 * unsharded
    assert adjustments(est)["tensor_parallel"] == (unsharded, 2 * unsharded)
    assert any("replicated 2x" in note for note in est.notes)


def test_tp_8_on_deepseek_v3_replicates_the_latent() -> None:
    seq = 4096
    latent = 61 * (512 + 64) * BF16
    est = estimate(geometry("deepseek-ai__DeepSeek-V3"), seq_len=seq, deployment=Deployment(tp=8))
    assert est.kv_cache_bytes_per_gpu == seq * latent
    assert est.kv_cache_bytes == 8 * seq * latent


def test_pp_reports_the_largest_stage() -> None:
    seq = 32768
    per_layer = seq * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-70B"), seq_len=seq, deployment=Deployment(pp=3, tp=2))
    assert est.kv_cache_bytes == 80 * per_layer  # 8 heads split 4 + 4: no replication
    assert est.kv_cache_bytes_per_gpu == 27 * per_layer // 2  # stages [27, 27, 26], half the heads
    assert adjustments(est)["pipeline_parallel"] == (80 * per_layer // 2, 27 * per_layer // 2)


def test_block_size_rounds_each_sequence_up() -> None:
    per_token = 32 * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), batch=3, seq_len=1000, deployment=Deployment(block_size=16))
    assert est.kv_cache_bytes == 3 * 63 * 16 * per_token
    assert adjustments(est)["block_size"] == (3 * 1000 * per_token, 3 * 1008 * per_token)


def test_no_window_counts_mistral_windows_as_full() -> None:
    seq = 32768
    est = estimate(geometry("mistralai__Mistral-7B-v0.1"), seq_len=seq, deployment=Deployment(no_window=True))
    assert adjustments(est)["no_window"] == (4096 * 32 * KV * 8 * 128 * BF16, seq * 32 * KV * 8 * 128 * BF16)


def test_kv_dtype_fp8_halves_and_int4_adds_group_scales() -> None:
    g = geometry("meta-llama__Llama-3.1-8B")
    seq = 4096
    fp8 = estimate(g, seq_len=seq, kv_dtype="fp8")
    assert fp8.kv_cache_bytes == seq * 32 * KV * 8 * 128 * FP8
    assert adjustments(fp8)["kv_dtype"] == (seq * 32 * KV * 8 * 128 * BF16, seq * 32 * KV * 8 * 128 * FP8)
    int4 = estimate(g, seq_len=seq, kv_dtype="int4", deployment=Deployment(quant_group_size=32))
    assert int4.kv_cache_bytes == seq * 32 * KV * (8 * 128 // 32) * (32 * 4 // 8 + 2 + 2)


def test_offload_fraction_and_layers() -> None:
    seq = 4096
    per_layer = seq * KV * 8 * 128 * BF16
    g = geometry("meta-llama__Llama-3.1-8B")
    quarter = estimate(g, seq_len=seq, deployment=Deployment(offload=Offload(fraction=0.25)))
    assert quarter.cpu_bytes == 32 * per_layer // 4
    assert quarter.kv_cache_bytes_per_gpu == 32 * per_layer * 3 // 4
    assert quarter.kv_cache_bytes == 32 * per_layer  # the whole cache, wherever it lives
    layers = estimate(g, seq_len=seq, deployment=Deployment(offload=Offload(layers=8)))
    assert (layers.cpu_bytes, layers.kv_cache_bytes_per_gpu) == (8 * per_layer, 24 * per_layer)
    assert adjustments(layers)["offload"] == (32 * per_layer, 24 * per_layer)


def test_whisper_cross_attention_uses_1500_encoder_positions() -> None:
    g = geometry("openai__whisper-large-v3")
    est = estimate(g, seq_len=448, deployment=Deployment(tp=4))
    per_token = 32 * KV * 20 * 64 * FP16
    assert est.kv_cache_bytes == (448 + 1500) * per_token  # 20 heads split 5 per rank: no replication
    assert est.kv_cache_bytes_per_gpu == (448 + 1500) * per_token // 4
    assert est.encoder_len == 1500


def test_hybrid_state_layers_ignore_tokens_and_split_over_tp() -> None:
    g = geometry("nvidia__Nemotron-H-56B-Base-8K")
    seq = 8192
    attention = 10 * seq * KV * 8 * 128 * BF16
    state = 54 * ((3 * (16384 + 2 * 8 * 256) + 256 * 64 * 256) * BF16)
    assert estimate(g, seq_len=seq).kv_cache_bytes == attention + state
    tp4 = estimate(g, seq_len=seq, deployment=Deployment(tp=4))
    assert tp4.kv_cache_bytes_per_gpu == (attention + state) // 4


# ---- properties ----------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(heads=st.integers(1, 128), head=st.sampled_from([64, 128, 256]), tp=st.integers(1, 64), seq=st.integers(1, 4096))
def test_tp_shards_sum_to_at_least_the_unsharded_bytes(heads: int, head: int, tp: int, seq: int) -> None:
    g = parse_config(make_config(num_key_value_heads=heads, num_attention_heads=heads, hidden_size=heads * head,
                                 num_hidden_layers=2), model_id="prop")
    whole = estimate(g, seq_len=seq).kv_cache_bytes
    sharded = estimate(g, seq_len=seq, deployment=Deployment(tp=tp))
    assert sharded.kv_cache_bytes >= whole
    assert sharded.kv_cache_bytes == tp * sharded.kv_cache_bytes_per_gpu


@settings(max_examples=60, deadline=None)
@given(seq=st.integers(1, 20000), bs=st.sampled_from([1, 8, 16, 32, 64, 128, 256]), batch=st.integers(1, 8),
       window=st.integers(2, 8192))
def test_block_rounding_never_decreases_and_adds_under_one_block(seq: int, bs: int, batch: int, window: int) -> None:
    config = make_config(num_hidden_layers=4, layer_types=["sliding_attention", "full_attention"] * 2,
                         sliding_window=window, model_type="gemma3_text", head_dim=128, num_key_value_heads=4)
    g = parse_config(config, model_id="prop")
    plain = estimate(g, batch=batch, seq_len=seq)
    blocked = estimate(g, batch=batch, seq_len=seq, deployment=Deployment(block_size=bs))
    assert blocked.kv_cache_bytes >= plain.kv_cache_bytes
    for before, after in zip(plain.groups, blocked.groups, strict=True):
        one_block = bs * after.bytes_per_token  # one block of one layer
        assert after.total_bytes - before.total_bytes < batch * after.count * one_block or bs == 1


@settings(max_examples=60, deadline=None)
@given(seq=st.integers(1, 40000), window=st.integers(2, 16384),
       engine=st.sampled_from(["ideal", "hf-dynamic", "hf-static", "llama.cpp", "trtllm", "sglang", "vllm"]))
def test_windows_never_exceed_full_attention(seq: int, window: int, engine: str) -> None:
    spec = SlidingWindowSpec(num_kv_heads=8, head_size=128, head_size_v=128, sliding_window=window)
    full = FullAttentionSpec(num_kv_heads=8, head_size=128, head_size_v=128)
    from kvplan.dtypes import lookup_dtype
    from kvplan.engines import SizingContext, get_engine

    fp16 = lookup_dtype("fp16")
    ctx = SizingContext(seq_len=seq, encoder_len=0, batch=1, dep=Deployment(engine=engine), kv_dtype=fp16,
                        state_dtype=fp16, model_dtype=fp16, has_full=True, has_windowed=True, swa_window=window)
    profile = get_engine(engine)
    # NOTE: vLLM's SlidingWindowSpec adds one alignment block even when T fits the window, so a short
    # request's sliding layer holds one block more than a full layer (cdiv(T, 16) + 1 blocks).
    slack = 16 if engine == "vllm" else 0
    assert profile.tokens_held(spec, ctx) <= profile.tokens_held(full, ctx) + slack


# ---- review fixes: contradictions, no-op flags, per-GPU scope ----------------------------------------
def test_no_window_on_a_model_without_windows_is_a_noted_no_op() -> None:
    # NOTE: this crashed with exit 101 (an internal assert) before.
    seq = 4096
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), seq_len=seq, deployment=Deployment(no_window=True))
    assert est.kv_cache_bytes == seq * 32 * KV * 8 * 128 * BF16
    assert "no_window" not in adjustments(est)
    assert any("--no-window changes nothing" in note for note in est.notes)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"prompt_len": 4097}, "--prompt-len 4,097 is longer than the sequence length 4,096"),
        ({"shared_prefix_tokens": 4097}, "--shared-prefix-tokens 4,097 is longer than the sequence length 4,096"),
        ({"shared_prefix_tokens": 1001, "prompt_len": 1000}, "is longer than --prompt-len 1,000"),
        ({"offload": Offload(layers=33)}, "--offload layers:33 is more than the model's 32 layers"),
        ({"engine": "hf-static", "max_cache_len": 4095}, "--max-cache-len 4,095 cannot hold"),
    ],
)
def test_lengths_that_contradict_the_sequence_or_model_are_input_errors(knobs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        estimate(geometry("meta-llama__Llama-3.1-8B"), seq_len=4096, deployment=Deployment(**knobs))


def test_lengths_at_the_boundary_are_accepted() -> None:
    seq, per_layer = 4096, 4096 * KV * 8 * 128 * BF16
    g = geometry("meta-llama__Llama-3.1-8B")
    assert estimate(g, seq_len=seq, deployment=Deployment(prompt_len=seq, shared_prefix_tokens=seq)).kv_cache_bytes \
        == 32 * per_layer
    everything = estimate(g, seq_len=seq, deployment=Deployment(offload=Offload(layers=32)))
    assert (everything.cpu_bytes, everything.kv_cache_bytes_per_gpu) == (32 * per_layer, 0)
    static = estimate(g, seq_len=seq, deployment=Deployment(engine="hf-static", max_cache_len=seq))
    assert static.kv_cache_bytes == 32 * per_layer


def test_engine_specific_flags_on_another_engine_are_noted_not_dropped() -> None:
    est = estimate(geometry("meta-llama__Llama-3.1-8B"), seq_len=4096,
                   deployment=Deployment(engine="vllm", kv_unified=True, max_cache_len=8192, swa_full_tokens_ratio=0.5))
    assert "--kv-unified is ignored: it applies to --engine llama.cpp, not vllm" in est.notes
    assert "--max-cache-len is ignored: it applies to --engine hf-static, not vllm" in est.notes
    assert "--swa-full-tokens-ratio is ignored: it applies to --engine sglang, not vllm" in est.notes
    own = estimate(geometry("meta-llama__Llama-3.1-8B"), seq_len=4096,
                   deployment=Deployment(engine="vllm", max_num_batched_tokens=2048))
    assert not any("is ignored" in note for note in own.notes)


def test_adjustments_say_whether_bytes_are_all_gpus_or_the_largest_gpu() -> None:
    seq = 32768
    per_layer = seq * KV * 8 * 128 * BF16
    est = estimate(geometry("meta-llama__Llama-3.1-70B"), seq_len=seq,
                   deployment=Deployment(tp=16, pp=2, offload=Offload(fraction=0.5)))
    scopes = {a.name: (a.scope, a.before_bytes, a.after_bytes) for a in est.adjustments}
    assert scopes["tensor_parallel"] == ("all_gpus", 80 * per_layer, 2 * 80 * per_layer)  # 1 head per rank: 2x
    assert scopes["pipeline_parallel"] == ("per_gpu", 80 * per_layer // 8, 40 * per_layer // 8)  # 1 of 8 heads
    assert scopes["offload"] == ("per_gpu", 40 * per_layer // 8, 40 * per_layer // 16)
    assert est.cpu_bytes == 2 * 80 * per_layer // 2  # half of every rank's cache, all 16 TP ranks


def test_encoder_len_beyond_the_configs_encoder_is_noted() -> None:
    g = geometry("openai__whisper-large-v3")
    per_token = 32 * KV * 20 * 64 * FP16  # decoder layers, K+V, heads, head dim, fp16 (no torch_dtype in config)
    at = estimate(g, seq_len=448, encoder_len=1500)
    beyond = estimate(g, seq_len=448, encoder_len=1501)
    assert beyond.kv_cache_bytes - at.kv_cache_bytes == per_token
    assert not any("beyond the encoder length" in note for note in at.notes)
    assert any("--encoder-len 1,501 is beyond the encoder length of the config" in note for note in beyond.notes)


def test_deployments_from_flags_read_token_counts_and_refuse_bools() -> None:
    """deployment_from_flags reads token counts as kvplan does (1k = 1,024); tp=True is refused, never taken
    for tp=1."""
    from kvplan.adjust import deployment_from_flags
    from kvplan.errors import InputError

    first = deployment_from_flags(engine="vllm", tp=2, prompt_len="1k")
    assert first == deployment_from_flags(engine="vllm", tp=2, prompt_len=1024) and first.prompt_len == 1024
    assert deployment_from_flags(engine="vllm", tp=1).tp == 1
    for _ in range(2):
        with pytest.raises(InputError, match="--tensor-parallel-size must be an integer >= 1, got True"):
            deployment_from_flags(engine="vllm", tp=True)
