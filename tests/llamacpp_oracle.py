"""The llama.cpp oracle: kvplan's llama.cpp profile against the real llama.cpp, architecture by architecture.

For every GGUF architecture kvplan reads, a tiny GGUF (4 layers or so, head size 32, random float32
weights, llama.cpp naming and shaping the tensors: kvplan.verify.llamacpp_gguf) is given to llama.cpp
(llama-cpp-python) across the context flags users pass (``-c``, ``-np``, ``-kvu``, ``-ctk``/``-ctv``,
``-fa``, ``-ub``, ``--swa-full``). llama.cpp makes each context and decodes one token; the bytes of every
cache tensor and buffer it allocated are compared with kvplan's prediction (``kvplan verify --engine
llama.cpp --measure tensors``), as are the cells, layers and sequences it logs.

    python tests/llamacpp_oracle.py        # print the outcome table (tools/llamacpp_oracle.py writes the docs page)

A miss kvplan knows about is listed in MISSES with its cause; a new miss fails the tests, and so does a
listed one that now matches (tests/test_verify_llamacpp_oracle.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Sizes the cache does not depend on, the same in every tiny model.
BASE: dict[str, Any] = {
    "block_count": 4, "context_length": 8192, "embedding_length": 128, "feed_forward_length": 64,
    "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 32,
    "attention.value_length": 32, "rope.dimension_count": 32, "attention.layer_norm_rms_epsilon": 1e-6,
}
MOE: dict[str, Any] = {"expert_count": 4, "expert_used_count": 2, "expert_feed_forward_length": 32}
MAMBA2: dict[str, Any] = {"ssm.conv_kernel": 4, "ssm.inner_size": 128, "ssm.state_size": 16,
                          "ssm.time_step_rank": 4, "ssm.group_count": 2}
DELTA_NET: dict[str, Any] = {"ssm.conv_kernel": 4, "ssm.inner_size": 64, "ssm.state_size": 32,
                             "ssm.time_step_rank": 2, "ssm.group_count": 2, "full_attention_interval": 4}
#: The layer norm key the GPT-2-era architectures require (instead of the RMS one).
LAYER_NORM: dict[str, Any] = {"attention.layer_norm_epsilon": 1e-5}
#: M-RoPE sections the Qwen2-VL family requires (rope.dimension_count / 2 in all).
ROPE_SECTIONS: dict[str, Any] = {"rope.dimension_sections": [6, 5, 5, 0]}
NO_ATTENTION = {"attention.head_count": None, "attention.head_count_kv": None, "attention.key_length": None,
                "attention.value_length": None, "rope.dimension_count": None}


@dataclass(frozen=True, kw_only=True, slots=True)
class TinyModel:
    name: str
    """The row's name (the GGUF architecture, with a variant where one architecture has two rows)."""
    arch: str
    what: str
    """What the tiny model exercises (its cache layout)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    measure: str = "tensors"
    """``tensors`` (a GGUF with weights; the bytes of every cache tensor), or ``log`` (the metadata alone, llama.cpp's
    dry run; its cache lines) where llama.cpp cannot name the architecture's weights for kvplan: its model saver
    (``llama_model_saver_supports_arch`` in src/llama-model-saver.cpp) refuses gemma3n, bitnet and apertus, and
    leaves out gemma4's ``per_layer_model_proj``."""

    def full_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in {**BASE, **self.metadata}.items() if v is not None}


