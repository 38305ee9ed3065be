"""Helpers of the engine-profile tests: estimate a real Hub config under one engine."""

from __future__ import annotations

import json

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.models import parse_config
from tests.conftest import REPO_ROOT, shared_config


def geometry(name: str):
    """A real Hub config: the bundled copy in model_configs/ when there is one, else ../shared/hf_configs."""
    bundled = REPO_ROOT / "model_configs" / f"{name}.json"
    config = json.loads(bundled.read_text()) if bundled.is_file() else shared_config(name)
    return parse_config(config, model_id=name.replace("__", "/"))


def run(name: str, engine: str, *, kv_dtype: str = "auto", batch: int = 1, seq_len: int | None = None, **knobs):
    return estimate(geometry(name), batch=batch, seq_len=seq_len, kv_dtype=kv_dtype,
                    deployment=Deployment(engine=engine, **knobs))
