"""The weight count of a config (weights.py): every expert resident, towers reported apart."""

from __future__ import annotations

from geometry_check import bundled

from kvplan.models import count_weights

from conftest import shared_config


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


def test_zero_shared_expert_and_zero_mtp_layers_are_valid() -> None:
    # Qwen3-Coder-480B: shared_expert_intermediate_size 0 = no shared expert (Qwen3MoeSparseMoeBlock has none).
    coder = count_weights(shared_config("Qwen__Qwen3-Coder-480B-A35B-Instruct"), model_id="coder")
    assert "shared_experts" not in {p.name for p in coder.parts}
    assert coder.num_experts == 160 and coder.experts_per_token == 8
    # Kimi-K2.5: num_nextn_predict_layers 0 = no MTP module, so no MTP note.
    kimi = count_weights(shared_config("moonshotai__Kimi-K2.5"), model_id="kimi")
    assert not any("multi-token-prediction" in note for note in kimi.notes)
    assert kimi.vision_parameters > 0
