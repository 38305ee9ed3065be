"""Model weights from config.json: parameter count and resident bytes, without downloading weights.

The language model is counted tensor by tensor from the config (embeddings, attention or MLA
projections, dense MLP or MoE with every expert resident, norms, biases, lm_head unless tied);
a vision tower and its projector are counted separately. Bytes follow the checkpoint: the
config's ``torch_dtype`` for plain weights, and the layout of its ``quantization_config``
(fp8 with block scales, AWQ/GPTQ int4 or int8 with group scales and zero points, MXFP4 experts as
gpt-oss ships them, bitsandbytes, compressed-tensors). Exact bytes may instead come from the
Hub's safetensors metadata (:func:`weights_from_safetensors`), or from ``--weights-bytes``.

Pure: no IO except :func:`weights_from_safetensors`, which imports huggingface_hub inside.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.arch import NESTED_TEXT_KEYS, REGISTRY, WRAPPER_TEXT_TYPES
from kvplan.arch.base import ArchParser, ConfigReader
from kvplan.errors import ConfigError, InputError, SourceError
from kvplan.units import cdiv

#: Bytes per element of the plain dtypes a config or safetensors header names.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "fp32": 4, "f32": 4, "float": 4,
    "float16": 2, "fp16": 2, "f16": 2, "half": 2,
    "bfloat16": 2, "bf16": 2,
    "float8_e4m3fn": 1, "f8_e4m3": 1, "f8_e5m2": 1, "fp8": 1,
    "int8": 1, "i8": 1, "u8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "i16": 2, "int32": 4, "i32": 4, "u32": 4, "int64": 8, "i64": 8, "f64": 8, "float64": 8,
}

#: Roles whose matrices a weight-quantisation method converts (unless listed as not converted).
QUANTISED_ROLES = frozenset({"attention", "mlp", "experts", "shared_experts"})

#: Architecture defaults of the keys weight counting needs that sparse configs omit
#: (their transformers config classes). Used only when the key is absent, and noted.
WEIGHT_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"intermediate_size": 11008, "vocab_size": 32000, "tie_word_embeddings": False},
    "mistral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
    "mixtral": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False,
                "num_local_experts": 8},
    "gemma": {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 24576},
    "gemma2": {"tie_word_embeddings": True, "vocab_size": 256000, "intermediate_size": 9216},
    "gemma3_text": {"tie_word_embeddings": True, "vocab_size": 262208, "intermediate_size": 9216,
                    "head_dim": 256},
    "qwen2": {"tie_word_embeddings": False}, "qwen3": {"tie_word_embeddings": False},
    "qwen2_moe": {"tie_word_embeddings": False}, "qwen3_moe": {"tie_word_embeddings": False},
    "phi3": {"tie_word_embeddings": False}, "phi": {"tie_word_embeddings": False},
    "deepseek_v2": {"tie_word_embeddings": False}, "deepseek_v3": {"tie_word_embeddings": False},
    "kimi_k2": {"tie_word_embeddings": False}, "deepseek": {"tie_word_embeddings": False},
    "gpt_oss": {"tie_word_embeddings": False}, "llama4_text": {"tie_word_embeddings": False},
    "glm4_moe": {"tie_word_embeddings": False}, "internlm2": {"tie_word_embeddings": False},
    "baichuan": {"tie_word_embeddings": False}, "stablelm": {"tie_word_embeddings": False},
    "cohere": {"tie_word_embeddings": True}, "granite": {"tie_word_embeddings": False},
    "olmo2": {"tie_word_embeddings": False},
    "gpt2": {"tie_word_embeddings": True}, "gpt_bigcode": {"tie_word_embeddings": True},
    "gptj": {"tie_word_embeddings": False}, "gpt_neox": {"tie_word_embeddings": False},
    "opt": {"tie_word_embeddings": True}, "bloom": {"tie_word_embeddings": True},
    "falcon": {"tie_word_embeddings": True}, "mamba": {"tie_word_embeddings": True},
    "falcon_mamba": {"tie_word_embeddings": False},
    # JambaConfig, Qwen3NextConfig, NemotronHConfig, MiniMaxConfig, ChatGLMConfig, T5Config, MT5Config,
    # WhisperConfig, Starcoder2Config and MptConfig defaults for the keys weight counting reads.
    "jamba": {"tie_word_embeddings": False, "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 16,
              "num_experts_per_tok": 2, "mamba_conv_bias": True, "mamba_proj_bias": False},
    "qwen3_next": {"tie_word_embeddings": False, "shared_expert_intermediate_size": 512, "num_experts": 512,
                   "moe_intermediate_size": 512, "num_experts_per_tok": 10, "decoder_sparse_step": 1},
    "nemotron_h": {"tie_word_embeddings": False, "use_conv_bias": True, "use_bias": False, "mlp_bias": False,
                   "attention_bias": False},
    "minimax": {"tie_word_embeddings": False}, "minimax_m1": {"tie_word_embeddings": False},
    "minimax_text_01": {"tie_word_embeddings": False},
    "chatglm": {"tie_word_embeddings": False, "add_qkv_bias": False, "add_bias_linear": False,
                "post_layer_norm": True, "multi_query_attention": False},
    "t5": {"tie_word_embeddings": True, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32},
    "mt5": {"tie_word_embeddings": False, "feed_forward_proj": "gated-gelu", "relative_attention_num_buckets": 32},
    "whisper": {"tie_word_embeddings": True, "num_mel_bins": 80, "max_source_positions": 1500,
                "max_target_positions": 448},
    "starcoder2": {"tie_word_embeddings": True, "use_bias": True},
    "mpt": {"tie_word_embeddings": True, "no_bias": True},
}

#: Families counted as a pre-norm decoder with gated (SwiGLU/GeGLU) MLPs.
_GATED = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma", "gemma2",
     "gemma3_text", "phi3", "internlm2", "internlm3", "baichuan", "cohere", "stablelm", "deepseek",
     "deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe", "gpt_oss", "llama4_text", "granite",
     "granitemoe", "olmo", "olmo2", "exaone", "yi", "mistral_nemo", "smollm3", "ministral"}
)
_CLASSIC = frozenset({"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "opt", "bloom", "falcon", "phi"})
_STATE = frozenset({"mamba", "falcon_mamba"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Matrix:
    """``count`` linear weight matrices of ``in_features`` x ``out_features``."""

    in_features: int
    out_features: int
    count: int = 1

    @property
    def parameters(self) -> int:
        return self.in_features * self.out_features * self.count


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightPart:
    """A group of tensors that share a role (and so a storage format)."""

    name: str
    """``embed_tokens``, ``lm_head``, ``attention``, ``mlp``, ``experts``, ``shared_experts``,
    ``router``, ``norms``, ``position_embeddings``, ``vision_tower``, ``projector``."""
    matrices: tuple[Matrix, ...] = ()
    other_parameters: int = 0
    """Biases, norm weights, conv kernels and other vectors (stored in the checkpoint dtype)."""
    tp_sharded: bool = True
    """Split across tensor-parallel ranks (norms and routers are replicated)."""
    vision: bool = False
    bytes: int = 0
    """Filled in by the storage layout."""
    storage: str = ""

    @property
    def parameters(self) -> int:
        return sum(m.parameters for m in self.matrices) + self.other_parameters


@dataclass(frozen=True, kw_only=True, slots=True)
class Quantisation:
    """How a checkpoint stores its quantised matrices."""

    method: str
    """``fp8``, ``awq``, ``gptq``, ``mxfp4``, ``bitsandbytes``, ``compressed-tensors``..."""
    bits: int
    group_size: int | None = None
    """Values per scale along the input dimension (None: one scale per output row or tensor)."""
    block: tuple[int, int] | None = None
    """fp8 block scales: (out, in) block shape."""
    scale_bytes: int = 2
    zero_bits: int = 0
    """Bits of zero point per group (AWQ/GPTQ store them packed at the weight's bit width)."""
    g_idx: bool = False
    """GPTQ stores an int32 group index per input feature."""
    roles: frozenset[str] = QUANTISED_ROLES
    not_converted: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"{self.method} {self.bits}-bit"
        if self.block:
            text += f", {self.block[0]}x{self.block[1]} block scales"
        elif self.group_size:
            text += f", group size {self.group_size}"
        return text

    def matrix_bytes(self, m: Matrix) -> int:
        values = m.in_features * m.out_features
        data = cdiv(values * self.bits, 8)
        if self.block is not None:
            scales = cdiv(m.out_features, self.block[0]) * cdiv(m.in_features, self.block[1]) * self.scale_bytes
        elif self.group_size:
            groups = cdiv(m.in_features, self.group_size) * m.out_features
            scales = groups * self.scale_bytes + cdiv(groups * self.zero_bits, 8)
        else:
            scales = m.out_features * self.scale_bytes
        extra = m.in_features * 4 if self.g_idx else 0
        return (data + scales + extra) * m.count


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightsEstimate:
    model_id: str
    model_type: str
    parts: tuple[WeightPart, ...]
    dtype: str
    """The plain dtype of unquantised tensors (``bfloat16``...)."""
    dtype_bytes: int
    quantisation: Quantisation | None
    num_experts: int | None
    experts_per_token: int | None
    source: str
    """``config`` (counted), ``safetensors`` (Hub metadata) or ``--weights-bytes``."""
    hidden_size: int
    """Shape figures for the activation estimate (0 when the weights were not counted)."""
    mlp_width: int
    """Per-token MLP width: intermediate size, or experts per token x expert size (+ shared)."""
    qkv_width: int
    vocab_size: int
    bytes_override: int | None = None
    """Exact total bytes (safetensors metadata or --weights-bytes) that replace the counted bytes."""
    notes: tuple[str, ...] = ()

    # ---- counts --------------------------------------------------------------------------------
    @property
    def counted(self) -> bool:
        """Whether parameters were counted from the config (False: only bytes are known)."""
        return any(p.parameters for p in self.parts)

    @property
    def parameters(self) -> int:
        return sum(p.parameters for p in self.parts)

    @property
    def vision_parameters(self) -> int:
        return sum(p.parameters for p in self.parts if p.vision)

    @property
    def language_parameters(self) -> int:
        return self.parameters - self.vision_parameters

    @property
    def expert_parameters(self) -> int:
        return sum(p.parameters for p in self.parts if p.name == "experts")

    @property
    def active_parameters(self) -> int:
        """Parameters one token reads: everything but the experts it is not routed to."""
        if not self.num_experts or not self.experts_per_token:
            return self.parameters
        unused = self.expert_parameters * (self.num_experts - self.experts_per_token) // self.num_experts
        return self.parameters - unused

    # ---- bytes ---------------------------------------------------------------------------------
    @property
    def counted_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    @property
    def bytes(self) -> int:
        return self.bytes_override if self.bytes_override is not None else self.counted_bytes

    @property
    def vision_bytes(self) -> int:
        return self._scaled(sum(p.bytes for p in self.parts if p.vision))

    @property
    def expert_bytes(self) -> int:
        return self._scaled(sum(p.bytes for p in self.parts if p.name == "experts"))

    def _scaled(self, counted: int) -> int:
        """A part's share of the exact total when bytes come from outside the count."""
        if self.bytes_override is None or not self.counted_bytes:
            return counted
        return counted * self.bytes_override // self.counted_bytes

    def bytes_per_gpu(self, *, tp: int = 1, pp: int = 1) -> int:
        """Bytes on the busiest GPU: TP splits matrices and embeddings, replicates norms and routers;
        PP splits the whole model into ``pp`` equal stages (a planning approximation)."""
        sharded = self._scaled(sum(p.bytes for p in self.parts if p.tp_sharded))
        replicated = self.bytes - sharded
        return cdiv(sharded, tp * pp) + cdiv(replicated, pp)

    def read_bytes_per_step(self, *, batch: int, tp: int = 1, pp: int = 1) -> int:
        """Weight bytes one decode step reads on one GPU: all but the experts no token is routed to.

        A batch of B tokens touches at most min(E, B * k) of E experts per MoE layer (distinct
        routing assumed, the most a step can read)."""
        resident = self.bytes_per_gpu(tp=tp, pp=pp)
        if not self.num_experts or not self.experts_per_token:
            return resident
        touched = min(self.num_experts, batch * self.experts_per_token)
        experts_gpu = cdiv(self.expert_bytes, tp * pp)
        return resident - experts_gpu + experts_gpu * touched // self.num_experts


# ---- entry points ----------------------------------------------------------------------------
def count_weights(config: Mapping[str, Any], *, model_id: str) -> WeightsEstimate:
    """Parameters and bytes of the checkpoint a ``config.json`` describes."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{model_id}: config must be a JSON object", "pass a Hugging Face config.json")
    outer = dict(config)
    nested_key = next((k for k in NESTED_TEXT_KEYS if isinstance(outer.get(k), Mapping)), None)
    outer_type = outer.get("model_type")
    if nested_key:
        text = dict(outer[nested_key])
        model_type = text.get("model_type") or WRAPPER_TEXT_TYPES.get(str(outer_type)) or outer_type
    else:
        text = outer
        model_type = outer_type
    model_type = str(model_type or "")
    if model_type == "gemma3" and nested_key:
        model_type = "gemma3_text"
    parser = REGISTRY.get(model_type)
    defaults = dict(parser().defaults_for(model_type) if parser else {})
    defaults.update(WEIGHT_DEFAULTS.get(model_type, {}))
    r = ConfigReader(
        text, source_name=model_id, prefix=f"{nested_key}." if nested_key else "", outer=outer,
        defaults=defaults, defaults_name=model_type or "generic",
    )
    if nested_key and "tie_word_embeddings" not in text and isinstance(outer.get("tie_word_embeddings"), bool):
        text = {**text, "tie_word_embeddings": outer["tie_word_embeddings"]}
        r.config = text

    if model_type in _GATED:
        parts, experts, top_k, shape = _gated_decoder(r, model_type)
    elif model_type in _CLASSIC:
        (parts, shape), experts, top_k = _classic_decoder(r, model_type), None, None
    elif model_type in _STATE:
        (parts, shape), experts, top_k = _mamba(r), None, None
    elif model_type in _MOE_HYBRID:
        parts, experts, top_k, shape = _MOE_HYBRID[model_type](r)
    elif model_type in _OTHER:
        (parts, shape), experts, top_k = _OTHER[model_type](r), None, None
    else:
        raise ConfigError(
            f"{model_id}: kvplan cannot count the weights of model_type {model_type!r} from its config",
            "pass --weights-bytes SIZE (the checkpoint's size), or --kv-budget SIZE to size the cache directly",
        )
    if isinstance(outer.get("vision_config"), Mapping):
        parts += _vision(outer, r, text_hidden=_hidden(r))

    dtype, dtype_bytes = _checkpoint_dtype(text, outer, r)
    quant = _quantisation(outer.get("quantization_config") or text.get("quantization_config"), model_id, r)
    stored = tuple(_store(part, dtype_bytes, quant) for part in parts)
    return WeightsEstimate(
        model_id=model_id, model_type=model_type, parts=stored, dtype=dtype, dtype_bytes=dtype_bytes,
        quantisation=quant, num_experts=experts, experts_per_token=top_k, source="config",
        notes=tuple(r.notes), **shape,
    )


def weights_from_bytes(total_bytes: int, *, model_id: str, model_type: str, why: str) -> WeightsEstimate:
    """Weights known only by their size (``--weights-bytes`` for a model kvplan cannot count)."""
    part = WeightPart(name="checkpoint", bytes=total_bytes, storage="as given")
    return WeightsEstimate(
        model_id=model_id, model_type=model_type, parts=(part,), dtype="unknown", dtype_bytes=0, quantisation=None,
        num_experts=None, experts_per_token=None, source="--weights-bytes", hidden_size=0, mlp_width=0, qkv_width=0,
        vocab_size=0, notes=(f"parameters not counted: {why}",),
    )


def with_exact_bytes(weights: WeightsEstimate, total_bytes: int, *, source: str, note: str | None = None) -> WeightsEstimate:
    """The same counts, with the total bytes taken from ``source`` (safetensors or --weights-bytes)."""
    notes = list(weights.notes)
    if note:
        notes.append(note)
    return dataclasses.replace(weights, bytes_override=total_bytes, source=source, notes=tuple(notes))


#: safetensors header dtype names -> bytes per element.
SAFETENSORS_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 1,
}


def weights_from_safetensors(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    fetch: Callable[..., Any] | None = None,
) -> tuple[int, dict[str, int]]:
    """(total bytes, element count per dtype) from the Hub's safetensors headers (no weight download).

    ``fetch`` defaults to ``huggingface_hub.get_safetensors_metadata``; tests pass a stand-in.
    """
    if fetch is None:
        try:
            from huggingface_hub import get_safetensors_metadata as fetch
        except ImportError:  # pragma: no cover - a dependency
            raise SourceError("huggingface_hub is not installed", "pip install huggingface-hub") from None
    try:
        metadata = fetch(repo_id, revision=revision, token=token)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(
            f"{repo_id}: could not read safetensors metadata from the Hub: {first}",
            "pass --weights-from config to count weights from config.json, or --weights-bytes SIZE",
        ) from None
    counts = dict(getattr(metadata, "parameter_count", None) or {})
    if not counts:
        raise SourceError(f"{repo_id}: the Hub lists no safetensors tensors", "pass --weights-bytes SIZE")
    unknown = sorted(set(counts) - set(SAFETENSORS_BYTES))
    if unknown:
        raise SourceError(
            f"{repo_id}: safetensors dtype {', '.join(unknown)} has no known size", "pass --weights-bytes SIZE"
        )
    return sum(SAFETENSORS_BYTES[d] * n for d, n in counts.items()), counts


# ---- families --------------------------------------------------------------------------------
def _hidden(r: ConfigReader) -> int:
    return r.first_of("hidden_size", ("hidden_size", "n_embd", "d_model", "dim"))


def _tied(r: ConfigReader) -> bool:
    value = r.raw("tie_word_embeddings")
    if isinstance(value, bool):
        return value
    if "tie_word_embeddings" in r.defaults:
        tied = bool(r.defaults["tie_word_embeddings"])
        r.note(f"tie_word_embeddings is not in the config; the {r.defaults_name} default is {str(tied).lower()}")
        return tied
    r.note("tie_word_embeddings is not in the config; transformers' default true (lm_head shares the embedding)")
    return True


def _embeddings(r: ConfigReader, hidden: int, *, lm_head_bias: bool = False) -> list[WeightPart]:
    vocab = _vocab(r)
    parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=hidden, out_features=vocab),))]
    if not _tied(r):
        parts.append(
            WeightPart(name="lm_head", matrices=(Matrix(in_features=hidden, out_features=vocab),),
                       other_parameters=vocab if lm_head_bias else 0)
        )
    return parts


def _gated_decoder(
    r: ConfigReader, model_type: str
) -> tuple[list[WeightPart], int | None, int | None, dict[str, int]]:
    """Pre-norm decoders with gated MLPs: Llama, Mistral, Qwen, Gemma, Phi-3, DeepSeek, gpt-oss, Llama 4..."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layers", "num_layers"))
    heads = r.first_of("num_attention_heads", ("num_attention_heads", "n_heads"))
    attention: list[Matrix] = []
    attn_other = 0
    qkv_width = 0
    if r.has("kv_lora_rank") and model_type in ("deepseek_v2", "deepseek_v3", "kimi_k2"):
        rank = r.first_of("kv_lora_rank", ("kv_lora_rank",))
        rope = r.first_of("qk_rope_head_dim", ("qk_rope_head_dim",))
        nope = r.first_of("qk_nope_head_dim", ("qk_nope_head_dim",))
        v_dim = r.first_of("v_head_dim", ("v_head_dim",))
        q_rank = r.optional("q_lora_rank", ("q_lora_rank",))
        if q_rank:
            attention += [Matrix(in_features=hidden, out_features=q_rank, count=layers),
                          Matrix(in_features=q_rank, out_features=heads * (nope + rope), count=layers)]
            attn_other += q_rank * layers  # q_a_layernorm
        else:
            attention.append(Matrix(in_features=hidden, out_features=heads * (nope + rope), count=layers))
        attention += [
            Matrix(in_features=hidden, out_features=rank + rope, count=layers),  # kv_a_proj_with_mqa
            Matrix(in_features=rank, out_features=heads * (nope + v_dim), count=layers),  # kv_b_proj
            Matrix(in_features=heads * v_dim, out_features=hidden, count=layers),  # o_proj
        ]
        attn_other += rank * layers  # kv_a_layernorm
        qkv_width = heads * (nope + rope) + rank + rope + heads * (nope + v_dim)
        r.note(f"MLA projections counted: q {'LoRA rank ' + str(q_rank) if q_rank else 'full'}, kv_lora_rank {rank}")
    else:
        kv_heads = _kv_heads(r, heads)
        head_dim = _head_dim(r, heads)
        q, kv = heads * head_dim, kv_heads * head_dim
        qkv_width = q + 2 * kv
        attention += [Matrix(in_features=hidden, out_features=q, count=layers),
                      Matrix(in_features=hidden, out_features=kv, count=2 * layers),
                      Matrix(in_features=q, out_features=hidden, count=layers)]
        if model_type == "qwen2" or (model_type == "qwen2_moe") or r.raw("attention_bias") is True \
                or r.raw("use_qkv_bias") is True or r.raw("qkv_bias") is True:
            attn_other += (q + 2 * kv) * layers
            if r.raw("attention_bias") is True and model_type not in ("qwen2", "qwen2_moe"):
                attn_other += hidden * layers  # o_proj bias
        if model_type in ("qwen3", "qwen3_moe", "gemma3_text") or r.raw("use_qk_norm") is True:
            attn_other += 2 * head_dim * layers
        if model_type == "gpt_oss":
            attn_other += heads * layers  # attention sinks
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=attn_other))

    # MLP / MoE layer by layer
    intermediate = r.first_of("intermediate_size", ("intermediate_size", "ffn_hidden_size"))
    moe_layers, experts, top_k, expert_size, shared_size = _moe_layout(r, model_type, layers, intermediate)
    dense_layers = layers - len(moe_layers)
    dense_size = intermediate
    if model_type == "llama4_text":
        dense_size = r.first_of("intermediate_size_mlp", ("intermediate_size_mlp",))
    mlp_bias = r.raw("mlp_bias") is True
    if dense_layers:
        parts.append(WeightPart(
            name="mlp",
            matrices=(Matrix(in_features=hidden, out_features=dense_size, count=2 * dense_layers),
                      Matrix(in_features=dense_size, out_features=hidden, count=dense_layers)),
            other_parameters=(2 * dense_size + hidden) * dense_layers if mlp_bias else 0,
        ))
    if moe_layers:
        n_moe = len(moe_layers)
        assert experts is not None and expert_size is not None
        bias = (2 * expert_size + hidden) * experts * n_moe if model_type == "gpt_oss" else 0
        parts.append(WeightPart(
            name="experts",
            matrices=(Matrix(in_features=hidden, out_features=expert_size, count=2 * experts * n_moe),
                      Matrix(in_features=expert_size, out_features=hidden, count=experts * n_moe)),
            other_parameters=bias,
        ))
        if shared_size:
            gate = hidden * n_moe if model_type == "qwen2_moe" else 0  # shared_expert_gate
            parts.append(WeightPart(
                name="shared_experts",
                matrices=(Matrix(in_features=hidden, out_features=shared_size, count=2 * n_moe),
                          Matrix(in_features=shared_size, out_features=hidden, count=n_moe)),
                other_parameters=gate,
            ))
        # gpt-oss routers have a bias; DeepSeek-V3-style routers an e_score_correction_bias.
        router_bias = experts * n_moe if model_type in ("gpt_oss", "deepseek_v3", "kimi_k2", "glm4_moe") else 0
        parts.append(WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=n_moe),),
                                other_parameters=router_bias, tp_sharded=False))
        r.note(
            f"MoE: {experts} experts of intermediate size {expert_size} in {n_moe} of {layers} layers, all resident"
            + (f"; {top_k} routed per token" if top_k else "")
        )
    norms_per_layer = 4 if model_type in ("gemma2", "gemma3_text") else 2
    parts.append(WeightPart(name="norms", other_parameters=(norms_per_layer * layers + 1) * hidden, tp_sharded=False))
    mtp = r.optional("num_nextn_predict_layers", ("num_nextn_predict_layers",))
    if mtp:
        r.note(
            f"num_nextn_predict_layers = {mtp}: the multi-token-prediction module is not counted "
            "(engines load it only for speculative decoding; the Hub checkpoint includes it)"
        )
    if moe_layers and expert_size:
        mlp_width = max(dense_size if dense_layers else 0, (top_k or 1) * expert_size + (shared_size or 0))
    else:
        mlp_width = dense_size
    shape = {"hidden_size": hidden, "mlp_width": mlp_width, "qkv_width": qkv_width, "vocab_size": _vocab(r)}
    return parts, experts if moe_layers else None, top_k if moe_layers else None, shape


