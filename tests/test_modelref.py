"""Resolving --model once: the kind each reference is read as, Hub URLs, and the one-line errors.

Nothing here touches the network: resolve() never does, and the Hub loads go to a local stand-in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import InputError, SourceError
from kvplan.modelref import load, resolve

from conftest import make_config
from hubstub import COMMIT, HubStub

TINY = make_config(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=256)


def test_kinds_of_reference(tmp_path: Path) -> None:
    config = tmp_path / "hf" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(TINY))
    (tmp_path / "gg").mkdir()
    shard = tmp_path / "gg" / "m-Q4_K_M.gguf"
    shard.write_bytes(b"GGUF")
    (tmp_path / "gg" / "mmproj-m-f16.gguf").write_bytes(b"GGUF")  # a projector beside it is not a second model
    cases = {
        str(config): ("file", config, None),
        str(config.parent): ("file", config, None),
        str(shard): ("gguf", shard, None),
        str(shard.parent): ("gguf", shard, None),
        "Llama-3.1-8B": ("bundled", None, "meta-llama/Llama-3.1-8B"),
        "acme/tiny": ("hub", None, "acme/tiny"),
        "acme/tiny-GGUF:Q4_K_M": ("hub-gguf", None, "acme/tiny-GGUF"),
    }
    for model, (kind, path, repo_id) in cases.items():
        ref = resolve(model)
        assert (ref.kind, ref.repo_id) == (kind, repo_id), model
        if path is not None:
            assert ref.path == path, model
    assert resolve("acme/tiny-GGUF:Q4_K_M").gguf_tag == "Q4_K_M"
    by_file = resolve("acme/tiny-GGUF", gguf_file="t-Q8_0.gguf")
    assert (by_file.kind, by_file.gguf_file) == ("hub-gguf", "t-Q8_0.gguf")
    assert resolve("meta-llama/Llama-3.1-8B", revision="v1.0").kind == "hub"  # a revision is asked of the Hub
    assert resolve("meta-llama/Llama-3.1-8B", revision="main").kind == "bundled"  # main: the default branch


def test_a_folder_with_config_json_is_read_by_it_even_beside_a_gguf(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "m-Q4_K_M.gguf").write_bytes(b"GGUF")
    assert resolve(str(tmp_path)).kind == "file"


def test_split_shard_resolves_to_the_whole_set(tmp_path: Path) -> None:
    names = [f"m-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    for name in names:
        (tmp_path / name).write_bytes(b"GGUF")
    ref = resolve(str(tmp_path / names[1]))
    assert ref.shards == tuple(tmp_path / name for name in names) and ref.path == tmp_path / names[0]


@pytest.mark.parametrize(
    ("url", "repo_id", "revision", "gguf_file"),
    [
        ("https://huggingface.co/acme/tiny", "acme/tiny", None, None),
        ("https://huggingface.co/acme/tiny/", "acme/tiny", None, None),
        ("https://hf.co/acme/tiny?library=transformers", "acme/tiny", None, None),
        (f"https://huggingface.co/acme/tiny/tree/{COMMIT}", "acme/tiny", COMMIT, None),
        ("https://huggingface.co/acme/tiny/tree/refs%2Fpr%2F3", "acme/tiny", "refs/pr/3", None),
        ("https://huggingface.co/acme/tiny/blob/v1.0/config.json", "acme/tiny", "v1.0", None),
        ("https://huggingface.co/acme/t-GGUF/blob/main/t-Q4_K_M.gguf", "acme/t-GGUF", "main", "t-Q4_K_M.gguf"),
        ("https://huggingface.co/acme/t-GGUF/resolve/main/t-Q4_K_M.gguf?download=true", "acme/t-GGUF", "main",
         "t-Q4_K_M.gguf"),
    ],
)
def test_hub_url_is_the_repo_id_and_revision(url: str, repo_id: str, revision: str | None,
                                             gguf_file: str | None) -> None:
    ref = resolve(url)
    assert (ref.kind, ref.repo_id, ref.revision, ref.gguf_file) == (
        "hub-gguf" if gguf_file else "hub", repo_id, revision, gguf_file)


def test_hub_url_of_a_bundled_model_stays_offline() -> None:
    ref = resolve("https://huggingface.co/meta-llama/Llama-3.1-8B")
    assert (ref.kind, ref.repo_id) == ("bundled", "meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize("url", [
    "https://huggingface.co/Qwen/Qwen3-32B/tree/main",
    "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
    "https://huggingface.co/Qwen/Qwen3-32B/resolve/main/config.json",
])
def test_hub_url_of_the_default_branch_of_a_bundled_model_stays_offline(runner, monkeypatch: pytest.MonkeyPatch,
                                                                        url: str) -> None:
    """`main`, the default branch, reads what no revision reads: the bundled config, offline (issue 22)."""
    from kvplan.cli import app

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ref = resolve(url)
    assert (ref.kind, ref.repo_id, ref.revision) == ("bundled", "Qwen/Qwen3-32B", None)
    result = runner.invoke(app, ["estimate", url, "-s", "4k", "--format", "json"])
    assert result.exit_code == 0, result.output
    bare = runner.invoke(app, ["estimate", "Qwen/Qwen3-32B", "-s", "4k", "--format", "json"])
    sized = json.loads(result.stdout)["totals"]["kv_cache_bytes"]
    assert sized == json.loads(bare.stdout)["totals"]["kv_cache_bytes"] == 64 * 4096 * 2 * 8 * 128 * 2  # layers,
    # tokens, K+V, kv heads, head dim, bf16
    other = runner.invoke(app, ["estimate", url.replace("/main", "/v1"), "-s", "4k"])  # another revision: the Hub
    assert other.exit_code == 2 and "Qwen/Qwen3-32B@v1 is not bundled" in other.stderr


def test_hub_url_loads_through_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStub({"acme/tiny": TINY}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        loaded = load(resolve(f"https://huggingface.co/acme/tiny/tree/{COMMIT}"))
    assert (loaded.source.kind, loaded.source.location, loaded.source.revision) == ("hub", "acme/tiny", COMMIT)
    assert loaded.num_hidden_layers == 2
    assert ("GET", f"/acme/tiny/resolve/{COMMIT}/config.json") in hub.requests


@pytest.mark.parametrize(
    ("url", "kwargs", "error", "phrase"),
    [
        ("https://example.com/acme/tiny", {}, SourceError, "not a Hugging Face Hub one"),
        ("https://huggingface.co/datasets/acme/data", {}, SourceError, "names a dataset, not a model"),
        ("https://huggingface.co/", {}, SourceError, "names no Hub repo"),
        ("https://huggingface.co/acme/tiny/blob/main/model.safetensors", {}, SourceError,
         "kvplan reads a repo's config.json or a .gguf file"),
        ("https://huggingface.co/acme/tiny/discussions/4", {}, SourceError, "kvplan cannot read"),
        ("https://huggingface.co/acme/tiny/tree/..%2F..%2Fx", {}, InputError, "the URL's revision"),
        ("https://huggingface.co/acme/tiny/tree/v1", {"revision": "v2"}, InputError,
         "the URL names revision 'v1' and --revision says 'v2'"),
    ],
)
def test_bad_hub_urls_are_one_line(url: str, kwargs: dict, error: type[Exception], phrase: str) -> None:
    with pytest.raises(error) as err:
        resolve(url, **kwargs)
    assert phrase in err.value.message  # type: ignore[attr-defined]


def test_empty_folder_says_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(SourceError) as err:
        resolve(str(tmp_path))
    assert err.value.message == f"directory {tmp_path} has no config.json and no .gguf model (it holds notes.txt)"
    assert f"kvplan looked for {tmp_path / 'config.json'} (a Hugging Face model) and {tmp_path / '*.gguf'}" in err.value.hint
    (tmp_path / "notes.txt").unlink()
    with pytest.raises(SourceError, match=r"no \.gguf model \(it is empty\)"):
        resolve(str(tmp_path))


def test_missing_path_and_missing_hub_repo_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    for path, what in (("./models/llama/config.json", "config.json"), ("models/m-Q4_K_M.gguf", ".gguf file")):
        with pytest.raises(SourceError) as err:
            resolve(path)
        assert err.value.message == f"no such file: {path}" and what in err.value.hint
    with HubStub({}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        with pytest.raises(SourceError) as err:
            load(resolve("acme/missing"))
    assert err.value.message == "acme/missing was not found on the Hugging Face Hub (or it is private)"


@pytest.mark.parametrize(
    ("model", "gguf_file", "error", "phrase"),
    [
        ("acme/t-GGUF", "t-Q4_K_M.bin", SourceError, "is not a .gguf file name"),
        ("acme/t-GGUF:Q4_K_M", "t-Q8_0.gguf", InputError, "names a GGUF by its tag and --gguf-file"),
        ("not a repo", "t-Q4_K_M.gguf", SourceError, "is not a Hub repo id"),
    ],
)
def test_gguf_file_errors(model: str, gguf_file: str, error: type[Exception], phrase: str) -> None:
    with pytest.raises(error, match=phrase):
        resolve(model, gguf_file=gguf_file)


def test_gguf_file_with_a_local_folder_points_at_the_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as err:
        resolve(str(tmp_path), gguf_file="m-Q4_K_M.gguf")
    assert str(tmp_path / "m-Q4_K_M.gguf") in (err.value.hint or "")


def test_resolve_never_imports_the_gguf_reader_or_the_hub_client(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    code = ("import sys; from kvplan.modelref import resolve; "
            f"[resolve(m) for m in ({str(tmp_path / 'm.gguf')!r}, 'acme/x:Q4_K_M', 'acme/x', "
            "'https://huggingface.co/acme/x/tree/main')]; "
            "bad = [m for m in ('kvplan.gguf.reader', 'huggingface_hub', 'gguf', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_same_file_through_two_spellings_shares_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    monkeypatch.chdir(tmp_path)
    assert kvplan.load_geometry("./config.json") is kvplan.load_geometry("config.json")
    assert kvplan.load_geometry(".").source.location == "config.json"


#: The input side, and the rooms below it that it may read from (models: config.json -> geometry).
INPUT_SIDE = {"sources", "hubref", "modelref", "gguf", "limits", "textsafe"}
BELOW_INPUT = {"errors", "units", "dtypes", "specs", "geometry", "safeload", "models"}


def test_the_input_side_imports_only_downward_and_has_no_cycle() -> None:
    """Counting imports inside functions (and under TYPE_CHECKING): nothing on the input side reaches the
    API, the calculator, the report or the CLI, and no two of its modules import each other."""
    from test_imports import MODULES, imports_of, layer_of

    members = [m for m in MODULES if layer_of(m) in INPUT_SIDE]
    graph = {m: {n for n in imports_of(m, module_level=False) if n in MODULES} for m in members}
    upward = sorted(f"{m} imports {n}" for m, names in graph.items() for n in names
                    if layer_of(n) not in INPUT_SIDE | BELOW_INPUT)
    assert not upward, upward

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for name in graph.get(start, ()):
            if name == goal or (name not in seen and (seen.add(name) or reaches(name, goal, seen))):
                return True
        return False

    cycles = sorted(m for m in members if reaches(m, m, set()))
    assert not cycles, cycles
