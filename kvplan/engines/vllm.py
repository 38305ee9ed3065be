"""vLLM v1: blocks of 16 (64 for MLA), sliding windows plus the batched tokens, Mamba page alignment."""

from __future__ import annotations

from dataclasses import replace

from kvplan.adjust import Deployment
from kvplan.dtypes import KvDtype
from kvplan.engines.base import (
    FLOAT_DTYPES,
    FP8_DTYPES,
    Budget,
    BudgetRequest,
    BudgetTerm,
    EngineProfile,
    ModelShape,
    PoolFacts,
    SizingContext,
    activation_estimate,
    dsa_fp8_bytes,
    version_tuple,
)
from kvplan.errors import InputError
from kvplan.geometry import ModelGeometry
from kvplan.specs import AttentionSpec, ChunkedLocalSpec, LayerSpec, MLASpec, SlidingWindowSpec, StateSpec
from kvplan.units import GiB, MiB, cdiv

#: vLLM ``--max-num-batched-tokens`` default kvplan assumes: ``vllm serve`` on a GPU with at least
#: 70 GiB that is not an A100 (H100, H200, MI300X), from ``EngineArgs.get_batch_defaults``.
#: The same function gives 2048 on smaller GPUs and 16384 for the offline ``LLM`` class.
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: The vLLM release whose log lines ``capacity.engine_log`` prints by default (the newest read).
VLLM_DEFAULT_VERSION = "0.33"
#: vLLM V0 ``--swap-space`` default (GiB of CPU blocks logged as ``# CPU blocks``).
VLLM_V0_SWAP_BYTES = 4 * GiB
VLLM_DOCS_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
#: vLLM ``CacheConfig.block_size`` values.
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)

# ---- the profiled budget (vLLM v1/worker/gpu_worker.py, utils/mem_utils.py) ------------------------------------
#: vLLM ``--gpu-memory-utilization`` default.
VLLM_GPU_MEMORY_UTILIZATION = 0.9
#: Non-torch memory vLLM subtracts (cuBLAS workspaces, NCCL buffers): kvplan's estimate.
VLLM_NON_TORCH_BYTES = 256 * MiB
#: V0's sampler warm-up: logits for ``max_num_seqs`` (default 256) rows in float32, one copy.
VLLM_LOGIT_ROWS = 256
#: ``EngineArgs.get_batch_defaults`` (0.10-0.33, ``vllm serve``): ``max_num_seqs`` 1024 on GPUs of at least
#: 70 GiB that are not A100s (H100, H200, MI300X), 256 on the others; never above max_num_batched_tokens.
VLLM_MAX_NUM_SEQS_LARGE, VLLM_MAX_NUM_SEQS_SMALL = 1024, 256
#: Live float32 copies of the ``[rows, vocab]`` logits at the peak of V1's dummy sampler run, in halves
#: (19 = 9.5 copies). ``gpu_model_runner._dummy_sampler_run`` samples with top-k and top-p set, so
#: ``Sampler.sample`` -> ``apply_top_k_top_p`` sorts the logits (``ops/topk_topp_sampler.py``, 0.11.0):
#: at the sort, the model's bf16 logits (0.5), their float32 copy (1), the sorted values (1), the int64
#: indices (2), the int64 iota the sort starts from (2) and the radix sort's double buffers for
#: values (1) and indices (2) are alive.
VLLM_SAMPLER_HALF_COPIES = 19
#: The same peak when FlashInfer's sampler runs instead (no sort: bf16 logits, float32 copy, probs).
VLLM_FLASHINFER_SAMPLER_HALF_COPIES = 5
#: vLLM's Marlin MXFP4 MoE kernel needs n % 256 == 0 and k % 128 == 0: ``Mxfp4MoEMethod.create_weights``
#: (0.10.1-0.11.0) pads each expert's intermediate size to a multiple of 128 and the hidden size to 256.
MARLIN_MXFP4_PAD_INTERMEDIATE, MARLIN_MXFP4_PAD_HIDDEN = 128, 256
#: From this release vLLM subtracts its CUDA graph estimate from the KV budget: ``profile_cudagraph_memory`` runs in
#: ``gpu_worker.determine_available_memory`` and ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "1" in the
#: 0.20.0 wheel (absent in 0.17.0; the log line says "default since v0.21.0").
VLLM_CUDAGRAPH_BUDGET_VERSION = (0, 20)
#: ``profile_cudagraph_memory``'s floor per graph after the first of each mode (``max(mem_samples[1], 1 << 20)``).
VLLM_CUDAGRAPH_MIN_PER_GRAPH = 1 * MiB
#: ``_set_cudagraph_sizes``: ``max_cudagraph_capture_size = min(max_num_seqs * 2, 512)`` (1024 on data-centre
#: Blackwell, ``is_device_capability_family(100)``).
VLLM_CUDAGRAPH_MAX_SIZE, VLLM_CUDAGRAPH_MAX_SIZE_BLACKWELL = 512, 1024
#: RoPE types whose factor vLLM does not apply to the maximum context (``_get_and_verify_max_len``).
VLLM_ROPE_UNSCALED = ("su", "longrope", "llama3")
#: ``mamba_cache_mode`` "align" (vllm#30877, first released in 0.14): with prefix caching on, a recurrent-state layer
#: keeps the running state and the state at the last block boundary, ``MambaSpec.max_memory_usage_bytes`` =
#: ``page * (2 + num_speculative_blocks)`` instead of ``page * (1 + num_speculative_blocks)``.
VLLM_MAMBA_ALIGN_VERSION = (0, 14)
#: From 0.28 ``EngineArgs._set_default_chunked_prefill_and_prefix_caching_args`` turns prefix caching on for hybrid
#: models too (0.26-0.27.1: ``default_prefix_caching = model_config.is_prefix_caching_supported and not
#: model_config.is_hybrid``, "keep it opt-in for now"), and picks "align" for every model (before: "all" for models
#: that declare ``SupportsMambaPrefixCaching``, else "align").
VLLM_HYBRID_PREFIX_CACHING_VERSION = (0, 28)
#: Early V1 (0.7 with VLLM_USE_V1=1) under ``vllm serve``: ``EngineArgs._override_v1_engine_args`` sets
#: ``max_num_batched_tokens`` 2048 and ``max_num_seqs`` 1024 for the OPENAI_API_SERVER usage context (8192 for the
#: offline ``LLM`` class).
VLLM_EARLY_V1_SERVE_BATCHED_TOKENS = 2048
#: The CUDA context with lazy module loading (CUDA >= 11.7): "~300MB", pytorch/pytorch#107667. Early V1's
#: ``determine_available_memory`` counts it: its non-torch term is the whole device's used memory less torch's
#: allocated bytes (``mem_get_info`` total - free - ``allocated_bytes.all.current``), with no baseline.
VLLM_CUDA_CONTEXT_BYTES = 300 * 1000**2
#: What early V1's device-wide non-torch term holds beyond those kvplan can count: allocator segments
#: ``empty_cache`` cannot return (fragmentation, vllm PR #2031), kernel images loaded by torch.compile, any other
#: process on the GPU. vllm PR #12569 (V1 at 0.7, Llama-3.1-70B w8a8, "Loading model weights took 67.7229 GB",
#: util 0.98, max-model-len 2048, ``vllm serve``) logs "# GPU blocks: 1381": on an H100 (79.11 GiB) that is
#: 2.01 GiB below kvplan's derivation (1,793 blocks of 5 MiB). kvplan derives the budget and says how far below
#: it vLLM's can be, this far: the range of blocks and concurrency it prints contains the published log.
VLLM_EARLY_V1_UNSEEN_BYTES = 2100 * MiB
#: "Estimated CUDA graph memory: X GiB total" in published start-up logs (vLLM 0.19-0.2x): 0.22 GiB (15 piecewise
#: graphs) to 1.97 GiB (tp 2); 0.64 GiB for Qwen3.5-4B with 51 + 35 graphs (actual pool 0.55 GiB).
VLLM_CUDAGRAPH_PUBLISHED_GIB = (0.22, 1.97)


