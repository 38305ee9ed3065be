"""Weight counts of the Llama-likes, the encoder-decoders, the BERT-style decoders and the classic decoders
that had none (issue 11: a weight count for every family), each against transformers itself: the model
built on the meta device from the same config (transformers' defaults of the type, then a variant where
one field changes the layout), its parameters and checkpoint buffers summed.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_models_weights import default_config

from kvplan.models import count_weights


def meta_count(config: dict[str, Any]) -> int:
    """test_models_weights.meta_count, extended to encoder-decoders (``AutoModelForSeq2SeqLM``): transformers'
    model on the meta device, parameters plus the buffers it saves in a checkpoint, tied weights once."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    values = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")}
    conf = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForSeq2SeqLM)
    with torch.device("meta"):
        for auto in autos:
            try:
                model = auto.from_config(conf)
                break
            except ValueError:
                continue
        else:
            raise AssertionError(f"transformers builds no causal or seq2seq LM for {config['model_type']}")
    saved = set(model.state_dict())
    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if n in saved]
    return sum(t.numel() for _, t in tensors)


def check(name: str, overrides: dict[str, Any]) -> None:
    model_type = name.split()[0]
    config = default_config(model_type, **overrides)
    assert count_weights(config, model_id=name).parameters == meta_count(default_config(model_type, **overrides))


# ---- Llama-likes (llama.py; vaultgemma in gemma.py) ---------------------------------------------------
LLAMA_LIKES = [
    ("apertus1p5_text", {}), ("apertus1p5_text gqa", {"num_key_value_heads": 8}),
    ("bitnet", {}), ("bitnet narrow mlp tied", {"intermediate_size": 4096, "tie_word_embeddings": True}),
    ("cwm", {}), ("cwm gqa4", {"num_key_value_heads": 4}),
    ("diffllama", {}), ("diffllama 16 heads", {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 128}),
    ("doge", {}), ("doge cdmoe", {"is_moe": True, "num_experts": 1024, "attention_bias": True}),
    ("helium", {}), ("helium tied", {"tie_word_embeddings": True}),
    ("hyperclovax", {}), ("hyperclovax no post-norm", {"use_post_norm": False}),
    ("iquestcoder", {}), ("iquestcoder tied", {"tie_word_embeddings": True}),
    ("jais2", {}), ("jais2 no biases", {"attention_bias": False, "mlp_bias": False}),
    ("mellum", {}), ("mellum dense first", {"mlp_layer_types": ["dense"] * 2 + ["sparse"] * 26}),
    ("nanochat", {}), ("nanochat biased", {"attention_bias": True}),
    ("vaultgemma", {}), ("vaultgemma narrow", {"intermediate_size": 4096, "num_key_value_heads": 8}),
    ("kolibri1", {}), ("kolibri1 wide shared", {"shared_expert_intermediate_size": 1024}),
    ("flint", {}), ("flint step 2", {"decoder_sparse_step": 2, "mlp_only_layers": [0, 1, 2, 3]}),
    ("beam", {}), ("beam 6 layers", {"num_hidden_layers": 6, "mlp_layer_types": ["dense", "sparse"] * 3}),
]


@pytest.mark.parametrize(("name", "overrides"), LLAMA_LIKES, ids=[n for n, _ in LLAMA_LIKES])
def test_llama_like_count_equals_transformers(name: str, overrides: dict[str, Any]) -> None:
    check(name, overrides)