MODELS: tuple[TinyModel, ...] = (
    TinyModel(name="llama", arch="llama", what="GQA, 2 of 4 heads"),
    TinyModel(name="qwen2", arch="qwen2", what="GQA"),
    TinyModel(name="qwen3", arch="qwen3", what="GQA, explicit head size",
              metadata={"attention.head_count": 8, "attention.head_count_kv": 1, "embedding_length": 256}),
    TinyModel(name="qwen3moe", arch="qwen3moe", what="MoE, GQA", metadata=MOE),
    TinyModel(name="qwen2moe", arch="qwen2moe", what="MoE with a shared expert",
              metadata={**MOE, "expert_shared_feed_forward_length": 32}),
    TinyModel(name="phi3", arch="phi3", what="sliding_window set, which llama.cpp ignores",
              metadata={"attention.sliding_window": 256}),
    TinyModel(name="gemma", arch="gemma", what="MHA"),
    TinyModel(name="gemma2", arch="gemma2", what="SWA every other layer (llama.cpp's rule)",
              metadata={"attention.sliding_window": 256}),
    TinyModel(name="gemma3", arch="gemma3", what="SWA 5 of 6 layers (llama.cpp's rule)",
              metadata={"block_count": 6, "attention.sliding_window": 256}),
    TinyModel(name="gemma3 (pattern key)", arch="gemma3", what="SWA from a per-layer sliding_window_pattern",
              metadata={"block_count": 6, "attention.sliding_window": 256,
                        "attention.sliding_window_pattern": [True, False, True, True, False, True]}),
    TinyModel(name="cohere2", arch="cohere2", what="SWA 3 of 4 layers",
              metadata={"attention.sliding_window": 256, "logit_scale": 1.0, "attention.layer_norm_epsilon": 1e-5}),
    TinyModel(name="gpt-oss", arch="gpt-oss", what="MoE, SWA every other layer, attention sinks",
              metadata={**MOE, "attention.sliding_window": 128}),
    TinyModel(name="exaone4 (64 layers)", arch="exaone4", what="SWA 3 of 4 layers (the 32B's rule)",
              metadata={"block_count": 64, "attention.sliding_window": 256}),
    TinyModel(name="exaone4 (4 layers)", arch="exaone4", what="sliding_window set on a model that is not the 32B",
              metadata={"attention.sliding_window": 256}),
    TinyModel(name="mistral3", arch="mistral3", what="sliding_window set",
              metadata={"attention.sliding_window": 256}),
    TinyModel(name="llama4", arch="llama4", what="MoE, chunked attention 3 of 4 layers",
              metadata={**MOE, "interleave_moe_layer_step": 1}),
    TinyModel(name="command-r", arch="command-r", what="MHA-style GQA",
              metadata={"logit_scale": 1.0, "attention.layer_norm_epsilon": 1e-5}),
    TinyModel(name="starcoder2", arch="starcoder2", what="GQA", metadata={"attention.layer_norm_epsilon": 1e-5}),
    TinyModel(name="granite", arch="granite", what="GQA", metadata={"logit_scale": 1.0}),
    TinyModel(name="deepseek2", arch="deepseek2", what="MLA latent (K only), MoE",
              metadata={**MOE, "block_count": 3, "leading_dense_block_count": 1, "attention.head_count": 2,
                        "attention.head_count_kv": 1, "attention.q_lora_rank": 32, "attention.kv_lora_rank": 64,
                        "attention.key_length": 96, "attention.value_length": 64, "rope.dimension_count": 32,
                        "attention.key_length_mla": 64, "attention.value_length_mla": 32, "expert_shared_count": 1,
                        "expert_weights_scale": 1.0}),
    TinyModel(name="qwen3next", arch="qwen3next", what="gated delta net 3 of 4 layers, MoE",
              metadata={**MOE, **DELTA_NET, "expert_shared_feed_forward_length": 32}),
    TinyModel(name="qwen35", arch="qwen35", what="gated delta net 3 of 4 layers",
              metadata={**DELTA_NET, "rope.dimension_sections": [6, 5, 5, 0]}),
    TinyModel(name="mamba2", arch="mamba2", what="Mamba-2 states only", metadata={**NO_ATTENTION, **MAMBA2}),
    TinyModel(name="jamba", arch="jamba", what="Mamba states 3 of 4 layers, MoE",
              metadata={**MOE, "attention.head_count_kv": [0, 2, 0, 0], "embedding_length": 64,
                        "attention.head_count": 2, "ssm.conv_kernel": 4, "ssm.inner_size": 128,
                        "ssm.state_size": 16, "ssm.time_step_rank": 8}),
    TinyModel(name="nemotron_h", arch="nemotron_h", what="Mamba-2, attention and MLP-only layers",
              metadata={**MAMBA2, "attention.head_count_kv": [0, 2, 0, 0], "feed_forward_length": [0, 0, 64, 0],
                        "attention.layer_norm_epsilon": 1e-5}),
    TinyModel(name="granitehybrid", arch="granitehybrid", what="Mamba-2 2 of 4 layers",
              metadata={**MAMBA2, "attention.head_count_kv": [0, 2, 0, 2], "ssm.group_count": 1,
                        "ssm.inner_size": 256}),
    TinyModel(name="falcon-h1", arch="falcon-h1", what="attention and a Mamba-2 state in every layer",
              metadata={**MAMBA2, "ssm.group_count": 1}),
    TinyModel(name="lfm2", arch="lfm2", what="short convolutions 2 of 4 layers",
              metadata={"attention.head_count_kv": [0, 2, 0, 2], "shortconv.l_cache": 3}),
    # Full attention only (GQA 2 of 4 heads unless said): one cache, the base rules.
    TinyModel(name="arcee", arch="arcee", what="GQA"),
    TinyModel(name="baichuan", arch="baichuan", what="GQA, ALiBi"),
    TinyModel(name="bloom", arch="bloom", what="GQA, ALiBi, layer norm", metadata=LAYER_NORM),
    TinyModel(name="chatglm", arch="chatglm", what="GQA"),
    TinyModel(name="codeshell", arch="codeshell", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="cogvlm", arch="cogvlm", what="GQA (the text tower)"),
    TinyModel(name="deci", arch="deci", what="per-layer KV heads, one layer without attention",
              metadata={"attention.head_count_kv": [2, 0, 4, 1]}),
    TinyModel(name="ernie4_5", arch="ernie4_5", what="GQA"),
    TinyModel(name="exaone", arch="exaone", what="GQA"),
    TinyModel(name="falcon", arch="falcon", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="glm4", arch="glm4", what="GQA"),
    TinyModel(name="gpt2", arch="gpt2", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="hrm_text", arch="hrm_text", what="one cache slot per stack layer and cycle (1 x 1 x (3 + 1) = 4)",
              metadata={"hrm.layers_per_stack": 1, "hrm.h_cycles": 1, "hrm.l_cycles": 3}),
    TinyModel(name="hunyuan-dense", arch="hunyuan-dense", what="GQA"),
    TinyModel(name="hunyuan_vl", arch="hunyuan_vl", what="GQA (the text tower)"),
    TinyModel(name="internlm2", arch="internlm2", what="GQA"),
    TinyModel(name="jais", arch="jais", what="GQA, ALiBi, layer norm", metadata=LAYER_NORM),
    TinyModel(name="jais2", arch="jais2", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="llama-embed", arch="llama-embed", what="GQA"),
    TinyModel(name="maincoder", arch="maincoder", what="GQA"),
    TinyModel(name="minicpm", arch="minicpm", what="GQA"),
    TinyModel(name="mpt", arch="mpt", what="GQA, ALiBi, layer norm", metadata=LAYER_NORM),
    TinyModel(name="nemotron", arch="nemotron", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="olmo", arch="olmo", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="openelm", arch="openelm", what="per-layer query and KV heads",
              metadata={"attention.head_count": [4, 4, 8, 8], "attention.head_count_kv": [1, 2, 2, 4]}),
    TinyModel(name="orion", arch="orion", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="pangu-embedded", arch="pangu-embedded", what="GQA"),
    TinyModel(name="phi2", arch="phi2", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="plamo", arch="plamo", what="GQA"),
    TinyModel(name="pockettts", arch="pockettts", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="qwen", arch="qwen", what="GQA"),
    TinyModel(name="qwen2vl", arch="qwen2vl", what="GQA, M-RoPE", metadata=ROPE_SECTIONS),
    TinyModel(name="qwen3vl", arch="qwen3vl", what="GQA, M-RoPE", metadata=ROPE_SECTIONS),
    TinyModel(name="paddleocr", arch="paddleocr", what="GQA, M-RoPE", metadata=ROPE_SECTIONS),
    TinyModel(name="refact", arch="refact", what="GQA, ALiBi"),
    TinyModel(name="seed_oss", arch="seed_oss", what="GQA"),
    TinyModel(name="smollm3", arch="smollm3", what="GQA"),
    TinyModel(name="stablelm", arch="stablelm", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="starcoder", arch="starcoder", what="GQA, layer norm", metadata=LAYER_NORM),
    TinyModel(name="talkie", arch="talkie", what="GQA", metadata={"logit_scale": 1.0}),
    TinyModel(name="xverse", arch="xverse", what="GQA"),
    TinyModel(name="chameleon", arch="chameleon", what="MHA (its image tokens need a vocabulary past 8,196)",
              metadata={"attention.head_count_kv": 4, "vocab_size": 8200}),
    TinyModel(name="gptneox", arch="gptneox", what="GQA, layer norm, parallel residual",
              metadata={**LAYER_NORM, "use_parallel_residual": True}),
    TinyModel(name="graniteswitch", arch="graniteswitch", what="GQA and llama.cpp's router layer (1 KV head) after the blocks",
              metadata={"logit_scale": 1.0, "adapters.count": 1, "adapters.lora_rank": 4,
                        "adapters.token_ids_activate": [5], "adapters.token_ids_substitute": [6]}),
    TinyModel(name="grok", arch="grok", what="MoE, flash attention forced off (a quantised V cache is refused)",
              metadata=MOE),
    TinyModel(name="qwen3tts", arch="qwen3tts", what="GQA, M-RoPE (its codec head needs a vocabulary of 3,072)",
              metadata={**ROPE_SECTIONS, "vocab_size": 4096}),
    TinyModel(name="minicpm3", arch="minicpm3", what="low-rank K/V decompressed per head: MHA K 48, V 32",
              metadata={"attention.q_lora_rank": 32, "attention.kv_lora_rank": 64, "attention.key_length": 48,
                        "attention.value_length": 32, "rope.dimension_count": 16, "attention.head_count_kv": 4}),
    TinyModel(name="apertus", arch="apertus", what="GQA, xIELU (dry run)",
              metadata={"xielu.alpha_n": 0.8, "xielu.alpha_p": 0.8, "xielu.beta": 0.5, "xielu.eps": 1e-6}, measure="log"),
    TinyModel(name="bitnet", arch="bitnet", what="GQA (dry run)", measure="log"),
    # Mixture of experts: the cache is the attention's alone.
    TinyModel(name="arctic", arch="arctic", what="MoE, GQA", metadata=MOE),
    TinyModel(name="bailingmoe", arch="bailingmoe", what="MoE with a shared expert", metadata={**MOE, "expert_shared_count": 1}),
    TinyModel(name="bailingmoe2", arch="bailingmoe2", what="MoE with a shared expert",
              metadata={**MOE, "expert_shared_count": 1, "expert_gating_func": 2}),
    TinyModel(name="dbrx", arch="dbrx", what="MoE, layer norm", metadata={**MOE, **LAYER_NORM, "attention.clamp_kqv": 8.0}),
    TinyModel(name="deepseek", arch="deepseek", what="MoE, a leading dense layer",
              metadata={**MOE, "expert_shared_count": 1, "leading_dense_block_count": 1}),
    TinyModel(name="ernie4_5-moe", arch="ernie4_5-moe", what="MoE", metadata={**MOE, "interleave_moe_layer_step": 1}),
    TinyModel(name="glm4moe", arch="glm4moe", what="MoE with a shared expert", metadata={**MOE, "expert_shared_count": 1}),
    TinyModel(name="granitemoe", arch="granitemoe", what="MoE", metadata={**MOE, "logit_scale": 1.0}),
    TinyModel(name="grovemoe", arch="grovemoe", what="MoE in expert groups",
              metadata={**MOE, "expert_group_scale": 1.0, "experts_per_group": 2}),
    TinyModel(name="hunyuan-moe", arch="hunyuan-moe", what="MoE", metadata=MOE),
    TinyModel(name="hy_v3", arch="hy_v3", what="MoE", metadata=MOE),
    TinyModel(name="minimax-m2", arch="minimax-m2", what="MoE", metadata={**MOE, "expert_gating_func": 2}),
    TinyModel(name="olmoe", arch="olmoe", what="MoE, MHA", metadata={**MOE, "attention.head_count_kv": 4}),
    TinyModel(name="qwen3vlmoe", arch="qwen3vlmoe", what="MoE, M-RoPE", metadata={**MOE, **ROPE_SECTIONS}),
    TinyModel(name="deepseek2-ocr", arch="deepseek2-ocr", what="MoE, MHA (DeepSeek-2 without MLA)",
              metadata={**MOE, "expert_shared_count": 1, "leading_dense_block_count": 1, "attention.head_count_kv": 4}),
    TinyModel(name="dots1", arch="dots1", what="MoE, MHA",
              metadata={**MOE, "expert_shared_count": 1, "attention.head_count_kv": 4, "expert_gating_func": 2}),
    TinyModel(name="mistral4", arch="mistral4", what="MLA latent (K only), MoE: DeepSeek-2's rule",
              metadata={**MOE, "leading_dense_block_count": 1, "attention.head_count": 2, "attention.head_count_kv": 1,
                        "attention.q_lora_rank": 32, "attention.kv_lora_rank": 64, "attention.key_length": 96,
                        "attention.value_length": 64, "rope.dimension_count": 32, "attention.key_length_mla": 64,
                        "attention.value_length_mla": 32, "expert_shared_count": 1, "expert_weights_scale": 1.0}),
    TinyModel(name="hy_v4", arch="hy_v4", what="MLA latent (K only), MoE, hyper-connections, no indexer",
              metadata={**MOE, "attention.head_count": 2, "attention.head_count_kv": 1, "attention.q_lora_rank": 32,
                        "attention.kv_lora_rank": 64, "attention.key_length": 96, "attention.value_length": 64,
                        "rope.dimension_count": 32, "attention.key_length_mla": 64, "attention.value_length_mla": 32,
                        "expert_shared_count": 1, "expert_gating_func": 2, "hyper_connection.count": 2,
                        "hyper_connection.epsilon": 1e-6, "hyper_connection.magnitude": 1.0}),
    TinyModel(name="deepseek4", arch="deepseek4", what="DeepSeek-V4: window, compressed (ratio 4, 128) and indexer "
              "caches, float32 compressor states, hyper-connections (llama.cpp's own test-llama-archs sizes)",
              metadata={"embedding_length": 512, "feed_forward_length": 1024, "attention.head_count": 8,
                        "attention.head_count_kv": 1, "attention.key_length": 64, "attention.value_length": 64,
                        "attention.q_lora_rank": 64, "attention.sliding_window": 128, "leading_dense_block_count": 1,
                        "expert_count": 2, "expert_used_count": 2, "expert_feed_forward_length": 128,
                        "expert_shared_feed_forward_length": 64, "expert_shared_count": 1, "expert_weights_scale": 1.0,
                        "expert_weights_norm": True, "swiglu_clamp_exp": 10.0, "attention.indexer.head_count": 64,
                        "attention.indexer.key_length": 128, "attention.indexer.top_k": 131072,
                        "attention.output_group_count": 8, "attention.output_lora_rank": 32,
                        "attention.compress_rope_freq_base": 160000.0, "hyper_connection.count": 4,
                        "hyper_connection.sinkhorn_iterations": 2, "hyper_connection.epsilon": 1e-6,
                        "hash_layer_count": 0, "attention.compress_ratios": [0, 0, 4, 128], "expert_gating_func": 4}),
    # Sliding windows by llama.cpp's fixed period (SWA_PERIOD), the full layer last or first.
    TinyModel(name="gemma3n", arch="gemma3n", what="SWA 4 of 5 layers (dry run)",
              metadata={"block_count": 10, "attention.sliding_window": 256}, measure="log"),
    TinyModel(name="gemma4", arch="gemma4", what="SWA from the required per-layer pattern (dry run)",
              metadata={"attention.sliding_window": 256, "attention.sliding_window_pattern": [True, True, True, False],
                        "embedding_length_per_layer_input": 16, "attention.key_length_swa": 32,
                        "attention.value_length_swa": 32}, measure="log"),
    TinyModel(name="afmoe", arch="afmoe", what="MoE, SWA 3 of 4 layers",
              metadata={**MOE, "expert_shared_count": 1, "attention.sliding_window": 256}),
    TinyModel(name="cohere2moe", arch="cohere2moe", what="MoE, SWA 3 of 4 layers, the full layer first",
              metadata={**MOE, "attention.sliding_window": 256, "logit_scale": 1.0, "leading_dense_block_count": 1}),
    TinyModel(name="laguna (pattern key)", arch="laguna", what="MoE, SWA 1 of 2 layers from a sliding_window_pattern of 2, "
              "the full layer first", metadata={**MOE, "leading_dense_block_count": 1, "attention.sliding_window": 256,
                                               "attention.sliding_window_pattern": 2}),
    TinyModel(name="laguna", arch="laguna", what="MoE, SWA 3 of 4 layers, the full layer first",
              metadata={**MOE, "leading_dense_block_count": 1, "attention.sliding_window": 256}),
    TinyModel(name="mellum", arch="mellum", what="MoE, SWA 3 of 4 layers", metadata={**MOE, "attention.sliding_window": 256}),
    TinyModel(name="muse-glimmer", arch="muse-glimmer", what="SWA 3 of 4 layers",
              metadata={"attention.sliding_window": 256, "logit_scale": 1.0}),
    TinyModel(name="olmo2", arch="olmo2", what="SWA 3 of 4 layers", metadata={"attention.sliding_window": 256}),
    TinyModel(name="olmo2 (no window)", arch="olmo2", what="no sliding_window: every layer full"),
    TinyModel(name="plamo3", arch="plamo3", what="SWA 7 of 8 layers",
              metadata={"block_count": 8, "attention.sliding_window": 256}),
    # Recurrent states.
    TinyModel(name="mamba", arch="mamba", what="Mamba-1 states only",
              metadata={**NO_ATTENTION, "ssm.conv_kernel": 4, "ssm.inner_size": 256, "ssm.state_size": 16,
                        "ssm.time_step_rank": 8}),
    TinyModel(name="lfm2moe", arch="lfm2moe", what="MoE, short convolutions 2 of 4 layers",
              metadata={**MOE, "shortconv.l_cache": 3, "attention.head_count_kv": [0, 2, 0, 2], "expert_gating_func": 2,
                        "leading_dense_block_count": 1}),
    TinyModel(name="qwen35moe", arch="qwen35moe", what="MoE, gated delta net 3 of 4 layers",
              metadata={**MOE, **DELTA_NET, **ROPE_SECTIONS, "expert_shared_feed_forward_length": 32}),
    TinyModel(name="nemotron_h_moe", arch="nemotron_h_moe", what="Mamba-2, attention and MoE layers",
              metadata={**MOE, **MAMBA2, **LAYER_NORM, "attention.head_count_kv": [0, 2, 0, 0],
                        "feed_forward_length": [0, 0, 64, 0], "expert_shared_feed_forward_length": 32}),
)

