"""Resolving --model: local path, bundled id or alias, and the Hub through a local stand-in server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, SourceError
from kvplan.sources import bundled_ids, load_raw_config

from conftest import make_config
from hubstub import COMMIT, HubStub

TINY = make_config(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=256)


def test_local_file_and_directory(write_config) -> None:
    path = write_config(TINY)
    config, source, _ = load_raw_config(str(path))
    assert config == TINY and source.kind == "file"
    config, source, _ = load_raw_config(str(path.parent))
    assert source.location == str(path)


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="has no config.json"):
        load_raw_config(str(tmp_path))


def test_missing_local_file() -> None:
    with pytest.raises(SourceError, match="no such file"):
        load_raw_config("./nope/config.json")


@pytest.mark.parametrize(
    ("text", "phrase"),
    [("{not json", "not valid JSON: "), ("[1, 2]", "must hold a JSON object"), ("3", "must hold a JSON object")],
)
def test_malformed_json(write_config, text: str, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase):
        load_raw_config(str(write_config(text)))


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "META-LLAMA/llama-3.1-8b", "llama-3.1-8b", "Llama-3.1-8B"])
def test_bundled_by_id_or_alias(name: str) -> None:
    _config, source, model_id = load_raw_config(name)
    assert (source.kind, model_id) == ("bundled", "meta-llama/Llama-3.1-8B")


def test_every_shared_model_is_bundled() -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "hf_configs"
    if not shared.is_dir():
        pytest.skip("shared/ not beside this checkout")
    bundled = {i.lower() for i in bundled_ids()}
    for path in shared.glob("*.json"):
        org, _, name = path.stem.partition("__")
        hub_id = f"{org}/{name}".lower()
        assert hub_id in bundled or any(b.startswith(hub_id) for b in bundled), hub_id


def test_hub_download_through_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStub({"acme/tiny": TINY}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        config, source, model_id = load_raw_config("acme/tiny")
        assert config == TINY and (source.kind, model_id) == ("hub", "acme/tiny")
        assert ("GET", "/acme/tiny/resolve/main/config.json") in hub.requests
        _, source, _ = load_raw_config("acme/tiny", revision=COMMIT)
        assert source.revision == COMMIT
    # Now in the hub cache: offline mode answers from it.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_raw_config("acme/tiny")[0] == TINY


@pytest.mark.parametrize(
    ("repo", "kwargs", "phrase", "hint"),
    [
        ("acme/missing", {}, "was not found on the Hugging Face Hub", "HF_TOKEN"),
        ("acme/gated", {}, "is gated", "accept the licence"),
        ("acme/tiny", {"revision": "v9"}, "revision 'v9' of acme/tiny was not found", "--revision"),
    ],
)
def test_hub_errors(monkeypatch: pytest.MonkeyPatch, repo: str, kwargs: dict, phrase: str, hint: str) -> None:
    with HubStub({"acme/tiny": TINY, "acme/gated": TINY}, gated={"acme/gated"}, token="hf_ok") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        with pytest.raises(SourceError) as err:
            load_raw_config(repo, **kwargs)
    assert phrase in err.value.message and hint in err.value.hint


def test_gated_repo_with_token(monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStub({"acme/gated": TINY}, gated={"acme/gated"}, token="hf_ok") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        assert load_raw_config("acme/gated", token="hf_ok")[0] == TINY


def test_offline_not_cached_names_bundled_models() -> None:
    with pytest.raises(SourceError) as err:
        load_raw_config("acme/not-cached")
    assert "offline mode" in err.value.message and "kvplan models" in err.value.hint


def test_unreachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    with pytest.raises(SourceError, match="cannot be reached"):
        load_raw_config("acme/unreachable")


def test_hub_returns_non_object(monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStub({"acme/list": b"[1, 2, 3]"}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        with pytest.raises(ConfigError, match="must hold a JSON object"):
            load_raw_config("acme/list")


def test_typo_gets_did_you_mean() -> None:
    with pytest.raises(SourceError) as err:
        load_raw_config("llama-3.1-8bb!")
    assert "llama-3.1-8b" in err.value.hint


def test_id_from_local_kvplan_metadata(write_config) -> None:
    path = write_config({**TINY, "_kvplan": {"hub_id": "acme/tiny"}})
    assert load_raw_config(str(path))[2] == "acme/tiny"
    assert json.loads(path.read_text())["_kvplan"]["hub_id"] == "acme/tiny"
