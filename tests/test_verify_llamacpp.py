"""`kvplan verify --engine llama.cpp`: llama.cpp's log lines read, kvplan's lines written, the verdict, the CLI.

The first tests need no llama.cpp (log text from llama.cpp's own format, GGUFs written with the gguf
package); the rest run the real llama.cpp through llama-cpp-python and skip without it.
"""

from __future__ import annotations

import importlib.util
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.units import MiB
from kvplan.verify.llamacpp import Prediction, compare_caches, judge, make_flags
from kvplan.verify.llamacpp_engine import EngineRun
from kvplan.verify.llamacpp_lines import CacheFigures, parse_log, predicted_figures

from conftest import shared_config_path

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
needs_llama_cpp = pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed")
#: llama-cpp-python's source distribution; it vendors llama.cpp and the GGUF headers of real models
#: (vendor/llama.cpp/models/ggml-vocab-*.gguf, written by llama.cpp's converter).
SDIST = Path(__file__).resolve().parents[2] / "shared" / "wheels" / "llama_cpp_python-0.3.36.tar.gz"

#: Lines llama.cpp 0.3.36 logs (src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp).
ISWA_LOG = """\
llama_context: n_ctx                 = 4096
llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells
llama_kv_cache: layer   0: filtered
llama_kv_cache: layer   1: dev = CPU
llama_kv_cache:        CPU KV buffer size =     1.06 MiB
llama_kv_cache: size =    1.06 MiB (  2048 cells,   2 layers,  2/2 seqs), K (q8_0):    0.53 MiB, V (q8_0):    0.53 MiB
llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 32
llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells
llama_kv_cache: layer   0: dev = CPU
llama_kv_cache: layer   1: filtered
llama_kv_cache:        CPU KV buffer size =     0.40 MiB
llama_kv_cache: size =    0.40 MiB (   768 cells,   2 layers,  2/2 seqs), K (q8_0):    0.20 MiB, V (q8_0):    0.20 MiB
llama_memory_recurrent:        CPU RS buffer size =     0.06 MiB
llama_memory_recurrent: size =    0.06 MiB (     2 cells,   4 layers,  2 seqs  0 rs_seq), R (f32):    0.01 MiB, \
S (f32):    0.05 MiB, P (f32):    0.00 MiB
""".splitlines()


def test_every_cache_line_is_read() -> None:
    base, swa, recurrent = parse_log(ISWA_LOG)
    assert (base.name, base.cells, base.layers, base.seqs, base.streams) == ("base", 2048, 2, 2, 2)
    assert (base.k_type, base.k_mib, base.v_mib, base.size_mib, base.buffer_mib) == ("q8_0", "0.53", "0.53", "1.06", "1.06")
    assert base.layer_indices == (1,)  # the DEBUG lines: layer 0 is filtered out of the base cache
    assert (swa.name, swa.cells, swa.layers, swa.layer_indices, swa.buffer_mib) == ("swa", 768, 2, (0,), "0.40")
    assert (recurrent.name, recurrent.cells, recurrent.layers, recurrent.seqs, recurrent.streams) == (
        "recurrent", 2, 4, 2, 0)
    assert (recurrent.k_type, recurrent.k_mib, recurrent.v_mib) == ("f32", "0.01", "0.05")