#: The case llama.cpp refuses (a quantised V cache without flash attention): kvplan expects the refusal.
REFUSED = "-c 4096 -ctv q8_0 -fa off (refused)"
#: (label, llama.cpp flags) compared for every model.
CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("-c 4096", {"ctx_size": 4096}),
    ("-c 3000 (padded)", {"ctx_size": 3000}),
    ("-c 6144 -np 3", {"ctx_size": 6144, "parallel": 3}),
    ("-c 6144 -np 3 -kvu", {"ctx_size": 6144, "parallel": 3, "kv_unified": True}),
    ("-c 4096 -np 2 --swa-full", {"ctx_size": 4096, "parallel": 2, "swa_full": True}),
    ("-c 8192 -np 2 -ub 128", {"ctx_size": 8192, "parallel": 2, "ubatch_size": 128}),
    ("-c 32768 (past llama4's 8,192-token chunk)", {"ctx_size": 32768}),
    ("-c 4096 -np 2 -ctk q8_0 -ctv q8_0 -fa on", {"ctx_size": 4096, "parallel": 2, "cache_type_k": "q8_0",
                                                 "cache_type_v": "q8_0", "flash_attn": "on"}),
    ("-c 4096 -ctk q4_0 -ctv q4_0 -fa on", {"ctx_size": 4096, "cache_type_k": "q4_0", "cache_type_v": "q4_0",
                                           "flash_attn": "on"}),
    ("-c 4096 -ctk q8_0 -fa off (V f16)", {"ctx_size": 4096, "cache_type_k": "q8_0", "flash_attn": "off"}),
    (REFUSED, {"ctx_size": 4096, "cache_type_v": "q8_0", "flash_attn": "off"}),
)



