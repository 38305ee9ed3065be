"""Families of issue 11 (round 2, fam3): the BART lineage, composite encoder-decoders, BERT-style decoders,
linear-attention and recurrent hybrids. Expected bytes are arithmetic over each config's fields for the
generate() the zoo oracle ran (tools/hf_zoo.py: batch B = 2, prompt P = 5, N = 2 new tokens, bf16), so a
decoder-only cache holds T = P + N - 1 = 6 tokens, an encoder-decoder's self cache N = 2 and its cross cache P = 5
(generate() never feeds the last new token back). Where tests/data/hf_zoo.json is present, each figure is also checked against the bytes transformers
really cached for that model type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import api
from kvplan.errors import ConfigError
from kvplan.models import count_weights

B, P, N, S = 2, 5, 2, 2  # batch, prompt, new tokens, bf16 bytes
T = P + N - 1  # decoder-only cache tokens
ZOO = Path(__file__).resolve().parent / "data" / "hf_zoo.json"


def kv_bytes(config: dict[str, Any], *, seq_len: int, encoder_len: int | None = None, tmp_path: Path) -> int:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dtype": "bfloat16", **config}))
    api.clear_cache()
    result = api.estimate(api.load_geometry(str(path)), engine="hf-dynamic", seq_len=seq_len, batch=B,
                          kv_dtype="bf16", encoder_len=encoder_len)
    return result.to_dict()["totals"]["kv_cache_bytes"]


def check_zoo(model_type: str, expected: int) -> None:
    """The arithmetic is what transformers measured, when the zoo's records are here."""
    if not ZOO.exists():
        return
    record = json.loads(ZOO.read_text())["records"].get(model_type)
    if record and record.get("status") == "ok":
        assert record["total_bytes"] == expected, model_type


def kv(layers: int, heads: int, head_dim: int, tokens: int) -> int:
    return layers * 2 * B * heads * head_dim * tokens * S  # layers x K+V x batch x heads x head dim x tokens x bf16


# ---- the BART lineage ------------------------------------------------------------------------------------
BART = {"model_type": "bart", "decoder_layers": 2, "decoder_attention_heads": 16, "d_model": 1024,
        "encoder_layers": 2, "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "vocab_size": 512,
        "architectures": ["BartForConditionalGeneration"]}


