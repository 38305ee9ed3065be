"""The GPU catalog: names, aliases, did-you-mean, published figures."""

from __future__ import annotations

import json
import re

import pytest

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.gpus import load_catalog, lookup, normalise_name, parse_bandwidth
from kvplan.units import GiB

GB_S = 10**9


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100", "H100-SXM-80GB"), ("H100-80GB", "H100-SXM-80GB"), ("h100-sxm", "H100-SXM-80GB"),
        ("h100 pcie", "H100-PCIe-80GB"), ("H100-NVL", "H100-NVL-94GB"), ("H200", "H200-141GB"),
        ("b200", "B200-180GB"), ("GB200", "GB200-186GB"), ("A100-40GB", "A100-40GB"), ("a100", "A100-SXM-80GB"),
        ("A100-80GB", "A100-SXM-80GB"), ("L40S", "L40S"), ("l4", "L4"), ("A10G", "A10G"), ("A10", "A10"),
        ("RTX4090", "RTX-4090"), ("rtx-4090", "RTX-4090"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("RTX 3090", "RTX-3090"), ("rtx_5090", "RTX-5090"), ("T4", "T4"), ("V100", "V100-16GB"),
        ("V100-32GB", "V100-32GB"), ("MI300X", "MI300X"), ("AMD Instinct MI325X", "MI325X"),
        ("M2 Ultra", "M2-Ultra-192GB"), ("m4-max", "M4-Max-128GB"),
    ],
)
def test_lookup_names_and_aliases(name: str, expected: str) -> None:
    assert lookup(name).name == expected


@pytest.mark.parametrize(
    ("name", "memory_gib", "bandwidth_gb_s"),
    # memory as torch.cuda reports it (marketed 80GB -> 79.11 GiB ...), bandwidth as published
    [("H100", 79.11, 3350), ("H200", 139.80, 4800), ("B200", 178.35, 8000), ("A100-40GB", 39.59, 1555),
     ("A100-80GB", 79.15, 2039), ("RTX-4090", 23.65, 1008), ("RTX-3090", 23.58, 936), ("RTX-5090", 31.36, 1792),
     ("L4", 22.05, 300), ("L40S", 44.39, 864), ("A10G", 22.19, 600), ("MI300X", 191.98, 5300), ("T4", 14.74, 320),
     ("V100", 15.77, 900)],
)
def test_reported_memory_and_published_bandwidth(name: str, memory_gib: float, bandwidth_gb_s: int) -> None:
    gpu = lookup(name)
    assert gpu.memory_bytes == round(memory_gib * GiB)
    assert gpu.bandwidth_bytes_per_s == bandwidth_gb_s * GB_S


def test_reported_memory_is_below_the_marketed_size() -> None:
    """Every NVIDIA/AMD card shows less than its marketed capacity read as GiB; Apple entries are the
    75% of unified memory Metal lets the GPU wire."""
    for gpu in load_catalog():
        marketed = int(re.search(r"(\d+)GB", gpu.name).group(1)) if re.search(r"(\d+)GB", gpu.name) else None
        assert gpu.memory_source, gpu.name
        if gpu.vendor == "apple":
            assert marketed is not None and gpu.memory_bytes == marketed * GiB * 3 // 4, gpu.name
        elif marketed is not None:
            assert 0.97 * marketed * GiB < gpu.memory_bytes < marketed * GiB, gpu.name


def test_typo_suggests_close_names() -> None:
    with pytest.raises(InputError) as info:
        lookup("H10")
    assert "H100-SXM-80GB" in (info.value.hint or "")
    with pytest.raises(InputError) as info:
        lookup("rtx 4080")
    assert "RTX-4090" in (info.value.hint or "") and "--gpu-mem" in (info.value.hint or "")


def test_every_alias_names_one_gpu_and_every_entry_has_a_source() -> None:
    seen: dict[str, str] = {}
    for gpu in load_catalog():
        assert gpu.memory_bytes > 0 and gpu.bandwidth_bytes_per_s > 0 and gpu.source
        for name in (gpu.name, *gpu.aliases):
            key = normalise_name(name)
            assert seen.setdefault(key, gpu.name) == gpu.name, name


def test_parse_bandwidth() -> None:
    assert parse_bandwidth("3.35TB/s") == 3350 * GB_S
    assert parse_bandwidth("936 GB/s") == 936 * GB_S
    assert parse_bandwidth("1TiB/s") == 1024**4
    with pytest.raises(InputError):
        parse_bandwidth("fast")


def test_gpus_command_json(runner) -> None:
    result = runner.invoke(app, ["gpus", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["gpus"]}
    assert rows["H200-141GB"]["memory_bytes"] == round(139.80 * GiB)  # torch's total for an H200 141GB
    assert "139.80" in rows["H200-141GB"]["memory_source"]
    assert "RTX4090" in rows["RTX-4090"]["aliases"]
