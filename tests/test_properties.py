"""Hypothesis properties of the ideal estimate."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc import estimate
from kvplan.models import parse_config

from conftest import make_config

tokens = st.integers(min_value=1, max_value=1 << 20)
batches = st.integers(min_value=1, max_value=256)

LLAMA = parse_config(make_config(num_key_value_heads=8), model_id="llama")
GEMMA3 = parse_config(
    {"model_type": "gemma3_text", "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
     "head_dim": 256, "sliding_window": 1024, "torch_dtype": "bfloat16"},
    model_id="gemma3",
)
JAMBA = parse_config(
    {"model_type": "jamba", "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
     "hidden_size": 4096, "torch_dtype": "bfloat16"},
    model_id="jamba",
)
MODELS = st.sampled_from([LLAMA, GEMMA3, JAMBA])


@settings(max_examples=60, deadline=None)
@given(model=MODELS, t=tokens, extra=st.integers(min_value=0, max_value=1 << 16), b=batches)
def test_monotone_in_length(model, t: int, extra: int, b: int) -> None:
    assert estimate(model, batch=b, seq_len=t).kv_cache_bytes <= estimate(model, batch=b, seq_len=t + extra).kv_cache_bytes


@settings(max_examples=60, deadline=None)
@given(model=MODELS, t=tokens, b=batches)
def test_linear_in_batch(model, t: int, b: int) -> None:
    assert estimate(model, batch=b, seq_len=t).kv_cache_bytes == b * estimate(model, batch=1, seq_len=t).kv_cache_bytes


@settings(max_examples=60, deadline=None)
@given(t=tokens, k=st.integers(min_value=1, max_value=64))
def test_full_attention_linear_in_tokens(t: int, k: int) -> None:
    assert estimate(LLAMA, seq_len=k * t).kv_cache_bytes == k * estimate(LLAMA, seq_len=t).kv_cache_bytes


@settings(max_examples=60, deadline=None)
@given(t=st.integers(min_value=1024, max_value=1 << 20))
def test_sliding_layers_flat_past_window(t: int) -> None:
    def sliding_bytes(n: int) -> int:
        return sum(g.total_bytes for g in estimate(GEMMA3, seq_len=n).groups if g.spec.kind == "sliding_window")

    assert sliding_bytes(t) == sliding_bytes(1024)


@settings(max_examples=60, deadline=None)
@given(t=tokens)
def test_windows_never_exceed_full(t: int) -> None:
    as_full = parse_config(
        {"model_type": "gemma3_text", "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
         "head_dim": 256, "sliding_window": 1024, "torch_dtype": "bfloat16",
         "layer_types": ["full_attention"] * 12},
        model_id="g",
    )
    assert estimate(GEMMA3, seq_len=t).kv_cache_bytes <= estimate(as_full, seq_len=t).kv_cache_bytes


@settings(max_examples=40, deadline=None)
@given(t=tokens, u=tokens)
def test_state_layers_constant(t: int, u: int) -> None:
    assert estimate(JAMBA, seq_len=t).state_bytes == estimate(JAMBA, seq_len=u).state_bytes
