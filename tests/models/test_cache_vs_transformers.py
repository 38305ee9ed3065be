"""transformers as the oracle for Gemma 4, MiMo-V2-Flash, Qwen3.5 and Nemotron-3 Super: each real config in
../shared/hf_configs is shrunk without changing its cache geometry (fewer layers, cut consistently with
the layer pattern; small hidden, MLP, vocabulary and expert counts: none of them reaches the cache), built
with random weights on the CPU, run through a short greedy ``generate``, and the cache it returns is
measured tensor by tensor. ``kvplan estimate --engine hf-dynamic`` must give the same bytes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from conftest import BF16, FP32, KV, shared_config

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

BATCH, PROMPT, NEW = 2, 5, 2
TOKENS = PROMPT + NEW - 1  # generate() never feeds the last new token back (measured)

#: Per-layer lists that must be cut with the layer count.
LAYER_LISTS = ("layer_types", "hybrid_layer_pattern", "moe_layer_freq", "mlp_layer_types")
SMALL = {"hidden_size": 256, "vocab_size": 512, "intermediate_size": 64, "moe_intermediate_size": 64,
         "moe_shared_expert_intermediate_size": 64, "shared_expert_intermediate_size": 64,
         "moe_latent_size": 32}
EXPERTS = {"num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "top_k_experts": 2}


def shrink(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """The text config cut to ``layers`` layers with small widths: heads, head dims, windows, state sizes
    and the layer pattern's first ``layers`` entries are kept."""
    text = dict(config.get("text_config") or config)
    text.pop("auto_map", None)
    text.pop("quantization_config", None)
    text["num_hidden_layers"] = layers
    for key in LAYER_LISTS:
        if isinstance(text.get(key), list):
            text[key] = text[key][:layers]
    if isinstance(text.get("hybrid_override_pattern"), str):
        text["hybrid_override_pattern"] = text["hybrid_override_pattern"][:layers]
    for key, value in {**SMALL, **EXPERTS}.items():
        if text.get(key) is not None:
            text[key] = value
    text["dtype"] = "bfloat16"
    text["eos_token_id"] = text["bos_token_id"] = text["pad_token_id"] = None  # ids beyond the small vocabulary
    return text


def measured_cache_bytes(text: dict[str, Any]) -> int:
    """Bytes of every floating-point tensor the returned cache holds (distinct storages counted once)."""
    kwargs = {k: v for k, v in text.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(text["model_type"], **kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    ids = torch.randint(3, 500, (BATCH, PROMPT))
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, min_new_tokens=NEW,
                             do_sample=False, return_dict_in_generate=True, pad_token_id=0)
    storages: dict[int, int] = {}
    for layer in out.past_key_values.layers:
        for value in vars(layer).values():
            values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            for tensor in values:
                if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                    storage = tensor.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def kvplan_hf_dynamic_bytes(runner, tmp_path, text: dict[str, Any]) -> int:
    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(text))
    result = runner.invoke(app, ["estimate", "--model", str(path), "--engine", "hf-dynamic", "--seq-len",
                                 str(TOKENS), "--batch", str(BATCH), "--kv-dtype", "bf16", "--format", "json",
                                 "--allow-defaults"])  # the shrunk configs leave the class defaults out
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["totals"]["kv_cache_bytes"]


# (config, layers kept, expected bytes as arithmetic over the shrunk config's fields)
CASES = [
    # layers 0-4 slide (8 KV heads x 256), layer 5 is global (num_global_key_value_heads 2 x global_head_dim 512)
    ("google__gemma-4-26B-A4B", 6, BATCH * TOKENS * KV * BF16 * (5 * 8 * 256 + 1 * 2 * 512)),
    ("nvidia__Gemma-4-31B-IT-NVFP4", 6, BATCH * TOKENS * KV * BF16 * (5 * 16 * 256 + 1 * 4 * 512)),
    # layer 0 full (4 KV heads), layer 1 sliding (swa 8 KV heads); K 192 + V 128 per head
    ("XiaomiMiMo__MiMo-V2-Flash", 2, BATCH * TOKENS * BF16 * (4 * (192 + 128) + 8 * (192 + 128))),
    # 3 gated-delta-net layers: conv (4 x (2*16*128 + 48*128)) bf16 + ssm (48 x 128 x 128) fp32; 1 full layer
    ("Qwen__Qwen3.5-27B", 4, BATCH * (3 * (4 * (2 * 16 * 128 + 48 * 128) * BF16 + 48 * 128 * 128 * FP32)
                                      + TOKENS * KV * 4 * 256 * BF16)),
    # M E M E M E M *: 4 Mamba-2 layers (conv 4 x (128*64 + 2*8*128) bf16, ssm 128 x 64 x 128 fp32), 1 attention
    ("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 8,
     BATCH * (4 * (4 * (128 * 64 + 2 * 8 * 128) * BF16 + 128 * 64 * 128 * FP32) + TOKENS * KV * 2 * 128 * BF16)),
]


