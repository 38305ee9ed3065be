"""Per-layer cache specs: each layer kind owns its formula.

Field names follow vLLM's ``kv_cache_interface`` (``num_kv_heads``, ``head_size``,
``head_size_v``, ``sliding_window``) so the numbers can be compared with vLLM directly.
Every spec answers two questions for one sequence: how many tokens it holds at a given
length, and how many bytes that is. The calculator never branches on the spec type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvplan.dtypes import KvDtype


@dataclass(frozen=True, kw_only=True, slots=True)
class SizingInputs:
    """What a spec needs besides its own geometry."""

    seq_len: int
    """Tokens held per sequence (prompt + generated)."""
    kv_dtype: KvDtype
    """Element type of attention K/V caches."""
    state_dtype: KvDtype
    """Element type of recurrent states (the model's dtype: vLLM's mamba_cache_dtype=auto)."""
    encoder_len: int
    """Encoder positions seen by cross-attention layers."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerSpec:
    """One cache-holding layer: how many tokens it keeps and what each costs."""

    kind: ClassVar[str] = "layer"

    def tokens_held(self, inputs: SizingInputs) -> int:
        """Tokens of this sequence the layer keeps at ``inputs.seq_len``."""
        raise NotImplementedError

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        """Bytes one cached token costs in this layer (0 for layers without a token cache)."""
        raise NotImplementedError

    def bytes_per_seq(self, inputs: SizingInputs) -> int:
        """Bytes this layer holds for one sequence."""
        return self.tokens_held(inputs) * self.bytes_per_token(inputs.kv_dtype)

    @property
    def grows_with_tokens(self) -> bool:
        return False

    @property
    def window(self) -> int | None:
        """Tokens a sliding or chunked layer keeps at most; None for every other kind."""
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionSpec(LayerSpec):
    """An attention layer that caches a K row and a V row per token and KV head."""

    num_kv_heads: int
    head_size: int
    """Head dim of K."""
    head_size_v: int
    """Head dim of V (equal to ``head_size`` for most models)."""

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        # NOTE: K and V are separate rows, as engines store them (vLLM head_size + head_size_v).
        return kv_dtype.bytes_for(self.num_kv_heads * self.head_size) + kv_dtype.bytes_for(
            self.num_kv_heads * self.head_size_v
        )

    @property
    def window(self) -> int | None:
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class FullAttentionSpec(AttentionSpec):
    """Full (global) attention: every token of the sequence stays in the cache."""

    kind: ClassVar[str] = "full_attention"

    def tokens_held(self, inputs: SizingInputs) -> int:
        return inputs.seq_len

    @property
    def grows_with_tokens(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding-window attention: at most the last ``sliding_window`` tokens stay."""

    kind: ClassVar[str] = "sliding_window"
    sliding_window: int

    def tokens_held(self, inputs: SizingInputs) -> int:
        return min(inputs.seq_len, self.sliding_window)

    @property
    def window(self) -> int | None:
        return self.sliding_window

    @property
    def grows_with_tokens(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkedLocalSpec(AttentionSpec):
    """Chunked local attention (Llama 4): a token sees only its own chunk of C tokens."""

    kind: ClassVar[str] = "chunked_local"
    attention_chunk_size: int

    def tokens_held(self, inputs: SizingInputs) -> int:
        # NOTE: the ideal cache keeps at most one chunk; engines keep more (see engine profiles).
        return min(inputs.seq_len, self.attention_chunk_size)

    @property
    def window(self) -> int | None:
        return self.attention_chunk_size

    @property
    def grows_with_tokens(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class CrossAttentionSpec(AttentionSpec):
    """Decoder cross-attention: K/V of the encoder output, fixed by the encoder length."""

    kind: ClassVar[str] = "cross_attention"

    def tokens_held(self, inputs: SizingInputs) -> int:
        return inputs.encoder_len


@dataclass(frozen=True, kw_only=True, slots=True)
class MLASpec(LayerSpec):
    """Multi-head latent attention: one latent row of kv_lora_rank + qk_rope_head_dim, no K/V pair."""

    kind: ClassVar[str] = "mla"
    kv_lora_rank: int
    qk_rope_head_dim: int
    fp8_ds_mla: bool = False
    """Sparse-attention (DSA) models: an fp8 cache is DeepSeek's ``fp8_ds_mla`` layout in vLLM and SGLang's
    NSA backends: kv_lora_rank fp8 + one fp32 scale per 128 + qk_rope_head_dim bf16 (656 B for 512 + 64)."""

    def fp8_ds_mla_bytes(self) -> int:
        """vLLM ``fp8_ds_mla`` / SGLang ``calculate_mla_kv_cache_dim`` (fp8): 512 + 4 * 4 + 64 * 2 = 656."""
        return self.kv_lora_rank + 4 * -(-self.kv_lora_rank // 128) + 2 * self.qk_rope_head_dim

    @property
    def num_kv_heads(self) -> int:
        return 1

    @property
    def head_size(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def head_size_v(self) -> int:
        return 0

    @property
    def window(self) -> int | None:
        return None

    def tokens_held(self, inputs: SizingInputs) -> int:
        return inputs.seq_len

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        return kv_dtype.bytes_for(self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def grows_with_tokens(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexerSpec(MLASpec):
    """The key cache of a sparse-attention (DSA) lightning indexer: one ``index_head_dim`` key per token per
    layer, one "head" like the MLA latent (so it shards, pages and grows as MLA does; ``qk_rope_head_dim`` 0).

    Hugging Face transformers keeps it in the model dtype; vLLM (``DeepseekV32IndexerCache``), SGLang
    (``index_key_cache.py``) and TensorRT-LLM keep fp8 keys plus one fp32 scale per 128 values: 132 B for 128."""

    kind: ClassVar[str] = "indexer"
    index_n_heads: int | None = None
    """Indexer query heads (not cached; recorded for the report)."""
    index_topk: int | None = None
    """Tokens each query attends to (not a cache size)."""
    hf_float32: bool = False
    """transformers' modeling keeps these keys in float32 whatever the model dtype (dots3_note)."""

    @property
    def index_head_dim(self) -> int:
        return self.kv_lora_rank

    def fp8_key_bytes(self) -> int:
        """fp8 key + fp32 scale per 128 values: 128 + 4 = 132 B."""
        return self.index_head_dim + 4 * -(-self.index_head_dim // 128)


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexKeySpec(FullAttentionSpec):
    """The key cache of a block-sparse attention indexer over GQA (MiniMax-M3 ``minimax_m3_sparse`` layers): one
    ``index_head_dim`` key per token per sparse layer, kept beside the layer's K/V in the cache's element type
    (transformers' ``MiniMaxM3VLSparseCacheLayer.idx_keys``: the model dtype). One key head, no V: it grows, pages
    and shards as a one-head full-attention layer does (replicated across tensor-parallel ranks)."""

    kind: ClassVar[str] = "indexer"
    num_kv_heads: int = 1
    head_size_v: int = 0
    index_n_heads: int | None = None
    """Indexer query heads (not cached; recorded for the report)."""

    @property
    def index_head_dim(self) -> int:
        return self.head_size


@dataclass(frozen=True, kw_only=True, slots=True)
class CompressedAttentionSpec(LayerSpec):
    """DeepSeek-V4 attention: one shared K=V head (``head_size``) over a sliding window of recent tokens,
    plus, when ``compress_ratio`` > 0, one compressed entry per ``compress_ratio`` past tokens (all of
    them are kept) and, for compressed-sparse layers, an indexer key of ``index_head_size`` per entry.

    The ideal cache: ``min(T, W)`` window rows + ``T // ratio`` compressed rows (+ as many indexer keys).
    What transformers keeps besides (the uncompressed tail's projections, the overlap state) is priced by
    the hf-dynamic profile."""

    kind: ClassVar[str] = "compressed_attention"
    head_size: int
    """Width of the one K=V row (``head_dim``)."""
    sliding_window: int
    compress_ratio: int
    """Source tokens per compressed entry; 0: the sliding window only."""
    index_head_size: int = 0
    """Indexer key width per compressed entry (``index_head_dim``; 0 without an indexer)."""
    overlap: bool = False
    """Two overlapping compressed series (compressed-sparse attention): projections twice as wide."""

    @property
    def num_kv_heads(self) -> int:
        return 1

    @property
    def head_size_v(self) -> int:
        return 0  # K = V: one row

    def window_tokens(self, seq_len: int) -> int:
        return min(seq_len, self.sliding_window)

    def compressed_entries(self, seq_len: int) -> int:
        return seq_len // self.compress_ratio if self.compress_ratio else 0

    def tokens_held(self, inputs: SizingInputs) -> int:
        """Rows held: the window plus the compressed entries."""
        return self.window_tokens(inputs.seq_len) + self.compressed_entries(inputs.seq_len)

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        return kv_dtype.bytes_for(self.head_size)

    def entry_bytes(self, kv_dtype: KvDtype) -> int:
        """One compressed entry with its indexer key."""
        return kv_dtype.bytes_for(self.head_size) + kv_dtype.bytes_for(self.index_head_size)

    def bytes_per_seq(self, inputs: SizingInputs) -> int:
        return (self.window_tokens(inputs.seq_len) * self.bytes_per_token(inputs.kv_dtype)
                + self.compressed_entries(inputs.seq_len) * self.entry_bytes(inputs.kv_dtype))

    def describe(self) -> str:
        text = f"K=V {self.head_size}, window {self.sliding_window}"
        if self.compress_ratio:
            text += f", 1 entry per {self.compress_ratio} tokens"
        if self.index_head_size:
            text += f" + indexer key {self.index_head_size}"
        return text

    @property
    def grows_with_tokens(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedKVSlidingSpec(CompressedAttentionSpec):
    """DeepSeek-V4 sliding-only layer (compress ratio 0): one K=V row per token in the window."""

    kind: ClassVar[str] = "sliding_kv_shared"


@dataclass(frozen=True, kw_only=True, slots=True)
class CompressedSparseSpec(CompressedAttentionSpec):
    """DeepSeek-V4 compressed-sparse attention (CSA): overlapping compression and a lightning indexer."""

    kind: ClassVar[str] = "compressed_sparse"


@dataclass(frozen=True, kw_only=True, slots=True)
class HeavilyCompressedSpec(CompressedAttentionSpec):
    """DeepSeek-V4 heavily compressed attention (HCA): dense attention over a strongly compressed history."""

    kind: ClassVar[str] = "heavily_compressed"


@dataclass(frozen=True, kw_only=True, slots=True)
class StateSpec(LayerSpec):
    """Recurrent state (Mamba, gated delta net, linear attention): constant per sequence."""

    kind: ClassVar[str] = "state"
    mixer: str
    """``mamba``, ``mamba2``, ``gated_delta_net`` or ``linear_attention``."""
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    """Named state tensors per sequence, e.g. (("conv", (3, 8192)), ("ssm", (8192, 16)))."""
    fp32_tensors: tuple[str, ...] = ()
    """Tensors the engine keeps in float32 whatever the state dtype (vLLM ``kda_state_dtype``: the recurrent state)."""

    def tensor_bytes(self, name: str, shape: tuple[int, ...], state_dtype: KvDtype) -> int:
        return 4 * _count(shape) if name in self.fp32_tensors else state_dtype.bytes_for(_count(shape))

    @property
    def state_elements(self) -> int:
        return sum(_count(shape) for _name, shape in self.shapes)

    def tokens_held(self, inputs: SizingInputs) -> int:
        return 0

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        return 0

    def bytes_per_seq(self, inputs: SizingInputs) -> int:
        return sum(self.tensor_bytes(name, shape, inputs.state_dtype) for name, shape in self.shapes)


@dataclass(frozen=True, kw_only=True, slots=True)
class NoCacheSpec(LayerSpec):
    """A layer that caches nothing (MLP-only or MoE-only blocks of hybrid stacks)."""

    kind: ClassVar[str] = "no_cache"
    reason: str

    def tokens_held(self, inputs: SizingInputs) -> int:
        return 0

    def bytes_per_token(self, kv_dtype: KvDtype) -> int:
        return 0


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedKVSpec(NoCacheSpec):
    """A layer that attends over an earlier layer's K/V and stores none of its own (Gemma 3n and Gemma 4
    ``num_kv_shared_layers``; vLLM ``kv_sharing_target_layer_name``; transformers puts a ``DummyLayer`` in its
    cache). It costs no bytes in any engine, so it keeps the ``no_cache`` kind every engine already skips;
    ``reason`` names the layers whose cache it reads."""


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
