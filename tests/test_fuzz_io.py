"""Property-based fuzzing of issue 26's ground: GGUF header semantics (versions, counts, key types), YAML number
forms in plans, and --output onto special files. Every case ends in exit 0 or 2 (1 only where a budget fails),
one Error line, no traceback, in bounded time, and never replaces what was not asked for.

Fast by default (CI); ``KVPLAN_FUZZ=long`` runs many more examples (the profiles of test_fuzz.py).
"""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import fuzz, run

from conftest import FP16, KV, make_config

#: make_config's model: 32 layers x 32 KV heads x head dim 128, fp16.
PER_TOKEN = KV * 32 * 32 * 128 * FP16
#: Seconds one hostile header may take to be read or refused.
HEADER_SECONDS = 10


# ---- GGUF header semantics ------------------------------------------------------------------------------------
def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


@st.composite
def gguf_value(draw: Any) -> bytes:
    """A type id and an encoded value: well formed, or with a length or count that lies."""
    vtype = draw(st.sampled_from([*_SCALAR_FORMATS, 8, 9, 13, 2**32 - 1]))
    if vtype in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[vtype]
        size = struct.calcsize(fmt)
        return struct.pack("<I", vtype) + draw(st.binary(min_size=size, max_size=size))
    if vtype == 8:
        text = draw(st.binary(max_size=12))
        length = draw(st.sampled_from([len(text), 2**63, 2**64 - 1, len(text) + 1]))
        return struct.pack("<IQ", 8, length) + text
    if vtype == 9:
        etype = draw(st.sampled_from([4, 8, 9, 6]))
        count = draw(st.sampled_from([0, 1, 3, 70_000, 2**24 + 1, 2**40, 2**64 - 1]))
        body = draw(st.binary(max_size=24))
        return struct.pack("<IIQ", 9, etype, count) + body
    return struct.pack("<I", vtype)


LLAMA_KEYS = [b"llama.block_count", b"llama.attention.head_count", b"llama.attention.head_count_kv",
              b"llama.embedding_length", b"llama.context_length", b"general.alignment"]


@st.composite
def gguf_header(draw: Any) -> bytes:
    version = draw(st.sampled_from([0, 1, 2, 3, 4, 2**32 - 1]))
    keys = draw(st.lists(st.tuples(st.sampled_from([*LLAMA_KEYS, b"x" * 3]), gguf_value()), max_size=6))
    n_kv = draw(st.sampled_from([len(keys) + 1, len(keys), len(keys) + 2, 2**16 + 1, 2**63]))
    n_tensors = draw(st.sampled_from([0, 1, 2**20 + 1, 2**64 - 1]))
    body = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + _s(b"general.architecture") + struct.pack("<I", 8)
    body += _s(b"llama")
    for key, value in keys:
        body += _s(key) + value
    return body + draw(st.binary(max_size=32))


@fuzz
@given(content=gguf_header(), padding=st.sampled_from([0, 1 << 20, 64 << 20]))
def test_any_gguf_header_ends_clean_and_quickly(content: bytes, padding: int, tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    with open(path, "wb") as handle:
        handle.write(content)
        handle.truncate(len(content) + padding)  # sparse: room that the counts may claim
    started = time.monotonic()
    result = run(["estimate", "-m", str(path), "--seq-len", "64"])
    assert time.monotonic() - started < HEADER_SECONDS, content[:64]
    if result.exit_code == 0:  # a header kvplan priced: its numbers come from the file's keys
        assert content[4:8] in (struct.pack("<I", 2), struct.pack("<I", 3)), content[:8]


@fuzz
@given(blocks=st.integers(min_value=0, max_value=2**32 - 1), kv_heads=st.sampled_from([1, 2, 4, 8]),
       version=st.sampled_from([2, 3]))
def test_gguf_block_count_is_priced_or_refused_by_the_layer_limit(blocks: int, kv_heads: int, version: int,
                                                                  tmp_path: Path) -> None:
    from kvplan.limits import MAX_LAYERS

    keys = {b"llama.block_count": blocks, b"llama.attention.head_count": 8, b"llama.attention.head_count_kv": kv_heads,
            b"llama.embedding_length": 128, b"llama.context_length": 4096}
    body = b"GGUF" + struct.pack("<IQQ", version, 0, len(keys) + 1) + _s(b"general.architecture")
    body += struct.pack("<I", 8) + _s(b"llama")
    for key, value in keys.items():
        body += _s(key) + struct.pack("<II", 4, value)
    path = tmp_path / "m.gguf"
    path.write_bytes(body)
    result = run(["estimate", "-m", str(path), "--seq-len", "64", "--engine", "ideal", "--format", "json"])
    if blocks > MAX_LAYERS.maximum:
        assert result.exit_code == 2 and "past kvplan's limit" in result.stderr, result.stderr
    elif blocks == 0:
        assert result.exit_code == 2
    else:
        assert result.exit_code == 0, result.stderr
        head_dim = 128 // 8
        assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] == KV * blocks * kv_heads * head_dim * FP16 * 64


