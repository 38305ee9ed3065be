"""The value types of a capacity answer: what `kvplan capacity` is asked (:class:`CapacityInputs`) and what
it answers (:class:`Capacity`). Below the budget rule, the data-parallel rules and the engine log, which
read them, and below :mod:`kvplan.fit`, which makes them."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.adjust import Deployment, Offload
from kvplan.engines.base import Budget
from kvplan.geometry import ModelGeometry
from kvplan.gpus import GpuSpec
from kvplan.models import WeightsEstimate


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityInputs:
    """What `kvplan capacity` was asked: GPU, engine, layout and limits."""

    gpu: GpuSpec | None
    """None with ``kv_budget_bytes``: the answers that need a GPU (decode floor) are left out."""
    engine: str = "vllm"
    tp: int = 1
    pp: int = 1
    num_gpus: int | None = None
    kv_dtype: str = "auto"
    dtype: str = "auto"
    """Weight dtype, as vLLM's ``--dtype`` (``auto`` = the engine's rule: 16 bits for float32 checkpoints)."""
    max_model_len: int | None = None
    """Tokens per request (vLLM ``--max-model-len``); None = the model's maximum context."""
    batch: int = 1
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_num_batched_tokens: int | None = None
    reserve_bytes: int | None = None
    """Replaces the activation/overhead estimate."""
    kv_budget_bytes: int | None = None
    kv_budget_per_rank: tuple[int, ...] | None = None
    """``--kv-budget`` as a list, one per rank in vLLM's global order (stage-major: pp stage x tp + tp rank):
    ``kv_budget_bytes`` is then their minimum and each pipeline stage is sized by its own smallest rank."""
    """KV bytes per GPU, as an engine logs them: skips the budget rule."""
    engine_version: str | None = None
    """The engine release whose log lines ``engine_log`` follows (None: the engine's default in kvplan)."""
    dp: int = 1
    """Data-parallel size (vLLM ``--data-parallel-size``, SGLang ``--dp``)."""
    enable_dp_attention: bool = False
    """SGLang ``--enable-dp-attention`` / vLLM DP with ``--enable-expert-parallel``: attention (and the MLA
    latent) is split over ``dp`` ranks instead of replicated over ``tp`` ranks."""
    kv_unified: bool = False
    """llama.cpp ``-kvu``: one cell pool shared by all slots."""
    ubatch_size: int | None = None
    """llama.cpp ``--ubatch-size``."""
    tensor_split: tuple[float, ...] | None = None
    """llama.cpp ``--tensor-split``: layer proportions per device (per-device KV buffers)."""
    cache_type_v: str | None = None
    """llama.cpp ``--cache-type-v``: the V cache type when it differs from K (``kv_dtype``)."""
    no_window: bool = False
    """``--no-window``/``--swa-full``: sliding and chunked layers hold every token (llama.cpp ``--swa-full``, vLLM
    ``--disable-hybrid-kv-cache-manager``)."""
    max_num_seqs: int | None = None
    """vLLM ``--max-num-seqs``: the sampler rows of the profile run (None: vLLM's default for the GPU)."""
    enforce_eager: bool = False
    """vLLM ``--enforce-eager``: no CUDA graph memory in the budget."""
    cpu_offload_bytes: int = 0
    """vLLM/SGLang ``--cpu-offload-gb`` in bytes: weights per GPU kept in host memory."""
    offload: Offload | None = None
    """KV layers in host memory: llama.cpp ``-ngl`` below all layers, or ``-nkvo`` (every layer)."""
    enable_prefix_caching: bool | None = None
    """vLLM ``--enable-prefix-caching``/``--no-enable-prefix-caching``; None = the engine version's default."""
    v_row_elems: int | None = None
    """llama.cpp ``-fa off`` with V widths that differ between layers: the padded V row (:class:`Deployment`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StagePlan:
    """One pipeline stage's ranks as the pool sees them (``Capacity.stages``)."""

    stage: int
    ranks: tuple[int, ...]
    """Its global ranks (vLLM's order, stage-major: stage x tp + tp rank)."""
    num_layers: int
    """Decoder layers the stage holds (the engine's ``get_pp_indices``)."""
    weights_bytes_per_gpu: int | None
    """Weights on one GPU of the stage (None: given as --kv-budget, or only known as a total)."""
    kv_budget_bytes: int
    """KV bytes of the stage's rank with the least room."""
    low_rank: int
    """That rank."""
    num_blocks: int | None
    """Blocks the stage's own budget and layers make (a block-pool engine; None otherwise)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Capacity:
    """`kvplan capacity`'s answer: what fits on the GPUs, and why."""

    geometry: ModelGeometry
    inputs: CapacityInputs
    deployment: Deployment
    kv_dtype_name: str
    kv_dtype_source: str
    max_model_len: int
    max_model_len_source: str
    weights: WeightsEstimate | None
    budget: Budget
    fits: bool
    block_size: int
    num_blocks: int
    max_tokens: int
    max_concurrency: float
    max_concurrent_requests: int
    max_context_len: int
    max_context_limit: str
    """``memory`` or ``model maximum`` (the search stopped at the model's context)."""
    min_tp: int | None
    min_num_gpus: int | None
    kv_bytes_per_request: int
    """KV bytes one request at max_model_len needs on the busiest GPU (engine rounding)."""
    kv_bytes_needed: int
    """``batch`` requests at max_model_len."""
    decode_bytes_per_step: int | None
    decode_floor_seconds: float | None
    decode_tokens_per_s: float | None
    suggestions: tuple[str, ...]
    checkpoint_dtype: str | None = None
    """The checkpoint's own dtype when the engine holds the weights in another (``weights.dtype``)."""
    notes: tuple[str, ...] = field(default=())
    engine_log: dict[str, object] | None = None
    """The engine's start-up log lines and their numbers (:mod:`kvplan.engine_log`)."""
    stages: tuple[StagePlan, ...] | None = None
    """Per pipeline stage, its ranks' room and blocks, when ranks differ (pp > 1, or --kv-budget per rank)."""
    limiting_rank: int | None = None
    """The rank whose room sizes the pool (None when the ranks are alike)."""
    kv_bytes_range: tuple[int, int] | None = None
    """A derived budget's reach: (budget less ``shortfall_bytes``, budget plus ``uncertainty_bytes``); None when
    given (--kv-budget) or when the engine profile gives no spread."""
    num_blocks_range: tuple[int, int] | None = None
    """The blocks (token slots // block size for a token pool) each end of ``kv_bytes_range`` makes."""
    max_concurrency_range: tuple[float, float] | None = None
    """The max concurrency each end of ``kv_bytes_range`` makes."""