class VllmProfile(EngineProfile):
    name = "vllm"
    title = "vLLM"
    source = (
        "vLLM v1 (vllm/v1/kv_cache_interface.py @ 001cabc1, kv_cache_utils.py, platforms/cuda.py): "
        "max_memory_usage_bytes per layer"
    )
    default_block_size = 16
    allowed_dtypes = (*FLOAT_DTYPES, *FP8_DTYPES, "int8", "nvfp4")
    checkpoint_kv_dtype = ("vLLM resolves --kv-cache-dtype auto to it: vllm/utils/torch_utils.py "
                           "get_kv_cache_quant_algo_string, vllm-project/vllm#30785")
    knobs = ("max_num_batched_tokens",)
    block_pool = True
    stage_budgets = True
    swa_extra_block = True
    dp_splits_experts = True
    query_heads_rule = ("vllm/config/model.py verify_with_parallel_config: 'Total number of attention heads must be "
                        "divisible by tensor parallel size'")
    mla_off = ("VLLM_MLA_DISABLE=1: FullAttentionSpec of qk_nope_head_dim + qk_rope_head_dim per head for K and for V "
               "(deepseek_v2.py pads V to qk_head_dim; model_arch_config_convertor.get_head_size)")
    mla_off_pads_v = True

    def attention_tp(self, tp: int, dp: int) -> int:
        """``--data-parallel-size D --enable-expert-parallel``: D engine cores of ``tp`` GPUs each."""
        if dp < 2:
            raise InputError("vLLM data parallel needs --data-parallel-size > 1", "e.g. --tp 1 --dp 8 --enable-dp-attention")
        return tp

    def mnbt(self, ctx: SizingContext) -> int:
        return ctx.dep.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS

    def check(self, layers: tuple[LayerSpec, ...], dep: Deployment, kv_dtype: KvDtype) -> list[str]:
        notes = super().check(layers, dep, kv_dtype)
        has_mla = any(isinstance(s, MLASpec) for s in layers)
        if dep.block_size is not None and dep.block_size not in VLLM_BLOCK_SIZES:
            raise InputError(
                f"vLLM does not support --block-size {dep.block_size}",
                f"vLLM's CacheConfig accepts {', '.join(map(str, VLLM_BLOCK_SIZES))}",
            )
        for heads in sorted({s.num_kv_heads for s in layers if isinstance(s, AttentionSpec)}):
            # NOTE: QKVParallelLinear divides KV heads over ranks (tp <= H_kv) or replicates them (tp > H_kv);
            # both need an exact division.
            if (dep.tp <= heads and heads % dep.tp) or (dep.tp > heads and dep.tp % heads):
                fits = [t for t in range(1, 2 * heads + 1) if heads % t == 0 or t % heads == 0]
                raise InputError(
                    f"vLLM cannot split {heads} KV heads over --tensor-parallel-size {dep.tp}: one must divide the other",
                    f"use a tensor-parallel size such as {', '.join(map(str, fits[:8]))}",
                )
        if has_mla and dep.block_size not in (None, 64):
            notes.append(f"vLLM's MLA backends (FlashMLA) force block size 64; --block-size {dep.block_size} is overridden")
        if kv_dtype.name == "int8":
            notes.append("vLLM int8 KV (int8_per_token_head, newer main) stores a float32 scale per token per head")
        if kv_dtype.name == "nvfp4":
            notes.append("vLLM nvfp4 KV is on newer main only (KVQuantMode)")
        return notes

    def model_max_len(self, geometry: ModelGeometry) -> tuple[int | None, str | None]:
        """``ModelConfig._get_and_verify_max_len``: the config's length times the RoPE scaling factor (yarn: times
        ``original_max_position_embeddings``) unless the type is su, longrope or llama3 or the model is Gemma-3
        (whose length is already scaled)."""
        tokens, source = geometry.max_context_tokens, geometry.max_context_source
        rope = geometry.rope_scaling
        if rope is None or tokens is None or rope.rope_type in VLLM_ROPE_UNSCALED or "gemma3" in geometry.model_type:
            return tokens, source
        if rope.rope_type == "yarn" and rope.original_max_position_embeddings is not None:
            base, base_source = rope.original_max_position_embeddings, f"{rope.source}.original_max_position_embeddings"
        else:
            base, base_source = tokens, source or "the config's length"
        scaled = int(base * rope.factor)
        if scaled == tokens:
            return tokens, source
        return scaled, f"{base_source} {base:,} x {rope.source}.factor {rope.factor:g} ({rope.rope_type}; vLLM _get_and_verify_max_len)"

    def state_pages(self, dep: Deployment) -> int:
        # NOTE: mamba_cache_mode "align": the running state plus the state at the last block boundary.
        return 2 if dep.enable_prefix_caching else 1

    def resolve_prefix_caching(self, requested: bool | None, version: str | None,
                               layers: tuple[LayerSpec, ...]) -> tuple[bool, list[str]]:
        """vLLM's ``enable_prefix_caching`` for ``version``: on by default in V1 (0.8 on) for attention-only models;
        for models with recurrent-state layers opt-in before 0.28 and on from 0.28 (``VLLM_HYBRID_PREFIX_CACHING_VERSION``)."""
        text = version or VLLM_DEFAULT_VERSION
        v = version_tuple(text, engine="vllm")[:2]
        if not any(isinstance(s, StateSpec) for s in layers):
            return (requested if requested is not None else v >= (0, 8)), []
        flag = "--enable-prefix-caching" if requested else "--no-enable-prefix-caching"
        if v < VLLM_MAMBA_ALIGN_VERSION:
            if not requested:
                return False, []
            return False, [f"vLLM {text}: {flag} on a model with recurrent-state layers: vLLM before 0.14 has no "
                           "'align' Mamba cache mode (vllm#30877); its Mamba-2 prefix caching ('all' mode, vllm#25752) "
                           "is not priced: one state page per request assumed"]
        # NOTE: attention-free models (pure Mamba) are not vLLM's is_hybrid: kvplan prices align mode for them only
        # when asked (their default and mode depend on SupportsMambaPrefixCaching, which a config does not say).
        hybrid = any(isinstance(s, (AttentionSpec, MLASpec)) and s.grows_with_tokens for s in layers)
        default = hybrid and v >= VLLM_HYBRID_PREFIX_CACHING_VERSION
        if requested is None and not hybrid:
            return False, []
        on = requested if requested is not None else default
        why = flag if requested is not None else (
            "vLLM's default for hybrid models from 0.28" if default else
            "vLLM's default for hybrid models before 0.28: 'keep it opt-in for now' (engine/arg_utils.py)")
        if not on:
            return False, [f"vLLM {text}: prefix caching off ({why}): one recurrent-state page per request; "
                           "--enable-prefix-caching adds one (mamba_cache_mode 'align')"]
        note = (f"vLLM {text}: prefix caching on ({why}): mamba_cache_mode 'align', each recurrent-state layer group "
                "holds 2 pages per request instead of 1 (MambaSpec.max_memory_usage_bytes = page x (2 + "
                "num_speculative_blocks)); --no-enable-prefix-caching for 1")
        if v < VLLM_HYBRID_PREFIX_CACHING_VERSION:
            note += ("; before 0.28 vLLM picks 'all' mode instead for models that declare SupportsMambaPrefixCaching "
                     "(Mamba-2 families: a page per block of context), which kvplan does not price")
        return True, [note]

    def block_size(self, spec: LayerSpec, ctx: SizingContext) -> int | None:
        if isinstance(spec, MLASpec):
            return 64
        return super().block_size(spec, ctx)

    def window_tokens(self, spec: LayerSpec, ctx: SizingContext) -> int:
        m = self.mnbt(ctx)
        if isinstance(spec, SlidingWindowSpec):
            return min(spec.sliding_window - 1 + m, ctx.seq_len)
        assert isinstance(spec, ChunkedLocalSpec)
        return min(spec.attention_chunk_size + m, ctx.seq_len)

    def tokens_held(self, spec: LayerSpec, ctx: SizingContext) -> int:
        held = super().tokens_held(spec, ctx)
        if isinstance(spec, SlidingWindowSpec):
            # NOTE: +1 block: the window may not start on a block boundary (SlidingWindowSpec).
            held += self.block_size(spec, ctx) or 1
        return held

    def bytes_per_token(self, spec: LayerSpec, ctx: SizingContext) -> int:
        dsa = dsa_fp8_bytes(spec, ctx.kv_dtype)
        if dsa is not None:
            # NOTE: MLAAttentionSpec.real_page_size_bytes (fp8_ds_mla) and the DSA indexer cache (fp8 + scale).
            return dsa
        if ctx.kv_dtype.name == "int8" and isinstance(spec, AttentionSpec):
            # NOTE: int8_per_token_head: one float32 scale per token per head, for K and for V.
            return spec.num_kv_heads * (spec.head_size + 4) + spec.num_kv_heads * (spec.head_size_v + 4)
        return super().bytes_per_token(spec, ctx)

    def prepare(self, layers: list[LayerSpec], ctx: SizingContext) -> tuple[SizingContext, list[str]]:
        states = [s for s in layers if isinstance(s, StateSpec)]
        attention = [s for s in layers if isinstance(s, (AttentionSpec, MLASpec)) and s.grows_with_tokens]
        if not states or not attention:
            return ctx, []
        mamba_page = max(EngineProfile.state_bytes(self, s, ctx) for s in states)
        spec = attention[0]
        per_token = self.bytes_per_token(spec, ctx)
        align = 64 if isinstance(spec, MLASpec) else 16
        needed = align * cdiv(mamba_page, align * per_token)
        block = max(ctx.dep.block_size or self.default_block_size or 1, needed)
        page = block * per_token
        note = (
            f"vLLM hybrid: attention block size set to {block} tokens (= {align} * cdiv({mamba_page:,}, {align} * "
            f"{per_token:,})) so an attention page holds a Mamba state; the state page is padded from "
            f"{mamba_page:,} to {page:,} bytes"
        )
        notes = [note]
        return replace(ctx, attn_block_size=block, state_page_bytes=page), notes

    def summary(self, ctx: SizingContext) -> str:
        return (
            f"vLLM v1 max_memory_usage_bytes: blocks of {ctx.attn_block_size or ctx.dep.block_size or 16} tokens "
            f"(64 for MLA); sliding layers cdiv(min(W - 1 + {self.mnbt(ctx)}, T), bs) + 1 blocks; chunked "
            f"cdiv(min(C + {self.mnbt(ctx)}, T), bs) blocks (max_num_batched_tokens {self.mnbt(ctx)}); Mamba one page per sequence"
        )

    # ---- the profiled KV budget ------------------------------------------------------------------
    def kv_budget(self, req: BudgetRequest) -> Budget:
        """``memory x gpu_memory_utilization - non_kv_cache_memory`` (``gpu_worker.determine_available_memory``).

        ``non_kv_cache_memory`` = weights as loaded + torch peak of the profile run + non-torch memory
        (``memory_profiling``). Per ``--engine-version``:

        - before 0.8 (V0): activations of ``max_num_batched_tokens`` tokens + 256 fp32 logit rows.
        - 0.8 on (V1): ``profile_run`` = a dummy forward over ``max_num_batched_tokens`` tokens, then the
          dummy sampler over ``min(max_num_seqs, max_num_batched_tokens)`` logit rows; the torch peak is
          the larger of the two (the forward's buffers are freed before sampling).
        - 0.20 on: vLLM also subtracts its CUDA graph estimate (``profile_cudagraph_memory``), which
          kvplan does not model (said in the notes).
        """
        util = req.gpu_memory_utilization or VLLM_GPU_MEMORY_UTILIZATION
        usable = int(req.memory_bytes * util)
        formula = f"memory x gpu_memory_utilization {util:g} - weights - activation peak - non-torch memory"
        if req.reserve_bytes is not None:
            return Budget(memory_bytes=req.memory_bytes, usable_bytes=usable, weights_bytes_per_gpu=req.weights_bytes_per_gpu,
                          activation_bytes=0, non_torch_bytes=0, reserve_bytes=req.reserve_bytes,
                          kv_bytes_per_gpu=usable - req.weights_bytes_per_gpu - req.reserve_bytes, formula=formula)
        version = req.version or VLLM_DEFAULT_VERSION
        v = version_tuple(version, engine="vllm")[:2]
        mnbt = req.max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
        shape = req.shape
        terms: tuple[BudgetTerm, ...]
        shortfall = None
        context = 0
        if early_v1(version):
            if req.max_num_batched_tokens is None:
                mnbt = VLLM_EARLY_V1_SERVE_BATCHED_TOKENS
            forward = activation_estimate(shape, tokens=mnbt, logit_rows=0, tp=req.tp)
            logits = mnbt * (shape.vocab_size + shape.hidden_size) * shape.dtype_bytes if req.last_stage else 0
            act = max(forward, logits)
            terms = (
                BudgetTerm(name="dummy forward", bytes=forward, source=(
                    f"early V1 profile_run: _dummy_run({mnbt:,} tokens) x (3 x mlp {shape.mlp_width} + qkv "
                    f"{shape.qkv_width} + 2 x hidden {shape.hidden_size}) x {shape.dtype_bytes} B / tp {req.tp} "
                    "(kvplan's estimate; vllm serve's max_num_batched_tokens 2048 in 0.7 V1, "
                    "arg_utils._override_v1_engine_args)")),
                BudgetTerm(name="dummy logits", bytes=logits, source=(
                    f"early V1 profile_run (0.7): compute_logits over the {mnbt:,} hidden states, {shape.dtype_bytes}-byte "
                    f"logits x vocab {shape.vocab_size:,} + the hidden states; no sampler run yet ('TODO(woosuk): "
                    "Consider the memory usage of the sampler'); the larger of the two terms counts")),
                BudgetTerm(name="CUDA context", bytes=VLLM_CUDA_CONTEXT_BYTES, source=(
                    "early V1 determine_available_memory counts the whole device's non-torch memory (mem_get_info "
                    "used - torch allocated, no baseline): the CUDA context, ~300 MB with lazy loading "
                    "(pytorch/pytorch#107667)")),
            )
            extra = 0
            context = VLLM_CUDA_CONTEXT_BYTES
            uncertainty = None
            shortfall = VLLM_EARLY_V1_UNSEEN_BYTES
        elif v < (0, 8):
            rows = VLLM_LOGIT_ROWS if req.last_stage else 0
            act = activation_estimate(shape, tokens=mnbt, logit_rows=rows, tp=req.tp)
            terms = (BudgetTerm(name="activation peak", bytes=act, source=(
                f"V0 profile run: {mnbt:,} tokens x (3 x mlp {shape.mlp_width} + qkv {shape.qkv_width} + 2 x hidden "
                f"{shape.hidden_size}) x {shape.dtype_bytes} B / tp {req.tp} + {rows} fp32 logit rows x vocab "
                f"{shape.vocab_size:,}" + ("" if req.last_stage else " (not the last pipeline stage: no sampling)"))),)
            extra = 0
            uncertainty = None
        else:
            extra = marlin_mxfp4_extra_bytes(shape)
            forward = activation_estimate(shape, tokens=mnbt, logit_rows=0, tp=req.tp)
            rows = min(req.max_num_seqs or default_max_num_seqs(req.memory_bytes, req.gpu_name), mnbt)
            # NOTE: profile_run samples only ``if get_pp_group().is_last_rank`` (gpu_model_runner.py).
            one_copy = rows * shape.vocab_size * 4 if req.last_stage else 0
            sampler = VLLM_SAMPLER_HALF_COPIES * one_copy // 2
            act = max(forward, sampler)
            terms = (
                BudgetTerm(name="dummy forward", bytes=forward, source=(
                    f"profile_run: _dummy_run({mnbt:,} tokens) x (3 x mlp {shape.mlp_width} + qkv {shape.qkv_width} + "
                    f"2 x hidden {shape.hidden_size}) x {shape.dtype_bytes} B / tp {req.tp} (kvplan's estimate)")),
                BudgetTerm(name="dummy sampler", bytes=sampler, source=(
                    f"_dummy_sampler_run: {rows:,} rows (min(max_num_seqs, max_num_batched_tokens)) x vocab "
                    f"{shape.vocab_size:,} x 4 B x {VLLM_SAMPLER_HALF_COPIES / 2:g} live copies at the top-k/top-p sort "
                    "(ops/topk_topp_sampler.py::apply_top_k_top_p)")),
            )
            flashinfer = VLLM_FLASHINFER_SAMPLER_HALF_COPIES * one_copy // 2
            # NOTE: both other paths only add KV memory: FlashInfer's sampler (no sort) and native MXFP4 layouts.
            uncertainty = (sampler - max(forward, flashinfer) if sampler > forward else 0) + extra
        if extra:
            terms = (BudgetTerm(name="weights load padding", bytes=extra, source=(
                "Marlin MXFP4 MoE (Hopper, vllm#23278 'Model loading took 65.9651 GiB'): experts padded to "
                f"intermediate % {MARLIN_MXFP4_PAD_INTERMEDIATE} and hidden % {MARLIN_MXFP4_PAD_HIDDEN} "
                "(Mxfp4MoEMethod.create_weights)")), *terms)
        terms = (*terms, BudgetTerm(name="non-torch memory", bytes=VLLM_NON_TORCH_BYTES,
                                    source="cuBLAS workspaces, NCCL buffers (kvplan's estimate)"))
        graphs = 0
        if v >= VLLM_CUDAGRAPH_BUDGET_VERSION and not req.enforce_eager:
            graphs, graph_source = cudagraph_estimate(req, mnbt)
            terms = (*terms, BudgetTerm(name="CUDA graphs", bytes=graphs, source=graph_source))
        reserve = act + VLLM_NON_TORCH_BYTES + context + extra + graphs
        if graphs:
            formula += " - CUDA graph estimate"
            shortfall = _cudagraph_shortfall_bytes(graphs)
        return Budget(memory_bytes=req.memory_bytes, usable_bytes=usable, weights_bytes_per_gpu=req.weights_bytes_per_gpu,
                      activation_bytes=act, non_torch_bytes=VLLM_NON_TORCH_BYTES + context, reserve_bytes=reserve,
                      kv_bytes_per_gpu=usable - req.weights_bytes_per_gpu - reserve, formula=formula, terms=terms,
                      uncertainty_bytes=uncertainty, shortfall_bytes=shortfall)

    def budget_uncertainty(self, budget: Budget) -> list[str]:
        if any(t.name == "dummy logits" for t in budget.terms):
            # NOTE: why (early V1's device-wide non-torch term, the gap vllm PR #12569's log shows) is in
            # docs/concepts/engines.md.
            return [f"vLLM 0.7 V1 KV budget derived (up to {(budget.shortfall_bytes or 0) / GiB:.2f} GiB less: early "
                    "V1 counts all the device's non-torch memory, as far below as vllm PR #12569's log fell): "
                    "--kv-budget takes its logged budget; docs/concepts/engines.md"]
        # NOTE: said in one sentence; why (weights as loaded per kernel, the sampler's sort, MoE workspaces, CUDA
        # graphs measured on the GPU) is in docs/concepts/engines.md, "Why the vLLM budget is derived".
        spread = [f"{budget.shortfall_bytes / GiB:.1f} GiB less"] if budget.shortfall_bytes else []
        spread += [f"{budget.uncertainty_bytes / GiB:.2f} GiB more"] if budget.uncertainty_bytes else []
        return ["vLLM KV budget derived" + (f" (up to {', '.join(spread)})" if spread else "")
                + ": --kv-budget takes its logged 'Available KV cache memory'; docs/concepts/engines.md"]

    # ---- start-up log lines ----------------------------------------------------------------------
    def log_notes(self, pool: PoolFacts) -> list[str]:
        return _version_forms_note(pool)

    def log_figures(self, pool: PoolFacts) -> dict[str, object]:
        """vLLM's KV lines for ``pool``, in the format of ``pool.version`` (vLLM ``v1/core/kv_cache_utils.py``).

        - V0 (< 0.8): ``# GPU blocks: N, # CPU blocks: C`` and concurrency ``N * bs / max_model_len``.
        - 0.8 - 0.9: ``GPU KV cache size`` = ``num_blocks * block_size`` (uniform models only).
        - 0.10 - 0.20: ``num_blocks // num_kv_cache_groups * block_size`` (``_report_kv_cache_config``).
        - 0.21 and later: ``int(max_concurrency * max_model_len)``; one merged line from 0.28.
        GiB figures: ``%.2f`` up to 0.12, ``str(round(x, 2))`` (``format_gib``) from 0.13 (0.14 read).
        """
        version = pool.version or VLLM_DEFAULT_VERSION
        v = version_tuple(version, engine="vllm")[:2]
        gib = _gib_text(pool.available_kv_bytes, v)
        fits = pool.kv_bytes_per_request <= pool.available_kv_bytes and pool.num_blocks >= pool.blocks_per_request
        out: dict[str, object] = {"version": version, "available_kv_bytes": pool.available_kv_bytes,
                                  "num_blocks": pool.num_blocks, "num_kv_cache_groups": pool.num_kv_cache_groups,
                                  "bytes_per_block": _bytes_per_block(pool)}
        if early_v1(version):
            # NOTE: vLLM 0.7 with VLLM_USE_V1=1 (v1/core/kv_cache_utils.py): "# GPU blocks: N" alone, and the
            # concurrency of num_blocks * block_size / max_model_len, the length printed without separators.
            conc = pool.num_blocks * pool.block_size / pool.max_model_len
            lines = [f"# GPU blocks: {pool.num_blocks}",
                     f"Maximum concurrency for {pool.max_model_len} tokens per request: {conc:.2f}x"]
            return {**out, "lines": lines, "gpu_kv_cache_tokens": pool.num_blocks * pool.block_size,
                    "max_concurrency": round(conc, 4)}
        if v < (0, 8):
            per_block = pool.block_size * sum(
                sum(1 for i in c.layer_indices if i in pool.layers_on_rank) * (c.k_bytes_per_token + c.v_bytes_per_token)
                for c in pool.caches
            )
            cpu = VLLM_V0_SWAP_BYTES // per_block if per_block else 0
            tokens = pool.num_blocks * pool.block_size
            conc = tokens / pool.max_model_len
            lines = [f"# GPU blocks: {pool.num_blocks}, # CPU blocks: {cpu}",
                     f"Maximum concurrency for {pool.max_model_len} tokens per request: {conc:.2f}x"]
            if tokens < pool.max_model_len:
                lines.append(
                    f"The model's max seq len ({pool.max_model_len}) is larger than the maximum number of tokens that "
                    f"can be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing "
                    "`max_model_len` when initializing the engine."
                )
            return {**out, "lines": lines, "gpu_kv_cache_tokens": tokens, "max_concurrency": round(conc, 4)}
        lines = [f"Available KV cache memory: {gib} GiB"]
        if pool.available_kv_bytes <= 0:
            return {**out, "lines": [*lines, _no_memory_text(v)], "num_blocks": 0}
        if not fits:
            return {**out, "lines": [*lines, _not_enough_text(pool, v)]}
        if v < (0, 10):
            tokens = pool.num_blocks * pool.block_size
        elif v < (0, 21):
            tokens = pool.num_blocks // pool.num_kv_cache_groups * pool.block_size
        else:
            tokens = int(pool.max_concurrency * pool.max_model_len)
        size_line = f"GPU KV cache size: {tokens:,} tokens"
        conc_line = f"Maximum concurrency for {pool.max_model_len:,} tokens per request: {pool.max_concurrency:.2f}x"
        lines += [f"{size_line}, {conc_line}"] if v >= (0, 28) else [size_line, conc_line]
        return {**out, "lines": lines, "gpu_kv_cache_tokens": tokens, "max_concurrency": round(pool.max_concurrency, 4)}


