"""The zoo oracle's ``generate()`` (tools/hf_zoo.py: batch B = 2, prompt P = 5, N = 2 new tokens, bf16): a
decoder-only cache holds T = P + N - 1 = 6 tokens, an encoder-decoder's self cache N = 2 and its cross cache P = 5;
``kvplan estimate --engine hf-dynamic`` sizes the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan import api

B, P, N, S = 2, 5, 2, 2  # batch, prompt, new tokens, bf16 bytes


T = P + N - 1  # decoder-only cache tokens


ZOO = Path(__file__).resolve().parents[1] / "data" / "hf_zoo.json"


def kv_bytes(config: dict[str, Any], *, seq_len: int, encoder_len: int | None = None, tmp_path: Path) -> int:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dtype": "bfloat16", **config}))
    api.clear_cache()
    # NOTE: a zoo config holds what differs from its config class's defaults: those defaults are the model.
    result = api.estimate(api.load_geometry(str(path)), engine="hf-dynamic", seq_len=seq_len, batch=B,
                          kv_dtype="bf16", encoder_len=encoder_len, allow_defaults=True)
    return result.to_dict()["totals"]["kv_cache_bytes"]


def check_zoo(model_type: str, expected: int) -> None:
    """The arithmetic is what transformers measured, when the zoo's records are here."""
    if not ZOO.exists():
        return
    record = json.loads(ZOO.read_text())["records"].get(model_type)
    if record and record.get("status") == "ok":
        assert record["total_bytes"] == expected, model_type


def kv(layers: int, heads: int, head_dim: int, tokens: int) -> int:
    return layers * 2 * B * heads * head_dim * tokens * S  # layers x K+V x batch x heads x head dim x tokens x bf16
