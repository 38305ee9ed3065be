"""The generic reading rules of a config.json (kvplan.models, base.py, nesting.py): aliases, derived and
defaulted values said as notes, --set overrides, bad values and the model types kvplan does not know."""

from __future__ import annotations

import pytest
from geometry_check import kinds

from kvplan.errors import ConfigError
from kvplan.models import parse_config

from conftest import make_config, shared_config


def test_missing_required_field_names_aliases() -> None:
    config = make_config(model_type="custom_llm", num_hidden_layers=...)
    with pytest.raises(ConfigError) as err:
        parse_config(config, model_id="m")
    assert "num_hidden_layers" in err.value.message and "n_layer" in err.value.message


def test_head_dim_derived_is_noted() -> None:
    geometry = parse_config(make_config(), model_id="m")
    assert any("head_dim derived as hidden_size // num_attention_heads = 4096 // 32 = 128" in n for n in geometry.notes)


def test_unknown_model_type_uses_generic_rules() -> None:
    geometry = parse_config(make_config(model_type="brand_new_llm", num_key_value_heads=4), model_id="m")
    assert geometry.family == "generic" and geometry.layers[0].num_kv_heads == 4
    assert any("brand_new_llm" in n for n in geometry.notes)


def test_unknown_model_type_missing_field_is_an_error() -> None:
    with pytest.raises(ConfigError):
        parse_config({"model_type": "brand_new_llm", "num_hidden_layers": 4}, model_id="m")


def test_set_overrides_and_records_provenance() -> None:
    geometry = parse_config(make_config(), model_id="m", overrides={"num_key_value_heads": 8})
    assert geometry.layers[0].num_kv_heads == 8
    assert {p.field: p.source for p in geometry.provenance}["num_kv_heads"] == "--set num_key_value_heads"


def test_set_reaches_nested_text_config() -> None:
    config = shared_config("google__gemma-3-27b-it")
    geometry = parse_config(config, model_id="g", overrides={"sliding_window": 512})
    assert geometry.layers[0].sliding_window == 512
    geometry = parse_config(config, model_id="g", overrides={"text_config.sliding_window": 256})
    assert geometry.layers[0].sliding_window == 256


@pytest.mark.parametrize(
    ("override", "phrase"),
    [
        ({"num_hidden_layers": 0}, "must be positive"),
        ({"num_hidden_layers": -3}, "must be positive"),
        ({"num_key_value_heads": "eight"}, "must be an integer"),
        ({"num_attention_heads": 10**9}, "absurdly large"),
        ({"num_key_value_heads": 64}, "more than the 32 attention heads"),
        ({"hidden_size": 4097}, "not divisible"),
        ({"num_key_value_heads": 5}, "not a multiple of 5 KV heads"),
        ({"layer_types": ["full_attention"] * 3}, "layer_types has 3 entries"),
        ({"layer_types": ["warp_attention"] * 32}, "unknown layer type"),
    ],
)
def test_bad_values_are_config_errors(override: dict, phrase: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(make_config(**override), model_id="m")
    assert phrase in err.value.message


def test_non_object_config() -> None:
    with pytest.raises(ConfigError):
        parse_config([1, 2], model_id="m")


def test_encoder_only_model_rejected() -> None:
    with pytest.raises(ConfigError, match="encoder-only"):
        parse_config({"model_type": "bert", "num_hidden_layers": 12}, model_id="b")


def test_generic_sliding_window_applies_to_every_layer_and_is_noted() -> None:
    geometry = parse_config(make_config(model_type="new_llm", sliding_window=1024), model_id="n")
    assert kinds(geometry) == ["sliding_window"] * 32
    assert any("sliding_window = 1024 applies to every layer" in n for n in geometry.notes)


def test_unknown_type_with_hybrid_layout_markers_is_refused() -> None:
    config = make_config(model_type="zamba_like", layers_block_type=["mamba", "hybrid"] * 16)
    with pytest.raises(ConfigError, match="layers_block_type"):
        parse_config(config, model_id="z")


def test_top_level_dtype_wins_over_text_config() -> None:
    config = {"model_type": "llava_next", "torch_dtype": "float16",
              "text_config": {**make_config(model_type="mistral"), "torch_dtype": "bfloat16"}}
    geometry = parse_config(config, model_id="l")
    assert (geometry.config_dtype, geometry.config_dtype_source) == ("float16", "config: torch_dtype")
    geometry = parse_config(config, model_id="l", overrides={"torch_dtype": "float32"})
    assert (geometry.config_dtype, geometry.config_dtype_source) == ("float32", "--set torch_dtype")


#: Ovis2.5's vision tower as transformers 5.25's Ovis2_5VisionConfig writes it: 27 layers, but no decoder.
OVIS2_5_VISION = {"model_type": "ovis2_5_vision", "hidden_size": 1024, "num_hidden_layers": 27,
                  "num_attention_heads": 16, "intermediate_size": 4096}


def test_a_model_type_without_a_decoder_is_refused_by_name(runner, tmp_path) -> None:
    import json

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(OVIS2_5_VISION))
    result = runner.invoke(app, ["estimate", "--model", str(path)])
    assert result.exit_code == 2, result.output
    assert "model_type 'ovis2_5_vision' has no decoder" in result.output
    assert "it keeps no KV cache" in result.output
    # the same tower nested in a wrapper whose own type has no decoder either (CLIP: a dual encoder)
    with pytest.raises(ConfigError, match="model_type 'clip_text_model' has no decoder"):
        parse_config({"model_type": "clip", "text_config": {"model_type": "clip_text_model"}}, model_id="clip")


def test_the_no_decoder_list_follows_the_installed_transformers_and_the_zoo() -> None:
    """kvplan/data/no_decoder_types.txt is tools/no_decoder_types.py's output for the installed transformers (run
    it again when transformers moves); no type on it is one a family module reads or one the zoo measured a cache of."""
    import json
    from pathlib import Path

    from kvplan.models import REGISTRY, no_decoder_types

    version, types = no_decoder_types()
    assert {"ovis2_5_vision", "siglip", "clip_text_model"} <= types
    assert not types & set(REGISTRY)
    zoo = Path(__file__).resolve().parents[1] / "data" / "hf_zoo.json"
    if zoo.exists():
        records = json.loads(zoo.read_text())["records"]
        assert not {t for t, r in records.items() if r.get("status") == "ok" and r.get("total_bytes")} & types
    transformers = pytest.importorskip("transformers")
    assert version == transformers.__version__, "run python tools/no_decoder_types.py"