def early_v1(version: str | None) -> bool:
    """vLLM before 0.8 run with ``VLLM_USE_V1=1``: ``--engine-version 0.7-v1`` (a log names it "Initializing a V1
    LLM engine (v0.7.x)", or prints "# GPU blocks: N" without V0's "# CPU blocks")."""
    if version is None:
        return False
    return version.strip().lower().endswith("v1") and version_tuple(version, engine="vllm")[:2] < (0, 8)


def cudagraph_sizes(max_num_seqs: int, mnbt: int, gpu_name: str | None) -> tuple[list[int], list[int]]:
    """(PIECEWISE capture sizes, FULL decode sizes) of vLLM's default ``FULL_AND_PIECEWISE`` mode
    (``VllmConfig._set_cudagraph_sizes``, 0.20-0.33): 1, 2, 4, multiples of 8 below 256, multiples of 16 from 256, up
    to ``min(max_num_seqs * 2, 512, max_num_batched_tokens)`` (+ max_num_batched_tokens when it is below that);
    decode graphs cover the sizes up to ``max_num_seqs``."""
    blackwell = any(tag in (gpu_name or "").upper() for tag in ("B200", "B300", "GB200", "GB300"))
    top = min(max_num_seqs * 2, VLLM_CUDAGRAPH_MAX_SIZE_BLACKWELL if blackwell else VLLM_CUDAGRAPH_MAX_SIZE, mnbt)
    sizes = [s for s in (1, 2, 4) if s <= top] + list(range(8, min(top + 1, 256), 8)) + list(range(256, top + 1, 16))
    if mnbt <= top and mnbt not in sizes:
        sizes.append(mnbt)
    full = [s for s in sizes if s <= max_num_seqs]
    if max_num_seqs <= top and max_num_seqs not in full:
        full.append(max_num_seqs)
    return sorted(sizes), sorted(full)


