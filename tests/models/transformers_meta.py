"""transformers as the oracle of weight counts: the model built on the meta device (no memory) from the same
config, its parameters and the buffers it saves in a checkpoint summed, tied weights once; and the checks the
family test files run against it."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest

from kvplan.models import count_weights

#: Words in the names of the vision/audio modules a language-only count leaves out.
VISION_WORDS = ("visual", "vision", "multi_modal_projector", "mm_projector")


def meta_count(config: dict[str, Any], *, language_only: bool = False) -> int:
    """transformers' own count: the model built on the meta device (no memory), parameters plus the
    buffers it saves in a checkpoint (routers' correction biases), tied weights once."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForImageTextToText)
    if "vision_config" in config:  # the composite model, with its vision tower
        autos = autos[::-1]
    with torch.device("meta"):
        for auto in autos:
            try:
                model = auto.from_config(conf)
                break
            except ValueError:
                continue
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for n, t in tensors if not (language_only and any(w in n for w in VISION_WORDS)))


def default_config(model_type: str, **overrides: Any) -> dict[str, Any]:
    """transformers' config class for ``model_type`` with its defaults, as a config.json dict."""
    transformers = pytest.importorskip("transformers")
    return transformers.AutoConfig.for_model(model_type, **overrides).to_dict()


def meta_count_lm(config: dict[str, Any]) -> int:
    """:func:`meta_count`, extended to encoder-decoders (``AutoModelForSeq2SeqLM``): transformers'
    model on the meta device, parameters plus the buffers it saves in a checkpoint, tied weights once."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForSeq2SeqLM)
    causal = any(a.endswith("ForCausalLM") for a in config.get("architectures") or [])
    if config.get("is_encoder_decoder") and not causal:  # the whole encoder-decoder, as kvplan counts it
        autos = autos[::-1]
    with torch.device("meta"):
        for auto in autos:
            try:
                model = auto.from_config(conf)
                break
            except ValueError:
                continue
        else:
            raise AssertionError(f"transformers builds no causal or seq2seq LM for {config['model_type']}")
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for _, t in tensors)


def check_lm_count(name: str, overrides: dict[str, Any]) -> None:
    model_type = name.split()[0]
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=name).parameters == meta_count_lm(default_config(model_type, **overrides))


def causal(model_type: str) -> list[str]:
    """The ``architectures`` of the type's ``*ForCausalLM`` (its decoder alone, no cross-attention cache)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type)
    return [transformers.AutoModelForCausalLM._model_mapping[type(config)].__name__]


#: Module paths of the language model inside a composite model; every other tensor is the vision part.
LANGUAGE = re.compile(r"^(model\.)?(language_model|text_model)\.|^lm_head\.")


def meta_vision_count(config: dict[str, Any]) -> int:
    """The tensors of transformers' composite model (meta device) outside its language model and lm_head."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for n, t in tensors if not LANGUAGE.match(n))


def meta_parameters(model_type: str, class_name: str, **overrides: Any) -> tuple[dict[str, Any], int, int]:
    """The default config of ``model_type`` as a config.json dict, transformers' count of the model built on
    the meta device (parameters once, saved buffers), and the part of it outside the language model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type, **overrides)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers, class_name)._from_config(config)
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    tower = sum(t.numel() for n, t in tensors if "language_model" not in n and not n.startswith("lm_head"))
    return config.to_dict(), sum(t.numel() for _, t in tensors), tower


DROP, SET = "_drop", "_set"

#: Keys without which transformers 5.24 cannot build the type's default config at all (its own default is None
#: where the modeling file needs a number): every case of the type starts from these.
BASE: dict[str, dict[str, Any]] = {
    "hunyuan_v1_moe": {"head_dim": 128},  # HunYuanMoEV1Config.head_dim None: the rotary embedding fails
    "nemotron": {"num_key_value_heads": 48},  # NemotronConfig leaves it None: the attention fails
    "dbrx": {"attn_config": {"rope_theta": 500000.0}},  # DbrxAttentionConfig has no rope_theta default
}


def config_of(model_type: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The config class's defaults with ``overrides``, less the keys ``overrides[DROP]`` names."""
    overrides = dict(overrides)
    drop, add = overrides.pop(DROP, []), overrides.pop(SET, {})
    config = default_config(model_type, **{**BASE.get(model_type, {}), **overrides})
    inner = config.get("text_config", config)
    for key in drop:
        del inner[key]
    inner.update(add)
    return config


def case_id(case: tuple[str, dict[str, Any]]) -> str:
    name, overrides = case
    return name + ("" if not overrides else "-" + "-".join(sorted(overrides)))


def assert_counts_like_transformers(name: str, overrides: dict[str, Any]) -> None:
    """``name`` (a model_type, then words naming the variant) on its config class's defaults with ``overrides``:
    kvplan's count equals transformers'."""
    config = default_config(name.split()[0], **overrides)
    assert count_weights(config, model_id=name).parameters == meta_count(config)


def assert_capacity_counts_the_weights(runner, tmp_path, model_type: str) -> None:
    """``kvplan capacity`` on the type's default config counts the weights transformers does."""
    from kvplan.cli import app

    config = default_config(model_type)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = runner.invoke(app, ["capacity", "--model", str(path), "--gpu", "H200", "--max-model-len", "4096",
                                 "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    weights = json.loads(result.stdout)["weights"]
    assert weights["source"] == "config"
    assert weights["parameters"] == meta_count(config)


def variant_cases(variants: dict[str, list[dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Each type's default config, then each of its variants."""
    return [(t, {}) for t in variants] + [(t, v) for t, vs in variants.items() for v in vs]


def variant_ids(variants: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [f"{t}-{'variant' if v else 'default'}" for t, v in variant_cases(variants)]


def assert_variant_counts_like_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = config_of(model_type, overrides)
    assert count_weights(config, model_id=model_type).parameters == meta_count(config)


def assert_variants_change_the_layout(variants: dict[str, list[dict[str, Any]]]) -> None:
    # each variant is a different model from its type's default: the comparison is not the default twice
    for model_type, cases in variants.items():
        counts = {count_weights(config_of(model_type, v), model_id=model_type).parameters for v in [{}, *cases]}
        assert len(counts) == 1 + len(cases), model_type
