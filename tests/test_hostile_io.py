"""Hostile input, round 3 (issue 26): YAML 1.1 numbers in plans, --dp and --tensor-split, what --output and
--plot may touch, interrupted writes, sizes past float range, GGUF counts and versions, check reports that
`kvplan diff` must read back, FIFOs as inputs, a Hub body past the limit, NEL and bidi in YAML, a full stderr.

Each case ends clean: a right number, or exit 2 with one line naming the problem, in bounded time, with
nothing replaced that was not asked for.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.cli import app
from kvplan.errors import InputError, SourceError
from kvplan.limits import MAX_LAYERS, MAX_REPORT_BYTES, MAX_REPORT_NODES, MAX_SCENARIOS, MAX_YAML_NODES
from kvplan.outfile import write_atomic
from kvplan.report import to_yaml

from conftest import FP16, KV, make_config

ROOT = Path(__file__).resolve().parents[1]
#: make_config's model: 32 layers x 32 KV heads x head dim 128 (hidden 4096 / 32 heads), fp16.
PER_TOKEN = KV * 32 * 32 * 128 * FP16


def invoke(runner: Any, *args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result


def error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_plan(folder: Path, body: str, name: str = "plan.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))


# ---- item 2: YAML 1.1 number forms in plans -------------------------------------------------------------
@pytest.mark.parametrize(
    ("written", "yaml_value", "form"),
    [
        ("010000", 0o10000, "octal"),
        ("-010", -0o10, "octal"),
        ("1:08:16", 1 * 3600 + 8 * 60 + 16, "base 60"),
        ("0x2710", 0x2710, "hex"),
        ("0b1010", 0b1010, "binary"),
        ("10_000", 10000, "digits grouped by _"),
    ],
)
def test_plan_numbers_in_yaml_1_1_forms_are_refused_by_key_and_value(
    written: str, yaml_value: int, form: str, tmp_path: Path, runner: Any, write_config: Any
) -> None:
    write_config(make_config())
    plan = write_plan(tmp_path, f"""\
        scenarios:
          - name: chat
            model: ./config.json
            seq_len: {written}
        """)
    result = invoke(runner, "check", str(plan), "--format", "json")
    assert result.exit_code == 2, result.output
    line = error_line(result)
    assert "line 4" in line and "'seq_len'" in line and written in line, line
    assert f"is {yaml_value:,} in YAML 1.1 ({form})" in line, line
    assert result.stdout == ""


def test_plan_sexagesimal_float_is_refused(tmp_path: Path, runner: Any, write_config: Any) -> None:
    write_config(make_config())
    plan = write_plan(tmp_path, """\
        scenarios:
          - name: chat
            model: ./config.json
            seq_len: 1000
            require_fit_on: {gpu: H100}
            gpu_memory_utilization: 0:54.5
        """)
    result = invoke(runner, "check", str(plan))
    assert result.exit_code == 2
    assert "'gpu_memory_utilization': 0:54.5 is 54.5 in YAML 1.1 (base 60)" in error_line(result)


def test_plan_decimal_and_quoted_numbers_read_as_the_command_line(tmp_path: Path, runner: Any, write_config: Any) -> None:
    write_config(make_config())
    plan = write_plan(tmp_path, """\
        scenarios:
          - {name: plain, model: ./config.json, seq_len: 10000}
          - {name: quoted, model: ./config.json, seq_len: '010000'}
        """)
    result = invoke(runner, "check", str(plan), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["scenarios"]
    cli = json.loads(invoke(runner, "estimate", "-m", str(tmp_path / "config.json"), "--seq-len", "010000",
                            "--format", "json").stdout)
    assert [row["kv_cache_bytes"] for row in rows] == [PER_TOKEN * 10000] * 2  # not 4,096 tokens
    assert cli["totals"]["kv_cache_bytes"] == PER_TOKEN * 10000


def test_reports_still_read_yaml_numbers_as_written(tmp_path: Path) -> None:
    from kvplan.safeload import load_yaml

    assert load_yaml("a: 010\nb: 1:00\n", label="r") == {"a": 8, "b": 60}  # only plans are held to decimal


# ---- item 5: --dp and --tensor-split --------------------------------------------------------------------
def test_dp_past_the_gpu_limit_and_past_num_gpus(runner: Any, write_config: Any) -> None:
    from kvplan.limits import MAX_NUM_GPUS

    config = str(write_config(make_config()))
    result = invoke(runner, "capacity", "-m", config, "--gpu", "H100", "--dp", str(MAX_NUM_GPUS.maximum + 1))
    assert result.exit_code == 2
    assert f"--dp {MAX_NUM_GPUS.maximum + 1:,} is past kvplan's limit of {MAX_NUM_GPUS.maximum:,}" in error_line(result)
    result = invoke(runner, "capacity", "-m", config, "--gpu", "H100", "--tp", "2", "--dp", "4", "--num-gpus", "4")
    assert result.exit_code == 2
    assert "--dp 4 ranks of --tp 2 x --pp 1 need 8 GPUs, more than --num-gpus 4" in error_line(result)  # 2 x 1 x 4
    ok = invoke(runner, "capacity", "-m", config, "--gpu", "H100", "--dp", "4", "--num-gpus", "8", "--format", "json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["inputs"]["tp"] == 8 // (1 * 4)  # GPUs / (pp x dp)


@pytest.mark.parametrize("split", ["nan,1", "1,inf", "-inf,1", "nan"])
def test_tensor_split_refuses_nan_and_inf(split: str, runner: Any, write_config: Any) -> None:
    config = str(write_config(make_config()))
    result = invoke(runner, "capacity", "-m", config, "--gpu", "H100", "--engine", "llama.cpp",
                    f"--tensor-split={split}")
    assert result.exit_code == 2
    assert "not a finite number" in error_line(result)


# ---- item 6: --output onto any input of the run -----------------------------------------------------------
@pytest.mark.parametrize("model", ["./cfg.json", "./model"])
def test_check_output_onto_a_config_the_plan_reads_is_refused(model: str, tmp_path: Path, runner: Any) -> None:
    (tmp_path / "model").mkdir()
    target = tmp_path / ("cfg.json" if model.endswith(".json") else "model/config.json")
    target.write_text(json.dumps(make_config()))
    before = target.read_bytes()
    plan = write_plan(tmp_path, f"scenarios:\n  - {{name: a, model: {model}, seq_len: 100}}\n")
    result = invoke(runner, "check", str(plan), "--output", str(target))
    assert result.exit_code == 2
    assert f"--output {target} is the command's own input" in error_line(result)
    assert target.read_bytes() == before


# ---- item 7: --output onto special files --------------------------------------------------------------------
def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def reader() -> None:
        with open(path, "rb") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread


def test_output_into_a_fifo_with_a_reader_writes_into_it(tmp_path: Path, runner: Any, write_config: Any) -> None:
    config = str(write_config(make_config()))
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = _read_fifo(fifo, got)
    for _ in range(100):  # the reader has opened its end
        time.sleep(0.01)
        if thread.is_alive():
            break
    time.sleep(0.1)
    result = invoke(runner, "estimate", "-m", config, "--seq-len", "100", "--output", str(fifo), "--format", "json")
    thread.join(10)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not replaced by a file
    assert json.loads(got[0])["totals"]["kv_cache_bytes"] == PER_TOKEN * 100
    assert leftovers(tmp_path) == []


def test_output_into_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path, runner: Any, write_config: Any) -> None:
    config = str(write_config(make_config()))
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = invoke(runner, "estimate", "-m", config, "--output", str(fifo))
    assert time.monotonic() - started < 10
    assert result.exit_code == 2
    assert "it is a FIFO that no process is reading" in error_line(result)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_dev_null_stays_a_device(runner: Any, write_config: Any) -> None:
    config = str(write_config(make_config()))
    before = os.stat("/dev/null")
    result = invoke(runner, "estimate", "-m", config, "--output", "/dev/null")
    assert result.exit_code == 0, result.output
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_output_through_proc_self_fd_writes_into_the_open_file(tmp_path: Path, write_config: Any) -> None:
    config = str(write_config(make_config()))
    out = tmp_path / "shell-redirect.log"
    with open(out, "wb") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        done = subprocess.run([sys.executable, "-m", "kvplan", "estimate", "-m", config, "--seq-len", "100",
                               "--output", "/proc/self/fd/1", "--format", "json"], stdout=handle,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert os.stat(out).st_ino == inode  # the shell's file, written into, not replaced
    assert json.loads(out.read_text())["totals"]["kv_cache_bytes"] == PER_TOKEN * 100


def test_output_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path: Path, runner: Any,
                                                                          write_config: Any) -> None:
    config = str(write_config(make_config()))
    target = tmp_path / "reports" / "kv.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "kv.json"
    link.symlink_to(target)
    result = invoke(runner, "estimate", "-m", config, "--seq-len", "100", "--output", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["totals"]["kv_cache_bytes"] == PER_TOKEN * 100
    assert leftovers(tmp_path) == [] and leftovers(target.parent) == []


def test_read_only_output_is_refused(tmp_path: Path, runner: Any, write_config: Any) -> None:
    config = str(write_config(make_config()))
    out = tmp_path / "kept.yaml"
    out.write_text("kept\n")
    out.chmod(0o444)
    result = invoke(runner, "estimate", "-m", config, "--output", str(out))
    assert result.exit_code == 2
    assert f"--output {out} is read-only" in error_line(result)
    assert out.read_text() == "kept\n" and stat.S_IMODE(os.stat(out).st_mode) == 0o444


def test_plot_path_has_the_output_protections(tmp_path: Path, runner: Any) -> None:
    model = tmp_path / "model.svg"  # a config.json under a plot's name: the input itself
    model.write_text(json.dumps(make_config()))
    before = model.read_bytes()
    result = invoke(runner, "capacity", "-m", str(model), "--gpu", "H100", "--plot", str(model))
    assert result.exit_code == 2
    assert f"--plot {model} is the command's own input" in error_line(result)
    assert model.read_bytes() == before
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    fifo = tmp_path / "plot.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="--plot .* no process is reading"):
        write_atomic(fifo, png, flag="--plot")
    locked = tmp_path / "locked.png"
    locked.write_bytes(b"kept")
    locked.chmod(0o444)
    with pytest.raises(InputError, match="--plot .* is read-only"):
        write_atomic(locked, png, flag="--plot")
    write_atomic(tmp_path / "kv.png", png, flag="--plot")
    assert (tmp_path / "kv.png").read_bytes() == png
    assert leftovers(tmp_path) == []


# ---- item 8: an interrupted write leaves nothing behind ------------------------------------------------------
def test_ctrl_c_during_a_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "report.yaml"
    out.write_text("old\n")

    def pieces() -> Any:
        yield "first piece\n"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, pieces())
    assert leftovers(tmp_path) == []
    assert out.read_text() == "old\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminating_signal_during_a_write_leaves_no_temporary_file(signum: int, tmp_path: Path) -> None:
    out = tmp_path / "report.yaml"
    out.write_text("old\n")
    script = textwrap.dedent(f"""\
        import os, signal
        from pathlib import Path
        from kvplan.outfile import write_atomic

        def pieces():
            yield "first piece\\n"
            os.kill(os.getpid(), {int(signum)})
            yield "never written\\n"

        write_atomic(Path({str(out)!r}), pieces())
        """)
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -signum, (done.returncode, done.stderr)  # still ended by the signal
    assert leftovers(tmp_path) == []
    assert out.read_text() == "old\n"


# ---- item 9: integers past float range ------------------------------------------------------------------------
def test_plan_size_past_float_range_is_exit_2(tmp_path: Path, runner: Any, write_config: Any) -> None:
    write_config(make_config())
    plan = write_plan(tmp_path, f"scenarios:\n  - {{name: a, model: ./config.json, seq_len: 100, "
                                f"max_kv_bytes: {10**400}}}\n")
    result = invoke(runner, "check", str(plan))
    assert result.exit_code == 2
    assert "max_kv_bytes 1.00e400 bytes is past kvplan's limit of 16 EiB" in error_line(result)


def test_size_at_the_limit_passes_and_one_past_is_refused() -> None:
    from kvplan.units import MAX_SIZE_BYTES, parse_size

    assert parse_size(2**64, what="--kv-budget") == 2**64 == MAX_SIZE_BYTES
    with pytest.raises(InputError, match="18,446,744,073,709,551,617 bytes is past"):
        parse_size(2**64 + 1, what="--kv-budget")


def test_diff_of_a_report_with_totals_past_float_range_is_exit_2(tmp_path: Path, runner: Any,
                                                                 write_config: Any) -> None:
    config = str(write_config(make_config()))
    report = json.loads(invoke(runner, "estimate", "-m", config, "--seq-len", "100", "--format", "json").stdout)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report))
    report["totals"]["kv_cache_bytes"] = 10**400
    new = tmp_path / "new.json"
    new.write_text(json.dumps(report))
    result = invoke(runner, "diff", str(old), str(new))
    assert result.exit_code == 2
    assert "totals.kv_cache_bytes must be a non-negative integer up to 2**64 (16 EiB), got 1.00e400" in error_line(result)


# ---- items 10 and 12: GGUF counts and versions ------------------------------------------------------------------
def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _kv_string(key: bytes, value: bytes) -> bytes:
    return _s(key) + struct.pack("<I", 8) + _s(value)


def _gguf_v3(tmp_path: Path) -> Path:
    gguf_tests = pytest.importorskip("test_gguf")
    arch, kv, _ = gguf_tests.FAMILIES["llama-gqa"]
    return gguf_tests.write_gguf(tmp_path / "v3.gguf", arch, kv)


def test_gguf_v2_reads_as_gguf_py_reads_it(tmp_path: Path, runner: Any) -> None:
    v3 = _gguf_v3(tmp_path)
    data = bytearray(v3.read_bytes())
    assert data[4:8] == struct.pack("<I", 3)
    data[4:8] = struct.pack("<I", 2)  # v2 and v3 share the layout: u64 counts (gguf-py reads both so)
    v2 = tmp_path / "v2.gguf"
    v2.write_bytes(bytes(data))
    gguf = pytest.importorskip("gguf")
    assert gguf.GGUFReader(str(v2)).fields["llama.block_count"].parts[-1][0] == 4
    old = json.loads(invoke(runner, "estimate", "-m", str(v3), "--seq-len", "100", "--engine", "ideal", "--format",
                            "json").stdout)
    new = invoke(runner, "estimate", "-m", str(v2), "--seq-len", "100", "--engine", "ideal", "--format", "json")
    assert new.exit_code == 0, new.output
    assert json.loads(new.stdout)["totals"]["kv_cache_bytes"] == old["totals"]["kv_cache_bytes"] == KV * 4 * 2 * 16 * FP16 * 100


def test_gguf_v1_is_refused_by_name(tmp_path: Path, runner: Any) -> None:
    path = tmp_path / "v1.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<III", 1, 0, 0))
    result = invoke(runner, "estimate", "-m", str(path))
    assert result.exit_code == 2
    assert "GGUF version 1 is not supported (GGUF v1, 2023, counted in 32 bits" in error_line(result)


@pytest.mark.parametrize(
    ("counts", "phrase"),
    [((0, (1 << 16) + 1), "metadata key/value count is 65,537, past kvplan's limit of 65,536"),
     (((1 << 20) + 1, 0), "tensor count is 1,048,577, past kvplan's limit of 1,048,576")],
)
def test_gguf_counts_past_their_bound_are_refused_before_reading(counts: tuple[int, int], phrase: str,
                                                                 tmp_path: Path, runner: Any) -> None:
    path = tmp_path / "many.gguf"
    with open(path, "wb") as handle:  # sparse: large enough that the file's size allows the count
        handle.write(b"GGUF" + struct.pack("<IQQ", 3, *counts))
        handle.truncate(64 << 20)
    started = time.monotonic()
    result = invoke(runner, "estimate", "-m", str(path))
    assert time.monotonic() - started < 10
    assert result.exit_code == 2
    assert phrase in error_line(result)


def test_gguf_kept_text_is_bounded_in_all(tmp_path: Path) -> None:
    from kvplan.gguf.reader import MAX_KEPT_BYTES, MAX_STRING_BYTES, LocalSource, read_header

    each = MAX_STRING_BYTES - 1024  # every string near its own limit; together past the header's
    count = MAX_KEPT_BYTES // each + 1
    path = tmp_path / "wordy.gguf"
    with open(path, "wb") as handle:
        handle.write(b"GGUF" + struct.pack("<IQQ", 3, 0, count))
        for index in range(count):
            handle.write(_s(b"k%d" % index) + struct.pack("<IQ", 8, each))
            handle.seek(each, os.SEEK_CUR)  # sparse text
        handle.truncate(handle.tell())
    source = LocalSource(str(path))
    with pytest.raises(Exception, match=f"pass {MAX_KEPT_BYTES // 1024**2} MiB at k{count - 1}"):
        read_header(source)
    source.close()


def test_gguf_block_count_has_the_config_layer_limit(tmp_path: Path, runner: Any) -> None:
    def header(blocks: int) -> bytes:
        return (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + _kv_string(b"general.architecture", b"llama")
                + _s(b"llama.block_count") + struct.pack("<II", 4, blocks))

    path = tmp_path / "deep.gguf"
    path.write_bytes(header(MAX_LAYERS.maximum + 1))
    result = invoke(runner, "estimate", "-m", str(path))
    assert result.exit_code == 2
    assert f"llama.block_count = {MAX_LAYERS.maximum + 1:,} is past kvplan's limit of {MAX_LAYERS.maximum:,}" in (
        error_line(result))
    path.write_bytes(header(MAX_LAYERS.maximum))  # at the limit: read on, to the next missing key
    assert "block_count" not in error_line(invoke(runner, "estimate", "-m", str(path)))


def test_gguf_long_arrays_are_skipped_quickly_and_the_next_key_still_read(tmp_path: Path) -> None:
    from kvplan.gguf.reader import MAX_ARRAY_LENGTH, MAX_KEPT_ARRAY, ArraySummary, LocalSource, read_header

    tokens = [b"tok%d" % i for i in range(1 << 20)]  # 4x Gemma 3's vocabulary of 262,144
    scores = MAX_ARRAY_LENGTH  # f64 each: 128 MiB, a sparse hole in the file
    path = tmp_path / "vocab.gguf"
    with open(path, "wb") as handle:
        handle.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 4) + _kv_string(b"general.architecture", b"llama")
                     + _s(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(map(_s, tokens))
                     + _s(b"tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 12, scores))
        handle.seek(8 * scores, os.SEEK_CUR)
        handle.write(_kv_string(b"general.name", b"after the arrays"))
    started = time.monotonic()
    source = LocalSource(str(path))
    header = read_header(source)
    source.close()
    assert time.monotonic() - started < 20
    assert header.metadata["general.name"] == "after the arrays"
    assert header.metadata["tokenizer.ggml.tokens"] == ArraySummary(element_type="str", length=1 << 20)
    assert header.metadata["tokenizer.ggml.scores"] == ArraySummary(element_type="<d", length=scores)
    assert len(tokens) > MAX_KEPT_ARRAY
    # the scores were stepped over: at most one read-ahead buffer (64 MiB) of their 128 MiB was read
    assert header.header_bytes < os.path.getsize(path) - 8 * scores + (64 << 20)


# ---- item 11: check reports that kvplan diff reads back ------------------------------------------------------
@pytest.mark.slow
def test_check_at_the_scenario_limit_is_read_back_by_diff(tmp_path: Path, runner: Any, write_config: Any) -> None:
    write_config(make_config())
    rows = "".join(f"  - name: scenario-{i:05d}-of-a-ten-thousand-scenario-sweep\n" for i in range(MAX_SCENARIOS))
    # every gate on (the largest compact row), one set of inputs (computed once: the run remembers it)
    plan = write_plan(tmp_path, "defaults:\n  model: ./config.json\n  seq_len: 100\n  max_kv_bytes: 40GiB\n"
                                "  max_kv_bytes_per_gpu: 40GiB\n  require_fit_on: {gpu: H100-80GB, num_gpus: 1}\n"
                                "  min_concurrency: 1\n  weights_bytes: 16GB\nscenarios:\n" + rows)
    report = tmp_path / "report.yaml"
    result = invoke(runner, "check", str(plan), "--output", str(report), "--format", "yaml")
    assert result.exit_code == 0, result.output[-2000:]
    text = report.read_text()
    assert len(text.encode()) <= MAX_REPORT_BYTES
    nodes = sum(isinstance(e, (yaml.ScalarEvent, yaml.CollectionStartEvent))
                for e in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert MAX_YAML_NODES < nodes <= MAX_REPORT_NODES  # past the config/plan node limit, within the report one
    same = invoke(runner, "diff", str(report), str(report), "--format", "json")
    assert same.exit_code == 0, same.output[-2000:]
    too_many = write_plan(tmp_path, "defaults:\n  model: ./config.json\nscenarios:\n" + rows + "  - name: one-more\n",
                          name="too-many.yaml")
    result = invoke(runner, "check", str(too_many))
    assert result.exit_code == 2
    assert f"{MAX_SCENARIOS + 1:,} scenarios, past kvplan's limit of {MAX_SCENARIOS:,}" in error_line(result)


def test_check_refuses_a_report_diff_could_not_read(tmp_path: Path, runner: Any, write_config: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.check_stream as check_stream

    write_config(make_config())
    plan = write_plan(tmp_path, "defaults:\n  model: ./config.json\n  seq_len: 100\nscenarios:\n"
                      + "".join(f"  - name: s{i}\n" for i in range(50)))
    full = json.loads(invoke(runner, "check", str(plan), "--format", "json", "--full").stdout)
    per_row = check_stream._count_nodes(full["scenarios"][0])
    # a limit that 20 --full rows (and the header's room) pass: the check stops at the 21st, names it, writes nothing
    monkeypatch.setattr(check_stream, "MAX_REPORT_NODES", check_stream._HEADER_NODES + 20 * per_row + per_row // 2)
    out = tmp_path / "report.yaml"
    result = invoke(runner, "check", str(plan), "--full", "--output", str(out))
    assert result.exit_code == 2
    assert "at scenario 's20', more than `kvplan diff` reads back" in error_line(result)
    assert "without --full" in result.stderr
    assert not out.exists()


# ---- item 13: FIFOs as inputs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["config.json", "model.gguf", "plan.yaml"])
def test_a_fifo_with_no_writer_as_input_ends_quickly(name: str, tmp_path: Path, runner: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.safeload

    monkeypatch.setattr(kvplan.safeload, "FIFO_WAIT_S", 0.5)
    fifo = tmp_path / name
    os.mkfifo(fifo)
    args = ["check", str(fifo)] if name.endswith(".yaml") else ["estimate", "-m", str(fifo)]
    started = time.monotonic()
    result = invoke(runner, *args)
    assert time.monotonic() - started < 10
    assert result.exit_code == 2
    line = error_line(result)
    assert ("is not a regular file" if name.endswith(".gguf") else "named pipe (FIFO) and nothing was written") in line


def test_a_fifo_with_a_writer_is_read(tmp_path: Path, runner: Any) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_text(json.dumps(make_config())), daemon=True).start()
    result = invoke(runner, "estimate", "-m", str(fifo), "--seq-len", "100", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] == PER_TOKEN * 100


# ---- item 14: a Hub config body past the limit is not downloaded whole ------------------------------------------
@pytest.mark.parametrize("fault", [None, "flood"])
def test_hub_config_past_the_limit_stops_downloading(fault: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvplan.limits import MAX_FILE_BYTES
    from kvplan.modelref import load_raw_config

    from hubstub import HubStub

    big = b'{"model_type": "llama", "pad": "' + b"x" * (MAX_FILE_BYTES + 4096) + b'"}'
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", "30")
    with HubStub({"acme/huge": big}, fault=fault) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(SourceError) as err:
            load_raw_config("acme/huge")
        sent = hub.sent_bytes
    assert "larger than kvplan's 16 MiB limit for a config.json; the download was stopped there" in err.value.message
    if fault == "flood":  # a body with no length that never ends: stopped within one 10 MiB chunk (plus socket buffers)
        assert MAX_FILE_BYTES < sent < HubStub.FLOOD_BYTES // 4, sent
    else:
        assert f"is {len(big):,} bytes" in err.value.message  # the announced size: refused before the body


# ---- item 15: NEL and bidi overrides in YAML reports ----------------------------------------------------------
@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("text", ["a\x85b", "left\u202eright", "x\u2028y", "p\u2029q", "c1\x9bz", "iso\u2066x\u2069"])
def test_yaml_reports_escape_line_breaks_and_bidi_controls(text: str, pure: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if pure:
        monkeypatch.delattr(yaml, "CSafeDumper", raising=False)
    dumped = to_yaml({"name": text, "model": "café"})
    special = [ch for ch in text if not ch.isascii()]
    assert special and not any(ch in dumped for ch in special), repr(dumped)
    assert yaml.safe_load(dumped) == {"name": text, "model": "café"}  # the round trip keeps the value
    assert to_yaml({"model": "café"}) == "model: café\n"  # UTF-8 text stays readable where nothing is unsafe


# ---- item 16: an error that cannot be written still exits 2 ------------------------------------------------------
@pytest.mark.parametrize("case", ["error", "budget"])
def test_a_full_stderr_keeps_the_exit_code(case: str, tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    (tmp_path / "config.json").write_text(json.dumps(make_config()))
    plan = write_plan(tmp_path, "scenarios:\n  - {name: a, model: ./config.json, seq_len: 1000, max_kv_bytes: 1MiB}\n")
    args = ["estimate", "-m", str(tmp_path / "missing.json")] if case == "error" else ["check", str(plan), "--format",
                                                                                        "json"]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "kvplan", *args], stderr=full, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    if case == "error":  # the error line is lost; the code still says "bad input"
        assert done.returncode == 2 and done.stdout == b""
    else:  # the FAIL line is lost; the report and "a budget is exceeded" are not
        assert done.returncode == 1
        assert json.loads(done.stdout)["scenarios"][0]["kv_cache_bytes"] == PER_TOKEN * 1000 > 1024**2
