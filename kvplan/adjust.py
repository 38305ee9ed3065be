"""Deployment adjustments: pure transforms that bend the dense formula the way deployments do.

A :class:`Deployment` holds every knob of ``kvplan estimate`` beyond batch, length and dtype
(engine profile, tensor and pipeline parallelism, blocks, beams, prefix sharing, windows,
quantization options, offload). The functions here are the engine-independent pieces:

- :func:`shard_for_tp` - the KV heads (or state channels) one tensor-parallel rank keeps;
- :func:`pp_partitions` - how many layers each pipeline stage holds (vLLM ``get_pp_indices``);
- :func:`round_to_blocks` - tokens rounded up to whole blocks;
- :func:`shared_token_slots` - token slots of a batch with beams and prefix sharing;
- :func:`parse_offload` - ``--offload 0.25`` or ``--offload layers:8``.

Every effect is reported as an :class:`Adjustment` {name, reason, before_bytes, after_bytes}.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from kvplan.dtypes import DEFAULT_GROUP_SIZE, lookup_dtype
from kvplan.errors import InputError
from kvplan.limits import MAX_BEAMS, MAX_PP, MAX_TP, check_limit
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
    StateSpec,
)
from kvplan.units import cdiv, parse_tokens

#: Default ``--residual-length``: recent tokens the Hugging Face QuantizedCache keeps in full precision.
DEFAULT_RESIDUAL_LENGTH = 128


@dataclass(frozen=True, kw_only=True, slots=True)
class Offload:
    """KV kept in host memory: a fraction of every GPU's cache, or whole layers."""

    fraction: float | None = None
    """Share of each GPU's cache bytes moved to the CPU (0 <= f <= 1)."""
    layers: int | None = None
    """Number of cache layers kept on the CPU, from the first layer on (llama.cpp keeps the first
    ``n_layer - n_gpu_layers`` layers on the host)."""

    def describe(self) -> str:
        return f"layers:{self.layers}" if self.layers is not None else f"{self.fraction:g}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Deployment:
    """How the model is served. The default is the ideal formula on one GPU."""

    engine: str = "ideal"
    """Engine profile: ideal, vllm, sglang, trtllm, llama.cpp, hf-dynamic or hf-static."""
    tp: int = 1
    """Tensor-parallel size (vLLM ``--tensor-parallel-size``)."""
    pp: int = 1
    """Pipeline-parallel size (vLLM ``--pipeline-parallel-size``)."""
    block_size: int | None = None
    """Tokens per block/page; ``None`` = the engine's default (ideal: no blocks)."""
    beams: int = 1
    """Beams per request (beam search keeps ``beams`` sequences per request)."""
    prompt_len: int | None = None
    """Prompt tokens of each request (part of ``seq_len``); needed by ``share_prefix``."""
    share_prefix: bool = False
    """Keep the prompt's full blocks once per request, not once per beam (prefix caching)."""
    shared_prefix_tokens: int = 0
    """Tokens of a prefix (system prompt) shared by every sequence of the batch."""
    no_window: bool = False
    """Account sliding/chunked layers as full attention (vLLM ``--disable-hybrid-kv-cache-manager``,
    llama.cpp ``--swa-full``)."""
    quant_group_size: int = DEFAULT_GROUP_SIZE
    """Values per scale/zero-point group of int8/int4/int2 caches."""
    residual_length: int = DEFAULT_RESIDUAL_LENGTH
    """Hugging Face QuantizedCache: recent tokens kept in full precision (hf engines only)."""
    offload: Offload | None = None
    max_num_batched_tokens: int | None = None
    """vLLM ``--max-num-batched-tokens`` (chunked-prefill budget); ``None`` = the documented default."""
    max_num_seqs: int | None = None
    """vLLM ``--max-num-seqs``: sequences scheduled at once (a check, never a silent cap)."""
    ubatch_size: int | None = None
    """llama.cpp ``--ubatch-size`` (``n_ubatch``, default 512): SWA cache slack."""
    kv_unified: bool = False
    """llama.cpp ``--kv-unified``: one cell pool shared by all sequences."""
    swa_full_tokens_ratio: float | None = None
    """SGLang ``--swa-full-tokens-ratio`` (default 0.8): SWA pool size / full pool size."""
    max_cache_len: int | None = None
    """hf-static ``max_cache_len``: tokens preallocated per sequence (default: ``seq_len``)."""
    cache_type_v: str | None = None
    """llama.cpp ``--cache-type-v``/``-ctv``: the V cache type when it differs from K (``--kv-dtype``/``-ctk``);
    None = the K type. Not an ``inputs`` key: the report says it in ``kv_dtype_source`` and an adjustment."""
    v_row_elems: int | None = None
    """llama.cpp with ``-fa off`` when the V width (KV heads x V head size) differs between layers: every layer's V
    row is padded to this many values, the widest (src/llama-kv-cache.cpp, TAG_V_CACHE_VARIABLE: V is stored
    transposed). None: each layer's own width. Not an ``inputs`` key: an engine note says it."""
    dtype: str | None = None
    """``--dtype`` (capacity): the dtype the engine holds the model in (:func:`kvplan.calc.served_geometry`), which
    ``--kv-dtype auto`` follows (vLLM's ``kv_cache_dtype auto`` is the model dtype as served). ``None``: the engine's
    own rule (``auto``), and none for the ideal formula; capacity sets it, so its ideal engine serves as vLLM does.
    Not an ``inputs`` key: capacity's inputs say it."""
    enable_prefix_caching: bool = False
    """Prefix caching on, as resolved for the engine and version (vLLM ``--enable-prefix-caching``): a vLLM
    recurrent-state layer then holds one more page per sequence (``mamba_cache_mode`` "align"). Not an ``inputs``
    key: capacity's notes say it."""

    def with_(self, **changes: object) -> Deployment:
        return replace(self, **changes)  # type: ignore[arg-type]

    def echo(self) -> dict[str, object]:
        """Every knob as the report's ``inputs`` echo it (plain JSON values)."""
        out: dict[str, object] = {}
        for name in (f.name for f in fields(self)):
            if name in NOT_ECHOED:
                continue
            knob = getattr(self, name)
            out[name] = knob.describe() if isinstance(knob, Offload) else knob
        return out