# ---- YAML number forms in plans ---------------------------------------------------------------------------------
@st.composite
def yaml_int_text(draw: Any) -> tuple[str, int | None]:
    """(how a number is written, its value on the command line) where the command line reads it; None where a plan
    must refuse it (YAML 1.1 reads it otherwise: octal, base 60, hex, binary, grouped by _)."""
    value = draw(st.integers(min_value=1, max_value=200_000))
    form = draw(st.sampled_from(["plain", "plus", "octal", "base60", "hex", "binary", "grouped", "quoted-zero"]))
    if form == "plain":
        return str(value), value
    if form == "plus":
        return f"+{value}", value
    if form == "octal":
        return "0" + format(value, "o"), None
    if form == "base60":
        return f"{value // 60}:{value % 60:02d}" if value >= 60 else f"1:{value % 60:02d}", None
    if form == "hex":
        return hex(value), None
    if form == "binary":
        return bin(value), None
    if form == "grouped":
        return f"{value:_}" if value >= 1000 else f"{value}_0", None
    return f"'0{value}'", value  # quoted: text, read by the command line's parser (leading zero is decimal)


@fuzz
@given(number=yaml_int_text(), key=st.sampled_from(["seq_len", "batch"]))
def test_plan_numbers_read_as_the_command_line_or_are_refused(number: tuple[str, int | None], key: str,
                                                              tmp_path: Path) -> None:
    written, value = number
    (tmp_path / "config.json").write_text(json.dumps(make_config(max_position_embeddings=1 << 20)))
    other = "batch: 1" if key == "seq_len" else "seq_len: 64"
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"scenarios:\n  - name: a\n    model: ./config.json\n    {other}\n    {key}: {written}\n")
    result = run(["check", str(plan), "--format", "json"])
    if value is None:
        assert result.exit_code == 2, (written, result.output)
        assert f"'{key}': {written} is " in result.stderr and "in YAML 1.1" in result.stderr, result.stderr
    elif key == "batch" and written.startswith("'"):
        assert result.exit_code == 2  # batch is an integer key: text is a type error, as ever
    else:
        assert result.exit_code == 0, (written, result.stderr)
        tokens, batch = (value, 1) if key == "seq_len" else (64, value)
        assert json.loads(result.stdout)["scenarios"][0]["kv_cache_bytes"] == PER_TOKEN * tokens * batch


# ---- --output onto special files ------------------------------------------------------------------------------
KINDS = ("missing", "regular", "read-only", "symlink", "dangling-symlink", "fifo-read", "fifo-unread", "dev-null",
         "directory")


def _make_target(kind: str, folder: Path) -> tuple[Path, list[bytes]]:
    path, got = folder / "out.json", []
    if kind in ("regular", "read-only"):
        path.write_text("old")
        if kind == "read-only":
            path.chmod(0o444)
    elif kind == "symlink":
        (folder / "target.json").write_text("old")
        path.symlink_to(folder / "target.json")
    elif kind == "dangling-symlink":
        path.symlink_to(folder / "not-yet.json")
    elif kind.startswith("fifo"):
        os.mkfifo(path)
        if kind == "fifo-read":
            def reader() -> None:
                with open(path, "rb") as handle:
                    got.append(handle.read())

            threading.Thread(target=reader, daemon=True).start()
            time.sleep(0.05)
    elif kind == "dev-null":
        path = Path("/dev/null")
    elif kind == "directory":
        path.mkdir()
    return path, got


@fuzz
@given(kind=st.sampled_from(KINDS), seq_len=st.integers(min_value=1, max_value=8192))
def test_output_onto_any_kind_of_file(kind: str, seq_len: int, tmp_path: Path) -> None:
    folder = tmp_path / f"case-{time.monotonic_ns()}"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps(make_config()))
    path, got = _make_target(kind, folder)
    before_kind = stat.S_IFMT(os.lstat(path).st_mode) if kind != "missing" else stat.S_IFREG  # a new file: regular
    result = run(["estimate", "-m", str(config), "--seq-len", str(seq_len), "--output", str(path), "--format", "json"])
    expected = PER_TOKEN * seq_len
    if kind in ("read-only", "fifo-unread", "directory"):
        assert result.exit_code == 2, result.output
        assert stat.S_IFMT(os.lstat(path).st_mode) == before_kind
        if kind == "read-only":
            assert path.read_text() == "old"
    else:
        assert result.exit_code == 0, result.output
        after = os.lstat(path)
        assert stat.S_IFMT(after.st_mode) == before_kind  # a FIFO, link or device stays one
        if kind == "fifo-read":
            for _ in range(500):
                if got:
                    break
                time.sleep(0.01)
            assert json.loads(got[0])["totals"]["kv_cache_bytes"] == expected
        elif kind != "dev-null":
            assert json.loads(path.read_text())["totals"]["kv_cache_bytes"] == expected
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]