def test_predicted_line_is_the_line_llama_cpp_prints() -> None:
    """The issue's two lines: a 4-layer GGUF with 2 KV heads of 32 (f16 at 2048, q8_0 with -fa on at 4096)."""
    k_f16 = 4 * 2048 * 2 * 32 * 2  # layers, cells, KV heads, head size, f16
    assert k_f16 == 1 * MiB
    line = predicted_figures("base", cells=2048, layers=4, seqs=1, streams=1, k_type="f16", v_type="f16",
                             k_bytes=k_f16, v_bytes=k_f16).line
    assert line == ("llama_kv_cache: size =    2.00 MiB (  2048 cells,   4 layers,  1/1 seqs), "
                    "K (f16):    1.00 MiB, V (f16):    1.00 MiB")
    k_q8 = 4 * 4096 * (2 * 32 // 32) * 34  # layers, cells, q8_0 blocks per row (32 values), 34 bytes per block
    q8 = predicted_figures("base", cells=4096, layers=4, seqs=1, streams=1, k_type="q8_0", v_type="q8_0",
                           k_bytes=k_q8, v_bytes=k_q8)
    assert (q8.size_mib, q8.k_mib, q8.v_mib) == ("2.12", "1.06", "1.06")
    assert parse_log([line])[0].size_mib == "2.00"


def _logged(**changes: object) -> CacheFigures:
    base = predicted_figures("base", cells=2048, layers=4, seqs=1, streams=1, k_type="f16", v_type="f16",
                             k_bytes=MiB, v_bytes=MiB, layer_indices=(0, 1, 2, 3))
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_cache_passes_only_when_every_figure_matches() -> None:
    want = _logged()
    assert compare_caches([_logged()], [want], measure="tensors")[0].match
    off_by_a_row = compare_caches([_logged(k_bytes=MiB + 64)], [want], measure="tensors")[0]
    assert not off_by_a_row.match and off_by_a_row.differences == ("K bytes: llama.cpp 1,048,640, kvplan 1,048,576",)
    # NOTE: the log prints 0.01 MiB: a 64-byte gap is seen by --measure tensors only.
    assert compare_caches([_logged(k_bytes=MiB + 64)], [want], measure="log")[0].match
    assert compare_caches([_logged(cells=2304)], [want], measure="log")[0].differences == (
        "cells: llama.cpp 2304, kvplan 2048",)
    missing = compare_caches([], [want], measure="log")
    assert [v.differences for v in missing] == [("kvplan predicts a base cache llama.cpp did not make",)]


#: DeepSeek-V4's compressor-state lines as llama.cpp 0.3.36 logs them (src/llama-kv-cache-dsv4.cpp), from the tiny
#: deepseek4 model of tests/llamacpp_oracle.py at -c 4096 -np 2: head 64, indexer head 128, one CSA and one HCA layer.
DSV4_STATE_LOG = """\
llama_kv_cache_dsv4: creating DSV4 CSA compressor state
llama_dsv4_comp_state:        CPU DSV4 csa state buffer size =     0.02 MiB
llama_dsv4_comp_state: csa ratio = 4, state = 8 x 128, streams = 2, rs_seq = 0, layers = 1, size =    0.02 MiB
llama_kv_cache_dsv4: creating DSV4 HCA compressor state
llama_dsv4_comp_state:        CPU DSV4 hca state buffer size =     0.12 MiB
llama_dsv4_comp_state: hca ratio = 128, state = 128 x 64, streams = 2, rs_seq = 0, layers = 1, size =    0.12 MiB
""".splitlines()


def test_deepseek4_compressor_state_lines_are_read_and_written() -> None:
    csa, hca = parse_log(DSV4_STATE_LOG)
    assert (csa.name, csa.kind, csa.ratio, csa.cells, csa.width, csa.seqs, csa.streams, csa.layers) == (
        "csa_state", "state", 4, 8, 128, 2, 0, 1)
    assert (csa.size_mib, csa.buffer_mib, hca.size_mib, hca.buffer_mib) == ("0.02", "0.02", "0.12", "0.12")
    head, streams, f32 = 64, 2, 4
    tensor = 128 * head * f32 * streams  # HCA: state_size 128 rows of n_embd_head_k, one of kv and score
    want = predicted_figures("hca_state", cells=128, layers=1, seqs=streams, streams=0, k_type="f32", v_type="f32",
                             k_bytes=tensor, v_bytes=tensor, ratio=128, width=head)
    assert want.line == DSV4_STATE_LOG[-1] and compare_caches([hca], [want], measure="buffers")[0].match
    wide = replace(want, width=2 * head)
    assert compare_caches([hca], [wide], measure="log")[0].differences == ("width: llama.cpp 64, kvplan 128",)
    measured = replace(hca, k_bytes=tensor, v_bytes=tensor + 64, buffer_bytes=2 * tensor + 64)
    assert compare_caches([measured], [want], measure="tensors")[0].differences == (
        f"score bytes: llama.cpp {tensor + 64:,}, kvplan {tensor:,}",
        f"buffer bytes: llama.cpp {2 * tensor + 64:,}, kvplan {2 * tensor:,}")


def test_refusals_pass_only_together() -> None:
    flags = make_flags(ctx_size=4096, cache_type_v="q8_0", flash_attn="off")
    refused = EngineRun(ok=False, error="llama.cpp refused to create the context", lines=(), caches=())
    made = EngineRun(ok=True, error=None, lines=(), caches=(_logged(),))
    expected = Prediction(caches=(), lines=(), n_ctx=4096, refusal="a quantised V cache without flash attention")
    assert judge(None, flags, refused, measure="log", prediction=expected).passed
    assert not judge(None, flags, made, measure="log", prediction=expected).passed
    predicted = Prediction(caches=(_logged(),), lines=(), n_ctx=4096)
    assert judge(None, flags, made, measure="log", prediction=predicted).passed
    assert "llama.cpp refused" in judge(None, flags, refused, measure="log", prediction=predicted).reason()


def test_flags_are_checked_as_llama_cpp_checks_them() -> None:
    from kvplan.errors import InputError

    assert make_flags(cache_type_k="fp16", cache_type_v="q8_0").cache_type_k == "f16"
    with pytest.raises(InputError, match="-ctk fp8"):
        make_flags(cache_type_k="fp8")
    with pytest.raises(InputError, match="-fa maybe"):
        make_flags(flash_attn="maybe")


def test_gguf_prediction_follows_llama_cpp_rules(tmp_path: Path) -> None:
    """kvplan's side alone (no llama.cpp): a gemma2 GGUF, SWA on even layers, at -c 8192 -np 2."""
    gguf = pytest.importorskip("gguf")
    import kvplan
    from kvplan.verify.llamacpp import predict

    path = tmp_path / "g2.gguf"
    writer = gguf.GGUFWriter(str(path), "gemma2")
    for key, value in {"block_count": 4, "context_length": 8192, "embedding_length": 128, "attention.head_count": 4,
                       "attention.head_count_kv": 2, "attention.key_length": 32, "attention.value_length": 32,
                       "attention.sliding_window": 256}.items():
        writer.add_uint32(f"gemma2.{key}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    prediction = predict(kvplan.load_geometry(str(path)), make_flags(ctx_size=8192, parallel=2))
    base, swa = prediction.caches
    row = 2 * 32 * 2  # KV heads, head size, f16
    assert (base.cells, base.layers, base.layer_indices) == (4096, 2, (1, 3))  # 8192 cells over 2 streams
    assert base.k_bytes == 2 * 4096 * 2 * row  # layers, cells, streams, row
    swa_cells = 256 * 1 + 512  # GGML_PAD(min(4096, n_swa * 1 sequence + n_ubatch), 256) = 768
    assert (swa.cells, swa.layers, swa.layer_indices) == (swa_cells, 2, (0, 2))
    assert swa.k_bytes == 2 * swa_cells * 2 * row


# ---- the command -------------------------------------------------------------------------------------------
def test_without_llama_cpp_exit_2_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.verify.llamacpp as module

    monkeypatch.setattr(module, "llama_cpp_missing", lambda: True)
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", "meta-llama/Llama-3.1-8B", "-c", "4096"])
    assert result.exit_code == 2, result.output
    assert "needs llama-cpp-python, which is not installed" in result.output
    assert "pip install '.[llamacpp]'" in result.output and "--find-links" in result.output


def test_mistral_config_has_no_sliding_window_in_llama_cpp() -> None:
    """convert_hf_to_gguf.py writes MistralForCausalLM as llama.cpp's llama architecture, which has no window."""
    import kvplan

    est = kvplan.estimate("mistralai/Mistral-7B-v0.1", seq_len=16384, engine="llama.cpp")
    assert est.kv_cache_bytes == 2 * 32 * 16384 * 8 * 128 * 2  # K+V, layers, cells, KV heads, head size, f16
    assert any("llama architecture" in note for note in est.notes)


def test_starcoder2_config_has_no_sliding_window_in_llama_cpp() -> None:
    """convert_hf_to_gguf.py writes Starcoder2ForCausalLM without its window; llama.cpp's starcoder2 has none."""
    import kvplan

    est = kvplan.estimate("bigcode/starcoder2-7b", seq_len=16384, engine="llama.cpp")
    assert est.kv_cache_bytes == 2 * 32 * 16384 * 4 * 128 * 2  # K+V, layers, cells, KV heads, head size, f16
    assert any("starcoder2" in note and "window" in note for note in est.notes)


@pytest.mark.parametrize(("model", "arch", "rule"), [
    ("MiniMaxAI/MiniMax-M1-80k", "minimax-01", "recurrent layers beside attention"),
])
def test_config_of_an_unread_architecture_is_refused_naming_it(model: str, arch: str, rule: str) -> None:
    """The converter writes an architecture whose cache kvplan's GGUF reader does not model: exit 2, saying which."""
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", model, "-c", "16384"])
    if "needs llama-cpp-python" in result.output:
        pytest.skip("llama-cpp-python is not installed")
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert f"llama.cpp reads it as {arch}" in flat and rule in flat and "GGUF reader does not model" in flat


def test_llama_cpp_line_counts_only_k_v_layers() -> None:
    """Nemotron-H 56B: 10 attention layers of 118; the Mamba-2 and MLP-only layers are not in llama_kv_cache."""
    import kvplan

    log = kvplan.capacity("nvidia/Nemotron-H-56B-Base-8K", engine="llama.cpp", kv_budget="64GiB",
                          ctx_size="16384").to_dict()["capacity"]["engine_log"]
    (cache,) = log["llama_caches"]
    assert (cache["layers"], cache["cells"]) == (10, 16384)
    assert cache["k_bytes"] == 10 * 16384 * 8 * 128 * 2  # layers, cells, KV heads, head size, f16


@pytest.mark.parametrize(("args", "phrase"), [
    (["-c", "4096"], "-c: llama.cpp's flags, for --engine llama.cpp"),
    (["--engine", "llama.cpp", "--batch", "2"], "--batch: flags of the torch decode"),
])
def test_flags_of_the_other_engine_are_exit_2(args: list[str], phrase: str) -> None:
    result = CliRunner().invoke(app, ["verify", "-m", "meta-llama/Llama-3.1-8B", *args])
    assert result.exit_code == 2, result.output
    assert phrase in result.output


def test_bad_cache_type_is_exit_2() -> None:
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", "meta-llama/Llama-3.1-8B", "-ctk", "fp4"])
    assert result.exit_code == 2, result.output
    assert "Error: -ctk fp4" in result.output


def _write_llama(path: Path) -> Path:
    from kvplan.verify.llamacpp_gguf import write_gguf

    return write_gguf(path, "llama", {"block_count": 4, "context_length": 8192, "embedding_length": 64,
                                      "feed_forward_length": 64, "attention.head_count": 2,
                                      "attention.head_count_kv": 2, "rope.dimension_count": 32,
                                      "attention.layer_norm_rms_epsilon": 1e-5})


@needs_llama_cpp
def test_tiny_gguf_passes_to_the_byte(tmp_path: Path) -> None:
    path = _write_llama(tmp_path / "llama.gguf")
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "4096", "-np", "2",
                                      "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "--measure", "tensors",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (cache,) = report["caches"]
    k_bytes = 4 * 2048 * 2 * (2 * 32 // 32) * 34  # layers, cells per stream, streams, q8_0 blocks per row, bytes each
    assert cache["measured_k_bytes"] == cache["predicted_k_bytes"] == k_bytes
    assert cache["measured_v_bytes"] == cache["predicted_v_bytes"] == k_bytes
    assert cache["measured_buffer_bytes"] == cache["predicted_buffer_bytes"] == 2 * k_bytes
    assert (cache["measured_cells"], cache["measured_layers"], cache["measured_streams"]) == (2048, 4, 2)
    assert report["verify"]["passed"] and report["verify"]["resolution_bytes"] == 1
    from kvplan.report.schema import report_schema

    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, report_schema())
    table = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "4096"],
                               env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    assert table.stdout.startswith("PASS: llama in llama.cpp") and "base cache (f16/f16): match" in table.stdout


@needs_llama_cpp
def test_a_gguf_llama_cpp_cannot_load_is_exit_2_naming_its_error(tmp_path: Path) -> None:
    """A file llama.cpp refuses before any context (here: a key its loader needs is missing) is bad input, not a
    FAIL of kvplan's cache rules: exit 2 with llama.cpp's own error line."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "incomplete.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in {"block_count": 2, "context_length": 4096, "embedding_length": 64, "attention.head_count": 2,
                       "attention.head_count_kv": 2}.items():
        writer.add_uint32(f"llama.{key}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "512"])
    assert result.exit_code == 2, result.output
    assert "could not load" in result.output and "llama.attention.layer_norm_rms_epsilon" in result.output


@needs_llama_cpp
def test_a_wrong_prediction_is_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.verify.llamacpp as module

    real = module.predict

    def one_cell_row_too_many(geometry: object, flags: object) -> Prediction:
        right = real(geometry, flags)  # type: ignore[arg-type]
        cache = right.caches[0]
        return replace(right, caches=(predicted_figures(
            "base", cells=cache.cells, layers=cache.layers, seqs=cache.seqs, streams=cache.streams,
            k_type=cache.k_type, v_type=cache.v_type, k_bytes=(cache.k_bytes or 0) + 64, v_bytes=cache.v_bytes or 0,
            layer_indices=cache.layer_indices),))

    monkeypatch.setattr(module, "predict", one_cell_row_too_many)
    path = _write_llama(tmp_path / "llama.gguf")
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "4096",
                                      "--measure", "tensors", "--format", "json"])
    assert result.exit_code == 1, result.output
    verdict = json.loads(result.stdout)["verify"]
    assert not verdict["passed"] and "K bytes: llama.cpp 2,097,152, kvplan 2,097,216" in verdict["reason"]  # 4 * 4096 * 64 * 2


@needs_llama_cpp
@pytest.mark.parametrize(("model", "ctx", "k_bytes"), [
    ("meta-llama/Llama-3.1-8B", 8192, 32 * 8192 * 8 * 128 * 2),  # layers, cells, KV heads, head size, f16
    ("mistralai/Mistral-7B-v0.1", 16384, 32 * 16384 * 8 * 128 * 2),  # a llama GGUF: no sliding window
    ("deepseek-ai/DeepSeek-V2-Lite", 8192, 27 * 8192 * (512 + 64) * 2),  # layers, cells, MLA latent + rope, f16
])
def test_config_json_is_written_as_a_gguf_with_its_cache(model: str, ctx: int, k_bytes: int) -> None:
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", model, "-c", str(ctx), "--format",
                                      "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["caches"][0]["predicted_k_bytes"] == k_bytes
    assert report["caches"][0]["logged_k_mib"] == f"{k_bytes / MiB:.2f}"
    assert report["inputs"]["gguf"].startswith("written by kvplan")


@needs_llama_cpp
@pytest.mark.parametrize(("name", "caches"), [
    # Gemma-4: the full layers' own KV heads and head size (global_head_dim), the sliding layers' window of 1,024
    # plus one ubatch of 512 cells per stream; 2 streams of 8,192 cells (-c 16384 -np 2), f16.
    ("google__gemma-4-26B-A4B", {"base": 2 * 8192 * 5 * 2 * 512 * 2,  # streams, cells, layers, KV heads, head, f16
                                 "swa": 2 * 1536 * 25 * 8 * 256 * 2}),
    ("nvidia__Gemma-4-31B-IT-NVFP4", {"base": 2 * 8192 * 10 * 4 * 512 * 2, "swa": 2 * 1536 * 50 * 16 * 256 * 2}),
    # DeepSeek-V4 (deepseek4): the plain cache holds no layer; the window of 128 plus a ubatch (768 cells, padded),
    # one entry per 4 tokens (CSA, with the indexer's 128-wide keys) or per 128 (HCA, 256 cells padded); K=V 512.
    # Its float32 compressor states (streams x rows x width x layers x 4): CSA and the indexer overlap two windows
    # of 4 (8 rows) of twice head_dim / index_head_dim; HCA keeps 128 rows of head_dim.
    ("deepseek-ai__DeepSeek-V4-Flash", {"base": 0, "swa": 2 * 768 * 43 * 512 * 2, "csa": 2 * 2048 * 21 * 512 * 2,
                                        "hca": 2 * 256 * 20 * 512 * 2, "lid": 2 * 2048 * 21 * 128 * 2,
                                        "csa_state": 2 * 8 * 2 * 512 * 21 * 4, "hca_state": 2 * 128 * 512 * 20 * 4,
                                        "lid_state": 2 * 8 * 2 * 128 * 21 * 4}),
    # Kimi-K2.5 (deepseek2, MLA): one latent of kv_lora_rank 512 + rope 64 per token and layer, K only.
    ("moonshotai__Kimi-K2.5", {"base": 2 * 8192 * 61 * (512 + 64) * 2}),
])
def test_shared_config_is_written_as_llama_cpp_converts_it(name: str, caches: dict[str, int]) -> None:
    """A real Hub config (../shared): kvplan writes the architecture and keys convert_hf_to_gguf.py would, and
    llama.cpp's caches equal kvplan's (K bytes per cache given here; V the same unless the layer has none)."""
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(shared_config_path(name)),
                                      "-c", "16384", "-np", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {row["name"]: row["predicted_k_bytes"] for row in report["caches"]} == caches
    # NOTE: a compressor state logs its size, not a K figure; the K/V caches log K
    assert all(row["logged_k_mib"] == f"{row['predicted_k_bytes'] / MiB:.2f}" for row in report["caches"]
               if row["kind"] == "kv")
    assert all(row["match"] for row in report["caches"])


@pytest.mark.parametrize(("name", "arch", "rule"), [
    ("XiaomiMiMo__MiMo-V2-Flash", "mimo2", "sliding-window layers chosen by the architecture's own rule"),
    ("stepfun-ai__Step-3.7-Flash", "step35", "sliding-window layers chosen by the architecture's own rule"),
    ("zai-org__GLM-5", "glm-dsa", "a DSA cache with an indexer"),
])
def test_shared_config_of_an_unread_architecture_is_refused_naming_it(name: str, arch: str, rule: str) -> None:
    test_config_of_an_unread_architecture_is_refused_naming_it(str(shared_config_path(name)), arch, rule)


@needs_llama_cpp
def test_hub_gguf_is_read_by_its_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """org/repo:QUANT: kvplan reads the header by ranged reads and llama.cpp's dry run reads the same bytes."""
    from hubstub import HubStub

    data = _write_llama(tmp_path / "tiny.gguf").read_bytes()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with HubStub({}, files={"acme/tiny-GGUF": {"tiny-F32.gguf": data}}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", "acme/tiny-GGUF:F32", "-c", "4096",
                                          "--format", "json"])
        assert result.exit_code == 0, result.output
        assert all(start == 0 for _name, start, _end in hub.ranges)  # the first chunk (1 MiB) holds the header
    report = json.loads(result.stdout)
    assert report["inputs"]["gguf"] == "acme/tiny-GGUF/tiny-F32.gguf (header)"
    assert report["caches"][0]["logged_k_mib"] == f"{4 * 4096 * 2 * 32 * 2 / MiB:.2f}"  # layers, cells, heads, size, f16
    refused = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", "acme/tiny-GGUF:F32", "--measure",
                                       "tensors"])
    assert refused.exit_code == 2