def _vocab(r: ConfigReader) -> int:
    return r.first_of("vocab_size", ("vocab_size", "padded_vocab_size", "n_vocab"))


def _moe_layout(
    r: ConfigReader, model_type: str, layers: int, intermediate: int
) -> tuple[list[int], int | None, int | None, int | None, int | None]:
    """(MoE layer indices, experts, experts per token, expert intermediate size, shared expert size)."""
    top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok", "experts_per_token", "moe_topk"))
    if model_type in ("mixtral", "gpt_oss"):
        experts = r.first_of("num_experts", ("num_local_experts", "num_experts"))
        return list(range(layers)), experts, top_k, intermediate, None
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        experts = r.first_of("num_experts", ("num_experts",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        step = r.optional("decoder_sparse_step", ("decoder_sparse_step",)) or 1
        only_mlp = set(r.raw("mlp_only_layers") or []) if r.has("mlp_only_layers") else set()
        moe = [i for i in range(layers) if i not in only_mlp and (i + 1) % step == 0]
        shared = r.optional("shared_expert_intermediate_size", ("shared_expert_intermediate_size",))
        return moe, experts, top_k, size, shared
    if model_type in ("deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe"):
        experts = r.optional("num_experts", ("n_routed_experts",))
        if not experts:
            return [], None, None, None, None
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        first_dense = r.optional("first_k_dense_replace", ("first_k_dense_replace",)) or 0
        freq = r.optional("moe_layer_freq", ("moe_layer_freq",)) or 1
        moe = [i for i in range(layers) if i >= first_dense and i % freq == 0]
        shared = r.optional("n_shared_experts", ("n_shared_experts",))
        return moe, experts, top_k, size, (shared * size if shared else None)
    if model_type == "llama4_text":
        experts = r.first_of("num_experts", ("num_local_experts",))
        step = r.optional("interleave_moe_layer_step", ("interleave_moe_layer_step",)) or 1
        moe_list = r.raw("moe_layers")
        moe = list(moe_list) if isinstance(moe_list, list) else [i for i in range(layers) if (i + 1) % step == 0]
        return moe, experts, top_k, intermediate, intermediate
    return [], None, None, None, None


def _classic_decoder(r: ConfigReader, model_type: str) -> tuple[list[WeightPart], dict[str, int]]:
    """GPT-2-style blocks: LayerNorms with bias, a non-gated MLP, biases on most projections."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layer", "num_layers"))
    heads = r.first_of("num_attention_heads", ("num_attention_heads", "n_head"))
    head_dim = hidden // heads
    ln = 2 * hidden  # LayerNorm weight + bias
    inner_aliases = {"gpt2": ("n_inner",), "gpt_bigcode": ("n_inner",), "gptj": ("n_inner",),
                     "gpt_neox": ("intermediate_size",), "opt": ("ffn_dim",), "bloom": (),
                     "falcon": ("ffn_hidden_size",), "phi": ("intermediate_size",)}[model_type]
    inner = r.optional("intermediate_size", inner_aliases) if inner_aliases else None
    if not inner:
        inner = 4 * hidden
        r.note(f"MLP width is 4 x hidden_size = {inner} ({model_type} default)")
    kv = hidden
    if model_type == "gpt_bigcode" and r.raw("multi_query") is not False:
        kv = head_dim
    if model_type == "falcon":
        if r.raw("new_decoder_architecture") is True:
            kv = r.first_of("num_kv_heads", ("num_kv_heads",)) * head_dim
        elif r.raw("multi_query") is not False:
            kv = head_dim
    bias = model_type != "gptj" and not (model_type == "falcon" and r.raw("bias") is not True)
    attn = [Matrix(in_features=hidden, out_features=hidden + 2 * kv, count=layers),
            Matrix(in_features=hidden, out_features=hidden, count=layers)]
    mlp = [Matrix(in_features=hidden, out_features=inner, count=layers),
           Matrix(in_features=inner, out_features=hidden, count=layers)]
    norms_per_layer = 2
    if model_type in ("gptj", "phi") or (model_type == "falcon" and r.raw("parallel_attn") is not False
                                          and r.raw("new_decoder_architecture") is not True):
        norms_per_layer = 1  # one shared input LayerNorm (parallel attention + MLP)
    parts = _embeddings(r, hidden, lm_head_bias=model_type in ("gptj", "phi"))
    parts += [
        WeightPart(name="attention", matrices=tuple(attn),
                   other_parameters=(hidden + 2 * kv + hidden) * layers if bias else 0),
        WeightPart(name="mlp", matrices=tuple(mlp),
                   other_parameters=(inner + hidden) * layers if (bias or model_type == "gptj") else 0),
        WeightPart(name="norms", other_parameters=(norms_per_layer * layers + 1) * ln
                   + (ln if model_type == "bloom" else 0), tp_sharded=False),
    ]
    positions = {"gpt2": ("n_positions",), "gpt_bigcode": ("n_positions",), "opt": ("max_position_embeddings",)}
    if model_type in positions:
        count = r.first_of("max_position_embeddings", positions[model_type]) + (2 if model_type == "opt" else 0)
        parts.append(WeightPart(name="position_embeddings", other_parameters=count * hidden))
    return parts, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": hidden + 2 * kv, "vocab_size": _vocab(r)}


def _mamba(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers", "n_layer"))
    inner = r.optional("intermediate_size", ("intermediate_size",)) or 2 * hidden
    state = r.first_of("state_size", ("state_size", "d_state"))
    conv = r.first_of("conv_kernel", ("conv_kernel", "d_conv"))
    rank = r.raw("time_step_rank")
    dt_rank = rank if isinstance(rank, int) else math.ceil(hidden / 16)
    matrices = (Matrix(in_features=hidden, out_features=2 * inner, count=layers),
                Matrix(in_features=inner, out_features=dt_rank + 2 * state, count=layers),
                Matrix(in_features=dt_rank, out_features=inner, count=layers),
                Matrix(in_features=inner, out_features=hidden, count=layers))
    vectors = (inner * conv + inner + inner + inner * state + inner) * layers  # conv w+b, dt bias, A_log, D
    parts = _embeddings(r, hidden)
    parts += [WeightPart(name="mlp", matrices=matrices, other_parameters=vectors),
              WeightPart(name="norms", other_parameters=(layers + 1) * hidden, tp_sharded=False)]
    return parts, {"hidden_size": hidden, "mlp_width": 2 * inner, "qkv_width": dt_rank + 2 * state, "vocab_size": _vocab(r)}


def _vision(outer: Mapping[str, Any], text: ConfigReader, *, text_hidden: int) -> list[WeightPart]:
    """A ViT-style vision tower (CLIP, SigLIP and similar) and the projector into the language model."""
    v = ConfigReader(outer["vision_config"], source_name=text.source_name, prefix="vision_config.")
    hidden = v.first_of("hidden_size", ("hidden_size", "embed_dim", "width"))
    inner = v.first_of("intermediate_size", ("intermediate_size", "mlp_dim"))
    layers = v.first_of("num_hidden_layers", ("num_hidden_layers", "depth", "num_layers"))
    patch = v.first_of("patch_size", ("patch_size",))
    image = v.first_of("image_size", ("image_size",))
    channels = v.optional("num_channels", ("num_channels", "in_channels")) or 3
    vtype = str(outer["vision_config"].get("model_type", ""))
    clip = "clip" in vtype
    patches = (image // patch) ** 2 + (1 if clip else 0)
    # per layer: q/k/v/o biases, two LayerNorms (weight + bias), the two MLP biases
    other = (4 * hidden + 2 * 2 * hidden + inner + hidden) * layers
    # position embeddings, CLIP's class embedding or SigLIP's patch bias, and the tower's LayerNorms
    other += patches * hidden + hidden + 2 * 2 * hidden
    tower = WeightPart(
        name="vision_tower", vision=True,
        matrices=(Matrix(in_features=hidden, out_features=hidden, count=4 * layers),
                  Matrix(in_features=hidden, out_features=inner, count=layers),
                  Matrix(in_features=inner, out_features=hidden, count=layers),
                  Matrix(in_features=channels * patch * patch, out_features=hidden)),
        other_parameters=other,
    )
    outer_type = str(outer.get("model_type", ""))
    if outer_type.startswith("llava") or outer_type == "vipllava":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),
                                         Matrix(in_features=text_hidden, out_features=text_hidden)),
                               other_parameters=2 * text_hidden)
    elif outer_type == "gemma3":
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),), other_parameters=hidden)
    else:
        projector = WeightPart(name="projector", vision=True,
                               matrices=(Matrix(in_features=hidden, out_features=text_hidden),))
        text.note(f"vision projector of {outer_type} approximated as one {hidden} x {text_hidden} matrix")
    if not (clip or "siglip" in vtype):
        text.note(f"vision tower {vtype or '(unnamed)'} counted as a plain ViT (approximate)")
    text.note(f"vision tower ({vtype or 'vit'}, {layers} layers) reported separately as weights.vision_*")
    return [tower, projector]


# ---- storage ---------------------------------------------------------------------------------
def _checkpoint_dtype(text: Mapping[str, Any], outer: Mapping[str, Any], r: ConfigReader) -> tuple[str, int]:
    for source in (text, outer):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if isinstance(value, str):
                name = value.lower().removeprefix("torch.")
                if name not in DTYPE_BYTES:
                    raise ConfigError(f"{r.source_name}: {key} {value!r} is not a known dtype", "pass --weights-bytes SIZE")
                return name, DTYPE_BYTES[name]
    r.note("the config names no torch_dtype: weights counted in 16 bits, as engines serve them (--dtype auto)")
    return "float16", 2


def _quantisation(qc: Any, model_id: str, r: ConfigReader) -> Quantisation | None:
    if not isinstance(qc, Mapping):
        return None
    method = str(qc.get("quant_method") or "").lower()
    skip = tuple(str(m) for m in (qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore") or ()))
    if method == "fp8" or method == "fbgemm_fp8":
        block = qc.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2:
            return Quantisation(method="fp8", bits=8, block=(int(block[0]), int(block[1])), scale_bytes=4, not_converted=skip)
        return Quantisation(method=method, bits=8, scale_bytes=4, not_converted=skip)
    if method in ("awq", "gptq"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = int(qc.get("group_size") or qc.get("q_group_size") or 128)
        zero = method == "gptq" or qc.get("zero_point", True) is not False
        return Quantisation(
            method=method, bits=bits, group_size=None if group <= 0 else group, scale_bytes=2,
            zero_bits=bits if zero else 0, g_idx=method == "gptq", not_converted=skip,
        )
    if method == "mxfp4":
        # NOTE: gpt-oss ships expert weights as MXFP4: 4-bit values with one e8m0 byte per 32 values.
        return Quantisation(method="mxfp4", bits=4, group_size=32, scale_bytes=1, roles=frozenset({"experts"}),
                            not_converted=skip)
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            return Quantisation(method="bitsandbytes", bits=4, group_size=int(qc.get("bnb_4bit_blocksize") or 64),
                                scale_bytes=4, not_converted=skip)
        if qc.get("load_in_8bit"):
            return Quantisation(method="bitsandbytes", bits=8, scale_bytes=4, not_converted=skip)
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        first = next(iter(groups.values()), {}) if isinstance(groups, Mapping) else {}
        weights = first.get("weights") if isinstance(first, Mapping) else None
        if isinstance(weights, Mapping) and weights.get("num_bits"):
            group = weights.get("group_size") if weights.get("strategy") == "group" else None
            if len(groups) > 1:
                r.note("compressed-tensors: only the first config group's weight format is counted")
            return Quantisation(method="compressed-tensors", bits=int(weights["num_bits"]),
                                group_size=int(group) if group else None, scale_bytes=2,
                                zero_bits=0 if weights.get("symmetric", True) else int(weights["num_bits"]),
                                not_converted=skip)
    raise ConfigError(
        f"{model_id}: quantization_config quant_method {method or '(missing)'!r} is not one kvplan can size",
        "pass --weights-bytes SIZE (the checkpoint's size in bytes)",
    )


def _store(part: WeightPart, dtype_bytes: int, quant: Quantisation | None) -> WeightPart:
    plain = part.parameters * dtype_bytes
    if quant is None or part.name not in quant.roles or part.vision or _skipped(part.name, quant.not_converted):
        return dataclasses.replace(part, bytes=plain, storage=f"{dtype_bytes * 8}-bit")
    data = sum(quant.matrix_bytes(m) for m in part.matrices)
    return dataclasses.replace(part, bytes=data + part.other_parameters * dtype_bytes, storage=quant.describe())


#: Module-name fragments in ``modules_to_not_convert`` and the part they leave unquantised.
_SKIP_WORDS = {"attention": ("self_attn", "attn", "attention"), "mlp": ("mlp",), "experts": ("experts",),
               "shared_experts": ("shared_expert",)}


def _skipped(name: str, not_converted: tuple[str, ...]) -> bool:
    words = _SKIP_WORDS.get(name, ())
    for module in not_converted:
        last = module.rstrip(".*").split(".")[-1]
        if last in words:
            return True
    return False


def resolve_weights(
    config: Mapping[str, Any],
    *,
    model_id: str,
    source_kind: str,
    weights_bytes: int | None = None,
    weights_from: str = "auto",
    revision: str | None = None,
    token: str | None = None,
    required: bool = True,
    fetch: Callable[..., Any] | None = None,
) -> tuple[WeightsEstimate | None, list[str]]:
    """The weights for ``kvplan capacity``, and notes on where they came from.

    ``weights_from``: ``config`` counts from config.json; ``safetensors`` reads the Hub's safetensors
    headers (Hub models only); ``auto`` = safetensors for Hub models when online, else config.
    ``--weights-bytes`` beats both. With ``required=False`` a model kvplan cannot count gives None.
    """
    import os

    if weights_from not in ("auto", "config", "safetensors"):
        raise InputError(f"--weights-from {weights_from!r} is not auto, config or safetensors", "e.g. --weights-from config")
    if weights_from == "safetensors" and source_kind != "hub":
        raise InputError(
            "--weights-from safetensors reads the Hub's metadata, but --model is a local or bundled config",
            "pass the Hub repo id with --revision (bundled names resolve offline), or --weights-bytes SIZE",
        )
    notes: list[str] = []
    try:
        counted = count_weights(config, model_id=model_id)
    except ConfigError as exc:
        if weights_bytes is not None:
            return weights_from_bytes(weights_bytes, model_id=model_id, model_type=str(config.get("model_type")),
                                      why=exc.message), notes
        if not required:
            notes.append(f"weights not counted ({exc.message}); pass --weights-bytes for the decode floor")
            return None, notes
        raise
    if weights_bytes is not None:
        return with_exact_bytes(counted, weights_bytes, source="--weights-bytes",
                                note=f"weight bytes from --weights-bytes ({weights_bytes:,}); counted "
                                f"{counted.counted_bytes:,}"), notes
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if weights_from == "safetensors" or (weights_from == "auto" and source_kind == "hub" and not offline):
        try:
            total, counts = weights_from_safetensors(model_id, revision=revision, token=token, fetch=fetch)
        except SourceError as exc:
            if weights_from == "safetensors":
                raise
            notes.append(f"safetensors metadata unavailable ({exc.message}); weights counted from config.json")
            return counted, notes
        dtypes = ", ".join(f"{d} {n:,}" for d, n in sorted(counts.items()))
        return with_exact_bytes(counted, total, source="safetensors",
                                note=f"weight bytes from the Hub's safetensors metadata ({dtypes} elements); "
                                f"counted from config: {counted.counted_bytes:,}"), notes
    return counted, notes


# ---- hybrid-state, GLM, encoder-decoder and other families -------------------------------------
def _gqa_attention(hidden: int, heads: int, kv_heads: int, head_dim: int, layers: int, *,
                   q_factor: int = 1) -> list[Matrix]:
    """q (x q_factor for gated attention), k, v and o projections of ``layers`` attention layers."""
    q, kv = heads * head_dim, kv_heads * head_dim
    return [Matrix(in_features=hidden, out_features=q * q_factor, count=layers),
            Matrix(in_features=hidden, out_features=kv, count=2 * layers),
            Matrix(in_features=q, out_features=hidden, count=layers)]


def _parser(r: ConfigReader) -> ArchParser:
    """The arch parser that sizes this model's cache, so weights and KV read heads by the same rules."""
    model_type = r.raw("model_type")
    return REGISTRY.get(model_type if isinstance(model_type, str) else "", ArchParser)()


def _kv_heads(r: ConfigReader, heads: int) -> int:
    return _parser(r).kv_heads(r, heads)


def _head_dim(r: ConfigReader, heads: int) -> int:
    return _parser(r).head_dim(r, heads)


def _experts_parts(hidden: int, expert_size: int, experts: int, n_moe: int, *, gated: bool = True,
                   shared_size: int | None = None, shared_gate: bool = False, router_bias: bool = False) -> list[WeightPart]:
    """Every expert resident (gated: gate/up/down; else up/down), optional shared expert, the router."""
    per_expert = 2 if gated else 1
    parts = [WeightPart(name="experts", matrices=(
        Matrix(in_features=hidden, out_features=expert_size, count=per_expert * experts * n_moe),
        Matrix(in_features=expert_size, out_features=hidden, count=experts * n_moe)))]
    if shared_size:
        parts.append(WeightPart(name="shared_experts", matrices=(
            Matrix(in_features=hidden, out_features=shared_size, count=per_expert * n_moe),
            Matrix(in_features=shared_size, out_features=hidden, count=n_moe)),
            other_parameters=hidden * n_moe if shared_gate else 0))
    parts.append(WeightPart(name="router", matrices=(Matrix(in_features=hidden, out_features=experts, count=n_moe),),
                            other_parameters=experts * n_moe if router_bias else 0, tp_sharded=False))
    return parts


def _bool(r: ConfigReader, key: str, default: bool) -> bool:
    value = r.raw(key)
    if isinstance(value, bool):
        return value
    default = bool(r.defaults.get(key, default))
    r.note(f"{r.prefix}{key} is not in the config; the {r.defaults_name} default is {str(default).lower()}")
    return default


def _mamba1_mixer(r: ConfigReader, hidden: int, count: int, *, d_inner: int, d_state: int, d_conv: int,
                  dt_rank: int, conv_bias: bool, proj_bias: bool, inner_norms: int = 0) -> WeightPart:
    """Mamba-1 mixers: in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj (+ Jamba's dt/B/C norms)."""
    matrices = (Matrix(in_features=hidden, out_features=2 * d_inner, count=count),
                Matrix(in_features=d_inner, out_features=dt_rank + 2 * d_state, count=count),
                Matrix(in_features=dt_rank, out_features=d_inner, count=count),
                Matrix(in_features=d_inner, out_features=hidden, count=count))
    vectors = d_inner * d_conv + (d_inner if conv_bias else 0) + d_inner + d_inner * d_state + d_inner
    vectors += (2 * d_inner + hidden) if proj_bias else 0
    vectors += inner_norms
    return WeightPart(name="mamba", matrices=matrices, other_parameters=vectors * count)


def _jamba(r: ConfigReader) -> tuple[list[WeightPart], int, int | None, dict[str, int]]:
    """Jamba: attention in layers i % attn_layer_period == attn_layer_offset, Mamba-1 elsewhere; MoE MLP
    in layers i % expert_layer_period == expert_layer_offset, a dense MLP elsewhere."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = _kv_heads(r, heads)
    head_dim = _head_dim(r, heads)
    period = r.first_of("attn_layer_period", ("attn_layer_period",))
    offset = r.first_of("attn_layer_offset", ("attn_layer_offset",))
    e_period = r.first_of("expert_layer_period", ("expert_layer_period",))
    e_offset = r.first_of("expert_layer_offset", ("expert_layer_offset",))
    n_attn = sum(1 for i in range(layers) if i % period == offset)
    n_moe = sum(1 for i in range(layers) if i % e_period == e_offset)
    d_inner = r.first_of("mamba_expand", ("mamba_expand",)) * hidden
    d_state = r.first_of("mamba_d_state", ("mamba_d_state",))
    d_conv = r.first_of("mamba_d_conv", ("mamba_d_conv",))
    rank = r.raw("mamba_dt_rank")
    dt_rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else math.ceil(hidden / 16)
    if not isinstance(rank, int):
        r.note(f"mamba_dt_rank auto = ceil(hidden_size / 16) = {dt_rank}")
    intermediate = r.first_of("intermediate_size", ("intermediate_size",))
    experts = r.first_of("num_experts", ("num_experts",))
    top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=tuple(_gqa_attention(hidden, heads, kv_heads, head_dim, n_attn))))
    parts.append(_mamba1_mixer(r, hidden, layers - n_attn, d_inner=d_inner, d_state=d_state, d_conv=d_conv,
                               dt_rank=dt_rank, conv_bias=_bool(r, "mamba_conv_bias", True),
                               proj_bias=_bool(r, "mamba_proj_bias", False), inner_norms=dt_rank + 2 * d_state))
    if layers - n_moe:
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - n_moe)),
            Matrix(in_features=intermediate, out_features=hidden, count=layers - n_moe))))
    parts += _experts_parts(hidden, intermediate, experts, n_moe)
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
    r.note(f"Jamba: {n_attn} attention and {layers - n_attn} Mamba layers; {experts} experts in {n_moe} of {layers} "
           "layers, all resident")
    shape = {"hidden_size": hidden, "mlp_width": max(intermediate, (top_k or 1) * intermediate),
             "qkv_width": max((heads + 2 * kv_heads) * head_dim, 2 * d_inner), "vocab_size": _vocab(r)}
    return parts, experts, top_k, shape


def _qwen3_next(r: ConfigReader) -> tuple[list[WeightPart], int | None, int | None, dict[str, int]]:
    """Qwen3-Next: gated full attention every full_attention_interval-th layer (q_proj doubled for the
    output gate, q/k norms), Gated DeltaNet elsewhere, MoE MLPs with a gated shared expert."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = _kv_heads(r, heads)
    head_dim = r.first_of("head_dim", ("head_dim",))
    interval = r.first_of("full_attention_interval", ("full_attention_interval",))
    types = r.raw("layer_types")
    if isinstance(types, list) and len(types) == layers:
        n_full = sum(1 for t in types if t in ("full_attention", "attention"))
    else:
        n_full = sum(1 for i in range(layers) if (i + 1) % interval == 0)
    n_linear = layers - n_full
    hk = r.first_of("linear_num_key_heads", ("linear_num_key_heads",))
    hv = r.first_of("linear_num_value_heads", ("linear_num_value_heads",))
    dk = r.first_of("linear_key_head_dim", ("linear_key_head_dim",))
    dv = r.first_of("linear_value_head_dim", ("linear_value_head_dim",))
    conv = r.first_of("linear_conv_kernel_dim", ("linear_conv_kernel_dim",))
    key_dim, value_dim = hk * dk, hv * dv
    parts = _embeddings(r, hidden)
    attention = _gqa_attention(hidden, heads, kv_heads, head_dim, n_full, q_factor=2)
    attention += [Matrix(in_features=hidden, out_features=2 * key_dim + 2 * value_dim, count=n_linear),  # in_proj_qkvz
                  Matrix(in_features=hidden, out_features=2 * hv, count=n_linear),  # in_proj_ba
                  Matrix(in_features=value_dim, out_features=hidden, count=n_linear)]  # out_proj
    # q/k norms of the full layers; conv1d, dt_bias, A_log and the gated norm of the DeltaNet layers
    other = 2 * head_dim * n_full + ((2 * key_dim + value_dim) * conv + 2 * hv + dv) * n_linear
    parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=other))
    intermediate = r.first_of("intermediate_size", ("intermediate_size",))
    moe, experts, top_k, expert_size, shared = _moe_layout(r, "qwen3_next", layers, intermediate)
    if len(moe) < layers:
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=intermediate, count=2 * (layers - len(moe))),
            Matrix(in_features=intermediate, out_features=hidden, count=layers - len(moe)))))
    if moe:
        assert experts is not None and expert_size is not None
        parts += _experts_parts(hidden, expert_size, experts, len(moe), shared_size=shared, shared_gate=True)
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
    r.note(f"Qwen3-Next: {n_full} gated full-attention and {n_linear} Gated DeltaNet layers; {experts} experts "
           "per MoE layer, all resident; the multi-token-prediction layer is not counted")
    shape = {"hidden_size": hidden, "mlp_width": (top_k or 1) * (expert_size or intermediate) + (shared or 0),
             "qkv_width": 2 * key_dim + 2 * value_dim, "vocab_size": _vocab(r)}
    return parts, experts if moe else None, top_k if moe else None, shape


