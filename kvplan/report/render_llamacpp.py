"""The table of `kvplan verify --engine llama.cpp`: each cache llama.cpp made beside kvplan's prediction."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from kvplan.report.layout import Fit, grid
from kvplan.report.layout import n as _n

#: (row label, report key without measured_/predicted_, K/V label swap for recurrent caches).
ROWS = (("cells", "cells"), ("layers", "layers"), ("seqs", "seqs"), ("streams", "streams"),
        ("{k} bytes", "k_bytes"), ("{v} bytes", "v_bytes"), ("total bytes", "bytes"), ("buffer bytes", "buffer_bytes"))
#: A DeepSeek-V4 compressor state's rows, as llama_dsv4_comp_state's line names them.
STATE_ROWS = (("rows", "cells"), ("layers", "layers"), ("streams", "seqs"), ("rs_seq", "streams"),
              ("kv bytes", "k_bytes"), ("score bytes", "v_bytes"), ("total bytes", "bytes"),
              ("buffer bytes", "buffer_bytes"))


def verify_llamacpp_table(report: dict[str, Any]) -> Group:
    """PASS/FAIL first, then per cache: llama.cpp's figures (its log, or its tensors) against kvplan's."""
    model, inputs, result = report["model"], report["inputs"], report["verify"]
    passed = result["passed"]
    verdict = Text.assemble(
        Text("PASS", style="green") if passed else Text("FAIL", style="bold red"),
        f": {model['id']} in llama.cpp (llama-cpp-python {result['llama_cpp_python'] or '?'}), measured by "
        f"{inputs['measure']}",
    )
    # NOTE: the flags on a line of their own, so a narrow terminal wraps between words of the verdict, not a flag.
    flags = (f"flags: -c {inputs['n_ctx']} -np {inputs['parallel']} -ctk {inputs['cache_type_k']} "
             f"-ctv {inputs['cache_type_v']} -fa {inputs['flash_attn']}" + (" -kvu" if inputs["kv_unified"] else "")
             + (f" -ub {inputs['ubatch_size']}" if inputs.get("ubatch_size") is not None else "")
             + (f" -ngl {inputs['n_gpu_layers']}" if inputs.get("n_gpu_layers") else "")
             + (" --swa-full" if inputs["swa_full"] else ""))
    lines: list[RenderableType] = [verdict, Text(flags)]
    if result["refused"] or result["predicted_refusal"]:
        lines.append(Text(f"llama.cpp: {result['refused'] or 'made the context'}"))
        lines.append(Text(f"kvplan: {result['predicted_refusal'] or 'expects the context'}"))
    for cache in report["caches"]:
        what = "compressor state" if cache["kind"] == "state" else "cache"
        lines.append(Text(f"{cache['name']} {what} ({cache['k_type']}/{cache['v_type']}): "
                          + ("match" if cache["match"] else "MISMATCH"),
                          style="bold" if cache["match"] else "bold red"))
        lines.append(_fit(cache))
    if result["reason"]:
        lines.append(Text(f"why: {result['reason']}"))
    return Group(*lines)


def _fit(cache: dict[str, Any]) -> Fit:
    """The cache's grid, or one line per figure where the grid does not fit the terminal."""
    return Fit(lambda: _cache_grid(cache), lambda: _cache_lines(cache))


def _rows(cache: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return STATE_ROWS if cache["kind"] == "state" else ROWS


def _labels(cache: dict[str, Any]) -> tuple[str, str]:
    return ("R", "S") if cache["kind"] == "recurrent" else ("K", "V")


def _logged(cache: dict[str, Any], key: str) -> str:
    """The measured figure, or what the log printed (MiB) where bytes were not measured."""
    value = cache.get(f"measured_{key}")
    if value is not None:
        return _n(value)
    mib = {"k_bytes": "logged_k_mib", "v_bytes": "logged_v_mib", "bytes": "logged_mib",
           "buffer_bytes": "logged_buffer_mib"}.get(key)
    if mib and cache.get(mib) is not None:
        return f"{cache[mib]} MiB"
    return "-"


def _predicted(cache: dict[str, Any], key: str) -> str:
    value = cache.get(f"predicted_{key}")
    if value is None:
        return "-"
    if cache.get(f"measured_{key}") is None and key in ("k_bytes", "v_bytes", "bytes", "buffer_bytes"):
        return f"{_n(value)} ({value / 1048576:.2f} MiB)"
    return _n(value)


def _cache_grid(cache: dict[str, Any]) -> RenderableType:
    k, v = _labels(cache)
    table = grid(("", "left"), ("llama.cpp", "right"), ("kvplan", "right"))
    for label, key in _rows(cache):
        table.add_row(label.format(k=k, v=v), _logged(cache, key), _predicted(cache, key))
    return table


def _cache_lines(cache: dict[str, Any]) -> RenderableType:
    k, v = _labels(cache)
    return Group(*(Text(f"{label.format(k=k, v=v)}: llama.cpp {_logged(cache, key)}, kvplan {_predicted(cache, key)}")
                   for label, key in _rows(cache)))
