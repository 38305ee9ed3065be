"""Weights counted from config.json: parameter counts against published counts, and storage bytes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvplan.engines import get_engine
from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.models import (
    count_weights,
    resolve_weights,
    serve_weights,
    weights_from_safetensors,
    with_exact_bytes,
)
from kvplan.sources import bundled_index, read_json_config

from conftest import make_config


def bundled(hub_id: str) -> dict:
    return read_json_config(bundled_index()[hub_id.lower()])


# Published total parameter counts (model cards / the Hub's safetensors parameter count), checked
# against kvplan's count from the bundled config.json. Within 1%.
PUBLISHED = [
    ("meta-llama/Llama-3.1-8B", 8.03e9),
    ("meta-llama/Llama-3.1-70B", 70.6e9),
    ("meta-llama/Llama-3.1-405B", 405.9e9),
    ("meta-llama/Llama-3.2-1B", 1.24e9),
    ("meta-llama/Llama-3.2-3B", 3.21e9),
    ("meta-llama/Llama-2-7b-hf", 6.74e9),
    ("meta-llama/Llama-2-13b-hf", 13.0e9),
    ("meta-llama/Llama-2-70b-hf", 69.0e9),
    ("mistralai/Mistral-7B-v0.1", 7.24e9),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9),
    ("Qwen/Qwen3-8B", 8.19e9),
    ("Qwen/Qwen3-0.6B", 0.596e9),
    ("Qwen/Qwen3-32B", 32.8e9),
    ("Qwen/Qwen3-30B-A3B", 30.5e9),
    ("Qwen/Qwen2.5-7B-Instruct", 7.61e9),
    ("deepseek-ai/DeepSeek-V3", 671e9),
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9),
    ("openai/gpt-oss-20b", 20.9e9),
    ("openai/gpt-oss-120b", 116.8e9),
    ("google/gemma-2-9b", 9.24e9),
    ("google/gemma-2-27b", 27.2e9),
    ("google/gemma-2-2b", 2.61e9),
    ("google/gemma-3-12b-it", 12.2e9),
    ("microsoft/phi-2", 2.78e9),
    ("microsoft/Phi-3-mini-4k-instruct", 3.82e9),
    ("microsoft/phi-4", 14.7e9),
    ("openai-community/gpt2", 124e6),
    ("EleutherAI/gpt-j-6b", 6.05e9),
    ("EleutherAI/gpt-neox-20b", 20.6e9),
    ("bigscience/bloom-560m", 559e6),
    ("llava-hf/llava-1.5-7b-hf", 7.06e9),
    ("state-spaces/mamba-2.8b-hf", 2.77e9),
    # hybrid-state, GLM, encoder-decoder and other families with their own counters
    ("ai21labs/Jamba-v0.1", 51.6e9),  # "52B total, 12B active" (Jamba paper); the Hub lists 51.6B
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 80e9),  # "80B in total and 3B activated" (model card)
    ("nvidia/Nemotron-H-56B-Base-8K", 56e9),
    ("MiniMaxAI/MiniMax-M1-40k", 456e9),  # "456 billion parameters, 45.9B activated" (model card)
    ("THUDM/chatglm3-6b", 6.24e9),
    ("THUDM/glm-4-9b-chat", 9.40e9),
    ("google-t5/t5-base", 222.9e6),
    ("openai/whisper-large-v3", 1.5435e9),  # the Hub lists 1,543,490,560
    ("bigcode/starcoder2-7b", 7.17e9),
    ("mosaicml/mpt-7b-instruct", 6.65e9),
    ("openai-community/gpt2-xl", 1.56e9),
]


@pytest.mark.parametrize(("hub_id", "published"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_count_matches_published(hub_id: str, published: float) -> None:
    counted = count_weights(bundled(hub_id), model_id=hub_id).parameters
    assert abs(counted - published) / published < 0.01, f"{hub_id}: {counted:,} vs {published:,.0f}"


def test_llama_31_8b_exact_count_and_bytes() -> None:
    w = count_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="llama")
    hidden, layers, inter, vocab, kv = 4096, 32, 14336, 128256, 8 * 128
    attention = layers * (hidden * hidden * 2 + hidden * kv * 2)  # q, o + k, v
    mlp = layers * 3 * hidden * inter
    norms = (2 * layers + 1) * hidden
    embeddings = 2 * vocab * hidden  # embed_tokens + untied lm_head
    assert w.parameters == attention + mlp + norms + embeddings == 8_030_261_248
    assert w.bytes == 8_030_261_248 * 2  # bf16
    assert w.bytes_per_gpu(tp=2) == (attention + mlp + embeddings) * 2 // 2 + norms * 2


def test_tied_embeddings_have_no_lm_head() -> None:
    tied = count_weights(bundled("meta-llama/Llama-3.2-1B"), model_id="x")
    assert "lm_head" not in {p.name for p in tied.parts}
    untied = count_weights(bundled("meta-llama/Llama-3.2-1B") | {"tie_word_embeddings": False}, model_id="x")
    assert untied.parameters - tied.parameters == 128256 * 2048


def test_moe_counts_every_expert_resident() -> None:
    w = count_weights(bundled("mistralai/Mixtral-8x7B-v0.1"), model_id="mixtral")
    experts = next(p for p in w.parts if p.name == "experts")
    assert experts.parameters == 32 * 8 * 3 * 4096 * 14336  # layers * experts * (gate, up, down) * h * I
    assert (w.num_experts, w.experts_per_token) == (8, 2)
    # one token reads 2 of 8 experts
    assert w.active_parameters == w.parameters - experts.parameters * 6 // 8
    # a decode step of 1 token reads 2/8 of the expert bytes; 4 tokens may touch all 8
    assert w.read_bytes_per_step(batch=1) == w.bytes - experts.bytes + experts.bytes * 2 // 8
    assert w.read_bytes_per_step(batch=4) == w.bytes


def test_mla_projections_deepseek_v3() -> None:
    w = count_weights(bundled("deepseek-ai/DeepSeek-V3"), model_id="v3")
    attention = next(p for p in w.parts if p.name == "attention")
    h, heads, q_rank, kv_rank, rope, nope, v = 7168, 128, 1536, 512, 64, 128, 128
    per_layer = (h * q_rank + q_rank * heads * (nope + rope) + h * (kv_rank + rope)
                 + kv_rank * heads * (nope + v) + heads * v * h)
    assert sum(m.parameters for m in attention.matrices) == 61 * per_layer
    assert attention.other_parameters == 61 * (q_rank + kv_rank)  # q_a and kv_a layernorms
    shared = next(p for p in w.parts if p.name == "shared_experts")
    assert shared.parameters == (61 - 3) * 3 * h * 2048  # one shared expert in the 58 MoE layers
    assert any("num_nextn_predict_layers" in n for n in w.notes)


def test_fp8_block_scales_deepseek_v3() -> None:
    w = count_weights(bundled("deepseek-ai/DeepSeek-V3"), model_id="v3")
    assert w.quantisation is not None and w.quantisation.block == (128, 128)
    experts = next(p for p in w.parts if p.name == "experts")
    # each 2048 x 7168 expert matrix: 1 byte per value + a float32 scale per 128 x 128 block
    per_matrix = 2048 * 7168 + (2048 // 128) * (7168 // 128) * 4
    assert experts.bytes == 58 * 256 * 3 * per_matrix
    embed = next(p for p in w.parts if p.name == "embed_tokens")
    assert embed.bytes == 129280 * 7168 * 2  # embeddings stay bf16


def test_mxfp4_gpt_oss_experts_only() -> None:
    w = count_weights(bundled("openai/gpt-oss-20b"), model_id="oss")
    experts = next(p for p in w.parts if p.name == "experts")
    values = 24 * 32 * 3 * 2880 * 2880  # layers * experts * (gate, up, down) * h * I
    biases = 24 * 32 * (2 * 2880 + 2880)
    assert experts.bytes == values // 2 + values // 32 + biases * 2  # 4-bit values + e8m0 scale per 32 + bf16 biases
    attention = next(p for p in w.parts if p.name == "attention")
    assert attention.bytes == attention.parameters * 2  # self_attn is not converted
    assert 13.7e9 < w.bytes < 13.8e9  # the published checkpoint is 13.8 GB


def small_llama(**quant: object) -> dict:
    return make_config(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
                       intermediate_size=512, vocab_size=1000, tie_word_embeddings=False, torch_dtype="float16",
                       quantization_config=quant or ...)


def test_awq_and_gptq_int4_group_scales() -> None:
    plain = count_weights(small_llama(), model_id="t")
    awq = count_weights(small_llama(quant_method="awq", bits=4, group_size=128, zero_point=True), model_id="t")
    gptq = count_weights(small_llama(quant_method="gptq", bits=4, group_size=128), model_id="t")

    def int4(i: int, o: int, g_idx: bool) -> int:
        groups = (i // 128) * o
        return i * o // 2 + groups * 2 + groups // 2 + (i * 4 if g_idx else 0)  # values, fp16 scales, zeros, g_idx

    mlp = 2 * (2 * int4(256, 512, False) + int4(512, 256, False))
    assert next(p for p in awq.parts if p.name == "mlp").bytes == mlp
    assert next(p for p in gptq.parts if p.name == "mlp").bytes == 2 * (2 * int4(256, 512, True) + int4(512, 256, True))
    # embeddings and lm_head stay 16-bit
    assert next(p for p in awq.parts if p.name == "lm_head").bytes == next(p for p in plain.parts if p.name == "lm_head").bytes
    assert awq.parameters == plain.parameters


def test_unknown_quant_method_and_model_type_ask_for_weights_bytes() -> None:
    with pytest.raises(ConfigError) as info:
        count_weights(small_llama(quant_method="exl9"), model_id="t")
    assert "--weights-bytes" in (info.value.hint or "")
    unknown = make_config(model_type="xverse", hidden_size=256, num_hidden_layers=2)  # no weight layout in kvplan
    with pytest.raises(ConfigError):
        count_weights(unknown, model_id="xverse")
    w, _notes = resolve_weights(unknown, model_id="xverse", source_kind="bundled", weights_bytes=100 * 10**9)
    assert w is not None and w.bytes == 100 * 10**9 and not w.counted
    w, notes = resolve_weights(unknown, model_id="xverse", source_kind="bundled", required=False)
    assert w is None and "not counted" in notes[0]


def test_vision_tower_reported_separately() -> None:
    w = count_weights(bundled("llava-hf/llava-1.5-7b-hf"), model_id="llava")
    h, inner, layers = 1024, 4096, 24
    tower = layers * (4 * h * h + 2 * h * inner + 4 * h + 4 * h + inner + h)  # matrices, qkvo biases, 2 LNs, MLP biases
    tower += 3 * 14 * 14 * h + (24 * 24 + 1) * h + h + 4 * h  # patch conv, positions, class embedding, pre/post LN
    projector = h * 4096 + 4096 + 4096 * 4096 + 4096
    assert w.vision_parameters == tower + projector
    assert w.language_parameters == 6_738_939_904  # Llama-2-7B with a 32,064-token vocabulary


def test_weights_bytes_override_keeps_counts() -> None:
    config = bundled("meta-llama/Llama-3.1-8B")
    w, _ = resolve_weights(config, model_id="x", source_kind="bundled", weights_bytes=10**10)
    assert w is not None and w.bytes == 10**10 and w.parameters == 8_030_261_248 and w.source == "--weights-bytes"


def test_safetensors_metadata_through_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake(repo_id: str, *, revision: str | None, token: str | None) -> SimpleNamespace:
        calls.append((repo_id, revision))
        return SimpleNamespace(parameter_count={"BF16": 8_030_261_248, "F32": 10})

    total, counts = weights_from_safetensors("meta-llama/Llama-3.1-8B", fetch=fake)
    assert total == 8_030_261_248 * 2 + 10 * 4 and counts["F32"] == 10
    monkeypatch.delenv("HF_HUB_OFFLINE")
    w, _ = resolve_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="meta-llama/Llama-3.1-8B", source_kind="hub",
                           fetch=fake)
    assert w is not None and w.source == "safetensors" and w.bytes == total
    assert calls == [("meta-llama/Llama-3.1-8B", None)] * 2


def test_safetensors_failure_falls_back_or_errors() -> None:
    def broken(repo_id: str, **_: object) -> None:
        raise OSError("offline")

    with pytest.raises(SourceError):
        weights_from_safetensors("a/b", fetch=broken)
    w, _notes = resolve_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="a/b", source_kind="hub",
                               weights_from="auto", fetch=broken)
    assert w is not None and w.source == "config"  # HF_HUB_OFFLINE=1 in tests: not even tried
    with pytest.raises(InputError):
        resolve_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="x", source_kind="bundled", weights_from="safetensors")


# ---- families with their own counters: exact arithmetic ------------------------------------------
def test_t5_base_exact() -> None:
    w = count_weights(bundled("google-t5/t5-base"), model_id="t5")
    d, d_ff, heads, d_kv, layers, vocab, buckets = 768, 3072, 12, 64, 12, 32128, 32
    attention = (layers + 2 * layers) * 4 * d * heads * d_kv  # enc self + dec self + dec cross: q, k, v, o
    mlp = 2 * layers * 2 * d * d_ff  # wi, wo in encoder and decoder (relu: not gated)
    norms = (2 * layers + 3 * layers + 2) * d  # RMS norms per sub-layer + the two final norms
    rel_bias = 2 * buckets * heads  # first layer of each stack
    assert w.parameters == vocab * d + attention + mlp + norms + rel_bias == 222_903_552  # the Hub's count


def test_whisper_large_v3_exact_with_128_mel_bins() -> None:
    config = bundled("openai/whisper-large-v3") | {"num_mel_bins": 128}
    w = count_weights(config, model_id="whisper")
    d, ffn, layers, vocab, mels = 1280, 5120, 32, 51866, 128
    attn = 4 * d * d + 3 * d  # q, k, v, o; biases on q, v, o
    mlp = d * ffn + ffn + ffn * d + d
    encoder = layers * (attn + mlp + 2 * 2 * d) + 2 * d  # two LayerNorms (w + b) per layer, final norm
    decoder = layers * (2 * attn + mlp + 3 * 2 * d) + 2 * d  # self + cross attention, three LayerNorms
    front = mels * d * 3 + d + d * d * 3 + d + 1500 * d  # conv1, conv2, encoder positions
    embeddings = vocab * d + 448 * d  # tokens (tied with proj_out) and decoder positions
    assert w.parameters == encoder + decoder + front + embeddings == 1_543_490_560  # the Hub's count
    default = count_weights(bundled("openai/whisper-large-v3"), model_id="whisper")
    assert w.parameters - default.parameters == (128 - 80) * d * 3  # WhisperConfig default num_mel_bins 80, noted
    assert any("num_mel_bins" in n for n in default.notes)


def test_jamba_mamba_attention_and_experts() -> None:
    w = count_weights(bundled("ai21labs/Jamba-v0.1"), model_id="jamba")
    h, d_inner, d_state, d_conv, dt_rank, inter = 4096, 2 * 4096, 16, 4, 4096 // 16, 14336
    mamba = next(p for p in w.parts if p.name == "mamba")
    per_layer = (h * 2 * d_inner + d_inner * (dt_rank + 2 * d_state) + dt_rank * d_inner + d_inner * h  # projections
                 + d_inner * d_conv + d_inner + d_inner + d_inner * d_state + d_inner  # conv w+b, dt bias, A_log, D
                 + dt_rank + 2 * d_state)  # dt, B and C RMS norms
    assert mamba.parameters == 28 * per_layer  # 32 layers, attention in 4 (i % 8 == 4)
    attention = next(p for p in w.parts if p.name == "attention")
    assert attention.parameters == 4 * (2 * h * h + 2 * h * 8 * 128)
    experts = next(p for p in w.parts if p.name == "experts")
    assert experts.parameters == 16 * 16 * 3 * h * inter  # 16 MoE layers (i % 2 == 1) x 16 experts, all resident
    assert (w.num_experts, w.experts_per_token) == (16, 2)


def test_qwen3_next_gated_attention_and_delta_net() -> None:
    w = count_weights(bundled("Qwen/Qwen3-Next-80B-A3B-Instruct"), model_id="q3n")
    h, heads, kv_heads, d = 2048, 16, 2, 256
    hk, hv, dk, dv, conv = 16, 32, 128, 128, 4
    full = 12 * (h * 2 * heads * d + 2 * h * kv_heads * d + heads * d * h + 2 * d)  # q doubled for the gate; q/k norms
    key_dim, value_dim = hk * dk, hv * dv
    delta = 36 * (h * (2 * key_dim + 2 * value_dim) + h * 2 * hv + value_dim * h  # in_proj_qkvz, in_proj_ba, out_proj
                  + (2 * key_dim + value_dim) * conv + 2 * hv + dv)  # conv1d, dt_bias + A_log, gated norm
    attention = next(p for p in w.parts if p.name == "attention")
    assert attention.parameters == full + delta
    shared = next(p for p in w.parts if p.name == "shared_experts")
    assert shared.parameters == 48 * (3 * h * 512 + h)  # Qwen3NextConfig default shared expert 512 (noted), + gate
    assert any("shared_expert_intermediate_size" in n for n in w.notes)


def test_chatglm_multi_query_groups() -> None:
    w = count_weights(bundled("THUDM/chatglm3-6b"), model_id="glm")
    h, layers, q, kv, ffn, vocab = 4096, 28, 32 * 128, 2 * 128, 13696, 65024
    per_layer = h * (q + 2 * kv) + q * h + h * 2 * ffn + ffn * h + 2 * h  # qkv, dense, SwiGLU, two RMS norms
    assert w.parameters == layers * per_layer + h + 2 * vocab * h  # final norm, embedding + output_layer


# ---- the dtype the engine holds the weights in ----------------------------------------------------
def test_float32_checkpoint_served_in_16_bits_except_by_transformers() -> None:
    w = count_weights(bundled("google/gemma-2-9b"), model_id="g")  # torch_dtype float32
    assert (w.dtype, w.bytes) == ("float32", w.parameters * 4)
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp", "ideal"):
        served, note = serve_weights(w, engine=get_engine(engine))
        assert (served.dtype, served.bytes) == ("bfloat16", w.parameters * 2), engine
        assert note and "--dtype float32" in note
    for engine in ("hf-dynamic", "hf-static"):
        served, note = serve_weights(w, engine=get_engine(engine))
        assert served.bytes == w.parameters * 4 and note is None
    forced, note = serve_weights(w, engine=get_engine("vllm"), dtype="float32")
    assert forced.bytes == w.parameters * 4 and note is None
    half, _ = serve_weights(count_weights(bundled("meta-llama/Llama-3.1-8B"), model_id="l"), engine=get_engine("hf-dynamic"),
                            dtype="float")
    assert half.bytes == 8_030_261_248 * 4  # --dtype float on a bf16 checkpoint
    with pytest.raises(InputError):
        serve_weights(w, engine=get_engine("vllm"), dtype="int3")


def test_served_dtype_keeps_quantised_matrices_and_scales_safetensors_bytes() -> None:
    oss = count_weights(bundled("openai/gpt-oss-20b"), model_id="oss")
    served, _ = serve_weights(oss, engine=get_engine("vllm"), dtype="float32")
    experts = next(p for p in oss.parts if p.name == "experts")
    experts32 = next(p for p in served.parts if p.name == "experts")
    assert experts32.bytes - experts.bytes == experts.other_parameters * 2  # only the bf16 biases grow
    w = count_weights(bundled("google/gemma-2-9b"), model_id="g")
    exact = with_exact_bytes(w, w.counted_bytes + 1000, source="safetensors")
    served, _ = serve_weights(exact, engine=get_engine("vllm"))
    assert served.bytes == (w.counted_bytes + 1000) * (w.parameters * 2) // (w.parameters * 4)
    given = with_exact_bytes(w, 10**10, source="--weights-bytes")
    served, note = serve_weights(given, engine=get_engine("vllm"))
    assert served.bytes == 10**10 and note and "taken as given" in note
