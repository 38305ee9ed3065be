"""Small GGUF files for llama.cpp: any architecture it knows, the cache geometry of a model, random weights.

A GGUF is written in two steps. First its metadata alone (llama.cpp's keys: ``{arch}.block_count``,
``{arch}.attention.head_count_kv`` ...) with the ``gguf`` package; llama.cpp then creates the model from
that metadata (``llama_model_init_from_user``, in the child process of :mod:`kvplan.verify.llamacpp_run`)
and names and shapes every weight itself, so no architecture's tensor list is written here. Second, the
same metadata with those tensors, filled with small random float32 numbers. The vocabulary is llama.cpp's
smallest: ``tokenizer.ggml.model = "none"`` with ``{arch}.vocab_size`` dummy tokens.

For a config.json, :func:`metadata_for` writes the architecture llama.cpp's converter
(``convert_hf_to_gguf.py``) would pick, with the cache geometry kvplan parsed from the config (heads, head
sizes, window, latent, recurrent states) and small widths where the cache does not look (hidden size,
MLP, experts, vocabulary).

Imports ``gguf`` and ``numpy`` (the ``kvplan[llamacpp]`` extra) inside the functions that write.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvplan.errors import InputError
from kvplan.gguf.archs import UNREAD
from kvplan.specs import (
    AttentionSpec,
    CompressedAttentionSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.verify.llamacpp_engine import MAX_WEIGHT_BYTES, engine_tensor_table

#: Keys written as given (the rest are prefixed with the architecture).
ABSOLUTE_PREFIXES = ("general.", "tokenizer.", "xielu.")  # xielu.*: llama.cpp names them without the architecture
#: Widths the cache never sees.
SMALL_EMBD, SMALL_FF, SMALL_EXPERT_FF, SMALL_VOCAB = 64, 64, 32, 32
MOE = {"expert_count": 4, "expert_used_count": 2, "expert_feed_forward_length": SMALL_EXPERT_FF}
#: Keys an architecture needs that do not shape its cache (experts, MLA's query rank, rope sections).
ARCH_SKELETON: dict[str, dict[str, Any]] = {
    "qwen3moe": MOE,
    "qwen2moe": {**MOE, "expert_shared_feed_forward_length": SMALL_EXPERT_FF},
    "gpt-oss": MOE,
    "deepseek2": {**MOE, "leading_dense_block_count": 1, "expert_shared_count": 1, "expert_weights_scale": 1.0,
                  "attention.q_lora_rank": 32},
    "qwen3next": {**MOE, "expert_shared_feed_forward_length": SMALL_EXPERT_FF},
    "qwen35moe": {**MOE, "expert_shared_feed_forward_length": SMALL_EXPERT_FF},
    "jamba": MOE,
    "nemotron_h": {"attention.layer_norm_epsilon": 1e-5},
    "llama4": {**MOE, "interleave_moe_layer_step": 1},
    "starcoder2": {"attention.layer_norm_epsilon": 1e-5},
    "gemma4": {"embedding_length_per_layer_input": 0},
    # llama.cpp's own test-llama-archs sizes for DeepSeek-V4 (tests/test-llama-archs.cpp), the cache keys aside
    "deepseek4": {"embedding_length": 512, "feed_forward_length": 1024, "attention.head_count": 8,
                  "rope.dimension_count": 64,
                  "attention.q_lora_rank": 64, "leading_dense_block_count": 1, "expert_count": 2,
                  "expert_used_count": 2, "expert_feed_forward_length": 128, "expert_shared_feed_forward_length": 64,
                  "expert_shared_count": 1, "expert_weights_scale": 1.0, "expert_weights_norm": True,
                  "swiglu_clamp_exp": 10.0, "attention.indexer.head_count": 64, "attention.indexer.top_k": 512,
                  "attention.output_group_count": 8, "attention.output_lora_rank": 32,
                  "attention.compress_rope_freq_base": 160000.0, "hyper_connection.count": 4,
                  "hyper_connection.sinkhorn_iterations": 2, "hyper_connection.epsilon": 1e-6, "hash_layer_count": 0,
                  "expert_gating_func": 4},
}
#: Architectures whose graph takes any n_embd beside the head sizes (checked with llama.cpp 0.3.36): their GGUFs
#: get SMALL_EMBD; the others (Qwen2's and Phi-3's reshapes) n_embd = head_count * head size.
SMALL_EMBD_OK = frozenset({"llama", "qwen3", "qwen3moe", "gemma2", "gemma3", "gpt-oss", "deepseek2", "qwen3next",
                           "qwen35", "qwen35moe", "nemotron_h", "mamba2"})
#: HF model_type -> (llama.cpp architecture the converter writes, whether it writes the sliding window).
#: NOTE: conversion/llama.py registers MistralForCausalLM and MixtralForCausalLM as LLM_ARCH_LLAMA, whose
#: llama.cpp code has no sliding window: a Mistral-7B-v0.1 GGUF caches every position.
CONFIG_ARCHS: dict[str, tuple[str, bool]] = {
    "llama": ("llama", False), "mistral": ("llama", False), "mixtral": ("llama", False),
    "qwen2": ("qwen2", False), "qwen3": ("qwen3", False), "qwen3_moe": ("qwen3moe", False),
    "phi3": ("phi3", True), "gemma2": ("gemma2", True), "gemma3": ("gemma3", True), "gemma3_text": ("gemma3", True),
    "gpt_oss": ("gpt-oss", True), "deepseek_v2": ("deepseek2", False), "deepseek_v3": ("deepseek2", False),
    "qwen3_next": ("qwen3next", False), "qwen3_5": ("qwen35", False), "qwen3_5_text": ("qwen35", False),
    "qwen3_5_moe": ("qwen35moe", False), "qwen3_5_moe_text": ("qwen35moe", False),
    "mamba2": ("mamba2", False), "nemotron_h": ("nemotron_h", False), "granitemoehybrid": ("granitehybrid", False),
    "jamba": ("jamba", False), "falcon_h1": ("falcon-h1", False), "lfm2": ("lfm2", False),
    "mamba": ("mamba", False), "falcon_mamba": ("mamba", False),
    # conversion/llama.py: Llama4ForConditionalGeneration -> llama4 (its chunk and period are llama.cpp's own)
    "llama4": ("llama4", False), "llama4_text": ("llama4", False),
    # conversion/starcoder.py: no sliding window written, and llama.cpp's starcoder2 has none
    "starcoder2": ("starcoder2", False),
    # conversion/deepseek.py registers Kimi-K2 (DeepseekV3ForCausalLM) and KimiK25ForConditionalGeneration as deepseek2
    "kimi_k2": ("deepseek2", False), "kimi_k25": ("deepseek2", False),
    # conversion/minimax.py, mimo.py, step3.py, glm.py: architectures kvplan's GGUF reader refuses (archs.UNREAD)
    "minimax": ("minimax-01", False), "minimax_text_01": ("minimax-01", False), "minimax_m1": ("minimax-01", False),
    "mimo_v2_flash": ("mimo2", False), "mimo_v2": ("mimo2", False), "step3p5": ("step35", False),
    "step3p7": ("step35", False), "glm_moe_dsa": ("glm-dsa", False),
    # conversion/gemma.py Gemma4Model: the per-layer sliding_window_pattern, head sizes and KV heads of both kinds
    "gemma4": ("gemma4", True), "gemma4_text": ("gemma4", True), "gemma4_assistant": ("gemma4-assistant", False),
    # conversion/deepseek.py DeepseekV4Model: the window, the per-layer compress_ratios, the indexer key width
    "deepseek_v4": ("deepseek4", True),
    # conversion/t5.py: T5, MT5 and UMT5ForConditionalGeneration -> t5 (archs.UNREAD: an encoder-decoder cache)
    "t5": ("t5", False), "mt5": ("t5", False), "umt5": ("t5", False),
}
#: Architectures whose sliding and full layers have their own head sizes (``attention.key_length_swa``) and
#: whose file says which layers slide (``attention.sliding_window_pattern``, one bool a layer).
SWA_OWN_HEADS = frozenset({"gemma4"})


def write_gguf(path: Path, arch: str, metadata: Mapping[str, Any], *, tensors: bool = True, seed: int = 0) -> Path:
    """Write a GGUF of ``arch`` with ``metadata`` (keys without the ``{arch}.`` prefix, but ``general.*`` and
    ``tokenizer.*``); with ``tensors``, the weights llama.cpp creates for it, random, else the metadata alone
    (what llama.cpp's dry run reads)."""
    meta = _complete(arch, metadata)
    if not tensors:
        return _write(path, arch, meta, ())
    weights = weight_bytes_bound(arch, meta)
    if weights > MAX_WEIGHT_BYTES:
        raise InputError(f"a GGUF with this cache geometry and random weights takes about {weights:,} bytes "
                         f"(float32, more than {MAX_WEIGHT_BYTES:,}): its widths are fixed by the cache",
                         "use --measure log (llama.cpp's dry run needs no weights)")

    with tempfile.TemporaryDirectory(prefix="kvplan-gguf-") as tmp:
        bare = _write(Path(tmp, "metadata.gguf"), arch, meta, ())
        table = engine_tensor_table(bare)
    return _write(path, arch, meta, table, seed=seed)


def weight_bytes_bound(arch: str, meta: Mapping[str, Any]) -> int:
    """About the float32 bytes of the model llama.cpp creates for ``meta``: its widest matrices per layer."""

    def value(key: str) -> int:
        raw = meta.get(f"{arch}.{key}", 0)
        return max(raw) if isinstance(raw, (list, tuple)) else int(raw or 0)

    embd = value("embedding_length")
    heads = value("attention.head_count") * max(value("attention.key_length"), value("attention.value_length"))
    width = max(heads, value("ssm.inner_size") * 2 + value("ssm.state_size") * value("ssm.group_count") * 2,
                value("attention.kv_lora_rank") * 2)
    experts = value("expert_count") * value("expert_feed_forward_length") * 3
    per_layer = embd * (4 * width + 3 * value("feed_forward_length") + experts)
    return 4 * (value("block_count") * per_layer + 2 * embd * value("vocab_size"))


def _complete(arch: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    meta = {"tokenizer.ggml.model": "none", "vocab_size": SMALL_VOCAB, **metadata}
    return {key if key.startswith(ABSOLUTE_PREFIXES) else f"{arch}.{key}": value for key, value in meta.items()}


def _write(path: Path, arch: str, meta: Mapping[str, Any], table: Sequence[tuple[str, tuple[int, ...]]],
           *, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in meta.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value) if value >= 0 else writer.add_int32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, (list, tuple)):
            writer.add_array(key, list(value))
        else:
            raise TypeError(f"GGUF metadata {key} = {value!r}")
    rng = np.random.default_rng(seed)
    for name, shape in table:
        numpy_shape = tuple(reversed(shape))
        data = rng.standard_normal(numpy_shape, dtype=np.float32) * np.float32(0.02)
        if ".ssm_a" in name:
            data = -np.abs(data)  # Mamba's A is negative (state decay)
        writer.add_tensor(name, data)  # float32, as llama.cpp created them (some CPU ops take no other)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---- a config.json's cache geometry as llama.cpp metadata ---------------------------------------------
def metadata_for(geometry: Any) -> tuple[str, dict[str, Any], list[str]]:
    """(llama.cpp architecture, metadata, notes) of a GGUF with the cache geometry of ``geometry`` (a
    :class:`kvplan.geometry.ModelGeometry` parsed from a config.json)."""
    model_type = str(geometry.model_type)
    layers: list[LayerSpec] = list(geometry.layers)
    n = int(geometry.num_hidden_layers)
    notes: list[str] = []
    known = CONFIG_ARCHS.get(model_type)
    kinds = {spec.kind for spec in layers}
    if known is None:
        if "cross_attention" in kinds:
            raise InputError(
                f"kvplan cannot write a llama.cpp GGUF for model_type {model_type}: its decoder attends to an "
                "encoder (cross-attention layers), and llama.cpp's converter has no decoder architecture for it "
                "(llama.cpp's one encoder-decoder architecture, t5, keeps a cache kvplan's GGUF reader does not "
                "model)", "kvplan estimate --engine llama.cpp sizes it from the config; verify cannot check it")
        if kinds != {"full_attention"}:
            raise InputError(
                f"kvplan cannot write a llama.cpp GGUF for model_type {model_type} (layer kinds: {', '.join(sorted(kinds))})",
                "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
        known = ("llama", False)
        notes.append(f"model_type {model_type} is written as llama.cpp's llama architecture: every layer is full "
                     "attention, so its cache depends only on the KV heads and head sizes")
    arch, writes_window = known
    if arch in UNREAD:
        raise InputError(
            f"kvplan cannot write a llama.cpp GGUF for model_type {model_type}: llama.cpp reads it as {arch}, "
            f"for which llama.cpp keeps {UNREAD[arch]}, a rule kvplan's GGUF reader does not model",
            "kvplan estimate --engine llama.cpp -m (the same config) still sizes it from the config; "
            "verify cannot check that figure against llama.cpp")
    per_layer: list[list[LayerSpec]] = [[] for _ in range(n)]
    if len(layers) % n:
        raise InputError(f"{model_type}: {len(layers)} layer specs for {n} layers", "report the model to kvplan")
    for index, spec in enumerate(layers):
        per_layer[index % n].append(spec)
    meta: dict[str, Any] = {"block_count": n, "context_length": int(geometry.max_context_tokens or 4096),
                            "embedding_length": SMALL_EMBD, "feed_forward_length": SMALL_FF,
                            "attention.layer_norm_rms_epsilon": 1e-6, **ARCH_SKELETON.get(arch, {})}
    attention = [next((s for s in specs if isinstance(s, (AttentionSpec, MLASpec))), None) for specs in per_layer]
    states = [next((s for s in specs if isinstance(s, StateSpec)), None) for specs in per_layer]
    present = [s for s in attention if s is not None]
    if present:
        _attention_keys(meta, arch, attention, present, writes_window=writes_window, notes=notes)
    compressed = [s for s in layers if isinstance(s, CompressedAttentionSpec)]
    if compressed:
        _compressed_keys(meta, arch, compressed, n)
    state = next((s for s in states if s is not None), None)
    if state is not None:
        _state_keys(meta, arch, state, states, attention)
    if arch == "nemotron_h":
        # NOTE: llama.cpp marks a layer recurrent when head_count_kv and feed_forward_length are both 0.
        meta["feed_forward_length"] = [SMALL_FF if (a is None and s is None) else 0 for a, s in zip(attention, states)]
    unknown = {spec.kind for spec in layers
               if not isinstance(spec, (AttentionSpec, MLASpec, StateSpec, NoCacheSpec, CompressedAttentionSpec))}
    if unknown:
        raise InputError(f"kvplan cannot write {', '.join(sorted(unknown))} layers as llama.cpp metadata",
                         "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
    return arch, meta, notes


def _attention_keys(meta: dict[str, Any], arch: str, attention: list[Any], present: list[Any], *,
                    writes_window: bool, notes: list[str]) -> None:
    first = present[0]
    if isinstance(first, MLASpec):
        rank, rope = first.kv_lora_rank, first.qk_rope_head_dim
        meta.update({"attention.head_count": 2, "attention.head_count_kv": 1, "attention.kv_lora_rank": rank,
                     "rope.dimension_count": rope, "attention.key_length": rank + rope, "attention.value_length": rank,
                     "attention.key_length_mla": rope + 32, "attention.value_length_mla": 32})
        return
    if arch in SWA_OWN_HEADS:
        _own_heads_keys(meta, attention, present)
        return
    k_sizes = {s.head_size for s in present}
    v_sizes = {s.head_size_v for s in present}
    if len(k_sizes) > 1 or len(v_sizes) > 1:
        raise InputError(f"layers with different head sizes (K {sorted(k_sizes)}, V {sorted(v_sizes)})",
                         "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
    head_k, head_v = k_sizes.pop(), v_sizes.pop()
    kv = [s.num_kv_heads if s is not None else 0 for s in attention]
    uniform = len(set(kv)) == 1
    # NOTE: query heads stay one number (llama.cpp derives sizes from the first layer's head_count); the layer
    # kinds of the hybrids are told by head_count_kv (0: a recurrent or MLP-only layer).
    meta.update({"attention.head_count": max(kv), "attention.head_count_kv": kv[0] if uniform else kv,
                 "attention.key_length": head_k, "attention.value_length": head_v, "rope.dimension_count": head_k})
    if arch not in SMALL_EMBD_OK:
        meta["embedding_length"] = max(kv) * head_k
    if arch in ("qwen35", "qwen35moe"):
        half = head_k // 2
        meta["rope.dimension_sections"] = [half - 2 * (half // 3), half // 3, half // 3, 0]
    windows = {s.sliding_window for s in present if isinstance(s, SlidingWindowSpec)}
    if windows and writes_window:
        if len(windows) > 1:
            raise InputError(f"sliding layers with different windows {sorted(windows)}", "report the model to kvplan")
        meta["attention.sliding_window"] = windows.pop()
    elif windows:
        notes.append(f"llama.cpp's {arch} architecture has no sliding window (the converter does not write it): "
                     "the GGUF caches every position of every layer")


def _compressed_keys(meta: dict[str, Any], arch: str, layers: list[CompressedAttentionSpec], n: int) -> None:
    """DeepSeek-V4's cache keys (conversion/deepseek.py DeepseekV4Model): one K=V head of ``key_length``, the
    window, one compress ratio a layer (0: the window only) and the indexer's key width."""
    if arch != "deepseek4" or len(layers) != n:
        raise InputError(f"kvplan cannot write compressed attention layers as llama.cpp's {arch} metadata",
                         "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
    heads = {s.head_size for s in layers}
    windows = {s.sliding_window for s in layers}
    index = {s.index_head_size for s in layers if s.index_head_size}
    if len(heads) > 1 or len(windows) > 1 or len(index) > 1:
        raise InputError(f"DeepSeek-V4 layers with different head sizes {sorted(heads)}, windows {sorted(windows)} "
                         f"or indexer keys {sorted(index)}", "report the model to kvplan")
    head = heads.pop()
    meta.update({"attention.head_count_kv": 1, "attention.key_length": head, "attention.value_length": head,
                 "attention.sliding_window": windows.pop(),
                 "attention.compress_ratios": [s.compress_ratio for s in layers],
                 "attention.indexer.key_length": index.pop() if index else 128})


def _own_heads_keys(meta: dict[str, Any], attention: list[Any], present: list[Any]) -> None:
    """Gemma-4's keys (conversion/gemma.py Gemma4Model): the full layers' head sizes as ``key_length``, the
    sliding layers' as ``key_length_swa``, KV heads per layer, which layers slide, and the trailing layers that
    reuse an earlier layer's cache (``shared_kv_layers``)."""
    sliding = [s for s in present if isinstance(s, SlidingWindowSpec)]
    full = [s for s in present if not isinstance(s, SlidingWindowSpec)] or sliding
    sizes: dict[str, tuple[int, int]] = {}
    for kind, specs in (("full", full), ("swa", sliding or full)):
        found = {(s.head_size, s.head_size_v) for s in specs}
        if len(found) > 1:
            raise InputError(f"{kind} layers with different head sizes {sorted(found)}", "report the model to kvplan")
        sizes[kind] = found.pop()
    windows = {s.sliding_window for s in sliding}
    if len(windows) > 1:
        raise InputError(f"sliding layers with different windows {sorted(windows)}", "report the model to kvplan")
    shared = len(attention) - max(i + 1 for i, a in enumerate(attention) if a is not None)
    # NOTE: a shared layer reads layer n_kv - 1 (n_kv - 2 if it slides: llama-model.cpp, n_layer_kv_from_start),
    # so it is written as the kind, KV heads included, of the last layer with a cache of its own.
    last = present[-1]
    layers = [a if a is not None else last for a in attention]
    kv = [a.num_kv_heads for a in layers]
    (head_k, head_v), (swa_k, swa_v) = sizes["full"], sizes["swa"]
    meta.update({"attention.head_count": max(kv), "attention.head_count_kv": kv,
                 "attention.key_length": head_k, "attention.value_length": head_v,
                 "attention.key_length_swa": swa_k, "attention.value_length_swa": swa_v,
                 "rope.dimension_count": head_k, "rope.dimension_count_swa": swa_k,
                 "attention.sliding_window": windows.pop() if windows else 0,
                 "attention.sliding_window_pattern": [isinstance(a, SlidingWindowSpec) for a in layers],
                 "attention.shared_kv_layers": shared})


def _state_keys(meta: dict[str, Any], arch: str, state: StateSpec, states: list[Any], attention: list[Any]) -> None:
    shapes = dict(state.shapes)
    conv = shapes.get("conv")
    if conv is None:
        raise InputError(f"{state.mixer} states have no conv part kvplan can write as llama.cpp metadata",
                         "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
    d_conv = conv[0] + 1
    if state.mixer == "mamba":
        # NOTE: llama.cpp's mamba and jamba need d_inner = 2 * n_embd (src/models/jamba.cpp asserts it); Jamba's
        # attention reshapes with n_embd = head_count * head size.
        meta.update({"ssm.conv_kernel": d_conv, "ssm.inner_size": conv[1], "ssm.state_size": shapes["ssm"][1],
                     "ssm.time_step_rank": 8})
        head_k = meta.get("attention.key_length")
        if arch in ("jamba", "mamba"):  # llama.cpp: "only an expansion factor of 2 is supported"
            meta["embedding_length"] = conv[1] // 2
            if head_k and (conv[1] // 2) % head_k == 0:
                meta["attention.head_count"] = conv[1] // 2 // head_k
    elif state.mixer == "mamba2":
        heads, head_dim, d_state = shapes["ssm"]
        d_inner = heads * head_dim
        meta.update({"ssm.conv_kernel": d_conv, "ssm.inner_size": d_inner, "ssm.state_size": d_state,
                     "ssm.time_step_rank": heads, "ssm.group_count": (conv[1] - d_inner) // (2 * d_state)})
    elif state.mixer == "gated_delta_net":
        v_heads, k_dim, v_dim = shapes["ssm"]
        k_heads = (conv[1] - v_heads * v_dim) // (2 * k_dim)
        meta.update({"ssm.conv_kernel": d_conv, "ssm.inner_size": v_heads * v_dim, "ssm.state_size": k_dim,
                     "ssm.time_step_rank": v_heads, "ssm.group_count": k_heads})
        recurrent = [s is not None for s in states]
        interval = next((i + 1 for i, r in enumerate(recurrent) if not r), 0)
        if interval and all(r == ((i + 1) % interval != 0) for i, r in enumerate(recurrent)):
            meta["full_attention_interval"] = interval
        else:
            meta["attention.recurrent_layers"] = recurrent
        heads = next((a.num_kv_heads for a in attention if a is not None), 1)
        meta["attention.head_count"] = meta["attention.head_count_kv"] = heads
    elif state.mixer == "short_conv":
        meta.update({"shortconv.l_cache": d_conv, "embedding_length": conv[1]})
    else:
        raise InputError(f"kvplan cannot write {state.mixer} states as llama.cpp metadata",
                         "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the .gguf to --model")
    if arch in ("mamba", "mamba2"):
        for key in ("attention.head_count", "attention.head_count_kv", "attention.key_length",
                    "attention.value_length", "rope.dimension_count"):
            meta.pop(key, None)