#: Deployment fields the report says elsewhere than the ``inputs`` echo (the report schema is unchanged).
NOT_ECHOED = ("cache_type_v", "enable_prefix_caching", "dtype", "v_row_elems")


@dataclass(frozen=True, kw_only=True, slots=True)
class Adjustment:
    """One bend of the formula, as the report shows it."""

    name: str
    reason: str
    before_bytes: int
    after_bytes: int
    scope: str = "all_gpus"
    """What the bytes count: ``all_gpus`` (the whole cache, every rank) or ``per_gpu`` (the most
    loaded GPU: pipeline stages and offload change only what one GPU holds)."""

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "reason": self.reason, "before_bytes": self.before_bytes,
                "after_bytes": self.after_bytes, "scope": self.scope}


def validate_deployment(dep: Deployment) -> None:
    """Reject values no engine could use; engine-specific checks live in the engine profiles."""
    for name, value, low in (("--tensor-parallel-size", dep.tp, 1), ("--pipeline-parallel-size", dep.pp, 1),
                             ("--beams", dep.beams, 1), ("--shared-prefix-tokens", dep.shared_prefix_tokens, 0),
                             ("--residual-length", dep.residual_length, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"{name} must be an integer >= {low}, got {value!r}", f"e.g. {name} {max(low, 2)}")
    for name, opt in (("--block-size", dep.block_size), ("--prompt-len", dep.prompt_len),
                      ("--max-num-batched-tokens", dep.max_num_batched_tokens), ("--max-num-seqs", dep.max_num_seqs),
                      ("--ubatch-size", dep.ubatch_size), ("--max-cache-len", dep.max_cache_len)):
        if opt is not None and (isinstance(opt, bool) or not isinstance(opt, int) or opt < 1):
            raise InputError(f"{name} must be a positive integer, got {opt!r}", f"e.g. {name} 16")
    if dep.swa_full_tokens_ratio is not None and not 0 < dep.swa_full_tokens_ratio <= 1:
        raise InputError(
            f"--swa-full-tokens-ratio must be in (0, 1], got {dep.swa_full_tokens_ratio}", "SGLang's default is 0.8"
        )
    if dep.share_prefix and dep.prompt_len is None:
        raise InputError("--share-prefix needs --prompt-len", "e.g. --prompt-len 1000 --share-prefix --beams 4")


def parse_offload(text: str | None) -> Offload | None:
    """``0.25`` (a fraction of every GPU's cache) or ``layers:N`` (N layers' caches on the CPU)."""
    if text is None:
        return None
    raw = str(text).strip().lower()
    if raw.startswith("layers:"):
        number = raw.removeprefix("layers:")
        if not number.isdigit() or int(number) < 1:
            raise InputError(f"--offload {text!r}: layers:N needs a positive layer count", "e.g. --offload layers:8")
        return Offload(layers=int(number))
    try:
        fraction = float(raw)
    except ValueError:
        raise InputError(f"--offload {text!r} is neither a fraction nor layers:N", "e.g. --offload 0.5 or --offload layers:8") from None
    if not 0 <= fraction <= 1:
        raise InputError(f"--offload fraction must be between 0 and 1, got {fraction}", "e.g. --offload 0.25")
    return Offload(fraction=fraction)


def round_to_blocks(num_tokens: int, block_size: int | None) -> int:
    """Tokens rounded up to whole blocks; unchanged without blocks."""
    if not block_size or block_size <= 1:
        return num_tokens
    return cdiv(num_tokens, block_size) * block_size


def as_full_attention(spec: LayerSpec) -> LayerSpec:
    """A sliding or chunked layer accounted as full attention (hybrid allocator off)."""
    if isinstance(spec, (SlidingWindowSpec, ChunkedLocalSpec)):
        return FullAttentionSpec(num_kv_heads=spec.num_kv_heads, head_size=spec.head_size, head_size_v=spec.head_size_v)
    return spec


def kv_heads_per_rank(num_kv_heads: int, tp: int, *, rule: str = "floor") -> int:
    """KV heads one TP rank keeps.

    ``floor`` (vLLM ``get_num_kv_heads``, SGLang): ``max(1, H_kv // tp)``, so heads are replicated
    when ``tp > H_kv``. ``ceil`` (TensorRT-LLM attention module): ``cdiv(H_kv, tp)``.
    A split where ``tp < H_kv`` does not divide ``H_kv`` (vLLM refuses it) uses ``cdiv`` under both
    rules, so the shards never hold fewer heads than the model has.
    """
    if rule == "ceil" or (tp < num_kv_heads and num_kv_heads % tp):
        return cdiv(num_kv_heads, tp)
    return max(1, num_kv_heads // tp)


def shard_for_tp(spec: LayerSpec, tp: int, *, rule: str = "floor") -> tuple[LayerSpec, list[str]]:
    """The spec one tensor-parallel rank holds, and notes on replication or uneven splits.

    Attention: ``kv_heads_per_rank``; MLA: the latent is replicated on every rank (vLLM and SGLang
    give MLA one KV "head"); states: channels split as vLLM ``mamba_utils`` splits them.
    """
    if tp == 1:
        return spec, []
    notes: list[str] = []
    if isinstance(spec, MLASpec):
        notes.append(f"MLA latent is replicated on each of the {tp} tensor-parallel ranks (one latent 'head'); one "
                     f"copy per request instead: SGLang --dp {tp} --enable-dp-attention, vLLM --data-parallel-size "
                     f"{tp} --enable-expert-parallel (kvplan capacity --dp {tp} --enable-dp-attention sizes it)")
        return spec, notes
    if isinstance(spec, AttentionSpec):
        heads = spec.num_kv_heads
        local = kv_heads_per_rank(heads, tp, rule=rule)
        if tp > heads:
            notes.append(
                f"--tensor-parallel-size {tp} > {heads} KV heads: each rank keeps {local} head(s), so the KV cache is "
                f"replicated {local * tp / heads:g}x across ranks ({local * tp} head copies for {heads} heads)"
            )
        elif heads % tp:
            notes.append(
                f"{heads} KV heads are not divisible by --tensor-parallel-size {tp}: kvplan gives each rank "
                f"cdiv = {local} (vLLM refuses this split; choose a tp that divides the KV heads)"
            )
        return replace(spec, num_kv_heads=local), notes
    if isinstance(spec, StateSpec):
        return _shard_state(spec, tp, notes), notes
    return spec, notes


def _split(value: int, tp: int, what: str, notes: list[str]) -> int:
    if value % tp:
        notes.append(f"{what} {value} is not divisible by --tensor-parallel-size {tp}; kvplan rounds up per rank")
    return cdiv(value, tp)


def _shard_state(spec: StateSpec, tp: int, notes: list[str]) -> StateSpec:
    shapes = dict(spec.shapes)
    out: list[tuple[str, tuple[int, ...]]] = []
    if spec.mixer == "mamba2" and "ssm" in shapes and "conv" in shapes:
        n_heads, head_dim, d_state = shapes["ssm"]
        kernel, conv_dim = shapes["conv"]
        d_inner = n_heads * head_dim
        n_groups = (conv_dim - d_inner) // (2 * d_state)
        # NOTE: vLLM extra_groups_for_head_shards: groups are replicated up to tp when not divisible.
        groups = n_groups if n_groups % tp == 0 else n_groups + (tp - n_groups)
        if groups != n_groups:
            notes.append(f"Mamba-2 n_groups {n_groups} replicated to {groups} for --tensor-parallel-size {tp} (vLLM)")
        out = [
            ("conv", (kernel, _split(d_inner + 2 * groups * d_state, tp, "Mamba-2 conv channels", notes))),
            ("ssm", (_split(n_heads, tp, "Mamba-2 heads", notes), head_dim, d_state)),
        ]
    else:
        for name, shape in spec.shapes:
            if spec.mixer == "mamba" and name == "ssm":
                out.append((name, (_split(shape[0], tp, "Mamba d_inner", notes), *shape[1:])))
            elif name == "conv":
                out.append((name, (shape[0], _split(shape[1], tp, f"{spec.mixer} conv channels", notes), *shape[2:])))
            else:  # ssm / kv_state of gated delta net and linear attention: heads first
                out.append((name, (_split(shape[0], tp, f"{spec.mixer} state heads", notes), *shape[1:])))
    return replace(spec, shapes=tuple(out))


def pp_partitions(num_layers: int, pp: int, *, extra_to_last: bool = False) -> list[int]:
    """Layers per pipeline stage as the engine's ``get_pp_indices`` splits them.

    Each stage gets ``L // pp``; the ``L % pp`` extra layers go one each to the stages before the
    last (vLLM ``vllm/distributed/utils.py``: the last stage also runs the LM head): 61 layers on 4
    stages -> [15, 15, 16, 15]; 32 on 3 -> [11, 11, 10]. ``extra_to_last``: to the last ``L % pp``
    stages instead (SGLang ``sglang/srt/distributed/utils.py``): 32 on 3 -> [10, 11, 11].
    """
    if pp > num_layers:
        raise InputError(
            f"--pipeline-parallel-size {pp} is larger than the model's {num_layers} layers",
            f"use at most --pipeline-parallel-size {num_layers}",
        )
    parts = [num_layers // pp] * pp
    extra = num_layers % pp
    for i in range(1, extra + 1) if extra_to_last else range(2, extra + 2):
        parts[-i] += 1
    return parts


def stage_of_layer(num_layers: int, pp: int, *, extra_to_last: bool = False) -> list[int]:
    """For each decoder layer index, the pipeline stage that holds it."""
    stages: list[int] = []
    for stage, count in enumerate(pp_partitions(num_layers, pp, extra_to_last=extra_to_last)):
        stages.extend([stage] * count)
    return stages


def shared_token_slots(
    *,
    seq_len: int,
    batch: int,
    beams: int,
    block_size: int | None,
    prompt_len: int | None,
    share_prefix: bool,
    shared_prefix_tokens: int,
) -> int:
    """Token slots one layer keeps for the whole batch when prefixes are shared.

    Sharing works on full blocks only (vLLM automatic prefix caching, SGLang radix cache):
    ``S_all`` = full blocks of the ``shared_prefix_tokens`` common to all ``batch`` requests, kept
    once; ``S_req`` = further full blocks of each request's prompt, kept once per request when
    ``share_prefix``; the rest is kept per beam, rounded up to blocks::

        slots = S_all + batch * (S_req + beams * round_up(seq_len - S_all - S_req))
    """
    bs = block_size if block_size and block_size > 1 else 1
    shared_all = min(shared_prefix_tokens, seq_len) // bs * bs
    shared_req = 0
    if share_prefix and prompt_len is not None:
        shared_req = (min(prompt_len, seq_len) - shared_all) // bs * bs
        shared_req = max(shared_req, 0)
    rest = seq_len - shared_all - shared_req
    return shared_all + batch * (shared_req + beams * round_to_blocks(rest, bs))


def deployment_from_flags(
    *,
    engine: str = "ideal",
    tp: int = 1,
    pp: int = 1,
    block_size: int | None = None,
    beams: int = 1,
    prompt_len: str | int | None = None,
    share_prefix: bool = False,
    shared_prefix_tokens: str | int | None = None,
    no_window: bool = False,
    quant_group_size: int = DEFAULT_GROUP_SIZE,
    residual_length: int = DEFAULT_RESIDUAL_LENGTH,
    offload: str | None = None,
    max_num_batched_tokens: str | int | None = None,
    max_num_seqs: int | None = None,
    ubatch_size: int | None = None,
    kv_unified: bool = False,
    swa_full_tokens_ratio: float | None = None,
    max_cache_len: str | int | None = None,
    cache_type_v: str | None = None,
    v_row_elems: int | None = None,
) -> Deployment:
    """A validated Deployment from CLI-style values (token counts accept ``4k``)."""
    check_limit(tp, MAX_TP, "--tensor-parallel-size")
    check_limit(pp, MAX_PP, "--pipeline-parallel-size")
    check_limit(beams, MAX_BEAMS, "--beams")

    def tokens(value: str | int | None, what: str) -> int | None:
        return None if value is None else parse_tokens(value, what=what)

    dep = Deployment(
        engine=engine, tp=tp, pp=pp, block_size=block_size, beams=beams,
        prompt_len=tokens(prompt_len, "--prompt-len"), share_prefix=share_prefix,
        shared_prefix_tokens=tokens(shared_prefix_tokens, "--shared-prefix-tokens") or 0,
        no_window=no_window, quant_group_size=quant_group_size, residual_length=residual_length,
        offload=parse_offload(offload),
        max_num_batched_tokens=tokens(max_num_batched_tokens, "--max-num-batched-tokens"),
        max_num_seqs=max_num_seqs, ubatch_size=ubatch_size, kv_unified=kv_unified,
        swa_full_tokens_ratio=swa_full_tokens_ratio, max_cache_len=tokens(max_cache_len, "--max-cache-len"),
        cache_type_v=value_type_name(cache_type_v), v_row_elems=v_row_elems,
    )
    validate_deployment(dep)
    return dep


def value_type_name(text: str | None) -> str | None:
    """llama.cpp ``--cache-type-v`` as kvplan's dtype name (``f16`` -> ``fp16``); None stays None."""
    if text is None:
        return None
    return lookup_dtype(text, what="--cache-type-v").name

