"""``--gpu local``: this machine's GPU (name, total and free memory), read as the tools the user has read it.

Tried in order: ``nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits`` (MiB),
``torch.cuda.mem_get_info`` when torch is installed and sees CUDA (the figure vLLM's budget starts from), and
ROCm's ``rocm-smi --showproductname --showmeminfo vram`` (bytes). No GPU is an :class:`InputError` (exit 2) that
says what each tool answered. The parsers are pure; :func:`read_local_gpu` runs the tools.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.errors import InputError
from kvplan.gpus import GpuSpec, lookup
from kvplan.units import format_bytes

MiB = 1024**2

#: Seconds one tool may take before kvplan gives up on it.
TOOL_TIMEOUT_S = 20

NVIDIA_SMI = ("nvidia-smi", "--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits")
ROCM_SMI = ("rocm-smi", "--showproductname", "--showmeminfo", "vram")


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalGpu:
    name: str
    total_bytes: int
    free_bytes: int | None
    tool: str
    """The tool that read it (``nvidia-smi``, ``torch.cuda.mem_get_info``, ``rocm-smi``)."""


def parse_nvidia_smi(text: str) -> list[LocalGpu]:
    """``NVIDIA H100 80GB HBM3, 81559, 81004`` lines (name, memory.total and memory.free in MiB); a GPU whose
    memory reads ``[N/A]`` (unified-memory parts) is left out."""
    gpus = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.rsplit(",", 2)]
        if len(parts) == 3 and parts[0] and parts[1].isdigit():
            free = int(parts[2]) * MiB if parts[2].isdigit() else None
            gpus.append(LocalGpu(name=parts[0], total_bytes=int(parts[1]) * MiB, free_bytes=free, tool="nvidia-smi"))
    return gpus


_ROCM_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.+?)\s*:\s*(.+?)\s*$")


def parse_rocm_smi(text: str) -> list[LocalGpu]:
    """rocm-smi's text: ``GPU[0] : Card Series: ...``, ``GPU[0] : VRAM Total Memory (B): 34342961152`` and
    ``GPU[0] : VRAM Total Used Memory (B): 7028736`` lines, one GPU per index."""
    fields: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        match = _ROCM_LINE.match(line.strip())
        if match:
            fields.setdefault(int(match[1]), {})[match[2].lower()] = match[3]
    gpus = []
    for index, values in sorted(fields.items()):
        total, used = values.get("vram total memory (b)", ""), values.get("vram total used memory (b)", "")
        if not total.isdigit():
            continue
        name = values.get("card series") or values.get("card model") or f"AMD GPU {index}"
        gpus.append(LocalGpu(name=name, total_bytes=int(total), tool="rocm-smi",
                             free_bytes=int(total) - int(used) if used.isdigit() else None))
    return gpus


def _run(command: tuple[str, ...]) -> tuple[str | None, str]:
    """(stdout, why not): stdout of a tool that ran and exited 0, else None and what happened."""
    if shutil.which(command[0]) is None:
        return None, "not found"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"failed: {exc}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return None, f"exit {done.returncode}" + (f": {said[0][:120]}" if said else "")
    return done.stdout, ""


def _torch_gpus() -> tuple[list[LocalGpu], str]:
    from kvplan.verify.device import cuda_memory  # NOTE: torch is imported under kvplan.verify only, and only here

    found, why = cuda_memory()
    if found is None:
        return [], why
    name, free, total = found
    return [LocalGpu(name=name, total_bytes=total, free_bytes=free, tool="torch.cuda.mem_get_info")], ""


def find_local_gpus(run: Callable[[tuple[str, ...]], tuple[str | None, str]] = _run,
                    torch_gpus: Callable[[], tuple[list[LocalGpu], str]] = _torch_gpus) -> list[LocalGpu]:
    """This machine's GPUs from the first tool that shows any; InputError (exit 2) naming each tool's answer."""
    tried = []
    text, why = run(NVIDIA_SMI)
    gpus = parse_nvidia_smi(text) if text is not None else []
    if gpus:
        return gpus
    tried.append(f"nvidia-smi {why or 'listed no GPU with its memory'}")
    gpus, why = torch_gpus()
    if gpus:
        return gpus
    tried.append(f"torch {why}")
    text, why = run(ROCM_SMI)
    gpus = parse_rocm_smi(text) if text is not None else []
    if gpus:
        return gpus
    tried.append(f"rocm-smi {why or 'listed no GPU with its memory'}")
    raise InputError(f"--gpu local: this machine shows no GPU ({'; '.join(tried)})",
                     "name the GPU the model will run on, e.g. --gpu H100 (kvplan gpus lists them), or give its "
                     "memory: --gpu-mem 80GiB")


def local_gpu(gpus: list[LocalGpu]) -> tuple[GpuSpec, list[str]]:
    """The first GPU as a :class:`GpuSpec`, and notes: what was read, the catalog entry whose bandwidth it takes,
    free memory when other processes hold some."""
    gpu = gpus[0]
    notes = [f"--gpu local: {gpu.name}, {format_bytes(gpu.total_bytes)} total"
             + (f", {format_bytes(gpu.free_bytes)} free" if gpu.free_bytes is not None else "")
             + f" ({gpu.tool}" + (f"; GPU 0 of {len(gpus)}" if len(gpus) > 1 else "") + ")"]
    try:
        known: GpuSpec | None = lookup(gpu.name)
    except InputError:
        known = None
    if known is not None and gpu.tool == "nvidia-smi":
        # NOTE: nvidia-smi's memory.total counts memory CUDA never hands out (H100 80GB: 81,559 MiB, where
        # torch.cuda.mem_get_info and vLLM see about 79.1 GiB); the catalog keeps the CUDA figure.
        spec = replace(known, memory_source=f"{known.memory_source} (catalog {known.name}; nvidia-smi says "
                       f"{format_bytes(gpu.total_bytes)})")
        notes.append(f"--gpu local: sized as the catalog's {known.name}, whose memory is what CUDA reports")
    elif known is not None:
        spec = replace(known, memory_bytes=gpu.total_bytes, memory_source=gpu.tool)
    else:
        spec = GpuSpec(name=gpu.name, memory_bytes=gpu.total_bytes, bandwidth_bytes_per_s=0, memory_source=gpu.tool)
        notes.append(f"--gpu local: {gpu.name} is not in kvplan's catalog, so no bandwidth (no decode floor; "
                     "--gpu-bandwidth gives one)")
    if gpu.free_bytes is not None and gpu.free_bytes < gpu.total_bytes * 9 // 10:
        notes.append(f"--gpu local: only {format_bytes(gpu.free_bytes)} of {format_bytes(gpu.total_bytes)} is free "
                     "now; the answer assumes the whole GPU (vLLM refuses to start when free memory is below "
                     "--gpu-memory-utilization x total: vllm/v1/worker/gpu_worker.py)")
    return spec, notes


def read_local_gpu() -> tuple[GpuSpec, list[str]]:
    """``--gpu local``: this machine's first GPU and notes on what was read."""
    return local_gpu(find_local_gpus())