def cudagraph_estimate(req: BudgetRequest, mnbt: int) -> tuple[int, str]:
    """kvplan's stand-in for ``profile_cudagraph_memory`` (gpu_model_runner.py, 0.20-0.33), which captures the first
    two graphs of each mode and estimates ``max over modes(first capture) + sum over modes(per graph x (n - 1))``:
    the first capture as the forward activations at the largest capture size (kvplan's activation estimate), each
    further graph at vLLM's own 1 MiB floor. A lower bound: measured per-graph costs are a few MiB."""
    seqs = min(req.max_num_seqs or default_max_num_seqs(req.memory_bytes, req.gpu_name), mnbt)
    piecewise, full = cudagraph_sizes(seqs, mnbt, req.gpu_name)
    first = activation_estimate(req.shape, tokens=max(piecewise), logit_rows=0, tp=req.tp)
    rest = (len(piecewise) - 1 + max(len(full) - 1, 0)) * VLLM_CUDAGRAPH_MIN_PER_GRAPH
    return first + rest, (
        f"profile_cudagraph_memory (subtracted from 0.20, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1): PIECEWISE="
        f"{len(piecewise)} (largest={max(piecewise)}), FULL={len(full)} (largest={max(full) if full else 0}); first "
        f"capture ~ forward activations at {max(piecewise)} tokens + {len(piecewise) - 1 + max(len(full) - 1, 0)} "
        "graphs x 1 MiB (vLLM's per-graph floor); kvplan's estimate, a lower bound")