@dataclass(frozen=True, kw_only=True, slots=True)
class Miss:
    cause: str
    """What llama.cpp allocated and kvplan predicted at -c 4096 -np 1, and why they differ."""
    matching: tuple[str, ...] = (REFUSED,)
    """The cases kvplan still gets right (its refusals)."""


#: Known misses: model name -> the cause. Their other cases are strict xfails in the tests.
MISSES: dict[str, Miss] = {}


#: Bundled config.json models, one per model_type kvplan writes as a GGUF (kvplan.verify.llamacpp_gguf).
CONFIG_MODELS: tuple[str, ...] = (
    "meta-llama/Llama-3.1-8B", "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen2-7B",
    "Qwen/Qwen3-0.6B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-Next-80B-A3B-Instruct", "microsoft/Phi-3-mini-4k-instruct",
    "google/gemma-2-27b", "google/gemma-3-12b-it", "google/gemma-3-1b-it", "openai/gpt-oss-120b",
    "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-R1", "ai21labs/Jamba-v0.1", "nvidia/Nemotron-H-56B-Base-8K",
    "state-spaces/mamba-2.8b-hf", "tiiuae/falcon-mamba-7b", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "bigcode/starcoder2-7b", "moonshotai/Kimi-K2-Instruct",
)
#: Real Hub configs in ../shared/hf_configs (beside the checkout; skipped where absent), one per model_type kvplan
#: writes that no bundled model has.
SHARED_CONFIG_MODELS: tuple[str, ...] = (
    "google__gemma-4-26B-A4B", "nvidia__Gemma-4-31B-IT-NVFP4", "deepseek-ai__DeepSeek-V4-Flash", "moonshotai__Kimi-K2.5",
)
SHARED_CONFIGS = Path(__file__).resolve().parent.parent.parent / "shared" / "hf_configs"