def _nemotron_h(r: ConfigReader) -> tuple[list[WeightPart], int | None, int | None, dict[str, int]]:
    """Nemotron-H: one mixer per block from hybrid_override_pattern: M = Mamba-2, * = attention,
    - = MLP (up/down, squared ReLU), E = MoE; each block has one RMSNorm."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    pattern = r.first_of("hybrid_override_pattern", ("hybrid_override_pattern",), kind="str")
    if len(pattern) != layers or set(pattern) - set("M*-E"):
        raise ConfigError(f"{r.source_name}: hybrid_override_pattern {pattern!r} does not describe {layers} layers",
                          "use one of M, *, -, E per layer")
    n_m, n_a, n_mlp, n_e = (pattern.count(s) for s in "M*-E")
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = _kv_heads(r, heads)
    head_dim = _head_dim(r, heads)
    parts = _embeddings(r, hidden)
    attn_bias = (heads + 2 * kv_heads) * head_dim + hidden if _bool(r, "attention_bias", False) else 0
    parts.append(WeightPart(name="attention", matrices=tuple(_gqa_attention(hidden, heads, kv_heads, head_dim, n_a)),
                            other_parameters=attn_bias * n_a))
    qkv_width = (heads + 2 * kv_heads) * head_dim
    if n_m:
        n_heads = r.first_of("mamba_num_heads", ("mamba_num_heads",))
        d_head = r.first_of("mamba_head_dim", ("mamba_head_dim",))
        groups = r.first_of("n_groups", ("n_groups",))
        d_state = r.first_of("ssm_state_size", ("ssm_state_size", "state_size"))
        conv = r.first_of("conv_kernel", ("conv_kernel",))
        d_inner = n_heads * d_head
        conv_dim = d_inner + 2 * groups * d_state
        in_out = 2 * d_inner + 2 * groups * d_state + n_heads
        vectors = conv_dim * conv + (conv_dim if _bool(r, "use_conv_bias", True) else 0) + 3 * n_heads + d_inner
        if _bool(r, "use_bias", False):
            vectors += in_out + hidden
        parts.append(WeightPart(name="mamba", matrices=(
            Matrix(in_features=hidden, out_features=in_out, count=n_m),
            Matrix(in_features=d_inner, out_features=hidden, count=n_m)), other_parameters=vectors * n_m))
        qkv_width = max(qkv_width, in_out)
    intermediate = r.first_of("intermediate_size", ("intermediate_size",)) if n_mlp else 0
    if n_mlp:
        bias = (intermediate + hidden) * n_mlp if _bool(r, "mlp_bias", False) else 0
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=hidden, out_features=intermediate, count=n_mlp),
            Matrix(in_features=intermediate, out_features=hidden, count=n_mlp)), other_parameters=bias))
    experts = top_k = None
    width = intermediate
    if n_e:
        experts = r.first_of("num_experts", ("n_routed_experts", "num_experts"))
        top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
        size = r.first_of("moe_intermediate_size", ("moe_intermediate_size",))
        shared = r.optional("moe_shared_expert_intermediate_size", ("moe_shared_expert_intermediate_size",))
        parts += _experts_parts(hidden, size, experts, n_e, gated=False, shared_size=shared, router_bias=True)
        width = max(width, (top_k or 1) * size + (shared or 0))
    parts.append(WeightPart(name="norms", other_parameters=(layers + 1) * hidden, tp_sharded=False))
    r.note(f"Nemotron-H: {n_m} Mamba-2, {n_a} attention, {n_mlp} MLP and {n_e} MoE blocks")
    return parts, experts, top_k, {"hidden_size": hidden, "mlp_width": width, "qkv_width": qkv_width,
                                   "vocab_size": _vocab(r)}


def _minimax(r: ConfigReader) -> tuple[list[WeightPart], int, int | None, dict[str, int]]:
    """MiniMax-01/M1: lightning attention (qkv, output gate, out_proj, norm) where attn_type_list is 0,
    softmax GQA attention where it is 1; MoE MLP in every layer."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = _kv_heads(r, heads)
    head_dim = _head_dim(r, heads)
    flags = r.first_of("attn_type_list", ("attn_type_list",), kind="list")
    if len(flags) != layers:
        raise ConfigError(f"{r.source_name}: attn_type_list has {len(flags)} entries for {layers} layers",
                          "one 0 (lightning) or 1 (softmax) per layer")
    n_soft = sum(1 for f in flags if f == 1)
    n_lin = layers - n_soft
    inner = heads * head_dim
    attention = _gqa_attention(hidden, heads, kv_heads, head_dim, n_soft)
    attention += [Matrix(in_features=hidden, out_features=3 * inner, count=n_lin),  # qkv_proj
                  Matrix(in_features=hidden, out_features=inner, count=n_lin),  # output_gate
                  Matrix(in_features=inner, out_features=hidden, count=n_lin)]  # out_proj
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=inner * n_lin))
    experts = r.first_of("num_experts", ("num_local_experts", "num_experts"))
    top_k = r.optional("num_experts_per_tok", ("num_experts_per_tok",))
    size = r.first_of("intermediate_size", ("intermediate_size",))
    shared = r.raw("shared_intermediate_size")
    shared = shared if isinstance(shared, int) and shared > 0 else None
    parts += _experts_parts(hidden, size, experts, layers, shared_size=shared)
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
    r.note(f"MiniMax: {n_lin} lightning-attention and {n_soft} softmax-attention layers; {experts} experts per layer, "
           "all resident")
    return parts, experts, top_k, {"hidden_size": hidden, "mlp_width": (top_k or 1) * size + (shared or 0),
                                   "qkv_width": 4 * inner, "vocab_size": _vocab(r)}