def _cudagraph_shortfall_bytes(graphs: int) -> int:
    """How much smaller the budget can be than kvplan's: vLLM measures its CUDA graph estimate on the GPU, kvplan
    subtracts a lower bound (``graphs``); published 'Estimated CUDA graph memory' lines run up to the top of the
    published range."""
    return max(int(VLLM_CUDAGRAPH_PUBLISHED_GIB[1] * GiB) - graphs, 0)


def _version_forms_note(pool: PoolFacts) -> list[str]:
    forms = vllm_token_lines(pool)
    if pool.num_kv_cache_groups > 1 and len(set(forms.values())) > 1 and pool.num_blocks:
        return [
            "vLLM's 'GPU KV cache size' line depends on its version for this hybrid pool: "
            f"{forms['0.10-0.20']:,} tokens in 0.10-0.20 (num_blocks // {pool.num_kv_cache_groups} groups * "
            f"block size), {forms['>=0.21']:,} from 0.21 (max concurrency x max_model_len); the pool itself "
            f"holds {pool.num_blocks * pool.block_size:,} token slots per layer (--engine-version picks the form)"
        ]
    return []


def default_max_num_seqs(memory_bytes: int, gpu_name: str | None) -> int:
    """``max_num_seqs`` when not given (``get_batch_defaults``, ``vllm serve``)."""
    large = memory_bytes >= 70 * GiB and "a100" not in (gpu_name or "").lower()
    return VLLM_MAX_NUM_SEQS_LARGE if large else VLLM_MAX_NUM_SEQS_SMALL