REAL_HEADERS = {
    # file: (-c, layers, KV heads, head size) of the model whose converter output it is
    "ggml-vocab-llama-bpe.gguf": (8192, 32, 8, 128),  # Meta-Llama-3-8B
    "ggml-vocab-phi-3.gguf": (4096, 32, 32, 96),  # Phi-3-mini: its sliding window is off in llama.cpp
    "ggml-vocab-command-r.gguf": (8192, 40, 64, 128),
    "ggml-vocab-starcoder.gguf": (8192, 30, 2, 128),
}


@pytest.fixture(scope="module")
def real_headers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SDIST.exists():
        pytest.skip(f"{SDIST.name} absent (../shared/wheels)")
    folder = tmp_path_factory.mktemp("real-gguf")
    with tarfile.open(SDIST) as archive:
        for member in archive:
            name = member.name.rsplit("/", 1)[-1]
            if name in REAL_HEADERS or name == "ggml-vocab-gemma-4.gguf":
                source = archive.extractfile(member)
                assert source is not None
                (folder / name).write_bytes(source.read())
    return folder


@needs_llama_cpp
@pytest.mark.parametrize("name", sorted(REAL_HEADERS))
def test_real_gguf_headers_pass(real_headers: Path, name: str) -> None:
    """GGUFs llama.cpp's converter wrote for real models (vocabulary only: llama.cpp's dry run needs no weight)."""
    ctx, layers, kv_heads, head = REAL_HEADERS[name]
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(real_headers / name), "-c",
                                      str(ctx), "--format", "json"])
    assert result.exit_code == 0, result.output
    (cache,) = json.loads(result.stdout)["caches"]
    assert cache["predicted_k_bytes"] == layers * ctx * kv_heads * head * 2  # f16
    assert cache["measured_layers"] == layers