def _chatglm(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    """ChatGLM2/3 and GLM-4 (remote code): fused query_key_value with multi-query groups, SwiGLU MLP."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_layers", "num_hidden_layers"))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    head_dim = r.optional("kv_channels", ("kv_channels",)) or hidden // heads
    groups = heads
    if _bool(r, "multi_query_attention", False):
        groups = r.first_of("multi_query_group_num", ("multi_query_group_num",))
    q, kv = heads * head_dim, groups * head_dim
    ffn = r.first_of("intermediate_size", ("ffn_hidden_size",))
    linear_bias = _bool(r, "add_bias_linear", False)
    qkv_bias = _bool(r, "add_qkv_bias", False) or linear_bias
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=(
        Matrix(in_features=hidden, out_features=q + 2 * kv, count=layers),
        Matrix(in_features=q, out_features=hidden, count=layers)),
        other_parameters=((q + 2 * kv) if qkv_bias else 0) * layers + (hidden * layers if linear_bias else 0)))
    parts.append(WeightPart(name="mlp", matrices=(
        Matrix(in_features=hidden, out_features=2 * ffn, count=layers),
        Matrix(in_features=ffn, out_features=hidden, count=layers)),
        other_parameters=(2 * ffn + hidden) * layers if linear_bias else 0))
    final = 1 if _bool(r, "post_layer_norm", True) else 0
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + final) * hidden, tp_sharded=False))
    return parts, {"hidden_size": hidden, "mlp_width": ffn, "qkv_width": q + 2 * kv, "vocab_size": _vocab(r)}


def _starcoder2(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    """StarCoder2: GQA attention and a c_fc/c_proj MLP, with biases (use_bias), LayerNorms with bias."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("num_hidden_layers",))
    heads = r.first_of("num_attention_heads", ("num_attention_heads",))
    kv_heads = _kv_heads(r, heads)
    head_dim = hidden // heads
    inner = r.first_of("intermediate_size", ("intermediate_size",))
    bias = _bool(r, "use_bias", True)
    q, kv = heads * head_dim, kv_heads * head_dim
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=tuple(_gqa_attention(hidden, heads, kv_heads, head_dim, layers)),
                            other_parameters=(q + 2 * kv + hidden) * layers if bias else 0))
    parts.append(WeightPart(name="mlp", matrices=(
        Matrix(in_features=hidden, out_features=inner, count=layers),
        Matrix(in_features=inner, out_features=hidden, count=layers)),
        other_parameters=(inner + hidden) * layers if bias else 0))
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * 2 * hidden, tp_sharded=False))
    return parts, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": q + 2 * kv, "vocab_size": _vocab(r)}


