"""transformers as kvplan's weights oracle: count the parameters of every zoo model on the meta device.

    python tools/hf_zoo_weights.py                 # every generation model type -> tests/data/hf_zoo_weights.json
    python tools/hf_zoo_weights.py --only llama    # a few model types (merged into the existing file)

Every generation model type of the installed transformers (the list tools/hf_zoo.py runs) is built from
its config class's OWN defaults, shrunk as tools/hf_zoo.py shrinks it (``shrink_config``: fewer layers,
small vocabulary and MLP widths, fewer experts, one-layer towers), then built again on the meta device
(no memory, no weights) and counted the way a checkpoint holds it: every parameter once (tied weights
once) plus the buffers the model saves in its state dict (routers' correction biases). The record keeps
the shrunk config, so the weights oracle follows the installed transformers without waiting for the KV
oracle's (slower) run. The parameters of vision/audio modules are counted apart, by module name, for
information. tests/test_hf_zoo_weights.py compares ``kvplan.models.count_weights`` with every record.
Run it again whenever transformers moves.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
WEIGHTS_JSON = ROOT / "tests" / "data" / "hf_zoo_weights.json"
#: Words in the module names of the towers a language-only count leaves out.
TOWER_WORDS = ("visual", "vision", "multi_modal_projector", "mm_projector", "audio")
#: Auto classes tried, in order, when a record names no class that built.
AUTOS = ("AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForImageTextToText")


def _classes(record: dict[str, Any]) -> list[str]:
    first = record.get("model_class")
    return ([first] if first else []) + [a for a in AUTOS if a != first]


def _reason(stage: str, exc: Exception) -> str:
    return f"{stage}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def shrunk_record(model_type: str, model_class: str | None) -> dict[str, Any]:
    """{"config", "model_class"}: the type's config class defaults shrunk as tools/hf_zoo.py does, or {"error"}."""
    import transformers
    from hf_zoo import shrink_config

    try:
        built = transformers.AutoConfig.for_model(model_type)
        raw = built.to_dict()
        config, _notes, _total, _keep = shrink_config(raw, built)
        config.pop("quantization_config", None)  # fp8/fp4 layouts need a GPU to build: the oracle counts the model
    except Exception as exc:  # a type whose defaults do not build or shrink is reported, not fatal
        return {"error": _reason("config", exc)}
    return {"config": config, "model_class": model_class}


def count(model_type: str, record: dict[str, Any]) -> dict[str, Any]:
    """{"parameters", "tower_parameters", "model_class"} of the record's model, or {"error"}."""
    import torch
    import transformers

    values = {k: v for k, v in record["config"].items() if k not in ("model_type", "auto_map", "quantization_config")}
    try:
        config = transformers.AutoConfig.for_model(model_type, **values)
    except Exception as exc:  # a record transformers cannot rebuild is reported, not fatal
        return {"error": _reason("config", exc)}
    errors = []
    for name in _classes(record):
        cls = getattr(transformers, name, None)
        if cls is None:
            continue
        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = cls.from_config(config) if name.startswith("Auto") else cls._from_config(config)
        except Exception as exc:  # one class failing: try the next
            errors.append(f"{name}: {type(exc).__name__}")
            continue
        saved = set(model.state_dict())
        tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
        total = sum(t.numel() for _, t in tensors)
        towers = sum(t.numel() for n, t in tensors if any(w in n for w in TOWER_WORDS))
        return {"model_class": type(model).__name__, "parameters": total, "tower_parameters": towers}
    return {"error": "; ".join(errors) or "no model class"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model types to (re)count")
    args = parser.parse_args(argv)
    import transformers
    from hf_zoo import generation_model_types
    from transformers.models.auto import modeling_auto

    doc = json.loads(WEIGHTS_JSON.read_text()) if WEIGHTS_JSON.exists() and args.only else {"records": {}}
    doc["transformers_version"] = transformers.__version__
    for model_type, spec in generation_model_types().items():
        if args.only and model_type not in args.only:
            continue
        # a multimodal type is counted with its towers (its image-text-to-text class) where it has one
        itt = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
        record = shrunk_record(model_type, itt if isinstance(itt, str) else spec["model_class"])
        outcome = record if "error" in record else count(model_type, record)
        if "parameters" in outcome:  # the class that built names the model kvplan counts (a *ForCausalLM: no towers)
            outcome["config"] = {**record["config"], "architectures": [outcome["model_class"]]}
        doc["records"][model_type] = outcome
        print(f"{model_type:32} {outcome.get('parameters', outcome.get('error'))}", file=sys.stderr)
    doc["records"] = dict(sorted(doc["records"].items()))
    WEIGHTS_JSON.write_text(json.dumps(doc, indent=1) + "\n")
    ok = sum(1 for r in doc["records"].values() if "parameters" in r)
    print(f"{ok} of {len(doc['records'])} model types counted -> {WEIGHTS_JSON.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