def marlin_mxfp4_extra_bytes(shape: ModelShape) -> int:
    """Bytes the Marlin MXFP4 MoE layout adds to the experts (0 for other checkpoints): each expert matrix
    grows by ``pad(I, 128) * pad(H, 256) / (I * H)`` with I = expert intermediate size, H = hidden size."""
    if shape.quant_method != "mxfp4" or not shape.expert_bytes_per_gpu or not shape.experts_per_token:
        return 0
    inter, hidden = shape.mlp_width // shape.experts_per_token, shape.hidden_size
    padded = cdiv(inter, MARLIN_MXFP4_PAD_INTERMEDIATE) * MARLIN_MXFP4_PAD_INTERMEDIATE * cdiv(
        hidden, MARLIN_MXFP4_PAD_HIDDEN) * MARLIN_MXFP4_PAD_HIDDEN
    return shape.expert_bytes_per_gpu * padded // (inter * hidden) - shape.expert_bytes_per_gpu


def vllm_token_lines(pool: PoolFacts) -> dict[str, int]:
    """The ``GPU KV cache size`` figure of each vLLM formula for one pool (they differ for hybrid models)."""
    return {
        "0.10-0.20": pool.num_blocks // max(pool.num_kv_cache_groups, 1) * pool.block_size,
        ">=0.21": int(pool.max_concurrency * pool.max_model_len),
    }