def _mpt(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    """MPT: fused Wqkv (attn_config.kv_n_heads for GQA), up/down MLP of expansion_ratio x d_model, ALiBi
    (no position embeddings, as transformers' MptModel), LayerNorms without bias when no_bias."""
    hidden = _hidden(r)
    layers = r.first_of("num_hidden_layers", ("n_layers",))
    heads = r.first_of("num_attention_heads", ("n_heads",))
    head_dim = hidden // heads
    kv_heads = r.optional("num_kv_heads", ("attn_config.kv_n_heads",)) or heads
    ratio = r.raw("expansion_ratio")
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool):
        ratio = 4
        r.note("expansion_ratio is not in the config; the MPT default is 4")
    inner = int(ratio * hidden)
    bias = not _bool(r, "no_bias", True)
    qkv = hidden + 2 * kv_heads * head_dim
    parts = _embeddings(r, hidden)
    parts.append(WeightPart(name="attention", matrices=(
        Matrix(in_features=hidden, out_features=qkv, count=layers),
        Matrix(in_features=hidden, out_features=hidden, count=layers)),
        other_parameters=(qkv + hidden) * layers if bias else 0))
    parts.append(WeightPart(name="mlp", matrices=(
        Matrix(in_features=hidden, out_features=inner, count=layers),
        Matrix(in_features=inner, out_features=hidden, count=layers)),
        other_parameters=(inner + hidden) * layers if bias else 0))
    ln = 2 * hidden if bias else hidden
    parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * ln, tp_sharded=False))
    return parts, {"hidden_size": hidden, "mlp_width": inner, "qkv_width": qkv, "vocab_size": _vocab(r)}


