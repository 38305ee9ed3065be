"""Compare kvplan's hf-dynamic profile with what transformers really cached (records of tools/hf_zoo.py).

A record holds a shrunk config, the generate() it ran (batch B, prompt P, N new tokens, dtype) and
the bytes of every tensor the returned cache held. kvplan is asked the same question through its
CLI, so this keeps working whatever the package layout becomes: only ``kvplan_hf_dynamic`` talks to
kvplan.

    python tests/hf_oracle.py zoo    # rewrite tests/data/hf_zoo_misses.json from the current outcomes
    python tests/hf_oracle.py real   # the same for tests/data/hf_real_misses.json
    python tests/hf_oracle.py weights  # kvplan's weight counts against tools/hf_zoo_weights.py's records
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
RECORDS = {"zoo": DATA / "hf_zoo.json", "real": DATA / "hf_real.json", "weights": DATA / "hf_zoo_weights.json"}
MISSES = {"zoo": DATA / "hf_zoo_misses.json", "real": DATA / "hf_real_misses.json",
          "weights": DATA / "hf_zoo_weights_misses.json"}
#: What separates the outcome from its cause in a misses file (the cause is written by hand and kept on rewrites).
CAUSE = "; cause: "
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    key: str
    exact: bool
    reason: str
    """Empty when exact; else ``refused: ...`` or ``mispriced: ...`` with both numbers."""
    kvplan_bytes: int | None = None
    measured_bytes: int | None = None


def cache_tokens(record: dict[str, Any]) -> tuple[int, int | None]:
    """(tokens in the self-attention cache, encoder tokens) after the record's generate() (its last new token is never fed back).

    generate() never feeds the last new token back: a decoder-only cache holds P + N - 1 tokens; an
    encoder-decoder's self cache holds N (start token + N - 1) and its cross cache the P encoder tokens.
    An encoder that reads an image (``encoder_input``: pixel_values) sets its own length from its config:
    None, so kvplan derives it (its figure is what the test checks).
    """
    prompt, new = record["prompt_tokens"], record["new_tokens"]
    if record.get("encoder_decoder"):
        return new, None if record.get("encoder_input") else prompt
    return prompt + new - 1, None


def kvplan_hf_dynamic(config: dict[str, Any], *, batch: int, seq_len: int, kv_dtype: str,
                      encoder_len: int | None) -> tuple[int, dict[str, Any] | str]:
    """Adapter: run ``kvplan estimate --engine hf-dynamic`` on ``config``; (exit code, report or error text)."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    with tempfile.TemporaryDirectory(prefix="kvplan-oracle-") as tmp:
        path = Path(tmp, "config.json")
        path.write_text(json.dumps(config))
        args = ["estimate", "--model", str(path), "--engine", "hf-dynamic", "--seq-len", str(seq_len),
                "--batch", str(batch), "--kv-dtype", kv_dtype, "--format", "json"]
        if encoder_len is not None:
            args += ["--encoder-len", str(encoder_len)]
        result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        lines = [line for line in result.output.splitlines() if line.strip()]
        error = next((line for line in lines if line.startswith("Error")), lines[0] if lines else "no output")
        return result.exit_code, error.strip()
    return 0, json.loads(result.stdout)


def _indices(text: str | None) -> list[int]:
    found: list[int] = []
    for part in (text or "").split(","):
        if "-" in part:
            lo, hi = part.split("-")
            found += range(int(lo), int(hi) + 1)
        elif part.strip():
            found.append(int(part))
    return found