def shared_config_file(name: str) -> Path | None:
    """The shared config ``name`` (``org__repo``), or None when ../shared is not beside this checkout."""
    path = SHARED_CONFIGS / f"{name}.json"
    return path if path.is_file() else None


#: The config models' case: llama.cpp's dry run, two sequences, a window's worth of cells and more.
CONFIG_FLAGS: dict[str, Any] = {"ctx_size": 16384, "parallel": 2}


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigOutcome:
    model: str
    arch: str
    passed: bool
    reason: str


def run_config(model: str, *, name: str | None = None) -> ConfigOutcome:
    """``kvplan verify --engine llama.cpp -m MODEL -c 16384 -np 2``: kvplan writes the GGUF, llama.cpp's dry run."""
    from kvplan.verify.llamacpp import make_flags, verify_llamacpp

    report = verify_llamacpp(model, make_flags(**CONFIG_FLAGS), measure="log")
    verdict = report["verify"]
    arch = report["inputs"]["gguf"].removeprefix("written by kvplan (").removesuffix(")")
    return ConfigOutcome(model=name or model, arch=arch, passed=verdict["passed"], reason=verdict["reason"] or "")


def run_shared_configs() -> list[ConfigOutcome]:
    """run_config for each of SHARED_CONFIG_MODELS present in ../shared."""
    found = []
    for stem in SHARED_CONFIG_MODELS:
        path = shared_config_file(stem)
        if path is not None:
            found.append(run_config(str(path), name=f"{stem.replace('__', '/')} (../shared config)"))
    return found