def _t5(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    """T5 family: encoder and decoder stacks (decoder layers add cross-attention), bias-free projections,
    RMS LayerNorms, relative position buckets in the first layer of each stack, one shared embedding."""
    d_model = _hidden(r)
    heads = r.first_of("num_attention_heads", ("num_heads",))
    d_kv = r.first_of("head_dim", ("d_kv",))
    d_ff = r.first_of("intermediate_size", ("d_ff",))
    enc = r.first_of("num_encoder_layers", ("num_layers",))
    dec = r.optional("num_decoder_layers", ("num_decoder_layers",)) or enc
    proj = r.raw("feed_forward_proj")
    if not isinstance(proj, str):
        proj = str(r.defaults.get("feed_forward_proj", "relu"))
        r.note(f"feed_forward_proj is not in the config; the {r.defaults_name} default is {proj}")
    gated = proj.startswith("gated")
    buckets = r.optional("relative_attention_num_buckets", ("relative_attention_num_buckets",)) or 32
    inner = heads * d_kv
    attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
    parts = _embeddings(r, d_model)
    parts.append(WeightPart(name="attention", matrices=(
        Matrix(in_features=d_model, out_features=inner, count=3 * attn_blocks),
        Matrix(in_features=inner, out_features=d_model, count=attn_blocks)),
        other_parameters=2 * buckets * heads))
    parts.append(WeightPart(name="mlp", matrices=(
        Matrix(in_features=d_model, out_features=d_ff, count=(2 if gated else 1) * (enc + dec)),
        Matrix(in_features=d_ff, out_features=d_model, count=enc + dec))))
    parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 2) * d_model, tp_sharded=False))
    r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
    return parts, {"hidden_size": d_model, "mlp_width": d_ff * (2 if gated else 1), "qkv_width": 3 * inner,
                   "vocab_size": _vocab(r)}