@needs_llama_cpp
def test_real_gemma_4_header_has_two_caches(real_headers: Path) -> None:
    """Gemma 4 26B-A4B: 5 full layers of 2 KV heads of 512, 25 SWA layers of 8 KV heads of 256, window 1024."""
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m",
                                      str(real_headers / "ggml-vocab-gemma-4.gguf"), "-c", "8192", "--format", "json"])
    assert result.exit_code == 0, result.output
    base, swa = json.loads(result.stdout)["caches"]
    assert (base["measured_layers"], base["predicted_k_bytes"]) == (5, 5 * 8192 * 2 * 512 * 2)
    swa_cells = 1536  # GGML_PAD(min(8192, 1024 * 1 + 512), 256)
    assert (swa["measured_cells"], swa["predicted_k_bytes"]) == (swa_cells, 25 * swa_cells * 8 * 256 * 2)


@needs_llama_cpp
def test_deepseek4_caches_sharing_layers_compare_by_their_lines(tmp_path: Path) -> None:
    """DeepSeek-V4's window, CSA, HCA and indexer caches each name a layer's tensor cache_k_l<il>: --measure tensors
    cannot tell whose is whose, so those caches are compared by llama.cpp's log and buffer lines, and a note says so."""
    from llamacpp_oracle import MODELS, build

    tiny = next(m for m in MODELS if m.arch == "deepseek4")
    path = build(tiny, tmp_path)
    result = CliRunner().invoke(app, ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "4096",
                                      "--measure", "tensors", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    caches = {c["name"]: c for c in report["caches"]}
    assert list(caches) == ["base", "swa", "csa", "hca", "lid", "csa_state", "hca_state", "lid_state"]
    ratios = tiny.metadata["attention.compress_ratios"]  # [0, 0, 4, 128]: one CSA and one HCA layer
    assert caches["csa"]["measured_cells"] == 4096 // 4 and caches["hca"]["measured_cells"] == 256  # GGML_PAD(32, 256)
    assert caches["csa"]["measured_layers"] == ratios.count(4) and caches["hca"]["measured_layers"] == ratios.count(128)
    assert caches["csa"]["measured_k_bytes"] is None  # compared by the lines
    # NOTE: the compressor states name their own tensors (dsv4_csa_state_kv_l2 ...): compared to the byte.
    head, index, f32 = tiny.metadata["attention.key_length"], tiny.metadata["attention.indexer.key_length"], 4
    for name, rows, width, layers in (("csa_state", 2 * 4, 2 * head, ratios.count(4)),
                                      ("hca_state", 128, head, ratios.count(128)),
                                      ("lid_state", 2 * 4, 2 * index, ratios.count(4))):
        tensor = rows * width * f32 * 1 * layers  # -np 1: one stream
        state = caches[name]
        assert state["measured_k_bytes"] == state["predicted_k_bytes"] == tensor, name
        assert state["measured_v_bytes"] == state["predicted_v_bytes"] == tensor, name
        assert state["measured_buffer_bytes"] == state["predicted_buffer_bytes"] == 2 * tensor, name
    notes = report["notes"]
    assert any("name a layer's tensors alike" in note for note in notes)
    # NOTE: the caches compared by their lines are not said to be compared to the byte.
    assert [n for n in notes if n.startswith("measured:")] == [
        "measured: a one-token decode; the tensors' bytes and their buffers' sizes read from ggml, compared to the "
        "byte for the base, csa_state, hca_state, lid_state only"]
    from kvplan.report.schema import report_schema

    pytest.importorskip("jsonschema").validate(report, report_schema())


@needs_llama_cpp
def test_deepseek4_compressor_states_pass_with_allocated_buffers(tmp_path: Path) -> None:
    """The issue's case: -c 4096 -np 2 --measure buffers lists and passes the three compressor states."""
    from llamacpp_oracle import MODELS, build

    path = build(next(m for m in MODELS if m.arch == "deepseek4"), tmp_path)
    args = ["verify", "--engine", "llama.cpp", "-m", str(path), "-c", "4096", "-np", "2", "--measure", "buffers"]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert table.stdout.startswith("PASS: deepseek4 in llama.cpp")
    for name in ("csa_state", "hca_state", "lid_state"):
        assert f"{name} compressor state (f32/f32): match" in table.stdout
    report = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    logged = [line for line in report["verify"]["logged_lines"] if line.startswith("llama_dsv4_comp_state: hca")]
    assert logged == ["llama_dsv4_comp_state: hca ratio = 128, state = 128 x 64, streams = 2, rs_seq = 0, layers = 1, "
                      "size =    0.12 MiB"]  # 2 tensors x 128 rows x 64 x 4 B x 2 streams = 131,072 B
    assert logged[0] in report["verify"]["predicted_lines"]