def per_layer_misses(record: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Layers whose kvplan bytes differ from the measured ones (decoder-only records).

    kvplan reports groups of layers; a layer can sit in two groups (a hybrid layer's attention and its
    state), so each layer gets its share of every group that names it.
    """
    if record.get("encoder_decoder") or any(layer["index"] < 0 for layer in record["layers"]):
        return []
    measured = {layer["index"]: layer["bytes"] for layer in record["layers"] if layer["group"] == "self"}
    predicted: dict[int, Fraction] = {}
    for group in report["layers"]:
        indices = _indices(group.get("layer_indices"))
        if not indices or group.get("bytes") is None:
            return []  # a group without layer indices cannot be split per layer
        for i in indices:
            predicted[i] = predicted.get(i, Fraction(0)) + Fraction(group["bytes"], len(indices))
    wrong = [i for i in sorted(measured) if predicted.get(i, 0) != measured[i]]
    return [f"layer {i}: kvplan {float(predicted.get(i, 0)):,.0f} B, transformers {measured[i]:,} B" for i in wrong[:4]]


def compare(key: str, record: dict[str, Any]) -> Outcome:
    """kvplan hf-dynamic against one measured record."""
    seq_len, encoder_len = cache_tokens(record)
    code, report = kvplan_hf_dynamic(record["config"], batch=record["batch"], seq_len=seq_len,
                                     kv_dtype=DTYPES[record["dtype"]], encoder_len=encoder_len)
    measured = record["total_bytes"]
    if isinstance(report, str):
        return Outcome(key=key, exact=False, reason=f"refused (exit {code}): {report}", measured_bytes=measured)
    got = report["totals"]["kv_cache_bytes"]
    if got != measured:
        ratio = f"{got / measured:.3g}x" if measured else "transformers cached nothing"
        kinds = ", ".join(f"{g['count']} {g['kind']}" for g in report["layers"])
        return Outcome(key=key, exact=False, kvplan_bytes=got, measured_bytes=measured,
                       reason=f"mispriced: kvplan {got:,} B vs transformers {measured:,} B ({ratio}; kvplan: {kinds})")
    layer_misses = per_layer_misses(record, report)
    if layer_misses:
        return Outcome(key=key, exact=False, kvplan_bytes=got, measured_bytes=measured,
                       reason="total exact, layers differ: " + "; ".join(layer_misses))
    return Outcome(key=key, exact=True, reason="", kvplan_bytes=got, measured_bytes=measured)


def load(kind: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(document of records, expected misses) for ``zoo`` or ``real``."""
    doc = json.loads(RECORDS[kind].read_text())
    misses = json.loads(MISSES[kind].read_text()) if MISSES[kind].exists() else {}
    return doc, misses


def measured(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in doc["records"].items() if r["status"] == "ok"}


def counted(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Weight records transformers could count, each with the shrunk config it built."""
    return {k: r for k, r in doc["records"].items() if "parameters" in r}


def compare_weights(key: str, record: dict[str, Any]) -> Outcome:
    """kvplan's parameter count of the record's config against transformers' count on the meta device."""
    from kvplan.errors import KvplanError
    from kvplan.models import count_weights

    measured_count = record["parameters"]
    try:
        got = count_weights(record["config"], model_id=key).parameters
    except KvplanError as exc:
        return Outcome(key=key, exact=False, reason=f"refused: {exc.message}", measured_bytes=measured_count)
    if got != measured_count:
        return Outcome(key=key, exact=False, kvplan_bytes=got, measured_bytes=measured_count,
                       reason=f"miscounted: kvplan {got:,} vs transformers {measured_count:,} parameters "
                              f"({got - measured_count:+,})")
    return Outcome(key=key, exact=True, reason="", kvplan_bytes=got, measured_bytes=measured_count)


#: Why kvplan misses a weight count: what it does not model (read from the type's transformers modeling file).
_NOT_MODELLED = "kvplan has no weight layout for"
WEIGHT_MISS_CAUSES = {
    "dots3_note": f"{_NOT_MODELLED} dots3-note's vision tower (a ViT with per-layer MoE) and audio encoder",
    "evolla": f"{_NOT_MODELLED} Evolla (a protein encoder, resampler and Llama with cross-attention)",
    "idefics": f"{_NOT_MODELLED} IDEFICS 1 (perceiver resampler, gated cross-attention layers)",
    "phi4_multimodal": f"{_NOT_MODELLED} Phi-4-multimodal (LoRA adapters, audio and vision encoders)",
    "udop": f"{_NOT_MODELLED} UDOP (a T5 with a layout-aware vision encoder)",
}


def write_misses(kind: str) -> None:
    doc, _ = load(kind)
    if kind == "weights":
        outcomes = [compare_weights(k, r) for k, r in counted(doc).items()]
    else:
        outcomes = [compare(k, r) for k, r in measured(doc).items()]
    # a cause written by hand after "; cause: " stays with its model type (the weights' causes live in this file)
    _, before = load(kind)
    causes = {k: v.split(CAUSE, 1)[1] for k, v in before.items() if CAUSE in v}
    if kind == "weights":
        causes.update(WEIGHT_MISS_CAUSES)
    misses = {o.key: o.reason + (CAUSE + causes[o.key] if o.key in causes else "") for o in outcomes if not o.exact}
    MISSES[kind].write_text(json.dumps(dict(sorted(misses.items())), indent=1) + "\n")
    print(f"{len(outcomes) - len(misses)} of {len(outcomes)} exact; {len(misses)} misses -> {MISSES[kind]}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    write_misses(sys.argv[1] if len(sys.argv) > 1 else "zoo")