def _bytes_per_block(pool: PoolFacts) -> int | None:
    """Bytes one block id takes over all tensors: ``page * group_size`` (None when pages differ)."""
    rows = {c.k_bytes_per_token + c.v_bytes_per_token for c in pool.caches if c.kind not in ("no_cache", "state")}
    counts = [sum(1 for i in c.layer_indices if i in pool.layers_on_rank) for c in pool.caches
              if c.kind not in ("no_cache", "state")]
    if len(rows) != 1 or any(c.kind == "state" for c in pool.caches):
        return None
    counts = [c for c in counts if c]
    lo, hi = min(counts), max(counts)
    if len(counts) == 1 or len(set(counts)) == 1:
        group_size = sum(counts) if len(counts) == 1 else counts[0]
    else:
        group_size = hi if hi < 1.5 * lo else lo
    return pool.block_size * rows.pop() * group_size


def kv_cache_group_count(counts: list[int]) -> int:
    """vLLM's hybrid allocator: layers of each kind in groups of ``group_size`` (the smallest kind's count
    unless the kinds are within 1.5x of each other), ``sum(cdiv(count, group_size))`` groups."""
    counts = [c for c in counts if c]
    if not counts:
        return 1
    lo, hi = min(counts), max(counts)
    group_size = hi if hi < 1.5 * lo else lo
    return sum(cdiv(c, group_size) for c in counts)


