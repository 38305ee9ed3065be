"""`kvplan recommend` (kvplan/recommender.py): the best deployment of each GPU type is the smallest layout that
`kvplan capacity` confirms, priced by the same code; its launch command; --prices, --max-itl; the report."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import kvplan
from kvplan.cli import app
from kvplan.errors import InputError, KvplanError
from kvplan.gpus import custom_gpu, lookup
from kvplan.recommender import Layout, Recommended, Target, layouts
from kvplan.units import MiB, cdiv

GPUS = "H100,L40S,H200"

# model, --max-model-len, --concurrency: each needs more than one GPU of at least one type below
CASES = [
    pytest.param("meta-llama/Llama-3.1-70B", 8192, 32, id="dense"),
    pytest.param("openai/gpt-oss-120b", 32000, 64, id="moe"),
    pytest.param("deepseek-ai/DeepSeek-V3", 32000, 64, id="mla"),
    pytest.param("mistralai/Mistral-7B-v0.1", 32000, 64, id="sliding-window"),
    pytest.param("google/gemma-3-27b-it", 32000, 64, id="hybrid-swa"),
    pytest.param("ai21labs/Jamba-v0.1", 32000, 64, id="hybrid-mamba"),
]


def confirm(model: str | kvplan.Geometry, layout: Layout, tokens: int, concurrency: int) -> kvplan.CapacityResult:
    """`kvplan capacity` for ``layout``, as a user would run it (per DP rank: cdiv(C, dp) requests)."""
    return kvplan.capacity(model, gpu=layout.gpu, tp=layout.tp, pp=layout.pp, engine=layout.engine,
                           kv_dtype=layout.kv_dtype, max_model_len=tokens, batch=cdiv(concurrency, layout.dp),
                           dp=layout.dp, enable_dp_attention=layout.dp > 1)


def fails(model: str | kvplan.Geometry, layout: Layout, tokens: int, concurrency: int) -> bool:
    try:
        return not confirm(model, layout, tokens, concurrency).fits
    except KvplanError:  # the engine refuses the layout
        return True


def check_smallest(model: str, best: Recommended, tokens: int, concurrency: int) -> None:
    """``best`` is what capacity says for its layout, and every smaller layout of its GPU fails under capacity."""
    lay = best.layout
    cap = confirm(model, lay, tokens, concurrency)
    assert cap.fits
    assert cap.max_concurrent_requests * lay.dp == best.requests >= concurrency
    assert (cap.budget.kv_bytes_per_gpu, cap.max_context_len) == (best.capacity.budget.kv_bytes_per_gpu,
                                                                    best.capacity.max_context_len)
    geometry = kvplan.load_geometry(model).model_geometry
    target = Target(max_model_len=tokens, concurrency=concurrency)
    smaller = [s for s in layouts(lay.gpu, lay.engine, lay.kv_dtype, geometry, target) if s.num_gpus < lay.num_gpus]
    assert all(fails(model, s, tokens, concurrency) for s in smaller), smaller
    if lay.num_gpus > 1:  # one fewer GPU, tensor-parallel on one node: refused or too small
        fewer = Layout(gpu=lay.gpu, engine=lay.engine, kv_dtype=lay.kv_dtype, tp=lay.num_gpus - 1, pp=1, nodes=1)
        assert fails(model, fewer, tokens, concurrency)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("model", "tokens", "concurrency"), CASES)
def test_best_of_each_gpu_is_the_smallest_layout_capacity_confirms(model: str, tokens: int, concurrency: int,
                                                                  engine: str) -> None:
    rec = kvplan.recommend(model, max_model_len=tokens, concurrency=concurrency, gpu=GPUS, engine=engine, top=0)
    assert rec.deployments, rec.rejected
    seen: set[tuple[str, str]] = set()
    for best in rec.deployments:
        lay = best.layout
        assert (lay.gpu.name, lay.kv_dtype) not in seen  # one per GPU type and KV dtype
        seen.add((lay.gpu.name, lay.kv_dtype))
        check_smallest(model, best, tokens, concurrency)
    assert any(d.layout.num_gpus > 1 for d in rec.deployments)  # the case searches past one GPU
    # ranked: fewest GPUs first, then fewer nodes, then the most headroom
    keys = [(d.layout.num_gpus, d.layout.nodes, -d.requests) for d in rec.deployments]
    assert keys == sorted(keys)


def test_mla_on_sglang_uses_dp_attention() -> None:
    """DeepSeek-V3's latent is one KV head: with --dp = --tp --enable-dp-attention each rank keeps one copy per
    request, not tp copies, so the DP-attention layout holds more and wins among layouts of equal size."""
    rec = kvplan.recommend("deepseek-ai/DeepSeek-V3", max_model_len=32000, concurrency=64, gpu="H200",
                           engine="sglang", kv_dtype="auto")
    best = rec.deployments[0]
    assert (best.layout.tp, best.layout.dp, best.layout.pp) == (8, 8, 1)
    plain = confirm("deepseek-ai/DeepSeek-V3", Layout(gpu=lookup("H200"), engine="sglang", kv_dtype="auto", tp=8, pp=1,
                                                      nodes=1), 32000, 64)
    assert not plain.fits and best.requests > plain.max_concurrent_requests
    command = rec.to_dict()["deployments"][0]["command"]
    assert "--tp 8 --dp 8 --enable-dp-attention --context-length 32000" in command
    # vLLM has no DP attention here: 8 H200 hold the latent 8 times over and need a second node
    vllm = kvplan.recommend("deepseek-ai/DeepSeek-V3", max_model_len=32000, concurrency=64, gpu="H200", kv_dtype="auto")
    assert vllm.deployments[0].layout.num_gpus > 8


def test_multi_node_layouts_pipeline_across_full_nodes() -> None:
    """DeepSeek-V3 (fp8, ~640 GiB of weights) needs more than one node of 8 H100s: tp 8 within each node, one
    pipeline stage per node."""
    rec = kvplan.recommend("deepseek-ai/DeepSeek-V3", max_model_len=32000, concurrency=64, gpu="H100",
                           kv_dtype="auto")
    lay = rec.deployments[0].layout
    assert (lay.tp, lay.nodes, lay.pp) == (8, lay.pp, lay.nodes) and lay.nodes > 1
    assert all(r.layout.tp == 8 for r in rec.rejected if r.layout.nodes > 1)


@pytest.fixture(scope="module")
def llama70b() -> kvplan.Geometry:
    return kvplan.load_geometry("meta-llama/Llama-3.1-70B")


def test_prices_rank_by_cost_per_hour(llama70b: kvplan.Geometry, tmp_path: Path) -> None:
    prices = {"H100": 2.49, "H200": 3.5, "L40S": 0.5}
    rec = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu=GPUS, kv_dtype="auto", prices=prices)
    costs = [d.cost_per_hour for d in rec.deployments]
    by_name = {lookup(n).name: p for n, p in prices.items()}
    assert costs == [round(by_name[d.layout.gpu.name] * d.layout.num_gpus, 4) for d in rec.deployments]
    assert costs == sorted(costs)
    # cheap L40S (8 x 0.50 = 4.00/h) beats 2 H200 (2 x 3.50 = 7.00/h) although it takes more GPUs
    assert rec.deployments[0].layout.gpu.name == "L40S"
    unpriced = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu=GPUS, kv_dtype="auto")
    assert unpriced.deployments[0].layout.gpu.name == "H200-141GB"  # fewest GPUs without prices
    file = tmp_path / "prices.yaml"
    file.write_text("H100: 2.49\nH200: 3.5\nL40S: 0.5\n")
    from_file = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu=GPUS, kv_dtype="auto", prices=file)
    assert [d.cost_per_hour for d in from_file.deployments] == costs


def test_unpriced_gpus_rank_after_priced(llama70b: kvplan.Geometry) -> None:
    rec = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu=GPUS, kv_dtype="auto",
                           prices={"H100": 2.49})
    assert rec.deployments[0].layout.gpu.name == "H100-SXM-80GB"
    assert all(d.cost_per_hour is None for d in rec.deployments[1:])
    assert any("no price for H200-141GB, L40S" in n for n in rec.to_dict()["notes"])


def test_max_itl_drops_candidates_above_the_decode_floor(llama70b: kvplan.Geometry) -> None:
    free = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu="H100", kv_dtype="auto")
    floor_ms = free.deployments[0].capacity.decode_floor_seconds * 1000
    limited = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu="H100", kv_dtype="auto",
                               max_itl=floor_ms - 0.01)
    best = limited.deployments[0]
    assert best.layout.num_gpus > free.deployments[0].layout.num_gpus
    assert best.capacity.decode_floor_seconds * 1000 <= floor_ms - 0.01
    assert any(r.layout == free.deployments[0].layout and "decode floor" in r.reason and "--max-itl" in r.reason
               for r in limited.rejected)
    # the floor is capacity's: (weights per GPU + KV of the batch) x pp / bandwidth
    cap = best.capacity
    assert cap.decode_floor_seconds == cap.decode_bytes_per_step * cap.inputs.pp / lookup("H100").bandwidth_bytes_per_s


def test_engine_refusals_are_rejected_with_the_reason() -> None:
    """Qwen2.5-7B: 28 query heads, 4 KV heads. tp 8 replicates the KV heads evenly but splits 28 query heads
    unevenly: vLLM refuses it; so does a 3-way split of 4 KV heads."""
    rec = kvplan.recommend("Qwen/Qwen2.5-7B-Instruct", max_model_len=32000, concurrency=256, gpu="L4",
                           kv_dtype="auto", max_gpus=8)
    reasons = {r.layout.tp: r.reason for r in rec.rejected if r.layout.nodes == 1}
    assert "cannot split 28 query heads over --tensor-parallel-size 8" in reasons[8]


def test_apple_gpus_only_run_llama_cpp() -> None:
    rec = kvplan.recommend("meta-llama/Llama-3.1-8B", max_model_len=8192, concurrency=4, gpu="M2-Ultra",
                           engine="vllm,llama.cpp")
    assert [d.layout.engine for d in rec.deployments] == ["llama.cpp"]
    assert any(r.reason == "vLLM does not run on apple GPUs" for r in rec.rejected)


def test_a_gpu_type_an_engine_does_not_run_on_is_said_in_a_note() -> None:
    rec = kvplan.recommend("meta-llama/Llama-3.1-8B", max_model_len=8192, concurrency=4, gpu="H100,M2-Ultra,M3-Ultra")
    assert {d.layout.gpu.name for d in rec.deployments} == {"H100-SXM-80GB"}
    assert ("vLLM does not run on Apple GPUs: M2-Ultra-192GB, M3-Ultra-512GB left out (--engine llama.cpp runs them)"
            in rec.to_dict()["notes"])


def test_nothing_fits_says_why_per_gpu(runner) -> None:
    """DeepSeek-V3's weights (fp8, about 640 GiB) do not leave KV room on 8 L4 (22 GiB each): no deployment, and
    the note and `rejected` say why for each layout; still exit 0 (an answer, not a failed check)."""
    result = runner.invoke(app, ["recommend", "-m", "deepseek-ai/DeepSeek-V3", "--max-model-len", "8192",
                                 "--gpu", "L4", "--max-gpus", "8", "-f", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["deployments"] == []
    assert {r["num_gpus"] for r in report["rejected"]} == {1, 2, 4, 8}
    assert all("leave no KV room on L4" in r["reason"] for r in report["rejected"])
    assert any(n.startswith("L4 (vllm): no layout up to 8 GPUs holds the target; 8x (tp 8, pp 1") for n in report["notes"])


# ---- launch commands ---------------------------------------------------------------------------------


def test_vllm_command_carries_the_layout_and_the_memory_setting(llama70b: kvplan.Geometry) -> None:
    report = kvplan.recommend(llama70b, max_model_len="8k", concurrency=32, gpu="H100", kv_dtype="fp8").to_dict()
    d = report["deployments"][0]
    assert d["command"] == (f"vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size {d['tp']} "
                            f"--pipeline-parallel-size {d['pp']} --max-model-len 8000 --kv-cache-dtype fp8 "
                            "--gpu-memory-utilization 0.9")
    assert any(line.startswith("Available KV cache memory: ") for line in d["engine_log"])


def test_sglang_command_spells_fp8_as_fp8_e4m3(llama70b: kvplan.Geometry) -> None:
    report = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu="H200", engine="sglang",
                              kv_dtype="fp8").to_dict()
    d = report["deployments"][0]
    assert d["command"] == ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --tp 2 "
                            "--context-length 8192 --mem-fraction-static 0.87 --kv-cache-dtype fp8_e4m3")


def tiny_gguf(path: Path) -> Path:
    pytest.importorskip("gguf")
    from test_gguf_commands import write_quantised

    return write_quantised(path)


def test_gguf_on_llama_cpp(tmp_path: Path) -> None:
    """A GGUF's weights come from its tensor table; llama.cpp splits layers over the GPUs of one machine, and its
    -c is the context of all slots together (slots x tokens). The smallest GPU count is what capacity confirms."""
    model = str(tiny_gguf(tmp_path / "tiny.gguf"))
    tokens, concurrency = 8192, 64  # 64 x 8192 x 512 B (4 layers x K+V x 2 KV heads x 16 x f16) = 256 MiB of KV
    gpu = custom_gpu(192 * MiB, 100 * 10**9, name="small")
    rec = kvplan.recommend(model, max_model_len=tokens, concurrency=concurrency, gpu=[gpu], engine="llama.cpp")
    best = rec.deployments[0]
    assert best.layout.num_gpus > 1  # one small GPU is not enough
    check_smallest(model, best, tokens, concurrency)
    d = rec.to_dict()["deployments"][0]
    split = ",".join(["1"] * best.layout.num_gpus)  # layers evenly over the devices, as capacity's pp splits them
    assert d["command"] == (f"llama-server -m {model} -c {tokens * concurrency} -np {concurrency} -ctk f16 -ctv f16 "
                            f"-ngl 999 -ts {split}")
    ts = kvplan.capacity(model, gpu=gpu, engine="llama.cpp", ctx_size=tokens * concurrency, parallel=concurrency,
                         pp=best.layout.num_gpus, tensor_split=split)
    assert ts.budget.kv_bytes_per_gpu == best.capacity.budget.kv_bytes_per_gpu
    assert ts.max_concurrent_requests == best.requests
    assert any("llama_kv_cache" in line for line in d["engine_log"])


def test_gguf_defaults_to_llama_cpp_as_capacity_does(runner, tmp_path: Path) -> None:
    """No --engine: a .gguf is sized for llama.cpp (kvplan.api.engine_for, as `kvplan capacity` picks it)."""
    model = str(tiny_gguf(tmp_path / "tiny.gguf"))
    gpu = custom_gpu(192 * MiB, 100 * 10**9, name="small")
    rec = kvplan.recommend(model, max_model_len=8192, concurrency=64, gpu=[gpu])
    chosen = kvplan.recommend(model, max_model_len=8192, concurrency=64, gpu=[gpu], engine="llama.cpp")
    assert [d.layout for d in rec.deployments] == [d.layout for d in chosen.deployments] != []
    assert rec.to_dict()["inputs"]["engines"] == ["llama.cpp"]
    assert any(n.startswith("engine llama.cpp: the model is a GGUF") for n in rec.to_dict()["notes"])
    result = runner.invoke(app, ["recommend", "-m", model, "--max-model-len", "8192", "--gpu", "RTX-4090,M2-Ultra",
                                 "-f", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inputs"]["engines"] == ["llama.cpp"]
    assert {d["gpu"] for d in report["deployments"]} == {"RTX-4090", "M2-Ultra-192GB"}  # Metal runs llama.cpp


# ---- the report and the command line ------------------------------------------------------------------


def test_report_shape_and_schema(llama70b: kvplan.Geometry) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from kvplan.report.schema import report_schema

    report = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, gpu=GPUS, engine="vllm,sglang",
                              top=3).to_dict()
    jsonschema.validate(report, report_schema())
    assert len(report["deployments"]) == 3 and [d["rank"] for d in report["deployments"]] == [1, 2, 3]
    d = report["deployments"][0]
    assert d["kv_bytes_needed_per_gpu"] <= d["kv_bytes_per_gpu"]
    assert d["headroom"] == d["max_concurrent_requests"] - 32
    assert any("is a floor" in note for note in report["notes"])


def test_cli_json_and_table(runner) -> None:
    args = ["recommend", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "32k", "--concurrency", "64", "--gpu", "H100,L40S"]
    result = runner.invoke(app, [*args, "-f", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["command"] == "recommend" and report["inputs"]["max_model_len"] == 32000
    assert report["deployments"][0]["gpu"] == "H100-SXM-80GB"
    table = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    assert "64 requests of 32,000 tokens" in table.stdout and "vllm serve meta-llama/Llama-3.1-8B" in table.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("H100: -1\n", "the price of H100 must be a positive number"),
    ("H100: cheap\n", "the price of H100 must be a positive number"),
    ("Z9000: 1\n", "'Z9000' is not in kvplan's GPU catalog"),
    ("- H100\n", "expected a mapping of GPU name to price"),
    ("H100: [\n", "is not valid YAML"),
])
def test_bad_prices_file_is_exit_2(runner, tmp_path: Path, text: str, message: str) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(text)
    result = runner.invoke(app, ["recommend", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "8192",
                                 "--gpu", "H100", "--prices", str(prices)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(("extra", "message"), [
    (["--engine", "nope"], "nope"),
    (["--gpu", "Z9000"], "Z9000"),
    (["--prices", "/nonexistent/prices.yaml"], "cannot read --prices"),
])
def test_bad_input_is_exit_2(runner, extra: list[str], message: str) -> None:
    result = runner.invoke(app, ["recommend", "-m", "meta-llama/Llama-3.1-8B", "--max-model-len", "8192", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_capacity_pp_zero_is_a_clear_error(runner) -> None:
    with pytest.raises(InputError, match="--pp must be a positive integer, got 0"):
        kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", pp=0)


# ---- round trip through `kvplan capacity --cmd` ----------------------------------------------------------


@pytest.mark.parametrize(("model", "engine", "kv_dtype"), [
    ("meta-llama/Llama-3.1-70B", "vllm", "fp8"),
    ("meta-llama/Llama-3.1-70B", "sglang", "auto"),
    ("deepseek-ai/DeepSeek-V3", "sglang", "auto"),
    ("meta-llama/Llama-3.1-70B", "trtllm", "fp8"),
    ("meta-llama/Llama-3.1-70B", "trtllm", "auto"),
])
def test_each_command_round_trips_through_capacity_cmd(runner, model: str, engine: str, kv_dtype: str) -> None:
    """Each recommended command, pasted into `kvplan capacity --cmd`, gives the same KV numbers."""
    pytest.importorskip("kvplan.launch")
    report = kvplan.recommend(model, max_model_len=8192, concurrency=32, gpu=GPUS, engine=engine,
                              kv_dtype=kv_dtype).to_dict()
    assert report["deployments"]
    for d in report["deployments"]:
        # trtllm-serve's --max_batch_size is the batch; vLLM and SGLang lines name none: the user's --batch
        batch = [] if engine == "trtllm" else ["--batch", str(cdiv(32, d["dp"]))]
        result = runner.invoke(app, ["capacity", "--cmd", d["command"], "--gpu", d["gpu"], *batch, "-f", "json"])
        assert result.exit_code == 0, (shlex.split(d["command"]), result.output)
        cap = json.loads(result.stdout)
        assert cap["budget"]["kv_bytes_per_gpu"] == d["kv_bytes_per_gpu"]
        assert cap["capacity"]["max_concurrency"] * d["dp"] == pytest.approx(d["max_concurrency"], rel=1e-4)  # both rounded
        assert cap["capacity"]["max_concurrent_requests"] * d["dp"] == d["max_concurrent_requests"]
        assert cap["capacity"]["max_context_len"] == d["max_context"]
        assert cap["inputs"]["kv_dtype"] == d["kv_dtype"] and cap["inputs"]["batch"] == cdiv(32, d["dp"])


def test_gguf_command_round_trips_through_capacity_cmd(runner, tmp_path: Path) -> None:
    pytest.importorskip("kvplan.launch")
    model = str(tiny_gguf(tmp_path / "tiny.gguf"))
    gpu = custom_gpu(192 * MiB, 100 * 10**9, name="small")
    rec = kvplan.recommend(model, max_model_len=8192, concurrency=64, gpu=[gpu], engine="llama.cpp")
    for d in rec.to_dict()["deployments"]:
        result = runner.invoke(app, ["capacity", "--cmd", d["command"], "--gpu-mem", "192MiB", "-f", "json"])
        assert result.exit_code == 0, result.output
        cap = json.loads(result.stdout)
        assert cap["budget"]["kv_bytes_per_gpu"] == d["kv_bytes_per_gpu"]
        assert cap["capacity"]["max_concurrent_requests"] == d["max_concurrent_requests"]


def test_search_prices_thousands_of_candidates(llama70b: kvplan.Geometry) -> None:
    rec = kvplan.recommend(llama70b, max_model_len=8192, concurrency=32, engine="vllm,sglang,trtllm,llama.cpp", top=0)
    assert rec.candidates >= 1000
    assert len(rec.deployments) > 20


# ---- the table at 80 columns ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "priced"), [("sglang", False), ("sglang", True), ("vllm,sglang", True)])
def test_table_fits_80_columns_without_cutting_a_number(engine: str, priced: bool) -> None:
    """At 80 columns (a terminal, or a pipe) no cell is cut: every number of every row is printed whole."""
    from io import StringIO

    from rich.console import Console

    from kvplan.gpus import load_catalog
    from kvplan.report.recommend import layout_cell, recommend_table

    prices = {g.name: 3.5 + i / 7 for i, g in enumerate(load_catalog())} if priced else None  # dollars per GPU-hour
    report = kvplan.recommend("deepseek-ai/DeepSeek-V3", max_model_len="32k", concurrency=128, engine=engine,
                              max_itl=50, prices=prices).to_dict()
    out = StringIO()
    Console(file=out, width=80, force_terminal=False, color_system=None).print(recommend_table(report))
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    rows = {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0].isdigit()}
    assert len(report["deployments"]) == 10
    for d in report["deployments"]:
        cells = rows[str(d["rank"])].split()
        expected = [str(d["rank"]), f"{d['num_gpus']}×{d['gpu']}", layout_cell(d),
                    *([d["engine"]] if "," in engine else []), d["kv_dtype"], f"{d['max_concurrent_requests']:,}",
                    f"{d['kv_bytes_per_gpu'] / 1024**3:.2f}", f"{d['decode_floor_ms']:.2f}",
                    *([f"{d['cost_per_hour']:.2f}"] if priced else [])]
        assert cells == expected
    assert "8×1×dp8" in text  # tp 8, pp 1, 8 DP-attention ranks in one cell
