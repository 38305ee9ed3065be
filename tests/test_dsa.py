"""DeepSeek-V3.2 / GLM-5 sparse attention (DSA): the indexer layer kind, the fp8_ds_mla latent, SGLang's
log line of sglang#11309, and DP attention (one MLA latent per request instead of one per TP rank)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.adjust import Deployment
from kvplan.api import load_geometry
from kvplan.calc import estimate
from kvplan.cli import app
from kvplan.models import parse_config
from kvplan.specs import IndexerSpec, MLASpec

from conftest import BF16, FP8, SHARED_CONFIGS

V3 = Path(__file__).resolve().parent.parent / "model_configs" / "deepseek-ai__DeepSeek-V3.json"
LAYERS = 61
LATENT_FP8_DS_MLA = 512 * FP8 + (512 // 128) * 4 + 64 * BF16  # fp8 latent + fp32 scale per 128 + bf16 rope = 656
INDEX_FP8 = 128 * FP8 + (128 // 128) * 4  # fp8 key + fp32 scale = 132


def v32_config(tmp_path: Path) -> Path:
    """DeepSeek-V3.2-Exp's config: V3's plus the published indexer fields (index_head_dim 128, 64 heads, top-k 2048)."""
    config = json.loads(V3.read_text())
    config.update(model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"], index_head_dim=128,
                  index_n_heads=64, index_topk=2048)
    path = tmp_path / "deepseek-v32" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return path


def test_parser_emits_one_indexer_per_mla_layer(tmp_path) -> None:
    geometry = parse_config(json.loads(v32_config(tmp_path).read_text()), model_id="v32")
    mla = [s for s in geometry.layers if type(s) is MLASpec]
    index = [s for s in geometry.layers if isinstance(s, IndexerSpec)]
    assert len(mla) == len(index) == LAYERS
    assert index[0].index_head_dim == 128 and index[0].index_n_heads == 64 and all(s.fp8_ds_mla for s in mla)


@pytest.mark.parametrize(("engine", "kv_dtype", "latent", "index"), [
    ("vllm", "fp8", LATENT_FP8_DS_MLA, INDEX_FP8),
    ("sglang", "fp8", LATENT_FP8_DS_MLA, INDEX_FP8),
    ("vllm", "bf16", (512 + 64) * BF16, INDEX_FP8),  # the indexer stays fp8 + scale in vLLM
    ("hf-dynamic", "bf16", (512 + 64) * BF16, 128 * BF16),  # transformers: the model dtype
])
def test_dsa_bytes_per_token_per_layer(tmp_path, engine, kv_dtype, latent, index) -> None:
    geometry = parse_config(json.loads(v32_config(tmp_path).read_text()), model_id="v32")
    est = estimate(geometry, seq_len=4096, kv_dtype=kv_dtype, deployment=Deployment(engine=engine))
    by_kind = {g.spec.kind: g.bytes_per_token for g in est.groups}
    assert by_kind == {"mla": latent, "indexer": index}


def test_sglang_11309_kv_size_with_the_index(runner, tmp_path) -> None:
    # https://github.com/sgl-project/sglang/pull/11309 (DeepSeek-V3.2-Exp, 8x B200, --tp 8 --dp 8
    # --enable-dp-attention, page 64, fp8): "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"
    tokens, page = 975_424, 64
    budget = tokens * LAYERS * (LATENT_FP8_DS_MLA + INDEX_FP8)  # #tokens x cell size
    result = runner.invoke(app, ["capacity", "-m", str(v32_config(tmp_path)), "--engine", "sglang", "--tp", "8", "--dp",
                                 "8", "--enable-dp-attention", "--kv-dtype", "fp8", "--block-size", "64", "--kv-budget",
                                 str(budget), "--max-model-len", "32768", "--engine-version", "0.5.3", "-f", "json"])
    assert result.exit_code == 0, result.output
    log = json.loads(result.stdout)["capacity"]["engine_log"]
    latent = LAYERS * (tokens + page) * LATENT_FP8_DS_MLA  # layers * (#tokens + page_size) rows * 656 B
    index = LAYERS * ((tokens + page + 1) // page) * page * INDEX_FP8  # pages of page_size * 132 B
    assert log["lines"] == ["KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"]
    assert (log["latent_size_bytes"], log["index_size_bytes"], log["kv_size_bytes"]) == (latent, index, latent + index)
    assert f"{latent / 2**30:.2f}" == "36.35"  # what the same pool logged before the PR (latent only)


def test_dp_attention_keeps_one_latent_per_request(runner) -> None:
    # DeepSeek-V3 on 8 GPUs: plain --tp 8 replicates the latent on every rank; SGLang --dp 8
    # --enable-dp-attention splits requests over ranks (attention tp 1): same bytes per GPU for 1/8 the requests.
    base = ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--kv-budget", "40GiB",
            "--max-model-len", "32768", "-f", "json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    dp = json.loads(runner.invoke(app, [*base, "--dp", "8", "--enable-dp-attention"]).stdout)
    per_request = LAYERS * 32768 * (512 + 64) * BF16  # one copy of one request's latent
    assert plain["capacity"]["kv_bytes_per_request"] == dp["capacity"]["kv_bytes_per_request"] == per_request
    assert any("--enable-dp-attention" in n and "8 copies" in n for n in plain["notes"])
    assert not any("8 copies" in n for n in dp["notes"])
    assert any("data parallel: 8 ranks on 8 GPUs" in n for n in dp["notes"])


def test_dp_attention_is_refused_where_it_means_nothing(runner) -> None:
    result = runner.invoke(app, ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--dp",
                                 "3", "--enable-dp-attention", "--kv-budget", "40GiB"])
    assert result.exit_code == 2 and "needs --dp > 1 dividing --tp" in result.output


@pytest.mark.skipif(not (SHARED_CONFIGS / "zai-org__GLM-5.json").exists(), reason="shared configs absent")
def test_glm5_real_config_has_the_indexer() -> None:
    geometry, _ = load_geometry(str(SHARED_CONFIGS / "zai-org__GLM-5.json"))
    est = estimate(geometry, seq_len=8192, kv_dtype="fp8", deployment=Deployment(engine="vllm"))
    assert {g.spec.kind: (g.count, g.bytes_per_token) for g in est.groups} == {
        "mla": (78, LATENT_FP8_DS_MLA), "indexer": (78, INDEX_FP8)}


def test_dp_attention_keeps_attention_weights_whole_per_dp_rank(runner) -> None:
    """SGLang --dp 8 --enable-dp-attention on --tp 8: each DP rank's attention runs on one GPU (attention tp = 8 / 8),
    so every GPU holds the whole attention projections; the MLP and experts stay split over the 8 GPUs."""
    base = ["capacity", "-m", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "--tp", "8", "--gpu", "H200",
            "--max-model-len", "32768", "-f", "json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    dp = json.loads(runner.invoke(app, [*base, "--dp", "8", "--enable-dp-attention"]).stdout)
    attention = next(p["bytes"] for p in plain["weights"]["parts"] if p["name"] == "attention")
    # busiest GPU: attention/8 split under plain tp 8, the whole attention under DP attention (ceil division)
    assert dp["weights"]["bytes_per_gpu"] - plain["weights"]["bytes_per_gpu"] == attention - -(-attention // 8)
    assert plain["budget"]["kv_bytes_per_gpu"] - dp["budget"]["kv_bytes_per_gpu"] == attention - -(-attention // 8)


def test_estimate_names_the_flag_that_removes_replicated_mla(runner) -> None:
    report = json.loads(runner.invoke(app, ["estimate", "-m", "deepseek-ai/DeepSeek-V3", "-tp", "8", "-s", "32k",
                                            "-f", "json"]).stdout)
    note = next(n for n in report["notes"] if n.startswith("MLA latent is replicated"))
    assert "SGLang --dp 8 --enable-dp-attention" in note and "vLLM --data-parallel-size 8" in note
