"""OpenAI gpt-oss: sliding and full layers, attention sinks, MoE (gpt_oss.py)."""

from __future__ import annotations

from geometry_check import BOTH, bundled, geometry_of, kinds, per_token

from kvplan.calc import estimate
from kvplan.models import count_weights

from conftest import BF16, KV


@BOTH
def test_gpt_oss_layer_types(bundled: bool) -> None:
    geometry = geometry_of("openai/gpt-oss-20b" if bundled else "openai__gpt-oss-20b", bundled=bundled)
    assert kinds(geometry) == ["sliding_window", "full_attention"] * 12
    assert geometry.layers[0].sliding_window == 128
    est = estimate(geometry, seq_len=131072, kv_dtype="bf16")
    assert est.kv_cache_bytes == (12 * 128 + 12 * 131072) * KV * 8 * 64 * BF16


def test_gpt_oss_120b_per_token() -> None:
    geometry = geometry_of("openai__gpt-oss-120b")
    assert per_token(geometry) == 36 * KV * 8 * 64 * BF16 == 73728


def test_mxfp4_gpt_oss_experts_only() -> None:
    w = count_weights(bundled("openai/gpt-oss-20b"), model_id="oss")
    experts = next(p for p in w.parts if p.name == "experts")
    values = 24 * 32 * 3 * 2880 * 2880  # layers * experts * (gate, up, down) * h * I
    biases = 24 * 32 * (2 * 2880 + 2880)
    assert experts.bytes == values // 2 + values // 32 + biases * 2  # 4-bit values + e8m0 scale per 32 + bf16 biases
    attention = next(p for p in w.parts if p.name == "attention")
    assert attention.bytes == attention.parameters * 2  # self_attn is not converted
    assert 13.7e9 < w.bytes < 13.8e9  # the published checkpoint is 13.8 GB
