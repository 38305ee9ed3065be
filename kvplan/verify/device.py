"""This machine's first CUDA device as torch sees it (``--gpu local`` asks here after nvidia-smi found nothing)."""

from __future__ import annotations

import importlib.util


def cuda_memory() -> tuple[tuple[str, int, int] | None, str]:
    """((name, free bytes, total bytes) of CUDA device 0 by ``torch.cuda.mem_get_info``, "") or (None, why not)."""
    if importlib.util.find_spec("torch") is None:
        return None, "not installed"
    import torch

    if not torch.cuda.is_available():
        return None, "installed, but CUDA is not available"
    free, total = torch.cuda.mem_get_info(0)
    return (torch.cuda.get_device_name(0), int(free), int(total)), ""