@pytest.mark.parametrize(("model_type", "fields"), [
    ("bart", {}),
    ("bigbird_pegasus", {}),
    ("fsmt", {}),
    ("nllb-moe", {}),
    ("blenderbot-small", {"d_model": 512}),
    ("prophetnet", {"decoder_layers": None, "decoder_attention_heads": None, "d_model": None,
                    "num_decoder_layers": 2, "num_decoder_attention_heads": 16, "hidden_size": 1024}),
    ("seamless_m4t", {"d_model": None, "hidden_size": 1024}),
])
def test_bart_lineage_self_and_cross(model_type: str, fields: dict[str, Any], tmp_path: Path) -> None:
    config = {k: v for k, v in {**BART, "model_type": model_type, **fields}.items() if v is not None}
    head_dim = (config.get("d_model") or config["hidden_size"]) // 16
    expected = kv(2, 16, head_dim, N) + kv(2, 16, head_dim, P)  # self over N tokens, cross over the P encoder tokens
    assert kv_bytes(config, seq_len=N, encoder_len=P, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_causal_lm_architecture_runs_the_decoder_alone(tmp_path: Path) -> None:
    config = {**BART, "architectures": ["BartForCausalLM"]}
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == kv(2, 16, 64, T)
    whisper = {"model_type": "whisper", "decoder_layers": 2, "decoder_attention_heads": 6, "d_model": 384,
               "is_encoder_decoder": True, "architectures": ["WhisperForCausalLM"]}
    expected = kv(2, 6, 384 // 6, T)
    assert kv_bytes(whisper, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("whisper", expected)


@pytest.mark.parametrize(("model_type", "config", "heads", "head_dim"), [
    ("xglm", {"model_type": "xglm", "num_layers": 2, "attention_heads": 16, "d_model": 1024}, 16, 64),
    ("trocr", {"model_type": "trocr", "decoder_layers": 2, "decoder_attention_heads": 16, "d_model": 1024,
               "is_encoder_decoder": False}, 16, 64),
    ("kosmos-2", {"model_type": "kosmos-2", "text_config": {"model_type": "kosmos_2_text_model", "layers": 2,
                                                             "attention_heads": 32, "embed_dim": 2048}}, 32, 64),
    ("kosmos-2.5", {"model_type": "kosmos-2.5", "text_config": {"model_type": "kosmos_2_5_text_model", "layers": 2,
                                                                 "attention_heads": 16, "embed_dim": 1536}}, 16, 96),
])
def test_bart_lineage_decoders(model_type: str, config: dict[str, Any], heads: int, head_dim: int,
                               tmp_path: Path) -> None:
    expected = kv(2, heads, head_dim, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_bart_weights_add_encoder_and_decoder() -> None:
    d, ffn, vocab, layers = 1024, 64, 512, 2
    counted = count_weights(BART, model_id="bart")
    attention = (layers + 2 * layers) * (4 * d * d + 4 * d)  # encoder self, decoder self + cross: q/k/v/o with bias
    mlp = 2 * layers * (2 * d * ffn + ffn + d)  # fc1 / fc2 with bias, encoder and decoder
    norms = (2 * layers + 3 * layers + 2) * 2 * d  # LayerNorms with bias (+ layernorm_embedding per stack)
    positions = 2 * (1024 + 2) * d  # learned, max_position_embeddings (BartConfig default 1024) + offset 2, per stack
    assert counted.parameters == vocab * d + attention + mlp + norms + positions + vocab  # tied lm_head; final_logits_bias


# ---- BERT-style decoders and composite encoder-decoders -----------------------------------------------------
BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 12, "hidden_size": 768,
        "intermediate_size": 64, "vocab_size": 512, "max_position_embeddings": 512, "type_vocab_size": 2,
        "is_decoder": False}


@pytest.mark.parametrize("model_type", ["bert", "roberta", "camembert", "xlm-roberta"])
def test_bert_style_decoder(model_type: str, tmp_path: Path) -> None:
    arch = "BertLMHeadModel" if model_type == "bert" else "ForCausalLM"
    config = {**BERT, "model_type": model_type, "architectures": [arch]}
    expected = kv(2, 12, 768 // 12, T)  # multi-head: 12 KV heads of hidden_size // heads
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_bert_as_encoder_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BERT, "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(ConfigError, match="encoder-only"):
        api.load_geometry(str(path))


def test_bert_weights() -> None:
    h, inner, vocab, pos, types, layers = 768, 64, 512, 512, 2, 2
    counted = count_weights({**BERT, "architectures": ["BertLMHeadModel"]}, model_id="bert")
    embeddings = vocab * h + (pos + types) * h + 2 * h
    per_layer = 4 * h * h + 4 * h + 2 * h + (h * inner + inner) + (inner * h + h) + 2 * h
    head = h * h + h + 2 * h + vocab  # transform dense + LayerNorm, decoder bias (tied weight)
    assert counted.parameters == embeddings + layers * per_layer + head


def test_encoder_decoder_reads_the_nested_decoder(tmp_path: Path) -> None:
    decoder = {**BERT, "is_decoder": True, "add_cross_attention": True}
    config = {"model_type": "encoder-decoder", "encoder": BERT, "decoder": decoder,
              "architectures": ["EncoderDecoderModel"], "is_encoder_decoder": True}
    expected = kv(2, 12, 64, N) + kv(2, 12, 64, P)
    assert kv_bytes(config, seq_len=N, encoder_len=P, tmp_path=tmp_path) == expected
    check_zoo("encoder-decoder", expected)
    counted = count_weights(config, model_id="bert2bert")
    one = count_weights({**BERT, "architectures": ["BertLMHeadModel"]}, model_id="bert").parameters
    h, vocab = 768, 512
    head, pooler = h * h + h + 2 * h + vocab, h * h + h  # the encoder is BertModel: its pooler, no LM head
    assert counted.parameters == one - head + pooler + count_weights(decoder, model_id="dec").parameters


def test_t5gemma_sliding_and_cross(tmp_path: Path) -> None:
    module = {"model_type": "t5_gemma_module", "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 2304, "sliding_window": 4096,
              "layer_types": ["sliding_attention", "full_attention"]}
    config = {"model_type": "t5gemma", "encoder": {**module, "is_decoder": False},
              "decoder": {**module, "is_decoder": True}, "is_encoder_decoder": True}
    expected = kv(2, 4, 256, N) + kv(2, 4, 256, P)  # N < window: the sliding layer holds every token
    assert kv_bytes(config, seq_len=N, encoder_len=P, tmp_path=tmp_path) == expected
    check_zoo("t5gemma", expected)


# ---- linear-attention and recurrent hybrids -------------------------------------------------------------------
def test_inkling_hybrid_sliding_layers(tmp_path: Path) -> None:
    hidden, kernel = 6144, 4
    config = {"model_type": "inkling_text", "num_hidden_layers": 6, "hidden_size": hidden, "num_attention_heads": 64,
              "num_key_value_heads": 8, "head_dim": 128, "swa_num_key_value_heads": 16, "swa_head_dim": 128,
              "sliding_window_size": 512, "conv_kernel_size": kernel, "layer_types": ["hybrid_sliding"] * 5 + ["hybrid"]}

    def convs(kv_width: int) -> int:  # four float32 conv windows of `kernel` inputs: K, V, pre-attention, pre-MLP
        return B * kernel * 4 * (2 * kv_width + 2 * hidden)

    expected = 5 * (kv(1, 16, 128, T) + convs(16 * 128)) + kv(1, 8, 128, T) + convs(8 * 128)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("inkling_text", expected)


def test_kimi_linear_and_bailing_hybrid_kda_plus_mla(tmp_path: Path) -> None:
    heads, dim, kernel = 32, 128, 4
    kda = B * (3 * heads * dim * kernel * S + heads * dim * dim * 4)  # q/k/v conv window + float32 recurrent state
    mla = B * T * (512 + 64) * S  # kv_lora_rank + qk_rope_head_dim (class default 64)
    kimi = {"model_type": "kimi_linear", "num_hidden_layers": 5, "hidden_size": 2304, "num_attention_heads": 32,
            "kv_lora_rank": 512, "linear_num_heads": heads, "linear_head_dim": dim, "linear_conv_kernel_dim": kernel,
            "layer_types": ["linear_attention"] * 4 + ["full_attention"]}
    assert kv_bytes(kimi, seq_len=T, tmp_path=tmp_path) == 4 * kda + mla
    check_zoo("kimi_linear", 4 * kda + mla)
    # Bailing hybrid as its config.json has it: head_dim is the KDA head dim, full attention every 6th layer
    bailing = {"model_type": "bailing_hybrid", "num_hidden_layers": 6, "hidden_size": 2560, "num_attention_heads": heads,
               "head_dim": dim, "short_conv_kernel_size": kernel, "layer_group_size": 6, "kv_lora_rank": 512}
    assert kv_bytes(bailing, seq_len=T, tmp_path=tmp_path) == 5 * kda + mla
    check_zoo("bailing_hybrid", 5 * kda + mla)


@pytest.mark.parametrize(("model_type", "config", "attention"), [
    ("olmo_hybrid", {"num_hidden_layers": 4, "hidden_size": 3840, "num_attention_heads": 30, "num_key_value_heads": 30,
                     "linear_num_key_heads": 30, "linear_num_value_heads": 30, "linear_key_head_dim": 96,
                     "linear_value_head_dim": 192, "linear_conv_kernel_dim": 4,
                     "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, kv(1, 30, 128, T)),
    ("lara_mini", {"num_hidden_layers": 5, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
                   "head_dim": 128, "linear_num_key_heads": 8, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
                   "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "sliding_window": 512,
                   "layer_types": ["linear_attention", "sliding_attention", "linear_attention", "full_attention",
                                   "sliding_attention"]}, 3 * kv(1, 4, 128, T)),
])
def test_gated_deltanet_hybrids(model_type: str, config: dict[str, Any], attention: int, tmp_path: Path) -> None:
    hk, hv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv, k = config["linear_key_head_dim"], config["linear_value_head_dim"], config["linear_conv_kernel_dim"]
    n_linear = config["layer_types"].count("linear_attention")
    state = B * ((2 * hk * dk + hv * dv) * k * S + hv * dk * dv * 4)  # conv window (model dtype) + float32 state
    expected = n_linear * state + attention
    assert kv_bytes({"model_type": model_type, **config}, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo(model_type, expected)


def test_lfm3_conv_window_is_whole_in_transformers(tmp_path: Path) -> None:
    config = {"model_type": "lfm3", "num_hidden_layers": 5, "hidden_size": 2048, "num_attention_heads": 16,
              "num_key_value_heads": 4, "head_dim": 128, "conv_L_cache": 7, "sliding_window": 256,
              "layer_types": ["conv", "conv", "full_attention", "conv", "sliding_attention"]}
    expected = 3 * B * 7 * 2048 * S + 2 * kv(1, 4, 128, T)  # conv_L_cache inputs of hidden_size; T < window
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("lfm3", expected)


def test_zamba2_mamba_everywhere_shared_attention_on_hybrid_layers(tmp_path: Path) -> None:
    heads, head_dim, groups, d_state, d_conv, hidden = 8, 640, 1, 64, 4, 2560
    config = {"model_type": "zamba2", "num_hidden_layers": 7, "hidden_size": hidden, "mamba_d_state": d_state,
              "mamba_d_conv": d_conv, "mamba_expand": 2, "mamba_ngroups": groups, "n_mamba_heads": heads,
              "mamba_headdim": head_dim, "num_attention_heads": 32, "num_key_value_heads": 32, "attention_head_dim": 160,
              "layers_block_type": ["linear_attention"] * 6 + ["hybrid"]}
    mamba = B * ((heads * head_dim + 2 * groups * d_state) * d_conv * S + heads * head_dim * d_state * 4)
    expected = 7 * mamba + kv(1, 32, 160, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("zamba2", expected)


def test_zaya_cca_states(tmp_path: Path) -> None:
    heads, kv_heads, head_dim = 8, 2, 128
    config = {"model_type": "zaya", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "head_dim": head_dim, "cca_time0": 2, "cca_time1": 2,
              "layer_types": ["hybrid", "hybrid"]}
    state = B * ((heads + kv_heads) * head_dim * (1 + 1) + kv_heads * head_dim // 2) * S  # q/k window + delayed V
    expected = 2 * (kv(1, kv_heads, head_dim, T) + state)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("zaya", expected)


def test_nemotron_h_layer_count_from_block_types(tmp_path: Path) -> None:
    heads, head_dim, groups, d_state, conv = 128, 64, 8, 128, 4
    config = {"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "mamba_num_heads": heads, "mamba_head_dim": head_dim, "n_groups": groups,
              "conv_kernel": conv, "ssm_state_size": d_state,
              "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"]}
    mamba = B * ((heads * head_dim + 2 * groups * d_state) * conv * S + heads * head_dim * d_state * 4)
    expected = mamba + kv(1, 8, 128, T)
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("nemotron_h", expected)


def test_glm4_moe_head_dim_floored_like_transformers(tmp_path: Path) -> None:
    config = {"model_type": "glm4_moe", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 96,
              "num_key_value_heads": 8}
    expected = kv(2, 8, 4096 // 96, T)  # modeling_glm4_moe: hidden_size // num_attention_heads = 42
    assert kv_bytes(config, seq_len=T, tmp_path=tmp_path) == expected
    check_zoo("glm4_moe", expected)


def test_recurrent_gemma_and_rwkv_states(tmp_path: Path) -> None:
    # transformers keeps these states outside the Cache object (the zoo measures only the Cache): arithmetic only
    rg = {"model_type": "recurrent_gemma", "num_hidden_layers": 3, "hidden_size": 2560, "num_attention_heads": 10,
          "num_key_value_heads": 10, "attention_window_size": 2048, "conv1d_width": 4,
          "block_types": ["recurrent", "recurrent", "attention"]}
    rg_state = B * (3 * 2560 * S + 2560 * 4)  # conv1d_width - 1 inputs (model dtype) + float32 RG-LRU state
    assert kv_bytes(rg, seq_len=T, tmp_path=tmp_path) == 2 * rg_state + kv(1, 10, 256, T)
    rwkv = {"model_type": "rwkv", "num_hidden_layers": 6, "hidden_size": 4096}
    assert kv_bytes(rwkv, seq_len=T, tmp_path=tmp_path) == 6 * B * 4096 * (2 * S + 3 * 4)
