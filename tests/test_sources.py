"""Reading a model's config.json (kvplan.modelref.load_raw_config): a local path, a bundled id or alias, and the Hub
through a local stand-in server (its failures, deadline and cache fallback, in kvplan.sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, SourceError
from kvplan.modelref import load_raw_config
from kvplan.sources import bundled_ids

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


def test_every_shared_model_is_bundled_or_read_from_its_file() -> None:
    """The real Hub configs beside the checkout: bundled (offline by id), or at least read from the file
    (the 2026 families are not bundled: a config.json path or the Hub names them)."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "hf_configs"
    if not shared.is_dir():
        pytest.skip("shared/ not beside this checkout")
    from typer.testing import CliRunner

    from kvplan.cli import app

    bundled = {i.lower() for i in bundled_ids()}
    for path in shared.glob("*.json"):
        org, _, name = path.stem.partition("__")
        hub_id = f"{org}/{name}".lower()
        if hub_id in bundled or any(b.startswith(hub_id) for b in bundled):
            continue
        result = CliRunner().invoke(app, ["estimate", "--model", str(path), "--seq-len", "4k", "--format", "json"])
        assert result.exit_code == 0, (path.name, result.output)


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


# ---- a hostile Hub: every failure ends within KVPLAN_HUB_TIMEOUT and says what happened -------------
HUB_DEADLINE_S = 1


@pytest.mark.parametrize(
    ("fault", "phrase"),
    [
        ("hang", "did not answer within 1 s (KVPLAN_HUB_TIMEOUT)"),
        ("trickle", "did not answer within 1 s (KVPLAN_HUB_TIMEOUT)"),
        ("500", "answered HTTP 500 (internal error)"),
        ("503", "answered HTTP 503 (unavailable)"),
        ("429", "answered HTTP 429 (rate limited)"),
        ("403", "answered HTTP 403 (forbidden)"),
        ("redirect", "redirected in a loop"),
        ("short", "closed the connection before the whole config.json arrived"),
    ],
)
def test_hostile_hub_ends_within_deadline(monkeypatch: pytest.MonkeyPatch, fault: str, phrase: str) -> None:
    import time

    with HubStub({"acme/tiny": TINY}, fault=fault) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", str(HUB_DEADLINE_S))
        started = time.monotonic()
        with pytest.raises(SourceError) as err:
            load_raw_config("acme/tiny")
        elapsed = time.monotonic() - started
    assert elapsed < HUB_DEADLINE_S + 1.5, elapsed
    assert phrase in err.value.message, err.value.message
    assert "offline mode" not in err.value.message
    if fault in ("500", "503", "429"):  # it answered: the message must not also say it did not answer
        assert "did not answer" not in err.value.message, err.value.message
    assert hub.requests  # it did ask


@pytest.mark.parametrize("fault", ["hang", "503", "429", "redirect"])
def test_hub_failure_falls_back_to_cache_with_note(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    from kvplan.api import load_geometry

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", str(HUB_DEADLINE_S))
    with HubStub({"acme/tiny": TINY}) as hub:  # warm the cache
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        load_raw_config("acme/tiny")
    with HubStub({"acme/tiny": TINY}, fault=fault) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        config, source, _ = load_raw_config("acme/tiny")
        geometry, _ = load_geometry("acme/tiny")
    assert config == TINY and source.kind == "hub"
    assert any("read from the local Hub cache" in note for note in geometry.notes), geometry.notes


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "1e9"])
def test_bad_hub_timeout_is_an_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", value)
    with pytest.raises(SourceError, match="KVPLAN_HUB_TIMEOUT"):
        load_raw_config("acme/anything")


@pytest.mark.parametrize(
    "revision",
    ["../../../../tmp/x", "/etc/passwd", "main\x1b[2J", "a b", "v1..v2", "refs/heads/", ".hidden", "x" * 300, "",
     "main:evil", "a@{1}"],
)
def test_bad_revision_rejected_before_any_request(monkeypatch: pytest.MonkeyPatch, revision: str) -> None:
    from kvplan.errors import InputError

    with HubStub({"acme/tiny": TINY}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        with pytest.raises(InputError, match="--revision"):
            load_raw_config("acme/tiny", revision=revision)
    assert hub.requests == []


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/12", "refs/convert/parquet", COMMIT, "release-2024_01"])
def test_good_revisions_pass(revision: str) -> None:
    from kvplan.hubref import validate_revision

    assert validate_revision(revision) == revision


@pytest.mark.parametrize("repo", ["acme/a--b", "acme/a..b", "-acme/x", "acme/x.", "a/b/c", "acme/" + "x" * 97])
def test_bad_repo_ids(repo: str) -> None:
    from kvplan.hubref import is_repo_id

    assert not is_repo_id(repo)
    with pytest.raises(SourceError, match="neither a file, a bundled model nor a Hub repo id"):
        load_raw_config(repo)


def test_model_argument_length_limit() -> None:
    with pytest.raises(SourceError, match="5,000 characters long; kvplan's limit is 4,096"):
        load_raw_config("a" * 5000)
    with pytest.raises(SourceError, match="cannot use --model"):
        load_raw_config("b" * 300)  # a file name past NAME_MAX (255)


def test_config_size_limit(tmp_path: Path) -> None:
    from kvplan.limits import MAX_FILE_BYTES

    big = tmp_path / "config.json"
    big.write_text('{"pad": "' + "x" * MAX_FILE_BYTES + '"}')
    with pytest.raises(ConfigError, match="larger than kvplan's 16 MiB limit"):
        load_raw_config(str(big))


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        (b"\xff\xfe{\x00}\x00", "is not UTF-8 text"),
        (b"[" * 5000 + b"]" * 5000, "nested deeper than 100 levels"),
        (b'{"a": ' * 150 + b"1" + b"}" * 150, "nested deeper than 100 levels"),
        (b'{"num_hidden_layers": ' + b"9" * 5000 + b"}", "integer with more than 4,300 digits"),
    ],
)
def test_raw_config_files_are_one_line_errors(tmp_path: Path, raw: bytes, phrase: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(raw)
    with pytest.raises(ConfigError, match=phrase):
        load_raw_config(str(path))


def test_special_files(tmp_path: Path) -> None:
    import os

    with pytest.raises(ConfigError, match="larger than kvplan's 16 MiB limit"):
        load_raw_config("/dev/zero")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    import threading

    threading.Thread(target=lambda: fifo.write_bytes(b'{"model_type": 1}'), daemon=True).start()
    assert load_raw_config(str(fifo))[0] == {"model_type": 1}
