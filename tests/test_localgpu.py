"""``--gpu local``: nvidia-smi and rocm-smi output as those tools print it, and this machine's real answer."""

from __future__ import annotations

import pytest

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.gpus import lookup
from kvplan.localgpu import (
    NVIDIA_SMI,
    ROCM_SMI,
    LocalGpu,
    find_local_gpus,
    local_gpu,
    parse_nvidia_smi,
    parse_rocm_smi,
)

MiB = 1024**2

#: `nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits` on two H100 80GB HBM3
#: (81,559 MiB is the memory.total nvidia-smi prints for that card), one busy.
NVIDIA_TWO_H100 = "NVIDIA H100 80GB HBM3, 81559, 81004\nNVIDIA H100 80GB HBM3, 81559, 40123\n"
#: A unified-memory part prints [N/A] for memory: not a figure kvplan can size with.
NVIDIA_UNIFIED = "NVIDIA GB10, [N/A], [N/A]\n"
#: `rocm-smi --showproductname --showmeminfo vram` text (a 32 GiB card; memory lines as rocm-smi prints them).
ROCM_ONE = """
============================ ROCm System Management Interface ============================
====================================== Product Info ======================================
GPU[0]		: Card Series: 		AMD Radeon PRO W7800
GPU[0]		: Card Vendor: 		Advanced Micro Devices, Inc. [AMD/ATI]
================================== Memory Usage (Bytes) ==================================
GPU[0]		: VRAM Total Memory (B): 34342961152
GPU[0]		: VRAM Total Used Memory (B): 7028736
==========================================================================================
"""


def test_nvidia_smi_lines_are_name_total_free_in_mib() -> None:
    gpus = parse_nvidia_smi(NVIDIA_TWO_H100)
    assert [(g.name, g.total_bytes, g.free_bytes) for g in gpus] == [
        ("NVIDIA H100 80GB HBM3", 81559 * MiB, 81004 * MiB), ("NVIDIA H100 80GB HBM3", 81559 * MiB, 40123 * MiB)]
    assert parse_nvidia_smi(NVIDIA_UNIFIED) == []


def test_rocm_smi_text_is_name_total_and_total_less_used() -> None:
    (gpu,) = parse_rocm_smi(ROCM_ONE)
    assert (gpu.name, gpu.total_bytes, gpu.free_bytes) == ("AMD Radeon PRO W7800", 34342961152, 34342961152 - 7028736)


def test_a_catalog_card_from_nvidia_smi_keeps_the_memory_cuda_reports() -> None:
    spec, notes = local_gpu(parse_nvidia_smi(NVIDIA_TWO_H100))
    h100 = lookup("H100-80GB")
    assert (spec.name, spec.memory_bytes, spec.bandwidth_bytes_per_s) == (h100.name, h100.memory_bytes,
                                                                         h100.bandwidth_bytes_per_s)
    assert notes[0] == "--gpu local: NVIDIA H100 80GB HBM3, 79.65 GiB total, 79.11 GiB free (nvidia-smi; GPU 0 of 2)"


def test_an_unknown_card_is_sized_by_the_tool_without_a_bandwidth() -> None:
    spec, notes = local_gpu(parse_rocm_smi(ROCM_ONE))
    assert (spec.name, spec.memory_bytes, spec.bandwidth_bytes_per_s) == ("AMD Radeon PRO W7800", 34342961152, 0)
    assert any("not in kvplan's catalog" in note for note in notes)


def test_busy_memory_is_said() -> None:
    busy = [LocalGpu(name="NVIDIA L40S", total_bytes=46068 * MiB, free_bytes=2000 * MiB, tool="nvidia-smi")]
    _spec, notes = local_gpu(busy)
    assert any("only 1.95 GiB of 44.99 GiB is free now" in note for note in notes)


def test_the_tools_are_tried_in_order() -> None:
    asked = []

    def run(command: tuple[str, ...]) -> tuple[str | None, str]:
        asked.append(command[0])
        return (None, "not found") if command == NVIDIA_SMI else (ROCM_ONE, "")

    gpus = find_local_gpus(run=run, torch_gpus=lambda: ([], "not installed"))
    assert asked == ["nvidia-smi", "rocm-smi"] and gpus[0].tool == "rocm-smi"
    assert ROCM_SMI[0] == "rocm-smi"


def test_no_gpu_names_what_each_tool_said() -> None:
    with pytest.raises(InputError) as err:
        find_local_gpus(run=lambda command: (None, "not found"), torch_gpus=lambda: ([], "not installed"))
    assert err.value.message == ("--gpu local: this machine shows no GPU (nvidia-smi not found; torch not installed; "
                                 "rocm-smi not found)")


def test_this_machine_without_a_gpu_is_exit_2(runner) -> None:
    """The real path, no stand-in: run only where this machine has no GPU (the CI and development machines)."""
    try:
        find_local_gpus()
    except InputError:
        pass
    else:
        pytest.skip("this machine has a GPU")
    result = runner.invoke(app, ["capacity", "Qwen/Qwen3-8B", "--gpu", "local"])
    assert result.exit_code == 2, result.output
    assert "Error: --gpu local: this machine shows no GPU (nvidia-smi " in result.stderr
    assert "--gpu H100" in result.stderr
