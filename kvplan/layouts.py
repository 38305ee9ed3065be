"""Attention layouts side by side at one model size: MHA, GQA, MQA, MLA and sliding windows.

Pure: a base (a parsed model, or bare dims) and variant names in, a :class:`Comparison` out; no
printing, no IO. Every variant is a :class:`ModelGeometry` sized by :func:`kvplan.calc.estimate`,
so the numbers are the same ones ``kvplan estimate`` gives for that layout.

Variant grammar (case-insensitive)::

    mha              KV heads = query heads, full attention
    gqa | gqa:N      N KV heads (default 8), full attention
    mqa              1 KV head, full attention
    mla | mla:R+P    one latent row of R + P values per token (default 512+64, DeepSeek-V3)
    swa:W            every attention layer keeps the last W tokens (the base's KV heads)
    hybrid:W:R       R local layers (window W) per global one, as Gemma 3 (hybrid:1024:5)
    model            the base model exactly as configured (needs --model)
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.adjust import Deployment
from kvplan.calc import Estimate, estimate
from kvplan.errors import ConfigError, InputError, KvplanError
from kvplan.geometry import ModelGeometry, Provenance
from kvplan.limits import MAX_DIM, MAX_LAYERS, check_limit
from kvplan.specs import (
    AttentionSpec,
    ChunkedLocalSpec,
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
)
from kvplan.units import parse_tokens

# NOTE: the example model when no --model or dims are given: 32 layers, 32 heads of dim 128 (hidden 4096),
# fp16, 4096 tokens; Llama-2-7B's attention, the model most KV-cache explanations start from.
SEED_LAYERS = 32
SEED_HEADS = 32
SEED_HEAD_DIM = 128
SEED_SEQ_LEN = 4096
SEED_DTYPE = "float16"

DEFAULT_GQA_KV_HEADS = 8
DEFAULT_MLA_RANK = 512
DEFAULT_MLA_ROPE = 64
DEFAULT_VARIANTS = ("mha", "gqa", "mqa")
KINDS = ("mha", "gqa", "mqa", "mla", "swa", "hybrid", "model")

MEMORY_ONLY_NOTE = "compare sizes memory only, not model quality or measured speed"
DECODE_NOTE = ("read/step: the KV bytes one decode step reads (every token each layer holds, whole batch); decode "
               "is memory-bound, so step time scales with it")
VARIANT_HINT = "variants: mha, gqa, gqa:N, mqa, mla, mla:RANK+ROPE, swa:W, hybrid:W:R, model"

#: Self-attention layers a variant replaces; state, no-cache and cross-attention layers stay.
SELF_ATTENTION = (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalSpec, MLASpec)


@dataclass(frozen=True, kw_only=True, slots=True)
class Base:
    """The model size every variant shares."""

    geometry: ModelGeometry
    """The base as configured (for bare dims: full-attention MHA)."""
    num_attention_heads: int
    """Query heads: MHA's KV heads, and what GQA's N must divide."""
    head_size: int
    """K head dim of the MHA-family variants."""
    head_size_v: int
    """V head dim of the MHA-family variants."""
    from_model: bool
    source_label: str
    """``--model``, ``--layers/--heads/--head-dim`` or ``default: the 32-layer, 32-head, head-dim-128 example model``."""
    notes: tuple[str, ...] = ()

    @property
    def num_attention_layers(self) -> int:
        return sum(isinstance(spec, SELF_ATTENTION) for spec in self.geometry.layers)


@dataclass(frozen=True, kw_only=True, slots=True)
class Variant:
    """One attention layout, parsed from its name."""

    kind: str
    """One of :data:`KINDS`."""
    num_kv_heads: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    window: int | None = None
    local_per_global: int | None = None
    kv_dtype: str | None = None
    """Set when one run compares several KV dtypes (--kv-dtype bf16,fp8): the name ends in ``@fp8``."""

    @property
    def name(self) -> str:
        """The canonical spelling: ``gqa:8``, ``mla:512+64``, ``hybrid:1024:5`` (``gqa:8@fp8`` with a dtype)."""
        return self.layout_name + (f"@{self.kv_dtype}" if self.kv_dtype else "")

    @property
    def layout_name(self) -> str:
        if self.kind == "gqa":
            return f"gqa:{self.num_kv_heads}"
        if self.kind == "mla":
            return f"mla:{self.kv_lora_rank}+{self.qk_rope_head_dim}"
        if self.kind == "swa":
            return f"swa:{self.window}"
        if self.kind == "hybrid":
            return f"hybrid:{self.window}:{self.local_per_global}"
        return self.kind


@dataclass(frozen=True, kw_only=True, slots=True)
class VariantResult:
    """One attention layout of a comparison, with its estimate and ratio to MHA."""

    variant: Variant
    description: str
    estimate: Estimate
    ratio_to_mha: float
    sweep: tuple[tuple[int, int], ...]
    """(seq_len, kv_cache_bytes) for every --sweep-seq length."""

    @property
    def kv_cache_bytes(self) -> int:
        return self.estimate.kv_cache_bytes

    @property
    def kv_cache_bytes_per_gpu(self) -> int:
        """On the GPU that holds the most (with --tp, MQA and MLA are replicated, not split)."""
        return self.estimate.kv_cache_bytes_per_gpu

    @property
    def decode_read_bytes_per_step(self) -> int:
        return decode_read_bytes(self.estimate)


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """`kvplan compare`'s answer: each layout's KV cache beside the MHA reference."""

    base: Base
    mha: Estimate
    """The reference every ratio divides by (computed even when ``mha`` is not listed)."""
    mha_sweep: tuple[tuple[int, int], ...]
    variants: tuple[VariantResult, ...]
    seq_len: int
    seq_len_source: str
    sweep_seq_lens: tuple[int, ...]
    notes: tuple[str, ...]


# ---- bases ---------------------------------------------------------------------------------------
def base_from_dims(
    *,
    layers: int | None = None,
    heads: int | None = None,
    head_dim: int | None = None,
    hidden_size: int | None = None,
) -> Base:
    """A full-attention MHA base from bare dims; what is not given comes from the example model."""
    for flag, value in (("--layers", layers), ("--heads", heads), ("--head-dim", head_dim), ("--hidden-size", hidden_size)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{flag} must be a positive integer, got {value!r}", f"e.g. {flag} 32")
    check_limit(layers, MAX_LAYERS, "--layers")
    for flag, value in (("--heads", heads), ("--head-dim", head_dim), ("--hidden-size", hidden_size)):
        check_limit(value, MAX_DIM, flag)
    if head_dim is not None and hidden_size is not None:
        raise InputError(
            "pass --head-dim or --hidden-size, not both",
            "the KV cache needs only the head dim; --hidden-size H means head dim H / --heads",
        )
    notes: list[str] = []
    given = any(v is not None for v in (layers, heads, head_dim, hidden_size))
    if not given:
        notes.append(
            f"no --model or dims given: the example model, {SEED_LAYERS} layers x {SEED_HEADS} heads x "
            f"head dim {SEED_HEAD_DIM}, fp16 (Llama-2-7B's attention)"
        )
    num_layers = layers if layers is not None else SEED_LAYERS
    num_heads = heads if heads is not None else SEED_HEADS
    if hidden_size is not None:
        if hidden_size % num_heads:
            raise InputError(
                f"--hidden-size {hidden_size} is not divisible by {num_heads} heads",
                "pass --head-dim directly, or a --heads that divides the hidden size",
            )
        head_size = hidden_size // num_heads
        notes.append(f"head dim = --hidden-size / heads = {hidden_size} // {num_heads} = {head_size}")
    else:
        head_size = head_dim if head_dim is not None else SEED_HEAD_DIM
    if given:
        defaulted = [f"{flag} {value}" for flag, value, chosen in (
            ("--layers", SEED_LAYERS, layers), ("--heads", SEED_HEADS, heads),
            ("--head-dim", SEED_HEAD_DIM, head_dim if hidden_size is None else hidden_size),
        ) if chosen is None]
        if defaulted:
            notes.append(f"not given, from the example model: {', '.join(defaulted)}")
    spec = FullAttentionSpec(num_kv_heads=num_heads, head_size=head_size, head_size_v=head_size)
    label = "--layers/--heads/--head-dim" if given else "default: the 32-layer, 32-head, head-dim-128 example model"
    geometry = ModelGeometry(
        model_id=f"{num_layers}L-{num_heads}H-d{head_size}",
        model_type="custom",
        family="dims",
        architecture=None,
        layers=(spec,) * num_layers,
        num_hidden_layers=num_layers,
        max_context_tokens=None,
        max_context_source=None,
        default_encoder_len=None,
        default_encoder_len_source=None,
        config_dtype=SEED_DTYPE,
        config_dtype_source="the example model",
        provenance=(
            Provenance(field="num_hidden_layers", value=num_layers, source="--layers" if layers else "default: the example model"),
            Provenance(field="num_attention_heads", value=num_heads, source="--heads" if heads else "default: the example model"),
            Provenance(field="head_dim", value=head_size, source=_head_dim_source(head_dim, hidden_size)),
        ),
    )
    return Base(
        geometry=geometry, num_attention_heads=num_heads, head_size=head_size, head_size_v=head_size,
        from_model=False, source_label=label, notes=tuple(notes),
    )


def _head_dim_source(head_dim: int | None, hidden_size: int | None) -> str:
    if head_dim is not None:
        return "--head-dim"
    if hidden_size is not None:
        return "derived: --hidden-size // heads"
    return "default: the example model"


def base_from_model(geometry: ModelGeometry) -> Base:
    """The base of a parsed model: its query heads and the head dims its MHA form would have."""
    attention = [spec for spec in geometry.layers if isinstance(spec, SELF_ATTENTION)]
    if not attention:
        raise ConfigError(
            f"{geometry.model_id} has no attention layers (only {_kinds_text(geometry.layers)}), "
            "so there is no attention layout to compare",
            "pick a transformer model, or give dims: --layers 32 --heads 32 --head-dim 128",
        )
    values = {p.field: p.value for p in reversed(geometry.provenance)}  # the first record wins
    heads = values.get("num_attention_heads")
    if not isinstance(heads, int):
        raise ConfigError(
            f"{geometry.model_id}: the number of query heads is unknown, so MHA and GQA cannot be built",
            "give dims instead: --layers L --heads H --head-dim D",
        )
    notes: list[str] = []
    plain = [spec for spec in attention if isinstance(spec, AttentionSpec)]
    if plain:
        head_size, head_size_v = plain[0].head_size, plain[0].head_size_v
        if len({(s.head_size, s.head_size_v) for s in plain}) > 1:
            notes.append(f"attention layers differ in head dims; MHA/GQA/MQA use the first's, {head_size}/{head_size_v}")
    else:
        nope, rope, v_dim = values.get("qk_nope_head_dim"), values.get("qk_rope_head_dim"), values.get("v_head_dim")
        if not (isinstance(nope, int) and isinstance(rope, int) and isinstance(v_dim, int)):
            raise ConfigError(
                f"{geometry.model_id}: an MLA model without qk_nope_head_dim, qk_rope_head_dim and v_head_dim, "
                "so the MHA it replaces is unknown",
                "add them to the config, or give dims: --layers L --heads H --head-dim D",
            )
        head_size, head_size_v = nope + rope, v_dim
        notes.append(
            f"MLA base: MHA/GQA/MQA use the heads MLA replaces, K head dim qk_nope_head_dim + qk_rope_head_dim "
            f"= {nope} + {rope} = {head_size}, V head dim v_head_dim = {v_dim}"
        )
    return Base(
        geometry=geometry, num_attention_heads=heads, head_size=head_size, head_size_v=head_size_v,
        from_model=True, source_label="--model", notes=tuple(notes),
    )


def kept_layers_note(base: Base) -> str | None:
    """Which layers every variant keeps as configured (cross-attention, recurrent state, no-cache)."""
    kept: dict[str, int] = {}
    for spec in base.geometry.layers:
        if not isinstance(spec, SELF_ATTENTION):
            kept[spec.kind] = kept.get(spec.kind, 0) + 1
    kept.pop("no_cache", None)
    if not kept:
        return None
    what = ", ".join(f"{count} {kind.replace('_', '-')} layers" for kind, count in kept.items())
    note = (
        f"variants change the {base.num_attention_layers} self-attention layers only; {what} keep the model's "
        "layout in every variant, so their bytes are in every total and ratios to MHA stay above the head ratio"
    )
    return note


def _kinds_text(layers: Sequence[LayerSpec]) -> str:
    return ", ".join(dict.fromkeys(spec.kind for spec in layers)) or "no layers"


# ---- variants ------------------------------------------------------------------------------------
def parse_variant(text: str, base: Base, *, tp: int = 1) -> Variant:
    """Parse and check one variant name against ``base``; impossible layouts raise InputError."""
    raw = str(text).strip()
    kind, colon, arg = raw.lower().partition(":")
    if colon and not arg.strip():
        raise InputError(f"variant {raw!r} has an empty argument after ':'", VARIANT_HINT)
    if kind not in KINDS:
        close = difflib.get_close_matches(kind, KINDS, n=1)
        raise InputError(
            f"unknown variant {raw!r}" + (f" (did you mean {close[0]!r}?)" if close else ""), VARIANT_HINT
        )
    heads = base.num_attention_heads
    if kind in ("mha", "mqa", "model"):
        if arg:
            raise InputError(f"variant {kind!r} takes no argument, got {raw!r}", VARIANT_HINT)
        if kind == "model" and not base.from_model:
            raise InputError("variant 'model' needs a --model to take the layout from", "e.g. --model meta-llama/Llama-3.1-8B")
        return Variant(kind=kind, num_kv_heads={"mha": heads, "mqa": 1}.get(kind))
    if kind == "gqa":
        n = _int_arg(arg, raw, "gqa:N, e.g. gqa:8") if arg else default_gqa_kv_heads(heads, tp)
        if n > heads:
            raise InputError(
                f"{raw}: {n} KV heads is more than the {heads} query heads",
                f"use gqa:N with N dividing {heads}: {_divisors(heads)}",
            )
        if heads % n:
            raise InputError(
                f"{raw}: {n} KV heads do not divide the {heads} query heads into equal groups",
                f"use gqa:N with N dividing {heads}: {_divisors(heads)}",
            )
        return Variant(kind="gqa", num_kv_heads=n)
    if kind == "mla":
        rank, rope = DEFAULT_MLA_RANK, DEFAULT_MLA_ROPE
        if arg:
            rank_text, plus, rope_text = arg.partition("+")
            if not plus:
                raise InputError(
                    f"{raw}: expected mla:RANK+ROPE", "e.g. mla:512+64 (DeepSeek-V3's kv_lora_rank + qk_rope_head_dim)"
                )
            rank = _int_arg(rank_text, raw, "mla:RANK+ROPE, e.g. mla:512+64")
            rope = _int_arg(rope_text, raw, "mla:RANK+ROPE, e.g. mla:512+64", allow_zero=True)
        return Variant(kind="mla", num_kv_heads=1, kv_lora_rank=rank, qk_rope_head_dim=rope)
    # windowed variants keep the base's own KV heads, which MLA layers do not have
    if any(isinstance(spec, MLASpec) for spec in base.geometry.layers):
        raise InputError(
            f"{raw}: {base.geometry.model_id} uses MLA, and kvplan has no sliding-window MLA layout",
            "compare windows on a GQA/MHA base: --model meta-llama/Llama-3.1-8B or --layers/--heads/--head-dim",
        )
    if kind == "swa":
        if not arg:
            raise InputError(f"{raw}: a window is needed", "swa:W, e.g. swa:4096 or swa:4k")
        return Variant(kind="swa", window=parse_tokens(arg, what=f"{raw}: window"))
    window_text, colon, ratio_text = arg.partition(":")
    if not arg or not colon:
        raise InputError(
            f"{raw}: expected hybrid:W:R (window W, R local layers per global one)", "e.g. hybrid:1024:5 (Gemma 3)"
        )
    window = parse_tokens(window_text, what=f"{raw}: window")
    return Variant(kind="hybrid", window=window, local_per_global=_int_arg(ratio_text, raw, "hybrid:1024:5"))


def default_gqa_kv_heads(num_attention_heads: int, tp: int = 1) -> int:
    """Bare ``gqa``: 8 KV heads, or (when 8 does not divide the query heads, e.g. Whisper's 20 or
    T5's 12) the largest divisor of the query heads below 8, so the default list works on any base.
    With ``tp`` > 1 the divisor must also split over the ranks as vLLM requires (one divides the other)."""
    divisors = [d for d in range(1, min(DEFAULT_GQA_KV_HEADS, num_attention_heads) + 1) if num_attention_heads % d == 0]
    return max((d for d in divisors if d % tp == 0 or tp % d == 0), default=max(divisors))


def _int_arg(text: str, raw: str, example: str, *, allow_zero: bool = False) -> int:
    text = text.strip()
    if not text.isdigit() or (int(text) == 0 and not allow_zero):
        what = "a non-negative" if allow_zero else "a positive"
        raise InputError(f"{raw}: {text!r} is not {what} integer", example)
    return int(text)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def variant_geometry(base: Base, variant: Variant) -> ModelGeometry:
    """The base with every self-attention layer replaced by the variant's; other layers stay."""
    if variant.kind == "model":
        return base.geometry
    layers: list[LayerSpec] = []
    position = 0  # index among attention layers: hybrid's pattern counts only them
    for spec in base.geometry.layers:
        if not isinstance(spec, SELF_ATTENTION):
            layers.append(spec)
            continue
        layers.append(_replace_layer(base, variant, spec, position))
        position += 1
    return replace(base.geometry, layers=tuple(layers), notes=())


def _replace_layer(base: Base, variant: Variant, spec: LayerSpec, position: int) -> LayerSpec:
    if variant.kind in ("mha", "gqa", "mqa"):
        assert variant.num_kv_heads is not None
        return FullAttentionSpec(num_kv_heads=variant.num_kv_heads, head_size=base.head_size, head_size_v=base.head_size_v)
    if variant.kind == "mla":
        assert variant.kv_lora_rank is not None and variant.qk_rope_head_dim is not None
        return MLASpec(kv_lora_rank=variant.kv_lora_rank, qk_rope_head_dim=variant.qk_rope_head_dim)
    assert isinstance(spec, AttentionSpec) and variant.window is not None
    heads, k_dim, v_dim = spec.num_kv_heads, spec.head_size, spec.head_size_v
    if variant.kind == "hybrid":
        assert variant.local_per_global is not None
        # NOTE: Gemma 3's pattern: R local layers, then one global, repeated (layer i is global when
        # (i + 1) % (R + 1) == 0).
        if (position + 1) % (variant.local_per_global + 1) == 0:
            return FullAttentionSpec(num_kv_heads=heads, head_size=k_dim, head_size_v=v_dim)
    return SlidingWindowSpec(num_kv_heads=heads, head_size=k_dim, head_size_v=v_dim, sliding_window=variant.window)


def describe(base: Base, variant: Variant, geometry: ModelGeometry) -> str:
    """One short line on the layout, for people."""
    heads = base.num_attention_heads
    if variant.kind == "mha":
        return f"{heads} KV heads = query heads"
    if variant.kind == "gqa":
        n = variant.num_kv_heads or 1
        return f"{n} KV heads, {heads // n} query heads each"
    if variant.kind == "mqa":
        return f"1 KV head for {heads} query heads"
    if variant.kind == "mla":
        return f"latent {variant.kv_lora_rank} + rope {variant.qk_rope_head_dim}"
    counts: dict[str, int] = {}
    for spec in geometry.layers:
        counts[spec.kind] = counts.get(spec.kind, 0) + 1
    if variant.kind == "swa":
        return f"window {variant.window:,} on all {counts.get('sliding_window', 0)} layers"
    if variant.kind == "hybrid":
        return f"{counts.get('sliding_window', 0)} local (window {variant.window:,}) + {counts.get('full_attention', 0)} global"
    short = {"full_attention": "full", "sliding_window": "sliding", "chunked_local": "chunked"}
    return "as configured: " + " + ".join(f"{count} {short.get(kind, kind)}" for kind, count in counts.items())


# ---- the comparison ------------------------------------------------------------------------------
def parse_seq_list(text: str, *, what: str = "--sweep-seq") -> tuple[int, ...]:
    """``"1k,4k,32k,128k"`` -> (1024, 4096, 32768, 131072), sorted, duplicates dropped."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items) or not all(items):
        raise InputError(f"{what} {text!r} has an empty entry", "comma-separated lengths, e.g. 1k,4k,32k,128k")
    return tuple(sorted({parse_tokens(item, what=what) for item in items}))


def compare(
    base: Base,
    variants: Sequence[str] = (),
    *,
    batch: int = 1,
    seq_len: int | None = None,
    kv_dtype: str = "auto",
    sweep_seq_lens: Sequence[int] = (),
    deployment: Deployment | None = None,
) -> Comparison:
    """Size every variant of ``base`` at one batch, length and dtype (and at each sweep length),
    served as ``deployment`` (engine profile, --tp, --block-size; default: the ideal formula, one GPU)."""
    dep = deployment or Deployment()
    names = list(variants) or ([*DEFAULT_VARIANTS] if not base.from_model else ["model", *DEFAULT_VARIANTS])
    parsed = list({v.name: v for v in (parse_variant(name, base, tp=dep.tp) for name in names)}.values())
    dtypes = [d.strip() for d in kv_dtype.split(",")]
    if len(dtypes) > 1 and not all(dtypes):
        raise InputError(f"--kv-dtype {kv_dtype} has an empty item", "e.g. --kv-dtype bf16,fp8")
    if len(set(dtypes)) < len(dtypes):
        raise InputError(f"--kv-dtype {kv_dtype} names a dtype twice", "e.g. --kv-dtype bf16,fp8")
    dtypes = dtypes if dtypes != [""] else ["auto"]
    kv_dtype = dtypes[0]  # MHA, the reference of every ratio, at the first dtype
    if len(dtypes) > 1:
        parsed = [replace(v, kv_dtype=d) for v in parsed for d in dtypes]
    notes = [*base.notes]
    heads = base.num_attention_heads
    plain_gqa = default_gqa_kv_heads(heads, dep.tp)
    if any(str(name).strip().lower() == "gqa" for name in names) and plain_gqa != DEFAULT_GQA_KV_HEADS:
        why = (f"do not divide the {heads} query heads" if heads % DEFAULT_GQA_KV_HEADS or heads < DEFAULT_GQA_KV_HEADS
               else f"do not split over --tp {dep.tp}")
        split = f" that splits over --tp {dep.tp}" if dep.tp > 1 else ""
        notes.append(
            f"gqa: {DEFAULT_GQA_KV_HEADS} KV heads {why}, so plain gqa uses {plain_gqa} (the largest divisor of "
            f"{heads} up to {DEFAULT_GQA_KV_HEADS}{split}); pick another with gqa:N"
        )
    kept = kept_layers_note(base)
    if kept:
        notes.append(kept)
    if seq_len is not None:
        seq_source = "--seq-len"
    elif not base.from_model:
        seq_len, seq_source = SEED_SEQ_LEN, f"default: the example model's {SEED_SEQ_LEN} tokens"
    else:
        seq_source = ""  # the model's maximum context, as estimate resolves it
    sweep_lens = tuple(sorted(set(sweep_seq_lens)))
    # NOTE: the sweep sizes a few layouts at a few lengths, some more than once (MHA is the reference and
    # usually a variant too): each is sized once per call; ratios and sweeps need bytes only, no walk.
    sized: dict[tuple[str, str, int | None], Estimate] = {}

    def size(variant: Variant, dtype: str, length: int | None) -> Estimate:
        key = (variant.layout_name, dtype, length)
        est = sized.get(key)
        if est is None:
            est = sized[key] = estimate(variant_geometry(base, variant), batch=batch, seq_len=length, kv_dtype=dtype,
                                        deployment=dep, adjustments=False)
        return est

    def sweep_of(variant: Variant, dtype: str = kv_dtype) -> tuple[tuple[int, int], ...]:
        return tuple((length, size(variant, dtype, length).kv_cache_bytes) for length in sweep_lens)

    mha_variant = Variant(kind="mha", num_kv_heads=base.num_attention_heads)
    mha = size(mha_variant, kv_dtype, seq_len)
    if not seq_source:
        seq_source = mha.seq_len_source
    assert mha.seq_len is not None
    resolved_len = mha.seq_len
    notes.extend(mha.notes)

    results = []
    for variant in parsed:
        geometry = variant_geometry(base, variant)
        try:
            est = size(variant, variant.kv_dtype or kv_dtype, resolved_len)
        except KvplanError as exc:  # name the variant: the user may not have typed it (plain gqa, the defaults)
            raise type(exc)(f"variant {variant.name}: {exc.message}", exc.hint) from None
        notes.extend(est.notes)
        if variant.kind == "hybrid" and not any(isinstance(spec, FullAttentionSpec) for spec in geometry.layers
                                                if isinstance(spec, SELF_ATTENTION)):
            notes.append(
                f"{variant.name}: {base.num_attention_layers} attention layers hold no complete group of "
                f"{variant.local_per_global} local + 1 global, so every attention layer is local"
            )
        if variant.window is not None and variant.window >= resolved_len:
            notes.append(
                f"{variant.name}: the window {variant.window:,} holds every one of the {resolved_len:,} tokens, "
                "so it saves nothing at this length"
            )
        results.append(
            VariantResult(
                variant=variant,
                description=describe(base, variant, geometry),
                estimate=est,
                ratio_to_mha=est.kv_cache_bytes / mha.kv_cache_bytes,
                sweep=sweep_of(variant, variant.kv_dtype or kv_dtype),
            )
        )
    notes.extend([MEMORY_ONLY_NOTE, DECODE_NOTE])
    return Comparison(
        base=base,
        mha=mha,
        mha_sweep=sweep_of(mha_variant),
        variants=tuple(results),
        seq_len=resolved_len,
        seq_len_source=seq_source,
        sweep_seq_lens=sweep_lens,
        notes=tuple(dict.fromkeys(notes)),
    )


def decode_read_bytes(est: Estimate) -> int:
    """KV bytes one decode step reads for the whole batch: each new token attends over every token
    each layer holds (windowed layers only their window) and reads each recurrent state once."""
    return sum(group.total_bytes for group in est.groups)


def plot_series(comparison: Comparison, *, num_points: int = 48) -> tuple[list[int], dict[str, list[int]]]:
    """Context lengths (log-spaced, windows included so their knees show) and KV bytes per variant, on
    the most loaded GPU (the whole cache on one GPU), so a --gpu-mem line compares like with like."""
    # NOTE: a model's lines stop at its maximum context (bare dims have none: up to 128k).
    limit = comparison.base.geometry.max_context_tokens if comparison.base.from_model else None
    top = max([comparison.seq_len, limit or 128 * 1024, *comparison.sweep_seq_lens])
    bottom = min([1024, *comparison.sweep_seq_lens, comparison.seq_len])
    lengths = {round(bottom * (top / bottom) ** (i / (num_points - 1))) for i in range(num_points)}
    lengths.update([*comparison.sweep_seq_lens, comparison.seq_len])  # the table's own points lie on the lines
    for result in comparison.variants:
        windows = (getattr(spec, "window", None) for spec in result.estimate.geometry.layers)
        lengths.update(w for w in windows if isinstance(w, int) and bottom <= w <= top)
    xs = sorted(lengths)
    series = {
        plot_label(result): [
            estimate(result.estimate.geometry, batch=result.estimate.batch, seq_len=x,
                     kv_dtype=result.estimate.kv_dtype.name, deployment=result.estimate.deployment,
                     adjustments=False).kv_cache_bytes_per_gpu
            for x in xs
        ]
        for result in comparison.variants
    }
    return xs, series


def plot_label(result: VariantResult) -> str:
    """The variant's name, with its windows when the name does not say them (``model (window 4,096)``)."""
    windows = sorted({w for spec in result.estimate.geometry.layers
                      if isinstance(w := getattr(spec, "window", None), int)})
    name = result.variant.name
    if windows and not any(str(w) in name for w in windows):
        name += f" (window {', '.join(f'{w:,}' for w in windows)})"
    return name
