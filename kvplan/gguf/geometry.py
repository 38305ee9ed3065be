"""GGUF metadata -> ModelGeometry: llama.cpp's keys, per architecture, into kvplan's layer specs.

The keys are those llama.cpp's converter writes and ``src/llama-model.cpp`` reads
(``{arch}.block_count``, ``{arch}.attention.head_count_kv`` ...). Each value's provenance names
its GGUF key. Layer rules follow llama.cpp:

- ``head_count_kv`` is a scalar or one entry per layer; 0 marks a layer without attention, which
  is a recurrent layer in the hybrid architectures (Jamba, Granite hybrid, and Nemotron-H when its
  ``feed_forward_length`` entry is 0 too) and a cache-free layer otherwise.
- sliding layers: ``{arch}.attention.sliding_window_pattern`` (a period or one bool per layer) when
  the file has it, else the architecture's fixed period from llama.cpp (``set_swa_pattern``): layer
  i slides when ``i % n < n - 1`` (gemma2 2, gemma3 6, cohere2 4, gpt-oss 2).
- DeepSeek-2 caches the MLA latent only when the file has ``attention.key_length_mla`` (conversions
  since llama.cpp #12801); an older conversion caches decompressed K/V per head.
- the last ``nextn_predict_layers`` blocks are multi-token-prediction layers, not the main stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.errors import ConfigError
from kvplan.geometry import ModelGeometry, Provenance
from kvplan.gguf.archs import SWA_PATTERN_REQUIRED, SWA_PERIOD, SWA_PERIOD_DENSE_FIRST, check_architecture
from kvplan.gguf.reader import ArraySummary, GgufHeader
from kvplan.limits import MAX_LAYERS
from kvplan.specs import (
    ChunkedLocalSpec,
    CompressedSparseSpec,
    FullAttentionSpec,
    HeavilyCompressedSpec,
    LayerSpec,
    MLASpec,
    NoCacheSpec,
    SharedKVSlidingSpec,
    SlidingWindowSpec,
    StateSpec,
)

#: Architectures whose KV cache holds one more single-head attention layer after the blocks (src/models/granite-switch.cpp
#: load_arch_hparams: router_layer = n_layer, n_layer_all = n_layer + 1, n_head_kv_arr[router_layer] = 1).
ROUTER_LAYER = frozenset({"graniteswitch"})
#: Architectures that load DeepSeek-2's attention keys (src/models/models.h: llama_model_mistral4 derives from
#: llama_model_deepseek2): with attention.key_length_mla they cache the MLA latent, K only.
#: hy_v4 loads the same keys and requires them (src/models/hy-v4.cpp asserts is_mla).
MLA_ARCHS = frozenset({"deepseek2", "mistral4", "hy_v4"})
#: Largest plausible dimension (heads, head size, layers, state sizes).
MAX_DIM = 1 << 24

#: Architectures whose sliding_window applies to every layer (as their transformers config does).
#: NOTE: not mistral3: src/models/mistral3.cpp reads no sliding window (llama.cpp caches every position).
SWA_ALL = frozenset({"phi3"})
#: Architectures with a sliding window only at one layer count (src/models/exaone4.cpp: the 64-layer 32B).
SWA_ONLY_AT: dict[str, int] = {"exaone4": 64}
#: Recurrent-only architectures and their state kind.
SSM_ONLY = {"mamba": "mamba", "mamba2": "mamba2"}
#: Hybrids: recurrent layers are those with head_count_kv == 0 (and, for nemotron_h, feed_forward_length 0).
HYBRID = {"jamba": "mamba", "granitehybrid": "mamba2", "nemotron_h": "mamba2", "nemotron_h_moe": "mamba2"}
#: Hybrids whose layer without attention is an MLP (no state) when its feed_forward_length is not 0
#: (src/models/nemotron-h.cpp: is_recr when n_head_kv(i) == 0 and n_ff(i) == 0; nemotron_h_moe loads the same way).
FFN_MARKS_MLP = frozenset({"nemotron_h", "nemotron_h_moe"})
#: Gated-delta-net hybrids: recurrent layers by attention.recurrent_layers, else every layer but each
#: full_attention_interval-th (src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp).
DELTA_NET = frozenset({"qwen3next", "qwen35", "qwen35moe"})
#: Short-convolution hybrids: layer i is a convolution when head_count_kv[i] = 0 (src/models/lfm2.cpp).
SHORT_CONV = frozenset({"lfm2", "lfm2moe"})
#: Parallel hybrids: an attention cache and a Mamba-2 state in every layer (src/models/falcon-h1.cpp).
PARALLEL_MAMBA2 = frozenset({"falcon-h1"})
#: Architectures whose layers with their own K/V llama.cpp fixes by count (n_layer_kv_from_start).
KV_FROM_START: dict[str, int] = {"gemma3n": 20}
#: llama4's chunk when the file sets no sliding_window of 0 (src/models/llama4.cpp: n_swa = 8192).
LLAMA4_CHUNK = 8192
#: kvplan's config family whose model_type matches the GGUF architecture (for the report's model_type).
MODEL_TYPE = {"gpt-oss": "gpt_oss", "deepseek2": "deepseek_v2", "deepseek4": "deepseek_v4", "granitehybrid": "granitemoehybrid",
              "gemma3": "gemma3_text", "command-r": "cohere", "qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe"}


class GgufMetaReader:
    """The metadata of one GGUF file, read by llama.cpp key with provenance and notes."""

    def __init__(self, header: GgufHeader, *, label: str) -> None:
        self.meta = header.metadata
        self.label = label
        arch = header.architecture
        if not arch:
            raise ConfigError(f"{label} has no general.architecture key", "the GGUF file is incomplete; re-convert it")
        self.arch = arch
        self.provenance: list[Provenance] = []
        self.notes: list[str] = []

    def key(self, suffix: str) -> str:
        return f"{self.arch}.{suffix}"

    def has(self, suffix: str) -> bool:
        return self.key(suffix) in self.meta

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def record(self, field: str, value: Any, source: str) -> None:
        self.provenance.append(Provenance(field=field, value=value, source=source))

    def _int(self, key: str, value: Any, *, zero_ok: bool) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{self.label}: {key} must be an integer, got {value!r}", "the GGUF metadata is corrupt")
        if value < 0 or (value == 0 and not zero_ok) or value > (1 << 40):
            raise ConfigError(f"{self.label}: {key} = {value:,} is out of range", "the GGUF metadata is corrupt")
        return value

    def integer(self, field: str, suffix: str, *, required: bool = True, zero_ok: bool = False) -> int | None:
        key = self.key(suffix)
        if key not in self.meta:
            if required:
                raise ConfigError(
                    f"{self.label}: required key {key} is missing (kvplan's {field})",
                    "the GGUF file is incomplete; re-convert it with a current llama.cpp",
                )
            return None
        value = self._int(key, self.meta[key], zero_ok=zero_ok)
        if suffix == "block_count" and value > MAX_LAYERS.maximum:  # the limit config.json's layer count has
            raise ConfigError(f"{self.label}: {key} = {value:,} is past kvplan's limit of {MAX_LAYERS.maximum:,} layers "
                              f"({MAX_LAYERS.why})", "the GGUF metadata is corrupt")
        if value > MAX_DIM and suffix not in ("context_length", "attention.sliding_window"):
            raise ConfigError(f"{self.label}: {key} = {value:,} is absurdly large (limit {MAX_DIM:,})", "the GGUF metadata is corrupt")
        self.record(field, value, f"gguf: {key}")
        return value

    def per_layer(self, field: str, suffix: str, num_layers: int, *, default: list[int] | None = None) -> list[int] | None:
        """A scalar or per-layer array key as one int per layer (0 allowed: a layer without it)."""
        key = self.key(suffix)
        if key not in self.meta:
            return default
        value = self.meta[key]
        if isinstance(value, list):
            if len(value) != num_layers:
                raise ConfigError(
                    f"{self.label}: {key} has {len(value)} entries but the model has {num_layers} blocks",
                    "the GGUF metadata is corrupt",
                )
            values = [self._int(key, v, zero_ok=True) for v in value]
            self.record(field, _summary(values), f"gguf: {key}")
            return values
        if isinstance(value, ArraySummary):
            raise ConfigError(f"{self.label}: {key} is an array of {value.length:,}", "the GGUF metadata is corrupt")
        scalar = self._int(key, value, zero_ok=True)
        self.record(field, scalar, f"gguf: {key}")
        return [scalar] * num_layers


def gguf_geometry(header: GgufHeader, *, model_id: str) -> ModelGeometry:
    """The per-layer cache geometry of a GGUF file, from its metadata alone."""
    r = GgufMetaReader(header, label=model_id)
    arch = r.arch
    check_architecture(arch, label=model_id)
    blocks = r.integer("num_hidden_layers", "block_count")
    assert blocks is not None
    nextn = r.integer("nextn_predict_layers", "nextn_predict_layers", required=False, zero_ok=True) or 0
    if nextn >= blocks:
        raise ConfigError(f"{model_id}: {nextn} next-token-prediction layers of {blocks} blocks", "the GGUF metadata is corrupt")
    num_layers = blocks - nextn
    if nextn:
        r.note(
            f"{arch}.nextn_predict_layers = {nextn}: the last {nextn} of {blocks} blocks are multi-token-prediction "
            f"layers; the main stack is {num_layers} layers (their weights are still in the file)"
        )
    if arch == "hy_v4" and (r.integer("index_topk", "attention.indexer.top_k", required=False, zero_ok=True) or 0):
        # NOTE: llama_model::create_memory gives hy_v4 a llama_kv_cache_dsa (MLA plus indexer keys) when indexer_top_k > 0.
        raise ConfigError(f"{model_id}: kvplan does not read hy_v4 GGUF files with an indexer yet: llama.cpp gives them "
                          "a DSA cache with indexer keys (llama_kv_cache_dsa)",
                          "size the model from its config.json (kvplan estimate -m ORG/NAME), which kvplan reads")
    kinds = [] if arch == "deepseek4" else _layer_kinds(r, blocks, num_layers)
    specs: list[LayerSpec] = _dsv4_layers(r, blocks, num_layers) if arch == "deepseek4" else []
    attention: dict[str, Any] | None = None
    state: StateSpec | None = None
    for index, kind in enumerate(kinds):
        if kind == "empty":
            attention = attention or _attention(r, blocks)
            specs.append(FullAttentionSpec(num_kv_heads=0, head_size=attention["head_size"],
                                           head_size_v=attention["head_size_v"]))
        elif kind in ("full", "sliding", "chunked"):
            attention = attention or _attention(r, blocks)
            kv_heads = attention["kv_heads"][index]
            if attention.get("mla"):
                if kind != "full":
                    raise ConfigError(f"{model_id}: sliding MLA layers are not supported", "report the model to kvplan")
                specs.append(MLASpec(kv_lora_rank=attention["kv_lora_rank"], qk_rope_head_dim=attention["rope_dim"]))
            elif kind == "full":
                specs.append(FullAttentionSpec(num_kv_heads=kv_heads, head_size=attention["head_size"],
                                               head_size_v=attention["head_size_v"]))
            elif kind == "chunked":
                specs.append(ChunkedLocalSpec(num_kv_heads=kv_heads, head_size=attention["head_size"],
                                              head_size_v=attention["head_size_v"], attention_chunk_size=LLAMA4_CHUNK))
            else:
                specs.append(SlidingWindowSpec(num_kv_heads=kv_heads, head_size=attention["head_size_swa"],
                                               head_size_v=attention["head_size_v_swa"], sliding_window=attention["window"]))
        elif kind == "state":
            state = state or _state(r)
            specs.append(state)
        elif kind == "shared":
            specs.append(NoCacheSpec(reason="reuses the K/V cache of an earlier layer (attention.shared_kv_layers)"))
        else:
            specs.append(NoCacheSpec(reason=kind))
    if arch in PARALLEL_MAMBA2:
        specs.extend([_state(r)] * num_layers)
        r.note(f"{arch}: every layer holds an attention K/V cache and a Mamba-2 state side by side")
    if arch in ROUTER_LAYER:
        attention = attention or _attention(r, blocks)
        specs.append(FullAttentionSpec(num_kv_heads=1, head_size=attention["head_size"], head_size_v=attention["head_size_v"]))
        r.note(f"{arch}: llama.cpp adds a router attention layer after the {num_layers} blocks, with 1 KV head; "
               "the KV cache holds it as one more layer")
    if arch == "gpt-oss":
        r.note("gpt-oss attention sinks are one learned logit per head (attn_sinks tensors): weights, not cache")
    context = r.integer("max_context_tokens", "context_length", required=False)
    r.note(
        "a GGUF file names no torch dtype: K/V counted in 16 bits, llama.cpp's default --cache-type-k/-v f16 "
        f"(the file's weights: {_file_type(header)})"
    )
    return ModelGeometry(
        model_id=model_id,
        model_type=MODEL_TYPE.get(arch, arch),
        family="gguf",
        architecture=f"gguf:{arch}",
        layers=tuple(specs),
        num_hidden_layers=num_layers,
        max_context_tokens=context,
        max_context_source=f"gguf: {r.key('context_length')}" if context is not None else None,
        default_encoder_len=None,
        default_encoder_len_source=None,
        config_dtype="float16",
        config_dtype_source="gguf: no torch dtype in the file; llama.cpp's f16 cache default",
        provenance=_dedupe(r.provenance),
        notes=tuple(r.notes),
    )


#: llama.cpp's DeepSeek-V4 compression ratios (src/llama-kv-cache-dsv4.h: DSV4_CSA_RATIO, DSV4_HCA_RATIO): its CSA
#: and HCA caches take the layers of exactly these ratios; 0 is a window-only layer.
DSV4_RATIOS = {0: "window only", 4: "compressed-sparse", 128: "heavily compressed"}


def _dsv4_layers(r: GgufMetaReader, blocks: int, num_layers: int) -> list[LayerSpec]:
    """DeepSeek-V4 (src/models/deepseek4.cpp, src/llama-kv-cache-dsv4.cpp): every layer one K=V row of
    ``attention.key_length`` per token in an ``attention.sliding_window`` window; a layer of ratio 4 adds one entry
    per 4 tokens and an ``attention.indexer.key_length`` indexer key, one of ratio 128 one entry per 128 tokens."""
    key = r.key("attention.compress_ratios")
    ratios = r.meta.get(key)
    if not isinstance(ratios, list):
        raise ConfigError(f"{r.label}: required array {key} is missing (one compression ratio per block)",
                          "the GGUF file is incomplete; re-convert it with a current llama.cpp")
    if len(ratios) < blocks:  # NOTE: llama.cpp throws "compress_ratios is shorter than block_count"
        raise ConfigError(f"{r.label}: {key} has {len(ratios)} entries for {blocks} blocks", "the GGUF metadata is corrupt")
    ratios = [r._int(key, v, zero_ok=True) for v in ratios[:num_layers]]
    if not set(ratios) <= set(DSV4_RATIOS):
        raise ConfigError(f"{r.label}: {key} holds {sorted(set(ratios) - set(DSV4_RATIOS))}: llama.cpp's DeepSeek-V4 "
                          f"caches take ratios {sorted(DSV4_RATIOS)} only", "the GGUF metadata is corrupt")
    r.record("compress_ratios", _summary(ratios), f"gguf: {key}")
    head = r.integer("head_dim", "attention.key_length")
    window = r.integer("sliding_window", "attention.sliding_window")
    index = r.integer("index_head_dim", "attention.indexer.key_length") if 4 in ratios else 0
    assert head is not None and window is not None and index is not None
    specs: dict[int, LayerSpec] = {
        0: SharedKVSlidingSpec(head_size=head, sliding_window=window, compress_ratio=0),
        4: CompressedSparseSpec(head_size=head, sliding_window=window, compress_ratio=4, index_head_size=index,
                                overlap=True),
        128: HeavilyCompressedSpec(head_size=head, sliding_window=window, compress_ratio=128),
    }
    r.note(f"DeepSeek-V4: one K=V row of {head} per token in a {window}-token window in every layer; "
           + ", ".join(f"{ratios.count(k)} {name} layers" + (f" (one entry per {k} tokens)" if k else "")
                       for k, name in DSV4_RATIOS.items()) + f"; indexer keys of {index} (llama_kv_cache_dsv4)")
    return [specs[ratio] for ratio in ratios]


def _layer_kinds(r: GgufMetaReader, blocks: int, num_layers: int) -> list[str]:
    """One of full / sliding / state / shared / a no-cache reason per main-stack layer."""
    arch = r.arch
    if arch in SSM_ONLY:
        return ["state"] * num_layers
    heads = r.per_layer("num_attention_heads", "attention.head_count", blocks)
    if heads is None:
        raise ConfigError(f"{r.label}: required key {r.key('attention.head_count')} is missing",
                          "the GGUF file is incomplete; re-convert it with a current llama.cpp")
    kv_heads = r.per_layer("num_kv_heads", "attention.head_count_kv", blocks)
    if kv_heads is None:
        kv_heads = heads
        r.note(f"{r.key('attention.head_count_kv')} is not in the file: llama.cpp uses head_count (multi-head attention)")
    if not any(kv_heads[:num_layers]) and arch not in {*HYBRID, *SHORT_CONV}:
        raise ConfigError(
            f"{r.label}: {r.key('attention.head_count_kv')} is 0 for every layer, so no layer has attention",
            "the GGUF metadata is corrupt; re-convert the model",
        )
    kinds: list[str] = []
    if arch in DELTA_NET:
        recurrent = _recurrent_layers(r, blocks, num_layers)
        return ["state" if recurrent[i] else "full" for i in range(num_layers)]
    if arch in SHORT_CONV:
        window = r.meta.get(r.key("attention.sliding_window")) or 0
        r.note(f"{arch}: layer i is a short convolution when head_count_kv[i] = 0 (llama.cpp is_recr)")
        return ["state" if not kv_heads[i] else ("sliding" if window else "full") for i in range(num_layers)]
    if arch in HYBRID:
        ffn = r.per_layer("intermediate_size", "feed_forward_length", blocks) if arch in FFN_MARKS_MLP else None
        for i in range(num_layers):
            if kv_heads[i]:
                kinds.append("full")
            elif ffn is not None and ffn[i]:
                kinds.append("MLP-only layer (head_count_kv = 0, feed_forward_length > 0): no attention, no state")
            else:
                kinds.append("state")
        rule = "head_count_kv[i] = 0 and feed_forward_length[i] = 0" if arch in FFN_MARKS_MLP else "head_count_kv[i] = 0"
        r.note(f"{arch}: layer i is recurrent when {rule} (llama.cpp recurrent_layer_arr)")
        return kinds
    sliding = _sliding_layers(r, num_layers)
    for i in range(num_layers):
        if not kv_heads[i]:
            kinds.append("empty")
        else:
            kinds.append(("chunked" if arch == "llama4" else "sliding") if sliding[i] else "full")
    shared = r.integer("num_kv_shared_layers", "attention.shared_kv_layers", required=False, zero_ok=True) or 0
    if arch in KV_FROM_START:
        # NOTE: llama.cpp fixes the layers with their own K/V for gemma3n (n_layer_kv_from_start = 20 in
        # src/models/gemma3n.cpp), whatever attention.shared_kv_layers says; the rest reuse earlier K/V.
        own = KV_FROM_START[arch]
        shared = max(0, num_layers - own)
        r.record("num_kv_shared_layers", shared, f"llama.cpp's {arch} rule: the first {own} layers hold K/V")
        if shared:
            kinds[num_layers - shared:] = ["shared"] * shared
            r.note(f"{arch}: layers from {own} on reuse earlier K/V and cache nothing (llama.cpp's rule)")
        shared = 0
    if shared:
        if shared >= num_layers:
            raise ConfigError(f"{r.label}: {shared} shared-KV layers of {num_layers}", "the GGUF metadata is corrupt")
        r.note(f"attention.shared_kv_layers = {shared}: the last {shared} layers reuse earlier K/V and cache nothing")
        kinds[num_layers - shared:] = ["shared"] * shared
    if "empty" in kinds:
        # NOTE: llama_kv_cache gives every layer K/V tensors (llama_hparams::has_kv is true for each layer but those
        # past n_layer_kv_from_start): a layer of 0 KV heads holds 0-byte tensors and counts in its "layers".
        r.note(f"layers with {r.key('attention.head_count_kv')} = 0 have no attention; llama.cpp still lists them "
               "in its KV cache, with tensors of 0 bytes")
    return kinds


def _recurrent_layers(r: GgufMetaReader, blocks: int, num_layers: int) -> list[bool]:
    """Gated-delta-net hybrids: attention.recurrent_layers, else all but each full_attention_interval-th layer."""
    key = r.key("attention.recurrent_layers")
    if key in r.meta:
        value = r.meta[key]
        if not isinstance(value, list) or len(value) != blocks or any(not isinstance(v, bool) for v in value):
            raise ConfigError(f"{r.label}: {key} must hold one true/false per block", "the GGUF metadata is corrupt")
        r.record("layer_types", _summary(["state" if v else "full" for v in value[:num_layers]]), f"gguf: {key}")
        return [bool(v) for v in value[:num_layers]]
    interval = r.integer("full_attention_interval", "full_attention_interval", required=False)
    if interval is None:
        interval = 4
        r.record("full_attention_interval", 4, f"llama.cpp default for {r.arch} ({key} and full_attention_interval absent)")
    r.note(f"{r.arch}: layer i is full attention when (i + 1) % {interval} == 0, else a gated delta net state")
    return [(i + 1) % interval != 0 for i in range(num_layers)]


def _sliding_layers(r: GgufMetaReader, num_layers: int) -> list[bool]:
    arch = r.arch
    key = r.key("attention.sliding_window_pattern")
    window_key = r.key("attention.sliding_window")
    if arch == "llama4":
        if window_key in r.meta and r.meta[window_key] == 0:
            r.note(f"{window_key} = 0: llama.cpp gives llama4 no chunked attention; every layer is full attention")
            return [False] * num_layers
        r.note(f"llama4: chunked attention of {LLAMA4_CHUNK:,} tokens in the layers the pattern marks "
               "(llama.cpp's n_swa for llama4, whatever the file's sliding_window)")
    elif arch in SWA_PATTERN_REQUIRED and not isinstance(r.meta.get(key), list):
        raise ConfigError(f"{r.label}: {key} (one true/false per layer) is missing; llama.cpp requires it for {arch}",
                          "the GGUF file is incomplete; re-convert it with a current llama.cpp")
    elif window_key not in r.meta or r.meta[window_key] == 0:
        return [False] * num_layers
    if arch in SWA_ONLY_AT and num_layers != SWA_ONLY_AT[arch]:
        r.note(f"{window_key} is set but llama.cpp slides {arch} layers only in its {SWA_ONLY_AT[arch]}-layer model: "
               "every layer is full attention")
        return [False] * num_layers
    if key in r.meta:
        value = r.meta[key]
        if isinstance(value, list):
            if len(value) < num_layers or any(not isinstance(v, bool) for v in value):
                raise ConfigError(f"{r.label}: {key} must hold one true/false per layer", "the GGUF metadata is corrupt")
            r.record("layer_types", _summary(["sliding" if v else "full" for v in value[:num_layers]]), f"gguf: {key}")
            return [bool(v) for v in value[:num_layers]]
        period = r._int(key, value, zero_ok=True)
        r.record("sliding_window_pattern", period, f"gguf: {key}")
        source = key
        if arch in SWA_PERIOD_DENSE_FIRST and period:
            # NOTE: load_swa_pattern(ml, n, dense_first) reads the file's period and keeps the full layer first.
            r.note(f"layer i is global when i % {period} == 0, else sliding ({key}, llama.cpp's {arch} rule)")
            return [i % period != 0 for i in range(num_layers)]
    elif arch in SWA_PERIOD_DENSE_FIRST:
        period = SWA_PERIOD_DENSE_FIRST[arch]
        r.record("sliding_window_pattern", period, f"llama.cpp default for {arch} (set_swa_pattern({period}, dense_first))")
        r.note(f"layer i is global when i % {period} == 0, else sliding (llama.cpp's {arch} rule)")
        return [i % period != 0 for i in range(num_layers)]
    elif arch in SWA_PERIOD:
        period = SWA_PERIOD[arch]
        r.record("sliding_window_pattern", period, f"llama.cpp default for {arch} (set_swa_pattern({period}))")
        source = f"llama.cpp's {arch} rule"
    elif arch in SWA_ALL:
        r.note(f"{window_key} applies to every layer ({arch})")
        if arch == "phi3":
            r.note("llama.cpp disables Phi-3 sliding windows (ggml-org/llama.cpp#13676) and caches full context")
        return [True] * num_layers
    else:
        r.note(f"{window_key} is set but llama.cpp's {arch} does not use it: every layer is full attention")
        return [False] * num_layers
    if period == 0:
        r.note(f"sliding_window_pattern 0 ({source}): every layer slides")
        return [True] * num_layers
    r.note(f"layer i is global when i % {period} == {period - 1}, else sliding ({source})")
    return [i % period < period - 1 for i in range(num_layers)]


def _attention(r: GgufMetaReader, blocks: int) -> dict[str, Any]:
    heads = r.per_layer("num_attention_heads", "attention.head_count", blocks) or []
    kv_heads = r.per_layer("num_kv_heads", "attention.head_count_kv", blocks, default=heads) or heads
    n_head = next((h for h in heads if h), 0)
    if not n_head:
        raise ConfigError(f"{r.label}: {r.key('attention.head_count')} is 0 for every layer", "the GGUF metadata is corrupt")
    for i, (h, kv) in enumerate(zip(heads, kv_heads)):
        if kv and (kv > h or h % kv):
            raise ConfigError(
                f"{r.label}: layer {i} has {h} attention heads and {kv} KV heads (not a whole group)",
                "the GGUF metadata is corrupt",
            )
    out: dict[str, Any] = {"kv_heads": kv_heads}
    if r.arch in MLA_ARCHS and r.has("attention.kv_lora_rank"):
        rank = r.integer("kv_lora_rank", "attention.kv_lora_rank")
        if r.has("attention.key_length_mla"):
            rope = r.integer("qk_rope_head_dim", "rope.dimension_count")
            k_mla = r.integer("qk_head_dim", "attention.key_length_mla")
            r.integer("v_head_dim", "attention.value_length_mla")
            assert rank is not None and rope is not None and k_mla is not None
            r.record("qk_nope_head_dim", k_mla - rope, f"derived: {r.key('attention.key_length_mla')} - rope dims")
            r.note(
                f"MLA caches one latent per token per layer: kv_lora_rank + rope dims = {rank} + {rope} = "
                f"{rank + rope} values ({r.key('attention.key_length_mla')} is set: an MLA conversion)"
            )
            return {**out, "mla": True, "kv_lora_rank": rank, "rope_dim": rope}
        r.note(
            f"{r.key('attention.key_length_mla')} is absent: a conversion from before llama.cpp's MLA cache (#12801); "
            "llama.cpp caches decompressed K and V for every head (re-convert the model for the small latent cache)"
        )
    embd = None
    head_size = r.integer("head_size", "attention.key_length", required=False)
    if head_size is None:
        embd = r.integer("hidden_size", "embedding_length")
        assert embd is not None
        if embd % n_head:
            raise ConfigError(f"{r.label}: embedding_length {embd} is not divisible by {n_head} heads", "the GGUF metadata is corrupt")
        head_size = embd // n_head
        r.record("head_size", head_size, f"derived: {r.key('embedding_length')} // {r.key('attention.head_count')}")
        r.note(f"head size derived as embedding_length // head_count = {embd} // {n_head} = {head_size} (llama.cpp's rule)")
    head_size_v = r.integer("head_size_v", "attention.value_length", required=False) or head_size
    out.update(head_size=head_size, head_size_v=head_size_v)
    if r.has("attention.sliding_window") and r.meta[r.key("attention.sliding_window")]:
        out["window"] = r.integer("sliding_window", "attention.sliding_window")
        out["head_size_swa"] = r.integer("head_size_swa", "attention.key_length_swa", required=False) or head_size
        out["head_size_v_swa"] = r.integer("head_size_v_swa", "attention.value_length_swa", required=False) or head_size_v
    return out


def _state(r: GgufMetaReader) -> StateSpec:
    if r.arch in SHORT_CONV:
        l_cache = r.integer("conv_L_cache", "shortconv.l_cache")
        width = r.integer("hidden_size", "embedding_length")
        assert l_cache is not None and width is not None
        if l_cache < 2:
            raise ConfigError(f"{r.label}: {r.key('shortconv.l_cache')} = {l_cache} (must be at least 2)",
                              "the GGUF metadata is corrupt")
        return StateSpec(mixer="short_conv", shapes=(("conv", (l_cache - 1, width)),))
    kind = SSM_ONLY.get(r.arch) or HYBRID.get(r.arch) or ("gated_delta_net" if r.arch in DELTA_NET else "mamba2")
    d_conv = r.integer("conv_kernel", "ssm.conv_kernel")
    d_inner = r.integer("d_inner", "ssm.inner_size")
    d_state = r.integer("state_size", "ssm.state_size")
    assert d_conv is not None and d_inner is not None and d_state is not None
    if d_conv < 2:
        raise ConfigError(f"{r.label}: {r.key('ssm.conv_kernel')} = {d_conv} (must be at least 2)", "the GGUF metadata is corrupt")
    if kind == "mamba":
        return StateSpec(mixer="mamba", shapes=(("conv", (d_conv - 1, d_inner)), ("ssm", (d_inner, d_state))))
    n_heads = r.integer("mamba_num_heads", "ssm.time_step_rank")
    n_groups = r.integer("n_groups", "ssm.group_count")
    assert n_heads is not None and n_groups is not None
    if d_inner % n_heads:
        raise ConfigError(f"{r.label}: ssm.inner_size {d_inner} is not divisible by {n_heads} heads", "the GGUF metadata is corrupt")
    head_dim = d_inner // n_heads
    r.record("mamba_head_dim", head_dim, f"derived: {r.key('ssm.inner_size')} // {r.key('ssm.time_step_rank')}")
    if kind == "gated_delta_net":
        # conv over Q, K (n_groups heads of state_size each) and V (inner_size); the state is
        # value heads x key head dim x value head dim (llama_hparams::n_embd_r / n_embd_s).
        return StateSpec(
            mixer="gated_delta_net",
            shapes=(("conv", (d_conv - 1, d_inner + 2 * n_groups * d_state)), ("ssm", (n_heads, d_state, head_dim))),
        )
    return StateSpec(
        mixer="mamba2",
        shapes=(("conv", (d_conv - 1, d_inner + 2 * n_groups * d_state)), ("ssm", (n_heads, head_dim, d_state))),
    )


def _file_type(header: GgufHeader) -> str:
    counts: dict[str, int] = {}
    for tensor in header.tensors:
        counts[tensor.type_name] = counts.get(tensor.type_name, 0) + 1
    return ", ".join(f"{n} {t}" for t, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "no tensors"


def _summary(values: Sequence[Any]) -> str:
    runs: list[str] = []
    previous, count = None, 0
    for value in [*values, object()]:
        if value == previous:
            count += 1
            continue
        if count:
            runs.append(f"{previous}" if count == 1 else f"{previous} x{count}")
        previous, count = value, 1
    return "[" + ", ".join(runs) + "]"


def _dedupe(items: list[Provenance]) -> tuple[Provenance, ...]:
    seen: dict[str, Provenance] = {}
    for item in items:
        seen.setdefault(item.field, item)
    return tuple(seen.values())