def _whisper(r: ConfigReader) -> tuple[list[WeightPart], dict[str, int]]:
    """Whisper: conv front end and learned positions, encoder and decoder layers (q, v, o with bias; k
    without), LayerNorms with bias, decoder cross-attention, proj_out tied to the token embedding."""
    d = _hidden(r)
    enc = r.first_of("encoder_layers", ("encoder_layers",))
    dec = r.first_of("decoder_layers", ("decoder_layers",))
    enc_ffn = r.first_of("encoder_ffn_dim", ("encoder_ffn_dim",))
    dec_ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim",))
    mels = r.first_of("num_mel_bins", ("num_mel_bins",))
    src = r.first_of("max_source_positions", ("max_source_positions",))
    tgt = r.first_of("max_target_positions", ("max_target_positions",))
    attn_blocks = enc + 2 * dec
    parts = _embeddings(r, d)
    parts.append(WeightPart(name="position_embeddings", other_parameters=(src + tgt) * d))
    parts.append(WeightPart(name="conv", other_parameters=mels * d * 3 + d + d * d * 3 + d))
    parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=d, count=4 * attn_blocks),),
                            other_parameters=3 * d * attn_blocks))
    parts.append(WeightPart(name="mlp", matrices=(
        Matrix(in_features=d, out_features=enc_ffn, count=enc), Matrix(in_features=enc_ffn, out_features=d, count=enc),
        Matrix(in_features=d, out_features=dec_ffn, count=dec), Matrix(in_features=dec_ffn, out_features=d, count=dec)),
        other_parameters=(enc_ffn + d) * enc + (dec_ffn + d) * dec))
    parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 2) * 2 * d, tp_sharded=False))
    r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
    return parts, {"hidden_size": d, "mlp_width": dec_ffn, "qkv_width": 3 * d, "vocab_size": _vocab(r)}


