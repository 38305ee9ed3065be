"""AI21 Jamba: Mamba and attention layers, MoE MLPs (jamba.py)."""

from __future__ import annotations

from geometry_check import bundled, geometry_of, kinds

from kvplan.calc import estimate
from kvplan.models import count_weights

from conftest import BF16, FP16, KV


def test_jamba_bundled() -> None:
    geometry = geometry_of("ai21labs/Jamba-v0.1", bundled=True)
    k = kinds(geometry)
    assert [i for i, kind in enumerate(k) if kind == "full_attention"] == [4, 12, 20, 28]
    d_inner, d_conv, d_state = 2 * 4096, 4, 16
    est = estimate(geometry, seq_len=1, kv_dtype="bf16")
    # From the config: 16,384 B/token and about 8.3 MiB of Mamba state per sequence.
    assert est.bytes_per_token == 4 * KV * 8 * 128 * BF16 == 16384
    assert est.state_bytes == 28 * ((d_conv - 1) * d_inner + d_inner * d_state) * FP16


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
