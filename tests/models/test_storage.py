"""How a checkpoint stores its weights (storage.py): dtypes, quantisation layouts, the Hub's safetensors
metadata, --weights-bytes, and the dtype an engine serves them in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from geometry_check import bundled

from kvplan.engines import get_engine
from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.models import count_weights, resolve_weights, serve_weights, weights_from_safetensors, with_exact_bytes

from conftest import make_config


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


def nvfp4(i: int, o: int) -> int:
    return i * o // 2 + (i // 16) * o  # 4-bit e2m1 values, one fp8 scale per 16 inputs


def fp8(i: int, o: int) -> int:
    return i * o + o * 4  # 8-bit values, a float32 scale (counted per output row)


def test_modelopt_nvfp4_fp8_and_config_groups_only() -> None:
    plain = count_weights(small_llama(), model_id="t")
    mlp_nvfp4 = 2 * (2 * nvfp4(256, 512) + nvfp4(512, 256))  # 2 layers: gate, up, down
    for quant in ({"quant_method": "modelopt", "quant_algo": "NVFP4"},
                  {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4"},
                  # an export that names only its config groups: 4-bit float weights = NVFP4
                  {"quant_method": "modelopt", "config_groups": {"group_0": {
                      "weights": {"num_bits": 4, "type": "float", "group_size": 16}, "targets": ["Linear"]}}}):
        weights = count_weights(small_llama(**quant), model_id="t")
        assert next(p for p in weights.parts if p.name == "mlp").bytes == mlp_nvfp4, quant
        assert weights.parameters == plain.parameters
    block = count_weights(small_llama(quant_method="modelopt", quant_algo="FP8_PB_WO"), model_id="t")
    assert next(p for p in block.parts if p.name == "mlp").bytes == 2 * 3 * (256 * 512 + (512 // 128) * (256 // 128) * 4)  # fp32 scale per 128x128
    per_tensor = count_weights(small_llama(quant_method="modelopt", quant_algo="FP8"), model_id="t")
    assert next(p for p in per_tensor.parts if p.name == "mlp").bytes == 2 * (2 * fp8(256, 512) + fp8(512, 256))
    with pytest.raises(ConfigError, match="not a ModelOpt format"):
        count_weights(small_llama(quant_method="modelopt", quant_algo="W9A9"), model_id="t")


def test_modelopt_mixed_precision_formats_by_module() -> None:
    # MIXED_PRECISION (nvidia/Qwen3.6-*-NVFP4's form): each module's format in quantized_layers
    layers = {f"model.layers.{i}.mlp.{m}": {"quant_algo": "NVFP4", "group_size": 16}
              for i in range(2) for m in ("gate_proj", "up_proj", "down_proj")}
    layers |= {f"model.layers.{i}.self_attn.{m}_proj": {"quant_algo": "FP8"} for i in range(2) for m in "qkvo"}
    layers["mtp.layers.0.mlp.experts"] = {"quant_algo": "FP8_PB_WO"}  # MTP: not counted, so not voted
    weights = count_weights(small_llama(quant_method="modelopt", quant_algo="MIXED_PRECISION",
                                        ignore=["lm_head", "mtp*"], quantized_layers=layers), model_id="t")
    parts = {p.name: p for p in weights.parts}
    assert parts["mlp"].bytes == 2 * (2 * nvfp4(256, 512) + nvfp4(512, 256))
    assert parts["attention"].bytes == 2 * 4 * fp8(256, 256)  # q, k, v, o of 2 layers
    assert parts["lm_head"].bytes == 1000 * 256 * 2  # not listed: float16
    assert any("ModelOpt mixed precision" in note for note in weights.notes)
    # the same checkpoint described by config_groups' targets
    groups = {"group_0": {"weights": {"num_bits": 8, "type": "float"},
                          "targets": [k for k in layers if "self_attn" in k]},
              "group_1": {"weights": {"num_bits": 4, "type": "float", "group_size": 16},
                          "targets": [k for k in layers if ".mlp." in k and not k.startswith("mtp")]}}
    by_groups = count_weights(small_llama(quant_method="modelopt", quant_algo="MIXED_PRECISION", config_groups=groups),
                              model_id="t")
    assert by_groups.bytes == weights.bytes
