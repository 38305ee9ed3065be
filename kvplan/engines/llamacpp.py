"""llama.cpp: cells padded to 256, SWA layers sized from the window and the micro-batch, f16 by default."""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.adjust import Deployment, as_full_attention, round_to_blocks
from kvplan.dtypes import GGML_CACHE_TYPES, KvDtype, lookup_dtype
from kvplan.engines.base import (
    BudgetRequest,
    EngineProfile,
    LogCache,
    PoolFacts,
    SizingContext,
    activation_estimate,
    kv_row_bytes,
    value_dtype,
)
from kvplan.errors import InputError
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    CompressedAttentionSpec,
    CrossAttentionSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.units import MiB

#: llama.cpp pads contexts and cell counts to 256 (``GGML_PAD(n_ctx, 256)``).
LLAMA_CPP_PAD = 256
#: ggml type names llama.cpp prints for kvplan's cache dtype names.
GGML_TYPE_NAMES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
#: model_types whose sliding window llama.cpp ignores, and why.
LLAMA_CPP_SWA_DISABLED = {
    # Phi-3, Phi-3.5 and phimoe share LLM_ARCH_PHI3
    "phi3": "src/models/phi3.cpp, PR #13676",
    # conversion/llama.py writes MistralForCausalLM and MixtralForCausalLM as LLM_ARCH_LLAMA, which has no window
    "mistral": "convert_hf_to_gguf.py writes it as the llama architecture, which has no sliding window",
    "mixtral": "convert_hf_to_gguf.py writes it as the llama architecture, which has no sliding window",
    # conversion/starcoder.py writes no sliding_window; src/models/starcoder2.cpp builds plain attention
    "starcoder2": "convert_hf_to_gguf.py writes no window and src/models/starcoder2.cpp has none",
}
#: llama.cpp ``n_ubatch`` default.
LLAMA_CPP_UBATCH = 512


#: llama.cpp's DeepSeek-V4 caches (``src/llama-kv-cache-dsv4.cpp``, llama-cpp-python 0.3.36's vendored llama.cpp):
#: compressed-sparse (CSA) layers keep one entry per 4 tokens, heavily compressed (HCA) ones per 128.
DSV4_CSA_RATIO, DSV4_HCA_RATIO = 4, 128


#: ``llama_dsv4_comp_state``'s three states (src/llama-kv-cache-dsv4.cpp): (name, the cache it compresses for,
#: its ratio); each is a float32 kv and a score tensor of ``width x rows`` per layer and stream.
DSV4_STATES = (("csa", "CSA", DSV4_CSA_RATIO), ("hca", "HCA", DSV4_HCA_RATIO), ("lid", "lightning-indexer", DSV4_CSA_RATIO))


def dsv4_state_shape(name: str, spec: CompressedAttentionSpec) -> tuple[int, int] | None:
    """(rows, width) of one layer's ``name`` state per stream, or None where the layer has none: CSA
    ``2 x 4`` rows of ``2 x head`` (``state_size 2*DSV4_CSA_RATIO``, ``n_embd_state 2*n_embd_head_k``), the lightning
    indexer ``2 x 4`` rows of ``2 x index_head``, HCA 128 rows of ``head``."""
    if name == "csa" and spec.compress_ratio == DSV4_CSA_RATIO:
        return 2 * DSV4_CSA_RATIO, 2 * spec.head_size
    if name == "lid" and spec.compress_ratio == DSV4_CSA_RATIO and spec.index_head_size:
        return 2 * DSV4_CSA_RATIO, 2 * spec.index_head_size
    if name == "hca" and spec.compress_ratio == DSV4_HCA_RATIO:
        return DSV4_HCA_RATIO, spec.head_size
    return None


def dsv4_state_bytes(spec: CompressedAttentionSpec) -> int:
    """Float32 compressor states of one DeepSeek-V4 layer per stream (``llama_dsv4_comp_state``: a kv and a score
    tensor of ``n_embd_state x state_size`` each): CSA and lightning-indexer states on CSA layers, HCA on HCA ones."""
    shapes = [dsv4_state_shape(name, spec) for name, _label, _ratio in DSV4_STATES]
    return sum(2 * rows * width * 4 for rows, width in (s for s in shapes if s is not None))


