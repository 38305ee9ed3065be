"""--cmd: an engine's launch line read as that engine reads it (kvplan/launch/).

Every line below is copied from the engine's own documentation (cited beside it); a line with a
placeholder model (``models/7B/ggml-model.gguf``) gets a small GGUF written here. Each run is checked
against the same run given with kvplan's own options, and the numbers as arithmetic.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.launch import KEYWORDS, read_launch
from kvplan.launch.shell import split_line

runner = CliRunner()
GIB = 1 << 30


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def strip_cmd_note(report: dict) -> dict:
    """A report without the notes (the --cmd run adds its own)."""
    return {k: v for k, v in report.items() if k not in ("notes", "kvplan_version")}


# ---- the shell and flag reading ------------------------------------------------------------------------
def test_split_line_joins_continuations_and_takes_environment_words_off() -> None:
    env, argv = split_line("CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 vllm serve org/m \\\n  --max-model-len=32k \\\n  -tp 2")
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_USE_V1": "1"}
    assert argv == ["vllm", "serve", "org/m", "--max-model-len=32k", "-tp", "2"]


def test_flag_equals_value_and_flag_space_value_read_alike() -> None:
    one = read_launch("vllm serve org/m --max-model-len=32k --tensor-parallel-size=2")
    two = read_launch("vllm serve org/m --max-model-len 32k -tp 2")
    assert one.keywords == two.keywords == {"model": "org/m", "max_model_len": "32k", "tp": 2, "engine": "vllm"}


def test_ignored_flags_are_named_once_with_their_values_skipped() -> None:
    launch = read_launch("vllm serve org/m --port 8000 --host 0.0.0.0 --trust-remote-code --port 8001 -tp 2")
    assert launch.keywords["tp"] == 2 and launch.model == "org/m"
    assert launch.ignored == ("--port", "--host", "--trust-remote-code")
    assert "not sized (no effect on memory in kvplan): --port, --host, --trust-remote-code" in launch.summary()


def test_every_keyword_a_reader_sets_is_a_keyword_of_the_api() -> None:
    api = set(inspect.signature(kvplan.capacity).parameters) | set(inspect.signature(kvplan.estimate).parameters)
    assert set(KEYWORDS) <= api


@pytest.mark.parametrize(("line", "message"), [
    ("ollama run llama3", "Ollama runs llama.cpp"),
    ("python train.py --lr 3", "not a launch line kvplan reads"),
    ("vllm serve", "names no model"),
    ("vllm serve 'org/m", "quotes balanced"),
    ("llama-server -m m.gguf -fa maybe", "llama.cpp takes on, off or auto"),
    ("python -m sglang.launch_server --model-path org/m --tp two", "is not an integer"),
])
def test_lines_kvplan_cannot_read_are_exit_2_with_the_reason(line: str, message: str) -> None:
    code, _out, err = run("estimate", "--cmd", line)
    assert code == 2, err
    assert message in " ".join(err.split())


# ---- vLLM --------------------------------------------------------------------------------------------
def test_vllm_docs_line_tp_pp_equals_kvplans_own_options() -> None:
    # docs.vllm.ai/en/latest/serving/parallelism_scaling.html (distributed serving)
    line = "vllm serve gpt2 --tensor-parallel-size 4 --pipeline-parallel-size 2"
    pasted = kvplan.estimate(cmd=line)
    own = kvplan.estimate("gpt2", engine="vllm", tp=4, pp=2)
    assert pasted.kv_cache_bytes_per_gpu == own.kv_cache_bytes_per_gpu
    # gpt2: 12 layers, 12 heads of 64, 1,024 positions, fp32 checkpoint served in 16 bits
    assert pasted.kv_cache_bytes_per_gpu == 2 * (12 // 2) * (12 // 4) * 64 * 2 * 1024  # K+V, layers/pp, heads/tp
    assert any(n.startswith("--cmd read as vLLM (vllm serve), model gpt2") for n in pasted.to_dict()["notes"])


def test_vllm_max_model_len_32k_is_32000_as_vllm_reads_it_in_capacity() -> None:
    line = "CUDA_VISIBLE_DEVICES=0 vllm serve meta-llama/Llama-3.1-8B \\\n --max-model-len 32k --port 8000"
    pasted = kvplan.capacity(cmd=line, gpu="H100").to_dict()
    own = kvplan.capacity("meta-llama/Llama-3.1-8B", gpu="H100", engine="vllm", max_model_len="32k").to_dict()
    assert strip_cmd_note(pasted) == strip_cmd_note(own)
    assert pasted["inputs"]["max_model_len"] == 32 * 1000
    assert pasted["capacity"]["kv_bytes_per_request"] == 2 * 32 * 8 * 128 * 2 * 32000  # K+V, layers, kv heads, bf16


def test_vllm_enforce_eager_takes_no_cuda_graph_memory_from_the_budget() -> None:
    base = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192"
    graphs = kvplan.capacity(cmd=base, gpu="H100", engine_version="0.33")
    eager = kvplan.capacity(cmd=base + " --enforce-eager", gpu="H100", engine_version="0.33")
    graph_bytes = next(t.bytes for t in graphs.budget.terms if t.name == "CUDA graphs")
    assert graph_bytes > 0
    assert eager.budget.kv_bytes_per_gpu - graphs.budget.kv_bytes_per_gpu == graph_bytes
    assert not [t for t in eager.budget.terms if t.name == "CUDA graphs"]


def test_vllm_cpu_offload_gb_moves_that_much_weight_off_each_gpu() -> None:
    base = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192"
    plain = kvplan.capacity(cmd=base, gpu="RTX4090")
    offload = kvplan.capacity(cmd=base + " --cpu-offload-gb 4", gpu="RTX4090")
    assert plain.budget.weights_bytes_per_gpu - offload.budget.weights_bytes_per_gpu == 4 * GIB
    assert offload.budget.kv_bytes_per_gpu - plain.budget.kv_bytes_per_gpu == 4 * GIB


def test_vllm_kv_cache_memory_bytes_is_the_budget_read_as_vllm_reads_it() -> None:
    line = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192 --kv-cache-memory-bytes 4G"
    cap = kvplan.capacity(cmd=line)
    assert cap.budget.kv_bytes_per_gpu == 4 * 2**30  # human_readable_int: upper-case G = 2**30
    assert kvplan.capacity(cmd=line.replace("4G", "4g")).budget.kv_bytes_per_gpu == 4 * 10**9


def test_vllm_quantization_fp8_counts_linear_weights_in_one_byte() -> None:
    base = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192"
    bf16 = kvplan.capacity(cmd=base, gpu="H100").to_dict()["weights"]
    fp8 = kvplan.capacity(cmd=base + " --quantization fp8", gpu="H100").to_dict()["weights"]
    # Llama-3.1-8B: 32 layers of hidden 4096, 1024-wide K/V, MLP 14336; embeddings and lm_head stay bf16
    linear = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)
    scales = 32 * 4 * (4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096)  # fp32 scale per output row
    assert bf16["bytes"] - fp8["bytes"] == linear * 2 - (linear + scales)


def test_vllm_quantization_of_another_method_than_the_checkpoints_is_exit_2() -> None:
    code, _out, err = run("capacity", "--gpu", "H100", "--cmd", "vllm serve meta-llama/Llama-3.1-8B --quantization awq")
    assert code == 2 and "has none" in err


def test_vllm_prefix_caching_flags_reach_the_api() -> None:
    # a hybrid model: with prefix caching each gated-delta-net group holds one more page per request (vLLM "align")
    model = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    concurrency = {}
    for flag, value in (("--enable-prefix-caching", True), ("--no-enable-prefix-caching", False)):
        assert read_launch(f"vllm serve org/m {flag}").keywords["enable_prefix_caching"] is value
        pasted = kvplan.capacity(cmd=f"vllm serve {model} {flag} --max-model-len 32768 -tp 2", gpu="H200")
        given = kvplan.capacity(model, gpu="H200", max_model_len=32768, tp=2, enable_prefix_caching=value)
        assert pasted.capacity.max_concurrency == given.capacity.max_concurrency
        assert "not read by this command" not in " ".join(pasted.to_dict()["notes"])
        concurrency[value] = given.capacity.max_concurrency
    assert concurrency[True] < concurrency[False]


def test_a_kvplan_option_that_disagrees_with_the_line_is_exit_2_and_one_that_agrees_runs() -> None:
    line = "vllm serve meta-llama/Llama-3.1-8B -tp 2 --max-model-len 8192"
    code, _out, err = run("capacity", "--gpu", "H100", "--tp", "4", "--cmd", line)
    assert code == 2 and "--tp 4 and the --cmd line's -tp 2 disagree" in " ".join(err.split())
    code, out, err = run("capacity", "--gpu", "H100", "--tp", "2", "--format", "json", "--cmd", line)
    assert code == 0, err
    assert json.loads(out)["inputs"]["tp"] == 2
    code, _out, err = run("capacity", "--gpu", "H100", "--engine", "sglang", "--cmd", line)
    assert code == 2 and "--engine sglang" in err


# ---- SGLang ------------------------------------------------------------------------------------------
def test_sglang_docs_deepseek_v3_line_equals_kvplans_own_options() -> None:
    # docs.sglang.ai/basic_usage/deepseek.html (DeepSeek V3/R1 on 8 x H200)
    line = "python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code"
    pasted = kvplan.capacity(cmd=line, gpu="H200", max_model_len=4096).to_dict()
    own = kvplan.capacity("deepseek-ai/DeepSeek-V3", gpu="H200", engine="sglang", tp=8, max_model_len=4096).to_dict()
    assert strip_cmd_note(pasted) == strip_cmd_note(own)
    # MLA: one latent of kv_lora_rank 512 + rope 64 per token per layer, 61 layers, bf16, on every TP rank
    assert pasted["capacity"]["kv_bytes_per_request"] == 61 * (512 + 64) * 2 * 4096


def test_sglang_flags_with_their_own_names() -> None:
    launch = read_launch("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2 --dp 2 "
                         "--enable-dp-attention --mem-fraction-static 0.8 --context-length 32768 "
                         "--kv-cache-dtype fp8_e4m3 --page-size 16 --max-running-requests 64 --port 30000")
    assert launch.keywords == {
        "model": "Qwen/Qwen3-8B", "tp": 2, "dp": 2, "enable_dp_attention": True, "mem_fraction_static": 0.8,
        "max_model_len": 32768, "kv_dtype": "fp8_e4m3", "block_size": 16, "max_num_seqs": 64, "engine": "sglang"}
    est = kvplan.estimate(cmd="python -m sglang.launch_server --model-path Qwen/Qwen3-8B --context-length 32768 "
                              "--kv-cache-dtype fp8_e4m3")
    assert est.kv_cache_bytes == 2 * 36 * 8 * 128 * 1 * 32768  # K+V, layers, kv heads, head dim, fp8


# ---- TensorRT-LLM --------------------------------------------------------------------------------------
#: TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json fields (the Hub card), served by the local Hub stand-in.
TINYLLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
             "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
             "max_position_embeddings": 2048, "vocab_size": 32000, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_trtllm_serve_quick_start_line_equals_kvplans_own_options(monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia.github.io/TensorRT-LLM/quick-start-guide.html ("Deploy with trtllm-serve"), with the
    # click options of tensorrt_llm/commands/serve.py added
    from hubstub import HubStub

    line = ('trtllm-serve "TinyLlama/TinyLlama-1.1B-Chat-v1.0" --max_batch_size 64 --max_num_tokens 8192 '
            "--kv_cache_free_gpu_memory_fraction 0.8 --host localhost --port 8000")
    with HubStub({"TinyLlama/TinyLlama-1.1B-Chat-v1.0": TINYLLAMA}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        pasted = kvplan.capacity(cmd=line, gpu="L4", weights_from="config").to_dict()
        own = kvplan.capacity("TinyLlama/TinyLlama-1.1B-Chat-v1.0", gpu="L4", engine="trtllm", weights_from="config",
                              max_num_batched_tokens=8192, batch=64, free_gpu_memory_fraction=0.8).to_dict()
    assert strip_cmd_note(pasted) == strip_cmd_note(own)
    assert pasted["inputs"]["free_gpu_memory_fraction"] == 0.8
    # 22 layers, 4 KV heads of 2048 / 32 = 64, bf16, the model's 2,048 tokens in blocks of 32
    assert pasted["capacity"]["kv_bytes_per_request"] == 2 * 22 * 4 * 64 * 2 * 2048


# ---- llama.cpp ---------------------------------------------------------------------------------------
gguf = pytest.importorskip("gguf")
from test_gguf_commands import BLOCK_BYTES, HEAD, KV_HEADS, LAYERS, OUTPUT_BYTES, write_quantised


@pytest.fixture
def model_gguf(tmp_path: Path) -> Path:
    return write_quantised(tmp_path / "ggml-model.gguf")


def test_llama_server_readme_line_equals_kvplans_own_options(model_gguf: Path) -> None:
    # ggml-org/llama.cpp tools/server/README.md: ./llama-server -m models/7B/ggml-model.gguf -c 2048
    line = f"./llama-server -m {model_gguf} -c 2048"
    pasted = kvplan.estimate(cmd=line)
    # llama-server's -np auto: 4 slots, unified cache (tools/server/server.cpp)
    own = kvplan.estimate(str(model_gguf), engine="llama.cpp", ctx_size=2048, parallel=4, kv_unified=True)
    assert pasted.kv_cache_bytes == own.kv_cache_bytes == 2 * LAYERS * KV_HEADS * HEAD * 2 * 2048  # K+V, f16, cells
    notes = pasted.to_dict()["notes"]
    assert any("llama-server -np auto: 4 slots" in n for n in notes)


def test_llama_c_not_divisible_by_np_is_rounded_as_llama_cpp_rounds_it(model_gguf: Path) -> None:
    code, out, err = run("estimate", "--format", "json", "--cmd", f"llama-cli -m {model_gguf} -c 4096 -np 3")
    assert code == 0, err
    report = json.loads(out)
    per_slot = -(-(4096 // 3) // 256) * 256  # n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) = 1536
    assert report["inputs"]["seq_len"] == per_slot and report["inputs"]["batch"] == 3
    assert report["totals"]["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD * 2 * per_slot * 3
    assert any("is not divisible by -np 3" in n for n in report["notes"])


def test_llama_ngl_keeps_the_first_layers_and_their_kv_in_host_memory(model_gguf: Path) -> None:
    line = f"llama-cli -m {model_gguf} -c 4096 -ngl 2"
    cap = kvplan.capacity(cmd=line, gpu_mem="1GiB").to_dict()
    # i_gpu_start = n_layer + 1 - ngl = 3: block 3 and the output layer on the GPU
    assert cap["weights"]["bytes_per_gpu"] == BLOCK_BYTES + OUTPUT_BYTES
    assert cap["capacity"]["kv_bytes_per_request"] == 2 * 1 * KV_HEADS * HEAD * 2 * 4096  # one layer's K+V, f16
    own = kvplan.capacity(str(model_gguf), gpu_mem="1GiB", ctx_size=4096, n_gpu_layers=2).to_dict()
    assert strip_cmd_note(cap) == strip_cmd_note(own)
    all_layers = kvplan.capacity(str(model_gguf), gpu_mem="1GiB", ctx_size=4096).to_dict()
    assert all_layers["weights"]["bytes_per_gpu"] == LAYERS * BLOCK_BYTES + OUTPUT_BYTES
    est = kvplan.estimate(cmd=line)
    assert est.kv_cache_bytes_per_gpu == 2 * 1 * KV_HEADS * HEAD * 2 * 4096
    assert est.cpu_bytes == 2 * 3 * KV_HEADS * HEAD * 2 * 4096


def test_llama_nkvo_keeps_all_kv_in_host_memory(model_gguf: Path) -> None:
    est = kvplan.estimate(cmd=f"llama-cli -m {model_gguf} -c 4096 -nkvo")
    assert est.kv_cache_bytes_per_gpu == 0
    assert est.cpu_bytes == 2 * LAYERS * KV_HEADS * HEAD * 2 * 4096


def test_fa_on_is_flash_attention_not_format_and_fa_off_refuses_a_quantised_v(model_gguf: Path) -> None:
    code, out, err = run("estimate", "-m", str(model_gguf), "-c", "4096", "-fa", "on", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["totals"]["kv_cache_bytes"] == 2 * LAYERS * KV_HEADS * HEAD * 2 * 4096  # K+V, f16
    code, _out, err = run("estimate", "-m", str(model_gguf), "-c", "4096", "-fa", "off", "-ctv", "q8_0",
                          "-ctk", "q8_0")
    assert code == 2 and "requires flash_attn" in " ".join(err.split())
    code, _out, err = run("capacity", "--gpu", "H100", "--cmd", f"llama-server -m {model_gguf} -fa off -ctv q4_0")
    assert code == 2 and "-fa off" in err


def test_a_gguf_is_sized_for_llama_cpp_unless_engine_says_otherwise(model_gguf: Path) -> None:
    code, out, err = run("capacity", "-m", str(model_gguf), "--gpu-mem", "1GiB", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["inputs"]["engine"] == "llama.cpp"
    assert any(n.startswith("engine llama.cpp: the model is a GGUF") for n in report["notes"])
    code, out, _err = run("capacity", "-m", str(model_gguf), "--gpu-mem", "1GiB", "--engine", "vllm", "--format", "json")
    assert json.loads(out)["inputs"]["engine"] == "vllm"
    code, out, _err = run("estimate", "-m", str(model_gguf), "-s", "512", "--format", "json")
    assert json.loads(out)["inputs"]["engine"] == "llama.cpp"


def test_engine_ollama_is_read_as_llama_cpp_with_a_note(model_gguf: Path) -> None:
    code, out, err = run("capacity", "-m", str(model_gguf), "--gpu-mem", "1GiB", "--engine", "ollama", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["inputs"]["engine"] == "llama.cpp"
    assert any(n.startswith("--engine ollama: Ollama runs llama.cpp") for n in report["notes"])


def test_engine_version_with_llama_cpp_is_refused(model_gguf: Path) -> None:
    code, _out, err = run("capacity", "-m", str(model_gguf), "--gpu-mem", "1GiB", "--engine", "llama.cpp",
                          "--engine-version", "b6000")
    assert code == 2 and "versions apply to vLLM and SGLang only" in " ".join(err.split())


def test_llama_flags_with_another_engine_are_exit_2() -> None:
    code, _out, err = run("capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-ngl", "10")
    assert code == 2 and "llama.cpp's flag" in err
    code, _out, err = run("capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "sglang",
                          "--enforce-eager")
    assert code == 2 and "vLLM's flag" in err


def test_llama_ngl_and_nkvo_log_the_host_layers_kv_in_a_cpu_buffer(model_gguf: Path) -> None:
    mib = 1 << 20
    layer = 2 * KV_HEADS * HEAD * 2 * 4096  # one layer's K+V, f16, 4,096 cells
    lines = kvplan.capacity(cmd=f"llama-cli -m {model_gguf} -c 4096 -ngl 2", gpu_mem="1GiB").engine_log["lines"]
    assert lines[:2] == [f"llama_kv_cache:        CPU KV buffer size = {3 * layer / mib:8.2f} MiB",
                         f"llama_kv_cache:      CUDA0 KV buffer size = {1 * layer / mib:8.2f} MiB"]
    lines = kvplan.capacity(cmd=f"llama-cli -m {model_gguf} -c 4096 -nkvo", gpu_mem="1GiB").engine_log["lines"]
    assert lines[0] == f"llama_kv_cache:        CPU KV buffer size = {LAYERS * layer / mib:8.2f} MiB"


# ---- lines run in a container ----------------------------------------------------------------------------
def test_vllm_docker_line_from_vllm_docs() -> None:
    # docs.vllm.ai/en/latest/deployment/docker.html: the vllm/vllm-openai image's entrypoint is the API server
    line = ('docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface '
            '--env "HUGGING_FACE_HUB_TOKEN=<secret>" -p 8000:8000 --ipc=host vllm/vllm-openai:latest '
            '--model mistralai/Mistral-7B-v0.1')
    pasted = kvplan.capacity(cmd=line, gpu="A100-40GB").to_dict()
    own = kvplan.capacity("mistralai/Mistral-7B-v0.1", gpu="A100-40GB", engine="vllm").to_dict()
    assert strip_cmd_note(pasted) == strip_cmd_note(own)
    assert "<secret>" not in " ".join(pasted["notes"])


def test_llama_cpp_docker_line_from_llama_cpp_docs(model_gguf: Path) -> None:
    # ggml-org/llama.cpp docs/docker.md (server image); the model path swapped for the test's GGUF
    line = (f"docker run -p 8080:8080 -v /path/to/models:/models --gpus all ghcr.io/ggml-org/llama.cpp:server-cuda "
            f"-m {model_gguf} -c 512 --host 0.0.0.0 --port 8080 --n-gpu-layers 99")
    est = kvplan.estimate(cmd=line)
    # llama-server -np auto: 4 slots, one unified pool of -c 512 cells padded to 256; -ngl 99 >= 4 + 1: all on GPU
    assert est.kv_cache_bytes == est.kv_cache_bytes_per_gpu == 2 * LAYERS * KV_HEADS * HEAD * 2 * 512


def test_sglang_docker_line_and_dp_attention_line_from_sglang_benchmark_readme() -> None:
    # sgl-project/sglang benchmark/deepseek_v3/README.md
    docker = ("docker run --gpus all --shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface "
              "--ipc=host lmsysorg/sglang:latest \\\n    python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 "
              "--tp 8 --trust-remote-code --port 30000")
    dp = ("SGL_ENABLE_JIT_DEEPGEMM=1 python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8 "
          "--trust-remote-code --enable-dp-attention --dp-size 8")
    plain = kvplan.capacity(cmd=docker, gpu="H200", max_model_len=4096).to_dict()
    attn_dp = kvplan.capacity(cmd=dp, gpu="H200", max_model_len=4096).to_dict()
    own = kvplan.capacity("deepseek-ai/DeepSeek-V3", gpu="H200", engine="sglang", tp=8, dp=8,
                          enable_dp_attention=True, max_model_len=4096).to_dict()
    assert strip_cmd_note(attn_dp) == strip_cmd_note(own)
    # the MLA latent, 61 layers x (512 + 64) x bf16, per request either way; with DP attention each of the 8 ranks
    # has its own pool instead of 8 TP ranks holding the same latent
    assert plain["capacity"]["kv_bytes_per_request"] == attn_dp["capacity"]["kv_bytes_per_request"] \
        == 61 * (512 + 64) * 2 * 4096
    assert 8 * attn_dp["capacity"]["max_tokens"] > plain["capacity"]["max_tokens"]


def test_flags_read_as_kvplans_default_are_named() -> None:
    launch = read_launch("vllm serve org/m --max-model-len auto")
    assert "max_model_len" not in launch.keywords
    assert "as kvplan's default: --max-model-len auto" in launch.summary()
    assert "as kvplan's default: -ngl all" in read_launch("llama-cli -m m.gguf -ngl all").summary()


def test_model_comes_from_the_line_and_without_either_is_exit_2() -> None:
    code, out, err = run("estimate", "--format", "json", "--cmd", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 4k")
    assert code == 0, err
    report = json.loads(out)
    assert report["model"]["id"] == "meta-llama/Llama-3.1-8B" and report["inputs"]["engine"] == "vllm"
    assert report["totals"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4000  # K+V, layers, kv heads, bf16, 4k = 4,000
    code, _out, err = run("estimate", "-s", "4k")
    assert code == 2 and "kvplan estimate needs a model" in err and "--cmd" in err
    code, _out, err = run("capacity", "-m", "gpt2", "--gpu", "H100", "--cmd", "vllm serve meta-llama/Llama-3.1-8B")
    assert code == 2 and "--model gpt2 and the --cmd line's meta-llama/Llama-3.1-8B disagree" in " ".join(err.split())


def test_engine_beside_the_line_agrees_by_profile(model_gguf: Path) -> None:
    for engine in ("llama.cpp", "llamacpp", "ollama"):
        code, _out, err = run("estimate", "--engine", engine, "--cmd", f"llama-cli -m {model_gguf} -c 1024")
        assert code == 0, (engine, err)


def test_the_engines_flags_work_as_kvplans_own_options(model_gguf: Path) -> None:
    own = ["capacity", "-m", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine-version", "0.33",
           "--max-model-len", "8192", "--enforce-eager", "--cpu-offload-gb", "2", "--quantization", "fp8",
           "--max-num-seqs", "64", "--format", "json"]
    line = ("vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192 --enforce-eager --cpu-offload-gb 2 "
            "--quantization fp8 --max-num-seqs 64")
    code, out, err = run(*own)
    assert code == 0, err
    code, pasted, err = run("capacity", "--gpu", "H100", "--engine-version", "0.33", "--format", "json", "--cmd", line)
    assert code == 0, err
    assert strip_cmd_note(json.loads(out)) == strip_cmd_note(json.loads(pasted))
    code, out, err = run("estimate", "-m", str(model_gguf), "-c", "4096", "-ngl", "2", "-fa", "auto", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["totals"]["kv_cache_bytes_per_gpu"] == 2 * 1 * KV_HEADS * HEAD * 2 * 4096  # one layer
    code, out, err = run("estimate", "-m", str(model_gguf), "-c", "4096", "-nkvo", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["totals"]["kv_cache_bytes_per_gpu"] == 0


def test_the_header_says_a_gguf_is_sized_for_llama_cpp(model_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run("capacity", "-m", str(model_gguf), "--gpu", "RTX4090")
    assert code == 0, err
    assert "llama.cpp for a GGUF" in out
    code, out, err = run("estimate", "-m", str(model_gguf), "-s", "1k")
    assert code == 0, err
    assert "engine llama.cpp for a GGUF" in out
