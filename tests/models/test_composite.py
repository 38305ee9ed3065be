"""Composite encoder-decoders: encoder-decoder, vision- and speech-encoder-decoder, T5Gemma (composite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers_meta import check_lm_count
from zoo_generate import B, N, P, check_zoo, kv, kv_bytes

from kvplan.models import count_weights

BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 12, "hidden_size": 768,
        "intermediate_size": 64, "vocab_size": 512, "max_position_embeddings": 512, "type_vocab_size": 2,
        "is_decoder": False}


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


#: VisionEncoderDecoderConfig's parts as transformers 5.25 builds them by default: a ViT encoder, a BERT decoder.
VIT = {"model_type": "vit", "num_hidden_layers": 1, "hidden_size": 768, "num_attention_heads": 12,
       "image_size": 224, "patch_size": 16, "num_channels": 3}


def test_vision_encoder_decoder_cross_attends_over_the_vit_patches(tmp_path: Path) -> None:
    """The decoder's cross-attention caches the ViT's last hidden state: one token per patch plus the class
    token; the encoder length comes from the encoder config, no --encoder-len needed."""
    decoder = {**BERT, "is_decoder": True, "add_cross_attention": True}
    config = {"model_type": "vision-encoder-decoder", "encoder": VIT, "decoder": decoder,
              "architectures": ["VisionEncoderDecoderModel"], "is_encoder_decoder": True}
    image, patch = VIT["image_size"], VIT["patch_size"]
    encoder_tokens = (image // patch) ** 2 + 1  # 14 x 14 patches + the class token = 197
    layers, heads, head_dim = decoder["num_hidden_layers"], 12, 768 // 12
    expected = kv(layers, heads, head_dim, N) + kv(layers, heads, head_dim, encoder_tokens)
    assert kv_bytes(config, seq_len=N, tmp_path=tmp_path) == expected
    check_zoo("vision-encoder-decoder", expected)  # measured: generate(pixel_values=[2, 3, 224, 224])
    # a rectangular image ([height, width], as Donut's configs write it) and another patch size
    wide = {**config, "encoder": {**VIT, "image_size": [384, 512], "patch_size": 32}}
    encoder_tokens = (384 // 32) * (512 // 32) + 1
    assert kv_bytes(wide, seq_len=N, tmp_path=tmp_path) == (
        kv(layers, heads, head_dim, N) + kv(layers, heads, head_dim, encoder_tokens))


def test_t5gemma_sliding_and_cross(tmp_path: Path) -> None:
    module = {"model_type": "t5_gemma_module", "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 2304, "sliding_window": 4096,
              "layer_types": ["sliding_attention", "full_attention"]}
    config = {"model_type": "t5gemma", "encoder": {**module, "is_decoder": False},
              "decoder": {**module, "is_decoder": True}, "is_encoder_decoder": True}
    expected = kv(2, 4, 256, N) + kv(2, 4, 256, P)  # N < window: the sliding layer holds every token
    assert kv_bytes(config, seq_len=N, encoder_len=P, tmp_path=tmp_path) == expected
    check_zoo("t5gemma", expected)


@pytest.mark.parametrize("encoder_type", ["bert", "roberta"])
def test_encoder_decoder_counts_the_encoder_as_a_bare_model(encoder_type: str) -> None:
    """BERT2BERT-style ``encoder-decoder``: the encoder is AutoModel's bare stack (pooler, no LM head), the
    decoder the LM-head model with cross-attention."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    encoder = transformers.AutoConfig.for_model(encoder_type, num_hidden_layers=2)
    decoder = transformers.AutoConfig.for_model("bert", num_hidden_layers=2, is_decoder=True, add_cross_attention=True)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    with torch.device("meta"):
        model = transformers.EncoderDecoderModel(config=config)
    expected = sum(p.numel() for p in model.parameters())
    assert count_weights(config.to_dict(), model_id="bert2bert").parameters == expected


#: (model_type and the variant's name, overrides of its config class's defaults): kvplan's count equals
#: transformers' causal LM (the whole model for an encoder-decoder) on the meta device.
LM_CASES: list[tuple[str, dict[str, Any]]] = [
    ("t5gemma", {}),
    ("t5gemma untied", {"tie_word_embeddings": False}),
]