def refused_config_types() -> list[tuple[str, list[str], str]]:
    """(model_type, bundled models, why) for each bundled model_type kvplan does not write as a llama.cpp GGUF."""
    import kvplan
    from kvplan.errors import InputError
    from kvplan.sources import bundled_ids
    from kvplan.verify.llamacpp_gguf import metadata_for

    refused: dict[str, tuple[list[str], str]] = {}
    for model in sorted(bundled_ids()):
        geometry = kvplan.load_geometry(model).model_geometry
        try:
            metadata_for(geometry)
        except InputError as exc:
            refused.setdefault(geometry.model_type, ([], exc.message))[0].append(model)
    return [(model_type, models, why) for model_type, (models, why) in sorted(refused.items())]


def config_table(outcomes: list[ConfigOutcome]) -> list[str]:
    rows = ["| model (config.json) | written as | kvplan = llama.cpp |", "|---|---|---|"]
    for o in outcomes:
        rows.append(f"| {o.model} | `{o.arch}` | {'yes' if o.passed else 'no: ' + o.reason} |")
    return rows


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseOutcome:
    model: str
    case: str
    passed: bool
    reason: str


def build(model: TinyModel, folder: Path) -> Path:
    """The tiny GGUF of ``model`` in ``folder`` (written once)."""
    from kvplan.verify.llamacpp_gguf import write_gguf

    path = folder / (model.name.replace(" ", "_").replace("(", "").replace(")", "") + ".gguf")
    if not path.exists():
        write_gguf(path, model.arch, model.full_metadata(), tensors=model.measure == "tensors", seed=0)
    return path


