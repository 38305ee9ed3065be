"""Quantized KV dtypes: real block bytes, group scales and zero points."""

from __future__ import annotations

import pytest

from kvplan.dtypes import GGML_CACHE_TYPES, grouped_dtype, lookup_dtype
from kvplan.errors import InputError

ROW = 8 * 128  # NOTE: one token's K row of an 8-KV-head, head-dim-128 layer


@pytest.mark.parametrize(
    ("name", "block_bytes"),
    [("q8_0", 34), ("q4_0", 18), ("q4_1", 20), ("q5_0", 22), ("q5_1", 24), ("iq4_nl", 18)],
)
def test_ggml_types_cost_their_block_bytes_per_32_values(name: str, block_bytes: int) -> None:
    dtype = lookup_dtype(name)
    assert dtype.scheme == "ggml"
    assert dtype.bytes_for(ROW) == ROW // 32 * block_bytes
    assert name == "q8_0" or dtype.bytes_for(ROW) < ROW  # NOTE: q8_0 is 1.0625 bytes per value, not 1


def test_q8_0_is_not_one_byte_per_value() -> None:
    assert lookup_dtype("q8_0").bytes_for(ROW) == ROW * 34 // 32 == 1088
    assert lookup_dtype("q8_0").bits_per_element == 8 * 34 / 32


@pytest.mark.parametrize(
    ("name", "bits", "group"), [("int8", 8, 64), ("int4", 4, 64), ("int2", 2, 32), ("int4", 4, 128)]
)
def test_grouped_ints_add_a_16_bit_scale_and_zero_point_per_group(name: str, bits: int, group: int) -> None:
    dtype = lookup_dtype(name, group_size=group)
    assert dtype.scheme == "grouped"
    assert dtype.bytes_for(ROW) == ROW // group * (group * bits // 8 + 2 + 2)  # values + fp16 scale + fp16 zero


def test_int4_default_group_is_64_and_costs_4_5_bits() -> None:
    dtype = lookup_dtype("int4")
    assert dtype.block_elems == 64
    assert dtype.bits_per_element == (64 * 4 + 4 * 8) / 64


def test_nvfp4_is_half_a_byte_plus_one_fp8_scale_per_16_values() -> None:
    dtype = lookup_dtype("nvfp4")
    assert dtype.bytes_for(128) == 128 // 2 + 128 // 16  # vLLM: head_size/2 + head_size/16


@pytest.mark.parametrize(("alias", "name"), [("fp8", "fp8_e4m3"), ("e5m2", "fp8_e5m2"), ("float8_e5m2", "fp8_e5m2"),
                                             ("f16", "fp16"), ("fp4", "nvfp4")])
def test_aliases(alias: str, name: str) -> None:
    assert lookup_dtype(alias).name == name


def test_fp8_variants_are_one_byte() -> None:
    assert lookup_dtype("fp8_e4m3").bytes_for(ROW) == lookup_dtype("fp8_e5m2").bytes_for(ROW) == ROW


def test_group_size_must_pack_into_bytes() -> None:
    with pytest.raises(InputError, match="whole bytes"):
        grouped_dtype("int2", 3)
    with pytest.raises(InputError, match="positive"):
        lookup_dtype("int4", group_size=0)


def test_unknown_dtype_lists_the_new_types() -> None:
    with pytest.raises(InputError) as info:
        lookup_dtype("int3")
    assert "int4" in (info.value.hint or "") and "nvfp4" in (info.value.hint or "")


def test_llama_cpp_cache_types_all_resolve() -> None:
    assert [lookup_dtype(name).name for name in GGML_CACHE_TYPES] == list(GGML_CACHE_TYPES)


@pytest.mark.parametrize(("group", "groups"), [(96, 11), (1024, 1), (2048, 1)])
def test_a_partial_last_group_costs_its_scale_not_a_whole_group(group: int, groups: int) -> None:
    # NOTE: 1024 values at 4 bits are 512 bytes whatever the group size; each started group adds
    # an fp16 scale and an fp16 zero point (cdiv(1024, 96) = 11, cdiv(1024, 2048) = 1).
    assert lookup_dtype("int4", group_size=group).bytes_for(ROW) == ROW * 4 // 8 + groups * (2 + 2)


@pytest.mark.parametrize("torch_dtype", ["int4", "int8", "uint8", "fp4", "float8_e4m3fn", "float8_e5m2", "mxfp4"])
@pytest.mark.parametrize("engine", ["ideal", "vllm", "sglang", "trtllm", "hf-dynamic"])
def test_a_weight_storage_torch_dtype_is_not_the_kv_dtype(torch_dtype: str, engine: str) -> None:
    """issue 26: a quantised checkpoint's ``torch_dtype`` names how weights are stored; ``--kv-dtype auto`` keeps
    K/V in the 16-bit type the model runs in (vLLM's ``_resolve_auto_dtype`` falls back to bfloat16)."""
    from kvplan.adjust import Deployment
    from kvplan.calc import estimate
    from kvplan.models import parse_config

    layers, kv_heads, head_dim, tokens, bf16 = 2, 4, 64, 128, 2  # 128: whole blocks in every engine
    config = {"model_type": "llama", "num_hidden_layers": layers, "hidden_size": 256, "num_attention_heads": kv_heads,
              "torch_dtype": torch_dtype}
    est = estimate(parse_config(config, model_id="q"), seq_len=tokens, kv_dtype="auto",
                   deployment=Deployment(engine=engine))
    assert est.kv_dtype.name == "bf16"
    assert est.kv_cache_bytes == 2 * layers * kv_heads * head_dim * tokens * bf16
    assert "names the weights' storage type" in est.kv_dtype_source


def test_an_unknown_config_dtype_is_still_refused() -> None:
    from kvplan.calc import estimate
    from kvplan.errors import ConfigError
    from kvplan.models import parse_config

    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
              "torch_dtype": "complex64"}
    with pytest.raises(ConfigError, match="config dtype 'complex64' is not a known dtype"):
        estimate(parse_config(config, model_id="q"), seq_len=10, kv_dtype="auto")
