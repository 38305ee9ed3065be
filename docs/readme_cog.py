"""Helpers for the cog blocks in README.md (run `cog -r README.md`; CI runs `cog --check`)."""

from __future__ import annotations

import os
import subprocess
import sys


def run(*args: str, width: int = 80, stderr: bool = True) -> str:
    """The real output of `kvplan ARGS`, at a pinned terminal width, offline."""
    env = {**os.environ, "COLUMNS": str(width), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    result = subprocess.run(
        [sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env, check=False
    )
    text = result.stdout + (result.stderr if stderr else "")
    return "\n".join(line.rstrip() for line in text.splitlines())


def block(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text}\n```"


def architectures_table() -> str:
    import json
    from pathlib import Path

    from kvplan.models import PARSERS

    data = Path(__file__).resolve().parents[1] / "tests" / "data"
    counted = {t for t, r in json.loads((data / "hf_zoo_weights.json").read_text())["records"].items()
               if "parameters" in r}
    misses = set(json.loads((data / "hf_zoo_weights_misses.json").read_text()))
    rows = ["| family | model_type values | weights exact | what is special |", "|---|---|---|---|"]
    for parser in sorted(PARSERS, key=lambda p: p.family):
        doc = (parser.__doc__ or "").strip().splitlines()
        special = doc[0] if doc else "standard K/V per layer"
        measured = [t for t in parser.model_types if t in counted]
        exact = [t for t in measured if t not in misses]
        weights = f"{len(exact)} of {len(measured)}" if measured else "-"
        rows.append(f"| {parser.family} | {', '.join(f'`{t}`' for t in parser.model_types)} | {weights} | {special} |")
    return "\n".join(rows)


def models_table() -> str:
    from kvplan.catalog import models_report
    from kvplan.units import format_bytes

    rows = [
        "| model (Hub id) | alias | layers | KV heads × head dim | max context | KV per token, full attention "
        "| KV per token at max context |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in models_report()["models"]:
        heads = "-" if row["num_kv_heads"] is None else (
            f"latent {row['head_dim']}" if "mla" in row["layers"] else f"{row['num_kv_heads']} × {row['head_dim']}"
        )
        per_token = format_bytes(row["bytes_per_token"]) if row["bytes_per_token"] else "-"
        if row["state_bytes_per_seq"]:
            per_token += f" + {format_bytes(row['state_bytes_per_seq'])}/seq state"
        ctx = "-" if row["max_context_len"] is None else f"{row['max_context_len']:,}"
        at_max = row["bytes_per_token_at_max_context"]
        at_max_text = "-" if at_max is None else format_bytes(at_max)
        rows.append(
            f"| `{row['id']}` | `{row['alias']}` | {row['layers']} | {heads} | {ctx} | {per_token} ({row['kv_dtype']}) "
            f"| {at_max_text} |"
        )
    return "\n".join(rows)


def help_of(command: str) -> str:
    return block(run(command, "--help", width=80, stderr=False))


def command_names() -> list[str]:
    from kvplan.cli import app

    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    first = [n for n in ("estimate", "models") if n in names]
    return first + sorted(n for n in names if n not in first)