def run_model(model: TinyModel, folder: Path) -> list[CaseOutcome]:
    """Every case of CASES for ``model``: one llama.cpp child process, one context (and decode) per case."""
    import kvplan
    from kvplan.verify.llamacpp import judge, make_flags
    from kvplan.verify.llamacpp_engine import run_engine

    measure = model.measure
    path = build(model, folder)
    geometry = kvplan.load_geometry(str(path))
    flags = [make_flags(**kwargs) for _label, kwargs in CASES]
    answer = run_engine(path, [f.context(f.ctx_size) for f in flags], measure=measure)
    outcomes = []
    for (label, _kwargs), flag, run in zip(CASES, flags, answer.runs):
        outcome = judge(geometry, flag, run, measure=measure)
        outcomes.append(CaseOutcome(model=model.name, case=label, passed=outcome.passed, reason=outcome.reason()))
    return outcomes


def run_all(folder: Path, *, verbose: bool = False) -> dict[str, list[CaseOutcome]]:
    import time

    found = {}
    for model in MODELS:
        start = time.perf_counter()
        found[model.name] = run_model(model, folder)
        if verbose:
            print(f"{model.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return found


def table(results: dict[str, list[CaseOutcome]]) -> list[str]:
    """The docs page's table: one row per model, the cases that match, and every miss's cause; then the sum."""
    rows = ["| architecture | tiny model | kvplan = llama.cpp | misses |", "|---|---|---|---|"]
    exact = sum(o.passed for outcomes in results.values() for o in outcomes)
    total = sum(len(outcomes) for outcomes in results.values())
    for model in MODELS:
        outcomes = results[model.name]
        matched = sum(o.passed for o in outcomes)
        missed = MISSES[model.name].cause if matched < len(outcomes) and model.name in MISSES else ""
        if matched < len(outcomes) and not missed:
            missed = "; ".join(sorted({o.reason for o in outcomes if not o.passed}))
        rows.append(f"| `{model.name}` | {model.what} | {sum(o.passed for o in outcomes)} of {len(outcomes)} | {missed} |")
    rows.append("")
    archs = len({m.arch for m in MODELS if m.name in results})
    rows.append(f"In all: {len(results)} tiny models of {archs} architectures, {total} cases, kvplan = llama.cpp in {exact}.")
    return rows


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory(prefix="kvplan-oracle-") as tmp:
        found = run_all(Path(tmp), verbose=True)
    print("\n".join(table(found)))
    for name, outcomes in found.items():
        for o in outcomes:
            if not o.passed:
                print(f"{name} [{o.case}]: {o.reason}", file=sys.stderr)