#: Families with their own counter that may have experts: (parts, experts, experts per token, shape).
_MOE_HYBRID: dict[str, Callable[[ConfigReader], tuple[list[WeightPart], int | None, int | None, dict[str, int]]]] = {
    "jamba": _jamba, "qwen3_next": _qwen3_next, "nemotron_h": _nemotron_h,
    "minimax": _minimax, "minimax_m1": _minimax, "minimax_text_01": _minimax,
}
#: Dense families with their own counter: (parts, shape).
_OTHER: dict[str, Callable[[ConfigReader], tuple[list[WeightPart], dict[str, int]]]] = {
    "chatglm": _chatglm, "t5": _t5, "mt5": _t5, "whisper": _whisper, "starcoder2": _starcoder2, "mpt": _mpt,
}


# ---- the dtype an engine serves the weights in -----------------------------------------------
#: ``--dtype`` spellings (vLLM's ``--dtype`` choices and torch names) -> kvplan's dtype name.
SERVE_DTYPES: dict[str, str] = {
    "half": "float16", "float16": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float": "float32", "float32": "float32", "fp32": "float32",
}
#: Engines that load a checkpoint in its own dtype (transformers 5 ``from_pretrained(dtype="auto")``);
#: every other engine's ``--dtype auto`` serves float32 checkpoints in 16 bits.
CHECKPOINT_DTYPE_ENGINES = frozenset({"hf-dynamic", "hf-static"})


def served_dtype(weights_dtype: str, *, engine: str, dtype: str = "auto") -> tuple[str, str]:
    """(dtype the engine holds unquantised weights in, why), for ``--dtype`` (``auto`` = the engine's rule).

    NOTE: vLLM's and SGLang's ``--dtype auto`` load a float32 checkpoint in 16 bits (bfloat16 where the
    GPU supports it, else float16: ``_get_and_verify_dtype``); TensorRT-LLM's ``dtype="auto"`` does the
    same and llama.cpp's converter writes 16-bit GGUF by default. transformers 5 keeps the checkpoint's
    dtype (``dtype="auto"``), so the hf-* profiles hold float32 weights in 4 bytes.
    """
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key != "auto":
        if key not in SERVE_DTYPES:
            raise InputError(f"--dtype {dtype!r} is not a weight dtype",
                             "use auto, bfloat16, float16 (half) or float32 (float), as vLLM's --dtype")
        return SERVE_DTYPES[key], f"--dtype {dtype}"
    if weights_dtype in ("float32", "float64") and engine not in CHECKPOINT_DTYPE_ENGINES:
        return "bfloat16", (f"{engine} --dtype auto serves a {weights_dtype} checkpoint in 16 bits "
                            "(bfloat16; float16 on GPUs without bf16); pass --dtype float32 to keep 4 bytes")
    return weights_dtype, "the checkpoint's dtype" + (f" ({engine} loads it as stored)" if engine in
                                                       CHECKPOINT_DTYPE_ENGINES else "")


def serve_weights(weights: WeightsEstimate, *, engine: str, dtype: str = "auto") -> tuple[WeightsEstimate, str | None]:
    """The weights as ``engine`` holds them in memory, and a note when that differs from the checkpoint.

    Quantised matrices keep their format; plain tensors take the served dtype. Exact bytes from the Hub's
    safetensors metadata are scaled by the same ratio; ``--weights-bytes`` is taken as given.
    """
    if not weights.counted:
        if dtype.strip().lower() != "auto":
            return weights, f"--dtype {dtype} ignored: the weights were given as bytes (--weights-bytes)"
        return weights, None
    name, why = served_dtype(weights.dtype, engine=engine, dtype=dtype)
    new_bytes = DTYPE_BYTES[name]
    if name == weights.dtype or (new_bytes == weights.dtype_bytes and dtype.strip().lower() == "auto"):
        return weights, None
    parts = tuple(_store(dataclasses.replace(p, bytes=0, storage=""), new_bytes, weights.quantisation)
                  for p in weights.parts)
    counted = sum(p.bytes for p in parts)
    override = weights.bytes_override
    if override is not None and weights.source == "safetensors" and weights.counted_bytes:
        override = override * counted // weights.counted_bytes
    note = (f"weights held in {name} ({new_bytes} bytes per value) although the checkpoint is {weights.dtype}: {why}"
            + ("; --weights-bytes taken as given" if weights.source == "--weights-bytes" else ""))
    return dataclasses.replace(weights, parts=parts, dtype=name, dtype_bytes=new_bytes, bytes_override=override,
                               notes=(*weights.notes, note)), note