def _gib_text(num_bytes: int, v: tuple[int, ...]) -> str:
    """``%.2f`` up to 0.12; ``format_gib`` = ``str(round(b / GiB, 2))`` after (``1.7``, ``49.0``)."""
    return f"{num_bytes / GiB:.2f}" if v < (0, 13) else str(round(num_bytes / GiB, 2))


def _no_memory_text(v: tuple[int, ...]) -> str:
    text = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine"
    if v < (0, 13):
        return text + "."
    if v >= (0, 24):
        text += " (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
    return text + f". See {VLLM_DOCS_URL} for more details."


def _not_enough_text(pool: PoolFacts, v: tuple[int, ...]) -> str:
    """``check_enough_kv_cache_memory``'s ValueError, per version (0.10-0.12, 0.13-0.21, 0.24+ read)."""
    needed, avail, est = pool.kv_bytes_per_request, pool.available_kv_bytes, pool.estimated_max_model_len
    owner = "model's" if v >= (0, 24) else "models's"
    head = (f"To serve at least one request with the {owner} max seq len ({pool.max_model_len}), "
            f"({_gib_text(needed, v)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({_gib_text(avail, v)} GiB). ")
    if v < (0, 13):
        estimated = f"Based on the available memory, the estimated maximum model length is {est}." if est > 0 else ""
        return head + estimated + " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    estimated = f"Based on the available memory, the estimated maximum model length is {est}. " if est > 0 else ""
    cpu = " (which also controls CPU memory on the CPU backend)" if v >= (0, 24) else ""
    return (head + estimated + f"Try increasing `gpu_memory_utilization`{cpu} or decreasing `max_model_len` when "
            f"initializing the engine. See {VLLM_DOCS_URL} for more details.")