@pytest.mark.parametrize(("name", "overrides"), LM_CASES, ids=[n for n, _ in LM_CASES])
def test_lm_weights_equal_transformers(name: str, overrides: dict[str, Any]) -> None:
    check_lm_count(name, overrides)


#: PI05Config (transformers 5.25) as its defaults write it: the decoder is a PaliGemma's Gemma under
#: vlm_config.text_config; the action expert (dit_config, a smaller Gemma) attends over that cache and keeps none.
PI05 = {"model_type": "pi05", "chunk_size": 50,
        "vlm_config": {"model_type": "paligemma",
                       "text_config": {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
                                       "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256},
                       "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                         "num_hidden_layers": 27}},
        "dit_config": {"model_type": "gemma", "hidden_size": 1024, "num_hidden_layers": 18,
                       "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256}}


def test_a_decoder_nested_two_levels_deep_is_read(runner, tmp_path: Path) -> None:
    import json

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(PI05))
    args = ["estimate", "--model", str(path), "--seq-len", "1000", "--kv-dtype", "bf16", "--format", "json"]
    report = json.loads(runner.invoke(app, args).stdout)
    text = PI05["vlm_config"]["text_config"]
    layers, kv_heads, head_dim, tokens, bf16 = (text["num_hidden_layers"], text["num_key_value_heads"],
                                                 text["head_dim"], 1000, 2)
    assert report["totals"]["kv_cache_bytes"] == 2 * layers * kv_heads * head_dim * tokens * bf16
    assert any("nested vlm_config.text_config (model_type gemma)" in n for n in report["notes"])
    # an undotted --set goes into the decoder read
    result = runner.invoke(app, [*args, "--set", "num_key_value_heads=2"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["kv_cache_bytes"] == 2 * layers * 2 * head_dim * tokens * bf16


@pytest.mark.parametrize(("encoder_type", "image_size", "patch_size", "leading"),
                         [("vit", 224, 16, 1), ("deit", 384, 16, 2), ("vit", [96, 128], 32, 1)])
def test_vision_encoder_decoder_cache_and_weights_equal_transformers(
        encoder_type: str, image_size: Any, patch_size: int, leading: int, tmp_path: Path) -> None:
    """A ViT or DeiT encoder (TrOCR's) and a BERT decoder, built by transformers and run through generate() on a
    blank image: the cross cache holds the patches plus the class (and DeiT's distillation) token, as kvplan
    derives from the encoder config; the weights are transformers' count on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    encoder = transformers.AutoConfig.for_model(encoder_type, num_hidden_layers=1, hidden_size=64, num_attention_heads=2,
                                                intermediate_size=64, image_size=image_size, patch_size=patch_size)
    decoder = transformers.AutoConfig.for_model("bert", num_hidden_layers=2, hidden_size=128, num_attention_heads=4,
                                                intermediate_size=64, vocab_size=512, is_decoder=True,
                                                add_cross_attention=True)
    config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id = config.pad_token_id = 0
    torch.manual_seed(0)
    model = transformers.VisionEncoderDecoderModel(config=config).to(torch.bfloat16).eval()
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    pixels = torch.zeros(B, 3, height, width, dtype=torch.bfloat16)
    with torch.no_grad():
        out = model.generate(pixel_values=pixels, max_new_tokens=N, min_new_tokens=N, do_sample=False,
                             return_dict_in_generate=True)
    cache = out.past_key_values
    measured = sum(t.numel() * t.element_size() for part in (cache.self_attention_cache, cache.cross_attention_cache)
                   for layer in part.layers for t in (layer.keys, layer.values))
    encoder_tokens = (height // patch_size) * (width // patch_size) + leading
    assert cache.cross_attention_cache.layers[0].keys.shape[-2] == encoder_tokens
    expected = kv(2, 4, 128 // 4, N) + kv(2, 4, 128 // 4, encoder_tokens)  # layers, heads, head dim, tokens
    assert measured == expected
    assert kv_bytes(config.to_dict(), seq_len=N, tmp_path=tmp_path) == expected
    with torch.device("meta"):
        meta = transformers.VisionEncoderDecoderModel(config=config)
    assert count_weights(config.to_dict(), model_id="ved").parameters == sum(p.numel() for p in meta.parameters())