class LlamaCppProfile(EngineProfile):
    name = "llama.cpp"
    title = "llama.cpp"
    source = (
        "llama.cpp (src/llama-kv-cache.cpp @ 3514e9f6, src/llama-kv-cache-iswa.cpp @ 2aef9767, "
        "llama-context.cpp, common/arg.cpp)"
    )
    allowed_dtypes = GGML_CACHE_TYPES
    checkpoint_kv_dtype = None  # NOTE: --cache-type-k/-v default f16 whatever the weights are
    shares_prefix = False
    beam_search = False
    knobs = ("ubatch_size", "kv_unified", "cache_type_v")
    splits_layers = True
    mla_off = ("a DeepSeek GGUF converted without MLA (no attention.key_length_mla): n_embd_head_k = qk_nope + qk_rope, "
               "n_embd_head_v = v_head_dim per head")

    def pool_block_size(self, sizes: list[int], dep: Deployment) -> int:
        return LLAMA_CPP_PAD

    def dtype_suggestion(self, kv_dtype: KvDtype) -> str | None:
        if kv_dtype.name in ("fp16", "bf16", "fp32"):
            return "--kv-dtype q8_0 (about half the KV cache of f16)"
        return None

    def activation(self, req: BudgetRequest) -> tuple[int, int]:
        """Compute buffers: activations of one n_ubatch of 512 tokens (logits for each of them)."""
        return activation_estimate(req.shape, tokens=LLAMA_CPP_UBATCH, logit_rows=LLAMA_CPP_UBATCH, tp=1), 0

    def auto_dtype(self, model_dtype: KvDtype) -> KvDtype:
        # NOTE: llama.cpp's --cache-type-k/-v default is f16 whatever the weights are.
        return lookup_dtype("fp16")

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        if dep.tp > 1:
            raise InputError(
                "llama.cpp splits layers across devices, not KV heads",
                "use --pipeline-parallel-size N for llama.cpp's layer split (-sm layer)",
            )
        if dep.block_size is not None:
            raise InputError("llama.cpp has no block size: it pads cells to 256", "drop --block-size for --engine llama.cpp")
        notes.extend(self._cache_type_checks(layers, dep, kv_dtype))
        if dep.pp > 1:
            notes.append("llama.cpp splits layers by --tensor-split proportions; kvplan assumes vLLM's even split")
        if any(isinstance(s, CrossAttentionSpec) for s in layers):
            notes.append("llama.cpp keeps the encoder output, not a cross-attention KV cache: cross layers count 0 bytes")
        if any(isinstance(s, StateSpec) for s in layers):
            notes.append("llama.cpp keeps recurrent states in float32, one per sequence")
        return notes

    def _cache_type_checks(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        """llama.cpp's rules on -ctk/-ctv (``src/llama-context.cpp::llama_init_from_model`` @ 0c1e57098)."""
        v = value_dtype(dep, kv_dtype)
        if v.name not in GGML_CACHE_TYPES:
            raise InputError(f"llama.cpp does not support --cache-type-v {v.name}",
                             f"llama.cpp accepts: {', '.join(GGML_CACHE_TYPES)}")
        if v != kv_dtype and any(isinstance(s, (MLASpec, CompressedAttentionSpec)) for s in layers):
            raise InputError(f"llama.cpp refuses different K ({_ggml(kv_dtype.name)}) and V ({_ggml(v.name)}) cache types "
                             "for an MLA model ('model does not support different K and V cache types')",
                             f"use one type: -ctk {_ggml(kv_dtype.name)} -ctv {_ggml(kv_dtype.name)}")
        if v.scheme != "ggml" or not any(isinstance(s, AttentionSpec) for s in layers):
            return []
        for s in layers:
            for which, dtype, size in (("V", v, getattr(s, "head_size_v", 0)), ("K", kv_dtype, getattr(s, "head_size", 0))):
                if isinstance(s, AttentionSpec) and dtype.scheme == "ggml" and size % dtype.block_elems:
                    raise InputError(
                        f"llama.cpp refuses {which} cache type {_ggml(dtype.name)}: its block of {dtype.block_elems} "
                        f"values does not divide the {which} head size {size} (flash attention is on: a quantised V "
                        "cache needs it)", f"use -ct{which.lower()} f16")
        return [f"llama.cpp: a quantised V cache ({_ggml(v.name)}) needs flash attention. llama.cpp's default -fa auto "
                "turns it on ('enabling flash_attn since it is required for quantized V cache'); with -fa off it "
                "refuses to start ('quantized V cache requires flash_attn to be enabled') [src/llama-context.cpp "
                "llama_init_from_model]"]

    def kv_rows(self, spec: AttentionSpec | MLASpec, kv_dtype: KvDtype, dep: Deployment) -> tuple[int, int]:
        if isinstance(spec, MLASpec):
            return kv_dtype.bytes_for(spec.head_size), 0
        k, v = kv_row_bytes(spec, kv_dtype, value_dtype(dep, kv_dtype))
        if dep.v_row_elems is not None:
            v = value_dtype(dep, kv_dtype).bytes_for(dep.v_row_elems)
        return k, v

    def padded_v_row(self, layers: Sequence[LayerSpec], *, flash_attn_off: bool) -> tuple[int | None, list[str]]:
        # NOTE: src/llama-kv-cache.cpp (TAG_V_CACHE_VARIABLE): without flash attention V is stored transposed, and
        # when n_embd_v_gqa differs between layers every layer's V tensor takes n_embd_v_gqa_max() values per cell.
        widths = {s.num_kv_heads * s.head_size_v for s in layers if isinstance(s, AttentionSpec)}
        if not flash_attn_off or len(widths) < 2:
            return None, []
        widest = max(widths)
        return widest, [f"llama.cpp -fa off: the V width differs between layers ({', '.join(map(str, sorted(widths)))} "
                        f"values), so every layer's V is padded to the widest, {widest} ('padding V cache to {widest}', "
                        "src/llama-kv-cache.cpp)"]

    def cached_layers(self, layers: list[LayerSpec], *, hf_cached_kv_heads: int | None,
                      model_type: str | None = None) -> tuple[list[LayerSpec], list[str]]:
        if model_type in LLAMA_CPP_SWA_DISABLED and any(isinstance(s, SlidingWindowSpec) for s in layers):
            # NOTE: src/models/phi3.cpp::load_arch_hparams sets swa_type NONE ("Phi SWA is currently disabled",
            # llama.cpp PR #13676); Mistral's GGUF is a llama one: every position is cached.
            return [as_full_attention(s) for s in layers], [
                f"llama.cpp disables {model_type}'s sliding window ({LLAMA_CPP_SWA_DISABLED[model_type]}): it caches "
                "every position, as full attention"]
        return layers, []

    def cells(self, ctx: SizingContext) -> tuple[int, int]:
        """(cells per stream, streams): ``-c B*T -np B``; context padded to 256 (llama.cpp ``src/llama-context.cpp``)."""
        n_seq = ctx.batch
        n_ctx = round_to_blocks(ctx.batch * ctx.seq_len, LLAMA_CPP_PAD)
        if ctx.dep.kv_unified:
            return n_ctx, 1
        return round_to_blocks(n_ctx // n_seq, LLAMA_CPP_PAD), n_seq

    def swa_cells(self, spec: LayerSpec, ctx: SizingContext) -> int:
        size_base, _streams = self.cells(ctx)
        n_swa = spec.window
        assert n_swa is not None, spec  # asked of sliding layers only
        ubatch = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        seqs = ctx.batch if ctx.dep.kv_unified else 1
        return round_to_blocks(min(size_base, n_swa * seqs + ubatch), LLAMA_CPP_PAD)

    def compressed_attention_note(self) -> str | None:
        return ("llama.cpp: DeepSeek-V4 as llama_kv_cache_dsv4 allocates it (src/llama-kv-cache-dsv4.cpp in "
                "llama-cpp-python 0.3.36): a raw iSWA cache (its non-SWA part holds 0 layers, the SWA part every "
                "layer's window), CSA/HCA compressed caches of GGML_PAD(cdiv(kv_size, ratio), 256) cells, a "
                "lightning-indexer cache beside CSA and float32 compressor states, one stream per sequence even with "
                "-kvu")

    def dsv4_rows(self, spec: CompressedAttentionSpec, ctx: SizingContext) -> tuple[int, int, int]:
        """(kv_size, raw SWA rows, compressed rows) of one stream: the raw iSWA cache keeps
        ``GGML_PAD(min(kv_size, n_swa + n_ubatch), 256)`` rows (its streams are never unified), a compressed cache
        ``GGML_PAD(max(1, cdiv(kv_size, ratio)), 256)``."""
        kv_size = self.cells(ctx)[0]
        ubatch = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        raw = kv_size if ctx.dep.no_window else round_to_blocks(min(kv_size, spec.sliding_window + ubatch),
                                                                  LLAMA_CPP_PAD)
        comp = round_to_blocks(max(1, -(-kv_size // spec.compress_ratio)), LLAMA_CPP_PAD) if spec.compress_ratio else 0
        return kv_size, raw, comp

    def compressed_bytes(self, spec: CompressedAttentionSpec, ctx: SizingContext) -> int:
        _kv, raw, comp = self.dsv4_rows(spec, ctx)
        k = ctx.kv_dtype.bytes_for(spec.head_size)
        index = ctx.kv_dtype.bytes_for(spec.index_head_size) if spec.index_head_size else 0
        return raw * k + comp * (k + index) + dsv4_state_bytes(spec)

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, CompressedAttentionSpec):
            return self.dsv4_rows(spec, ctx)[1]
        if isinstance(spec, CrossAttentionSpec) or not isinstance(spec, (AttentionSpec, MLASpec)):
            return 0
        if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
            return self.swa_cells(spec, ctx)
        return self.cells(ctx)[0]

    def token_slots(self, spec: LayerSpec, ctx: SizingContext) -> int:
        return self.tokens_held(spec, ctx) * self.cells(ctx)[1]

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        if isinstance(spec, MLASpec):
            # NOTE: llama.cpp caches the MLA latent in K only (kv_lora_rank + qk_rope_head_dim).
            return ctx.kv_dtype.bytes_for(spec.head_size)
        if isinstance(spec, AttentionSpec) and (ctx.dep.cache_type_v is not None or ctx.dep.v_row_elems is not None):
            # NOTE: -ctk and -ctv are separate ggml types: K rows in type_k, V rows in type_v (llama-kv-cache.cpp).
            return sum(self.kv_rows(spec, ctx.kv_dtype, ctx.dep))
        return super().bytes_per_token(spec, ctx)

    def state_bytes(self, spec: StateSpec, ctx: SizingContext) -> int:
        return 4 * spec.state_elements

    def summary(self, ctx: SizingContext) -> str:
        cells, streams = self.cells(ctx)
        ub = ctx.dep.ubatch_size or LLAMA_CPP_UBATCH
        return (
            f"llama.cpp: {cells:,} cells x {streams} stream(s) (context padded to 256); SWA layers "
            f"GGML_PAD(min(cells, n_swa * n_seq + n_ubatch {ub}), 256) cells; recurrent states float32"
        )

    # ---- start-up log lines ----------------------------------------------------------------------
    def _dsv4_lines(self, pool: PoolFacts) -> dict[str, object]:
        """``llama_kv_cache_dsv4``'s lines: the raw iSWA cache (non-SWA part: kv_size cells, 0 layers; SWA part:
        every layer's window), then the CSA, HCA and lightning-indexer caches and the compressor states, one stream
        per sequence (llama.cpp#22319's older build printed ``4/1 seqs`` for the raw cache under -kvu)."""
        k_type = _ggml(pool.kv_dtype)
        streams = pool.batch
        compressed = [c for c in pool.caches if isinstance(c.spec, CompressedAttentionSpec)]
        n_ctx = round_to_blocks(pool.batch * pool.max_model_len, LLAMA_CPP_PAD)
        unified = compressed[0].streams == 1 and pool.batch > 1
        kv_size = n_ctx if unified or pool.batch == 1 else round_to_blocks(n_ctx // pool.batch, LLAMA_CPP_PAD)
        lines = ["llama_kv_cache_dsv4: creating DSV4 raw KV cache",
                 f"llama_kv_cache_iswa: creating non-SWA KV cache, size = {kv_size} cells"]
        buffers: dict[str, int] = {}
        device = _backend(pool) + "0"
        caches = [_dsv4_cache("base", kv_size, 0, streams, 0, k_type, lines, buffers, device)]
        width = compressed[0].k_bytes_per_token  # one K row of head_size in the cache type
        raw = compressed[0].cells
        lines.append(f"llama_kv_cache_iswa: creating     SWA KV cache, size = {raw} cells")
        n_raw = sum(len(c.layer_indices) for c in compressed)
        caches.append(_dsv4_cache("swa", raw, n_raw, streams, width, k_type, lines, buffers, device))
        for name, label, ratio in (("csa", "CSA compressed", DSV4_CSA_RATIO), ("hca", "HCA compressed", DSV4_HCA_RATIO),
                                   ("lid", "lightning-indexer", DSV4_CSA_RATIO)):
            group = [c for c in compressed if isinstance(c.spec, CompressedAttentionSpec) and c.spec.compress_ratio == ratio]
            if name == "lid":
                group = [c for c in group if isinstance(c.spec, CompressedAttentionSpec) and c.spec.index_head_size]
            if not group:
                continue
            spec = group[0].spec
            assert isinstance(spec, CompressedAttentionSpec)
            cells = round_to_blocks(max(1, -(-kv_size // ratio)), LLAMA_CPP_PAD)
            row = lookup_dtype(pool.kv_dtype).bytes_for(spec.index_head_size if name == "lid" else spec.head_size)
            lines.append(f"llama_kv_cache_dsv4: creating DSV4 {label} KV cache, size = {max(1, -(-kv_size // ratio))} cells")
            caches.append(_dsv4_cache(name, cells, sum(len(c.layer_indices) for c in group), streams, row, k_type,
                                      lines, buffers, device))
        for name, label, ratio in DSV4_STATES:
            caches.append(_dsv4_state(name, label, ratio, compressed, streams, lines, device))
        states = sum(dsv4_state_bytes(c.spec) * len(c.layer_indices) * streams for c in compressed
                     if isinstance(c.spec, CompressedAttentionSpec))
        return {"version": pool.version, "lines": lines, "llama_caches": caches,
                "buffers": [{"device": d, "bytes": b} for d, b in buffers.items()],
                "notes": [f"llama.cpp DeepSeek-V4: the compressor states add {states / MiB:,.2f} MiB of float32 "
                          "('DSV4 csa/hca/lid state buffer size' lines), counted in the KV bytes"]}

    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """``llama_kv_cache`` lines (``src/llama-kv-cache.cpp`` @ 0c1e57098): per device
        ``%10s KV buffer size = %8.2f MiB``, then ``size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs),
        K (%s): %7.2f MiB, V (%s): %7.2f MiB``; iSWA models print ``creating non-SWA KV cache, size = N
        cells`` and ``creating     SWA KV cache, size = N cells`` before each cache's lines."""
        if any(isinstance(c.spec, CompressedAttentionSpec) for c in pool.caches):
            return self._dsv4_lines(pool)
        kind_type = _ggml(pool.kv_dtype)
        v_type = _ggml(pool.v_dtype or pool.kv_dtype)
        devices = layer_devices(pool.num_layers, pool.tensor_split or (1.0,) * pool.pp, start=pool.gpu_layer_start)
        windowed = ("sliding_window", "chunked_local")
        swa_full = set(pool.swa_full_layers)
        # NOTE: a layer without K/V (recurrent, MLP-only) is not one of the cache's layers (llama-kv-cache.cpp
        # skips it: "does not have KV cache").
        members = [(c, i) for c in pool.caches if c.kind not in ("state", "no_cache") for i in c.layer_indices]
        # NOTE: --swa-full keeps the SWA layers in their own cache object, sized like the base one
        # (llama-kv-cache-iswa.cpp: size_swa = size_base after "using full-size SWA cache").
        full = [(c, i) for c, i in members if c.kind not in windowed and i not in swa_full]
        swa = [(c, i) for c, i in members if c.kind in windowed or i in swa_full]
        lines: list[str] = []
        caches: list[dict[str, object]] = []
        buffers: dict[str, int] = {}
        if swa and swa_full:
            lines.append("llama_kv_cache_iswa: using full-size SWA cache (ref: "
                         "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)")
        for label, group in (("non-SWA", full), ("    SWA", swa)):
            if not group:
                continue
            cells, streams = group[0][0].cells, group[0][0].streams
            if swa:
                lines.append(f"llama_kv_cache_iswa: creating {label} KV cache, size = {cells} cells")
            per_device: dict[int, int] = {}
            k = v = layers = 0
            for cache, i in group:
                kb, vb = _cells_bytes(cache, cache.k_bytes_per_token), _cells_bytes(cache, cache.v_bytes_per_token)
                k, v, layers = k + kb, v + vb, layers + 1
                # NOTE: a layer's KV sits on its layer's device; -nkvo or a layer left on the host: a CPU buffer
                # (src/llama-kv-cache.cpp, dev_name "CPU" unless offload).
                layer = i % pool.num_layers
                dev = -1 if layer < pool.host_kv_layers else devices[layer]
                per_device[dev] = per_device.get(dev, 0) + kb + vb
            for dev in sorted(per_device):
                name = "CPU" if dev < 0 else _backend(pool) + str(dev)
                lines.append(f"llama_kv_cache: {name:>10} KV buffer size = {per_device[dev] / MiB:8.2f} MiB")
                buffers[name] = buffers.get(name, 0) + per_device[dev]
            seqs = pool.batch
            lines.append(
                f"llama_kv_cache: size = {(k + v) / MiB:7.2f} MiB ({cells:6d} cells, {layers:3d} layers, "
                f"{seqs:2d}/{streams} seqs), K ({kind_type}): {k / MiB:7.2f} MiB, V ({v_type}): {v / MiB:7.2f} MiB"
            )
            caches.append({"name": "swa" if label.strip() == "SWA" else "base", "cells": cells, "layers": layers,
                           "seqs": seqs, "streams": streams, "k_type": kind_type, "k_bytes": k, "v_type": v_type,
                           "v_bytes": v})
        return {"version": pool.version, "lines": lines, "llama_caches": caches,
                "buffers": [{"device": d, "bytes": b} for d, b in buffers.items()]}


def _dsv4_cache(name: str, cells: int, layers: int, streams: int, row_bytes: int, k_type: str, lines: list[str],
                buffers: dict[str, int], device: str) -> dict[str, object]:
    """One ``llama_kv_cache`` of a DeepSeek-V4 model (K only, every layer on the first GPU): its buffer and size
    lines."""
    k = cells * streams * row_bytes * layers
    if layers:
        lines.append(f"llama_kv_cache: {device:>10} KV buffer size = {k / MiB:8.2f} MiB")
        buffers[device] = buffers.get(device, 0) + k
    lines.append(f"llama_kv_cache: size = {k / MiB:7.2f} MiB ({cells:6d} cells, {layers:3d} layers, "
                 f"{streams:2d}/{streams} seqs), K ({k_type}): {k / MiB:7.2f} MiB, V ({k_type}): {0:7.2f} MiB")
    return {"name": name, "cells": cells, "layers": layers, "seqs": streams, "streams": streams, "k_type": k_type,
            "k_bytes": k, "v_type": k_type, "v_bytes": 0}


def _dsv4_state(name: str, label: str, ratio: int, compressed: Sequence[LogCache], streams: int, lines: list[str],
                device: str) -> dict[str, object]:
    """One ``llama_dsv4_comp_state`` (src/llama-kv-cache-dsv4.cpp): ``creating DSV4 ... compressor state``, its
    buffer line (none when no layer holds it) and ``%s ratio = %u, state = %u x %u, streams = %u, rs_seq = %u,
    layers = %zu, size = %7.2f MiB``; kvplan's ``cells`` are the state's rows per stream, ``k_bytes`` its kv
    tensors, ``v_bytes`` its score tensors (float32, rs_seq 0: no rollback snapshots)."""
    lines.append(f"llama_kv_cache_dsv4: creating DSV4 {label} compressor state")
    shapes = [(shape, len(c.layer_indices)) for c in compressed if isinstance(c.spec, CompressedAttentionSpec)
              and (shape := dsv4_state_shape(name, c.spec)) is not None]
    # NOTE: llama.cpp prints the state's shape from the model's widths even when no layer holds it.
    specs = [c.spec for c in compressed if isinstance(c.spec, CompressedAttentionSpec)]
    head, index = specs[0].head_size, max(s.index_head_size for s in specs)
    rows = 2 * ratio if ratio == DSV4_CSA_RATIO else ratio
    width = {"csa": 2 * head, "hca": head, "lid": 2 * index}[name]
    layers = sum(count for _shape, count in shapes)
    tensor = sum(r * w * 4 * streams * count for (r, w), count in shapes)  # one of kv, score: float32
    if layers:
        # NOTE: not one of engine_log's buffers, which are the 'KV buffer size' lines --compare-log reads.
        lines.append(f"llama_dsv4_comp_state: {device:>10} DSV4 {name} state buffer size = {2 * tensor / MiB:8.2f} MiB")
    lines.append(f"llama_dsv4_comp_state: {name} ratio = {ratio}, state = {rows} x {width}, streams = {streams}, "
                 f"rs_seq = 0, layers = {layers}, size = {2 * tensor / MiB:7.2f} MiB")
    return {"name": f"{name}_state", "cells": rows, "layers": layers, "seqs": streams, "streams": streams,
            "k_type": "f32", "k_bytes": tensor, "v_type": "f32", "v_bytes": tensor, "ratio": ratio, "width": width}


#: ggml's backend name per GPU vendor, the prefix of a device buffer's name in the ``KV buffer size`` line
#: (ggml-cuda: GGML_CUDA_NAME "CUDA", "ROCm" for HIP builds; ggml-metal: GGML_METAL_NAME "MTL").
BACKENDS = {"nvidia": "CUDA", "amd": "ROCm", "apple": "MTL"}


def _backend(pool: PoolFacts) -> str:
    return BACKENDS.get(pool.gpu_vendor, "CUDA")


def _ggml(name: str) -> str:
    """The ggml type name llama.cpp prints (``fp16`` -> ``f16``; q8_0 ... as they are)."""
    return GGML_TYPE_NAMES.get(name, name)


def _cells_bytes(cache: LogCache, row_bytes: int) -> int:
    return row_bytes * cache.cells * cache.streams


def layer_devices(num_layers: int, split: tuple[float, ...], *, start: int = 0) -> list[int]:
    """Device of each layer under ``-sm layer`` with every layer offloaded (``llama-model.cpp::load_tensors``):
    cumulative ``split`` proportions over ``num_layers + 1`` slots (the output layer is the last slot);
    layer ``il`` goes to the first device whose cumulative share exceeds ``il / (num_layers + 1)``.
    ``split`` is ``--tensor-split`` (or the devices' free memory, llama.cpp's default). With ``-ngl`` below all
    layers, ``start`` is ``i_gpu_start``: the share is ``(il - start) / (num_layers + 1 - start)``, and the layers
    before ``start`` are on the host (their device here is unused)."""
    total = sum(split)
    if total <= 0:
        raise InputError("--tensor-split needs a positive proportion", "e.g. --tensor-split 3,1")
    cumulative, acc = [], 0.0
    for share in split:
        acc += share
        cumulative.append(acc / total)
    slots = max(num_layers + 1 - start, 1)
    out = []
    for il in range(num_layers):
        x = (il - start) / slots
        out.append(next((d for d, c in enumerate(cumulative) if c > x), len(split) - 1))
    return out


def check_flash_attn(flash_attn: str, v_type: str) -> list[str]:
    """llama.cpp ``-fa on|off|auto`` against the V cache type (``llama_init_from_model``, src/llama-context.cpp):
    a quantised V cache needs flash attention, so ``-fa off`` with one is refused as llama.cpp refuses it."""
    if flash_attn not in ("on", "off", "auto"):
        raise InputError(f"-fa {flash_attn!r}: llama.cpp takes on, off or auto", "e.g. -fa on")
    quantised = lookup_dtype(v_type).scheme == "ggml"
    if flash_attn == "off" and quantised:
        raise InputError(f"llama.cpp refuses a quantised V cache ({_ggml(v_type)}) with -fa off ('quantized V cache "
                         "requires flash_attn to be enabled', src/llama-context.cpp)",
                         "use -fa on (or auto), or -ctv f16")
    if flash_attn == "off":
        return ["llama.cpp -fa off: the KV cache holds the same bytes (V stored transposed); the compute buffers "
                "differ, which kvplan's estimate does not model"]
    return []