#: Recurrent models run transformers' reference (torch) scan kernels on the CPU: minutes each on a shared box.
#: tools/hf_zoo.py --real measured the same totals (19,415,040 B and 34,222,080 B, tests/data/hf_real.json).
SLOW_ON_CPU = {"Qwen__Qwen3.5-27B", "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8"}


@pytest.mark.parametrize(("name", "layers", "expected"), CASES, ids=[c[0] for c in CASES])
def test_hf_dynamic_on_shrunk_real_config(runner, tmp_path, name: str, layers: int, expected: int) -> None:
    assert kvplan_hf_dynamic_bytes(runner, tmp_path, shrink(shared_config(name), layers)) == expected


@pytest.mark.slow
@pytest.mark.parametrize(("name", "layers", "expected"), CASES, ids=[c[0] for c in CASES])
def test_transformers_caches_the_same_bytes(name: str, layers: int, expected: int) -> None:
    if name in SLOW_ON_CPU and not os.environ.get("KVPLAN_ORACLE_ALL"):
        pytest.skip("reference scan kernels on the CPU take minutes; set KVPLAN_ORACLE_ALL=1 to measure")
    assert measured_cache_bytes(shrink(shared_config(name), layers)) == expected


#: MiniMax-M3 (transformers MiniMaxM3VLTextConfig, fed the Hub's sparse_attention_config): layer 0 full, layers 1-2
#: block-sparse; every layer 4 KV heads x 128, each sparse layer an index key of 128 (MiniMaxM3VLSparseCacheLayer).
MINIMAX_M3 = {"model_type": "minimax_m3_vl_text", "num_hidden_layers": 3, "hidden_size": 256, "vocab_size": 512,
              "intermediate_size": 64, "dense_intermediate_size": 64, "shared_intermediate_size": 64,
              "num_local_experts": 4, "num_experts_per_tok": 2, "dtype": "bfloat16", "eos_token_id": None,
              "bos_token_id": None, "pad_token_id": None,
              "sparse_attention_config": {"sparse_attention_freq": [0, 1, 1], "sparse_index_dim": 128}}
MINIMAX_M3_BYTES = BATCH * TOKENS * BF16 * (3 * KV * 4 * 128 + 2 * 128)


def test_minimax_m3_hf_dynamic(runner, tmp_path) -> None:
    assert kvplan_hf_dynamic_bytes(runner, tmp_path, MINIMAX_M3) == MINIMAX_M3_BYTES


@pytest.mark.slow
def test_transformers_caches_minimax_m3_index_keys() -> None:
    assert measured_cache_bytes(MINIMAX_M3) == MINIMAX_M3_BYTES


#: Gemma 3 without ``sliding_window_pattern`` or ``layer_types``: Gemma3TextConfig's default pattern (6) applies, 5
#: sliding layers then 1 global; 7 layers = layers 0-4 and 6 slide (window 4 of the 6 tokens), layer 5 is global.
GEMMA3_NO_PATTERN = {"model_type": "gemma3_text", "num_hidden_layers": 7, "hidden_size": 256, "vocab_size": 512,
                     "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                     "sliding_window": 4, "dtype": "bfloat16", "eos_token_id": None, "bos_token_id": None,
                     "pad_token_id": None}


def test_gemma3_without_pattern_slides_five_of_six(runner, tmp_path) -> None:
    from kvplan.calc import estimate
    from kvplan.models import parse_config

    geometry = parse_config(GEMMA3_NO_PATTERN, model_id="gemma3")
    assert [s.kind for s in geometry.layers] == ["sliding_window"] * 5 + ["full_attention", "sliding_window"]
    kv_heads, head_dim, window = 2, 64, 4
    ideal = estimate(geometry, batch=BATCH, seq_len=TOKENS, kv_dtype="bf16")
    assert ideal.kv_cache_bytes == BATCH * KV * kv_heads * head_dim * BF16 * (6 * window + 1 * TOKENS)
    # transformers' own figure (measured below) is what --engine hf-dynamic gives
    assert kvplan_hf_dynamic_bytes(runner, tmp_path, GEMMA3_NO_PATTERN) == GEMMA3_NO_PATTERN_HF


#: 6 sliding layers of window 4 and 1 global layer of the 6 tokens; two other planners count all 7 as sliding.
GEMMA3_NO_PATTERN_HF = BATCH * KV * 2 * 64 * BF16 * (6 * 4 + 1 * TOKENS)


@pytest.mark.slow
def test_transformers_gemma3_without_pattern() -> None:
    assert measured_cache_bytes(GEMMA3_NO_PATTERN) == GEMMA3_NO_PATTERN_HF
