"""Pure sizing: a ModelGeometry and inputs in, an Estimate out. No printing, no IO."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.dtypes import KvDtype, lookup_dtype
from kvplan.errors import ConfigError, InputError
from kvplan.geometry import ModelGeometry
from kvplan.specs import LayerSpec, SizingInputs

#: Upper bound on the batch, to catch absurd input.
MAX_BATCH = 1 << 24

#: What ``--kv-dtype auto`` means when the config names no dtype: engines serve such checkpoints
#: in 16 bits (vLLM's ``--dtype auto`` turns a float32/absent dtype into a 16-bit one).
NO_CONFIG_DTYPE = "fp16"


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerGroup:
    """Consecutive or scattered layers that share one spec."""

    spec: LayerSpec
    count: int
    layer_indices: tuple[int, ...]
    tokens_held: int
    """Tokens one sequence keeps in each layer of the group."""
    bytes_per_token: int
    """Bytes one cached token costs in one layer."""
    bytes_per_seq: int
    """Bytes one sequence holds in the whole group."""
    total_bytes: int
    """Bytes of the whole batch in the whole group."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    geometry: ModelGeometry
    batch: int
    seq_len: int | None
    seq_len_source: str
    kv_dtype: KvDtype
    kv_dtype_source: str
    state_dtype: KvDtype
    encoder_len: int | None
    encoder_len_source: str | None
    groups: tuple[LayerGroup, ...]
    notes: tuple[str, ...]

    @property
    def kv_cache_bytes(self) -> int:
        """The whole cache: every layer, every sequence of the batch."""
        return sum(group.total_bytes for group in self.groups)

    @property
    def bytes_per_sequence(self) -> int:
        return sum(group.bytes_per_seq for group in self.groups)

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token costs summed over every token-caching layer, before any window is full."""
        return sum(g.bytes_per_token * g.count for g in self.groups if g.spec.grows_with_tokens)

    @property
    def state_bytes(self) -> int:
        return sum(g.total_bytes for g in self.groups if g.spec.kind == "state")

    @property
    def cross_attention_bytes(self) -> int:
        return sum(g.total_bytes for g in self.groups if g.spec.kind == "cross_attention")


def resolve_kv_dtype(geometry: ModelGeometry, kv_dtype: str) -> tuple[KvDtype, str, KvDtype, list[str]]:
    """(kv dtype, its source, state dtype, notes) for ``--kv-dtype`` (``auto`` = the config's dtype)."""
    notes: list[str] = []
    if geometry.config_dtype is not None:
        try:
            model_dtype = lookup_dtype(geometry.config_dtype, what="config dtype")
        except InputError:
            raise ConfigError(
                f"{geometry.model_id}: config dtype {geometry.config_dtype!r} is not a known dtype",
                "pass --kv-dtype explicitly, e.g. --kv-dtype bf16",
            ) from None
        model_source = f"{geometry.config_dtype_source} = {geometry.config_dtype}"
    else:
        model_dtype = lookup_dtype(NO_CONFIG_DTYPE)
        model_source = "default: the config has no torch_dtype; 16-bit as vLLM's --dtype auto serves it"
    if kv_dtype.strip().lower() == "auto":
        if geometry.config_dtype is None:
            notes.append(
                "the config names no torch_dtype, so --kv-dtype auto assumes fp16 (2 bytes, as vLLM serves it); "
                "pass --kv-dtype fp32 or bf16 to choose"
            )
        return model_dtype, f"auto: {model_source}", model_dtype, notes
    chosen = lookup_dtype(kv_dtype)
    if any(spec.kind == "state" for spec in geometry.layers) and chosen != model_dtype:
        notes.append(
            f"recurrent states stay in the model dtype {model_dtype.name}; --kv-dtype {chosen.name} applies "
            "to attention K/V only"
        )
    return chosen, "--kv-dtype", model_dtype, notes


def estimate(
    geometry: ModelGeometry,
    *,
    batch: int = 1,
    seq_len: int | None = None,
    kv_dtype: str = "auto",
    encoder_len: int | None = None,
) -> Estimate:
    """The ideal KV cache of ``batch`` sequences of ``seq_len`` tokens, layer group by group.

    Sliding layers hold min(T, W) tokens, chunked layers min(T, C), state layers a fixed size per
    sequence and cross-attention layers the encoder length.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"--batch must be a positive integer, got {batch!r}", "e.g. --batch 8")
    if batch > MAX_BATCH:
        raise InputError(f"--batch {batch:,} is absurdly large (limit {MAX_BATCH:,})", "check the value")
    notes = list(geometry.notes)

    if seq_len is not None:
        seq_source = "--seq-len"
    elif geometry.max_context_tokens is not None:
        seq_len = geometry.max_context_tokens
        seq_source = f"model maximum context ({geometry.max_context_source} = {seq_len})"
    elif geometry.grows_with_tokens:
        raise InputError(
            f"{geometry.model_id}: the config names no maximum context, so the sequence length is unknown",
            "pass --seq-len, e.g. --seq-len 4k",
        )
    else:
        seq_source = "not needed: no layer grows with tokens"
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1):
        raise InputError(f"--seq-len must be a positive integer, got {seq_len!r}", "e.g. --seq-len 4096")

    dtype, dtype_source, state_dtype, dtype_notes = resolve_kv_dtype(geometry, kv_dtype)
    notes.extend(dtype_notes)

    enc_source = None
    if geometry.has_cross_attention:
        if encoder_len is not None:
            enc_source = "--encoder-len"
        elif geometry.default_encoder_len is not None:
            encoder_len = geometry.default_encoder_len
            enc_source = f"{geometry.default_encoder_len_source} = {encoder_len}"
        else:
            encoder_len = seq_len
            enc_source = "default: the encoder length equals --seq-len"
            notes.append("the config names no encoder length; cross-attention assumes it equals --seq-len")
        if encoder_len is None or encoder_len < 1:
            raise InputError(f"--encoder-len must be a positive integer, got {encoder_len!r}", "e.g. --encoder-len 1500")
    elif encoder_len is not None:
        notes.append("--encoder-len is ignored: the model has no cross-attention layers")
        encoder_len = None

    inputs = SizingInputs(
        seq_len=seq_len or 0, kv_dtype=dtype, state_dtype=state_dtype, encoder_len=encoder_len or 0
    )
    groups = tuple(_group(geometry.layers, inputs, batch))
    if seq_len is not None and geometry.max_context_tokens is not None and seq_len > geometry.max_context_tokens:
        notes.append(
            f"--seq-len {seq_len:,} is beyond the model's maximum context {geometry.max_context_tokens:,}"
        )
    return Estimate(
        geometry=geometry,
        batch=batch,
        seq_len=seq_len,
        seq_len_source=seq_source,
        kv_dtype=dtype,
        kv_dtype_source=dtype_source,
        state_dtype=state_dtype,
        encoder_len=encoder_len,
        encoder_len_source=enc_source,
        groups=groups,
        notes=tuple(dict.fromkeys(notes)),
    )


def _group(layers: tuple[LayerSpec, ...], inputs: SizingInputs, batch: int) -> list[LayerGroup]:
    order: list[LayerSpec] = []
    members: dict[LayerSpec, list[int]] = {}
    for index, spec in enumerate(layers):
        if spec not in members:
            members[spec] = []
            order.append(spec)
        members[spec].append(index)
    groups = []
    for spec in order:
        indices = tuple(members[spec])
        per_layer_seq = spec.bytes_per_seq(inputs)
        groups.append(
            LayerGroup(
                spec=spec,
                count=len(indices),
                layer_indices=indices,
                tokens_held=spec.tokens_held(inputs),
                bytes_per_token=spec.bytes_per_token(inputs.kv_dtype),
                bytes_per_seq=per_layer_seq * len(indices),
                total_bytes=per_layer_seq * len(indices) * batch,
            )
        )
    return groups
