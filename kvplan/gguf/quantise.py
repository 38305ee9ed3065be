"""llama.cpp's quantisation mixes (``llama-quantize``) applied to a config.json's counted weights.

What a llama.cpp user runs is a GGUF quantised by ``llama-quantize``, most often Q4_K_M, not the bf16
checkpoint. The per-tensor rule is llama.cpp's ``src/llama-quant.cpp`` (``llama_tensor_get_type_impl``,
``tensor_allows_quantization``, ``tensor_type_fallback`` @ 007dbbf3), for the file types kvplan offers:

- every 2-D (and 3-D expert) ``*.weight`` takes the file type's base type (Q4_K_M: Q4_K; Q5_K_M:
  Q5_K; Q6_K; Q8_0; F16; BF16); norms, the expert router (``ffn_gate_inp``), position embeddings and 1-D
  vectors are not quantised (F32 as ``convert_hf_to_gguf`` writes them);
- ``output.weight`` (or ``token_embd.weight`` when there is no output tensor: tied embeddings) is Q6_K for
  a k-quant, Q8_0 for Falcon or a row length not a multiple of the base block;
- Q4_K_M / Q5_K_M: ``attn_v`` (and ``attn_qkv``) number ``i`` of ``n`` and ``ffn_down`` of layer ``i`` of
  ``n_layer`` are Q6_K when ``use_more_bits(i, n)``: ``i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2``
  (Falcon's ffn_down: Q6_K below n/16, Q5_K on the use_more_bits layers); the 70B Llama's attn_v is at
  least Q5_K; an 8-expert model (Mixtral) keeps attn_v and attn_k in Q8_0 and attn_output in Q5_K;
- a tensor whose rows are not whole blocks falls back: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16.

A ggml type stores ``block`` values in ``size`` bytes (``ggml-common.h``): Q4_K 256 in 144, Q5_K 256 in
176, Q6_K 256 in 210, Q8_0 32 in 34, Q5_0 32 in 22, Q5_1 32 in 24, F16/BF16 2 bytes, F32 4.

kvplan knows each part's matrices by shape, not by llama.cpp tensor name; it names them so: in the
attention part, a matrix of ``hidden -> q + 2 kv`` width is ``attn_qkv``, one counted twice per q matrix
is ``attn_k`` + ``attn_v``, the last ``-> hidden`` one is ``attn_output``; in an MLP or expert part the
``-> hidden`` matrix is ``ffn_down``. MoE layers are taken to follow the dense ones (DeepSeek's
``first_k_dense_replace``); an interleaved MoE model's ffn_down bump may sit on other layers (same count).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.errors import InputError
from kvplan.gguf.weights import LlamaCppLayerSplit
from kvplan.models.tensors import Matrix, Quantisation, WeightPart, WeightsEstimate

#: ggml type -> (values per block, bytes per block), ggml-common.h.
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_0": (32, 34), "Q5_0": (32, 22),
    "Q5_1": (32, 24), "F16": (1, 2), "BF16": (1, 2), "F32": (1, 4),
}
#: llama-quantize file type -> its base ggml type (``llama_ftype_get_default_type``).
FILE_TYPES: dict[str, str] = {
    "Q4_K_M": "Q4_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K", "Q8_0": "Q8_0", "F16": "F16", "BF16": "BF16",
}
#: What llama.cpp users run when nobody says otherwise.
DEFAULT_FILE_TYPE = "Q4_K_M"
#: ``tensor_type_fallback``: the type used when a row is not a whole number of blocks.
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
#: The ``source`` of a WeightsEstimate built here.
SOURCE = "llama.cpp rule"
#: Parts whose tensors llama-quantize leaves as they are (norms, router, position embeddings: F32).
_KEPT_F32 = frozenset({"norms", "router", "router_tables", "position_embeddings", "altup_laurel"})
#: Parts llama.cpp ships in a separate mmproj file, F16 as its converter writes them.
_MMPROJ = frozenset({"vision_tower", "projector", "mllama_vision_model"})
_FFN = frozenset({"mlp", "experts", "shared_experts"})


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp's ``use_more_bits(i_layer, n_layers)`` (C integer division; i >= n/8 where it matters)."""
    eighth = n // 8
    return i < eighth or i >= 7 * n // 8 or (i - eighth) % 3 == 2


def file_type(name: str | None) -> str:
    """A ``--weights-quant`` value as llama.cpp spells it (case-insensitive), or an error listing the choices."""
    if name is None:
        return DEFAULT_FILE_TYPE
    key = name.strip().upper()
    if key not in FILE_TYPES:
        raise InputError(f"--weights-quant {name!r} is not a llama.cpp file type kvplan sizes",
                         f"one of {', '.join(FILE_TYPES)} (default {DEFAULT_FILE_TYPE})")
    return key


def tensor_bytes(m: Matrix, ggml_type: str) -> int:
    """Bytes of ``m.count`` tensors of ``m.out_features`` rows of ``m.in_features`` values (ggml's ne[0])."""
    ggml_type = fit_rows(ggml_type, m.in_features)
    block, size = GGML_BLOCKS[ggml_type]
    return m.count * m.out_features * (m.in_features // block) * size


def fit_rows(ggml_type: str, ncols: int) -> str:
    """``tensor_type_fallback``: a type whose blocks tile a row of ``ncols`` values."""
    if ncols % GGML_BLOCKS[ggml_type][0] == 0:
        return ggml_type
    fallback = _FALLBACK.get(ggml_type, "F16")
    return fallback if ncols % GGML_BLOCKS[fallback][0] == 0 else "F16"


@dataclass(frozen=True, kw_only=True, slots=True)
class GgufQuantisation(Quantisation):
    """The report's ``weights.quantization``: which llama.cpp file type, and that it is not the checkpoint."""

    file_type: str
    checkpoint_dtype: str
    chosen: bool = False
    """The user picked it (--weights-quant); else it is the llama.cpp profile's default."""

    def describe(self) -> str:
        return f"{self.file_type} ({'--weights-quant' if self.chosen else 'llama.cpp default; --weights-quant for others'})"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Group:
    """``count`` tensors of one shape: ``bumped`` of them take ``high``, the rest ``low``."""

    matrix: Matrix
    low: str
    high: str
    layers: tuple[int, ...] = ()
    """Layer of each bumped tensor (for the device split)."""

    @property
    def bumped(self) -> int:
        return len(self.layers)

    def total(self) -> int:
        m = self.matrix
        return (m.count - self.bumped) * _one_bytes(m, self.low) + self.bumped * _one_bytes(m, self.high or self.low)

    def bump(self) -> int:
        m = self.matrix
        return _one_bytes(m, self.high or self.low) - _one_bytes(m, self.low)


def _one_bytes(m: Matrix, ggml_type: str) -> int:
    """:func:`tensor_bytes` of one of ``m``'s tensors (``m.count`` aside)."""
    ggml_type = fit_rows(ggml_type, m.in_features)
    block, size = GGML_BLOCKS[ggml_type]
    return m.out_features * (m.in_features // block) * size


def quantise_weights(weights: WeightsEstimate, *, num_layers: int, ftype: str | None = None,
                     model_type: str | None = None) -> WeightsEstimate:
    """``weights`` (counted from a config.json) as llama-quantize would store them in a ``ftype`` GGUF, with
    llama.cpp's layer split (token_embd in host memory) for the per-device figures."""
    chosen = ftype is not None
    ftype = file_type(ftype)
    base = FILE_TYPES[ftype]
    quantised = base not in ("F16", "BF16")
    mixed = ftype in ("Q4_K_M", "Q5_K_M")
    falcon = model_type == "falcon"
    experts = weights.num_experts or 0
    hidden = weights.hidden_size
    tied = not any(p.name == "lm_head" for p in weights.parts)
    notes: list[str] = []

    def output_type(ncols: int) -> str:
        if not quantised:
            return base
        if falcon or ncols % GGML_BLOCKS[base][0]:
            return "Q8_0"
        return base if base == "Q8_0" else "Q6_K"

    # ---- attn_v-like tensors first: their counter runs over the whole model -----------------------
    attention = next((p for p in weights.parts if p.name == "attention"), None)
    roles: dict[int, list[tuple[str, Matrix]]] = {}
    if attention is not None:
        roles[id(attention)] = _attention_roles(attention, hidden=hidden, qkv_width=weights.qkv_width)
    n_wv = sum(m.count for rs in roles.values() for role, m in rs if role == "attn_v")
    # dense layers first, then MoE layers (first_k_dense_replace)
    dense_down = sum(m.count for m in (_down(p) for p in weights.parts if p.name == "mlp") if m is not None)
    wv_seen = 0
    groups: dict[str, list[_Group]] = {}
    vectors: dict[str, int] = {}
    layers: tuple[int, ...]
    for part in weights.parts:
        out: list[_Group] = []
        vectors[part.name] = vectors.get(part.name, 0) + part.other_parameters
        if part.name in _KEPT_F32:
            out += [_Group(matrix=m, low="F32", high="F32") for m in part.matrices]
        elif part.name in _MMPROJ:
            out += [_Group(matrix=m, low="F16", high="F16") for m in part.matrices]
        elif part.name == "lm_head":
            out += [_Group(matrix=m, low=output_type(m.in_features), high="") for m in part.matrices]
        elif part.name in ("embed_tokens", "per_layer_embeddings"):
            low = output_type(hidden) if tied else base
            out += [_Group(matrix=m, low=low, high="") for m in part.matrices]
        elif part.name == "attention":
            for role, m in roles[id(part)]:
                low, high, layers = base, base, ()
                if quantised and role == "attn_v":
                    if mixed:
                        layers = tuple(range(wv_seen, wv_seen + m.count))
                        layers = tuple(i * num_layers // max(n_wv, 1) for i in layers if use_more_bits(i, n_wv))
                        high = "Q6_K"
                    if model_type == "llama" and num_layers == 80 and low in ("Q4_K",):  # LLM_TYPE_70B
                        low = "Q5_K"
                    if experts == 8:
                        low = high = "Q8_0"
                    wv_seen += m.count
                elif quantised and role == "attn_k" and experts == 8:
                    low = high = "Q8_0"
                elif quantised and role == "attn_output" and experts == 8 and not falcon and ftype == "Q4_K_M":
                    low = high = "Q5_K"
                out.append(_Group(matrix=m, low=low, high=high, layers=layers))
        elif part.name in _FFN and quantised:
            down = _down(part)
            per_layer = experts if part.name == "experts" and experts else 1
            first = 0 if part.name == "mlp" else dense_down
            for m in part.matrices:
                if m is not down:
                    out.append(_Group(matrix=m, low=base, high=base))
                    continue
                n_here = m.count // per_layer
                idx = [first + i for i in range(n_here)]
                if falcon and ftype == "Q4_K_M":
                    top = [i for i in idx if i < num_layers // 16]
                    mid = [i for i in idx if i >= num_layers // 16 and use_more_bits(i, num_layers)]
                    out.append(_Group(matrix=replace(m, count=per_layer * (n_here - len(top))), low=base,
                                      high="Q5_K", layers=tuple(i for i in mid for _ in range(per_layer))))
                    out.append(_Group(matrix=replace(m, count=per_layer * len(top)), low="Q6_K", high="Q6_K"))
                    continue
                layers = tuple(i for i in idx if use_more_bits(i, num_layers)) if mixed else ()
                out.append(_Group(matrix=m, low=base, high="Q6_K" if mixed else base,
                                  layers=tuple(i for i in layers for _ in range(per_layer))))
        else:
            out += [_Group(matrix=m, low=base, high=base) for m in part.matrices]
        groups.setdefault(part.name, []).extend(out)
    if any(p.name in _MMPROJ for p in weights.parts):
        notes.append("vision tower counted in F16, as llama.cpp's separate mmproj file stores it")

    parts: list[WeightPart] = []
    for part in weights.parts:
        if part.name in [p.name for p in parts]:
            continue
        gs = groups.get(part.name, [])
        nbytes = sum(g.total() for g in gs) + 4 * vectors.get(part.name, 0)
        types: dict[str, int] = {}
        for g in gs:
            for t, n in ((g.low, g.matrix.count - g.bumped), (g.high, g.bumped)):
                if n:
                    key = fit_rows(t, g.matrix.in_features)
                    types[key] = types.get(key, 0) + n
        if vectors.get(part.name):
            types["F32 vectors"] = 0
        storage = ", ".join(f"{t} x{n}" if n else t for t, n in types.items())
        merged = [p for p in weights.parts if p.name == part.name]
        parts.append(WeightPart(name=part.name, matrices=tuple(m for p in merged for m in p.matrices),
                                other_parameters=sum(p.other_parameters for p in merged), tp_sharded=part.tp_sharded,
                                vision=part.vision, bytes=nbytes, storage=f"gguf {storage}"))
    by_name = {p.name: p.bytes for p in parts}
    host = by_name.get("embed_tokens", 0)
    output = by_name.get("lm_head", host if tied else 0)
    bumps = [0] * num_layers
    for gs in groups.values():
        for g in gs:
            for layer in g.layers:
                if 0 <= layer < num_layers:
                    bumps[layer] += g.bump()
    rest = sum(p.bytes for p in parts) - host - by_name.get("lm_head", 0) - sum(bumps)
    share = rest // max(num_layers, 1)
    blocks = tuple(share + b for b in bumps)
    split = LlamaCppLayerSplit(block_bytes=blocks, output_bytes=output + rest - share * num_layers, host_bytes=host)
    notes.append(
        f"llama.cpp: weights as {ftype}{' (the common quant)' if not chosen else ''} by llama-quant.cpp's rule, not as "
        f"the {weights.dtype} checkpoint; pass --weights-quant or the .gguf file")
    notes.append(f"llama.cpp layer split (-sm layer, -ngl all): token_embd stays in host memory ({host:,} B, not "
                 "counted per GPU); blocks and the output layer go to the GPUs")
    quant = GgufQuantisation(method="gguf", bits=GGML_BLOCKS[base][1] * 8 // GGML_BLOCKS[base][0], file_type=ftype,
                             checkpoint_dtype=weights.dtype, chosen=chosen)
    return replace(
        weights, parts=tuple(parts), dtype=ftype, dtype_bytes=2, quantisation=quant, source=SOURCE, bytes_override=None,
        notes=(*weights.notes, *notes), device_split=split)


def _down(part: WeightPart) -> Matrix | None:
    """The ``-> hidden`` projection of an MLP or expert part (ffn_down): the last matrix."""
    return part.matrices[-1] if len(part.matrices) > 1 else None


def _attention_roles(part: WeightPart, *, hidden: int, qkv_width: int) -> list[tuple[str, Matrix]]:
    """The attention part's matrices named as llama.cpp's tensors (see the module docstring)."""
    out: list[tuple[str, Matrix]] = []
    matrices = part.matrices
    q_count = matrices[0].count if matrices else 0
    for index, m in enumerate(matrices):
        if m.in_features == hidden and m.out_features == qkv_width and len(matrices) <= 2:
            out.append(("attn_v", m))  # attn_qkv: the attn_v branch of llama_tensor_get_type_impl
        elif index > 0 and m.in_features == hidden and m.count == 2 * q_count and m.count % 2 == 0:
            half = replace(m, count=m.count // 2)
            out += [("attn_k", half), ("attn_v", half)]
        elif index == len(matrices) - 1 and index > 0 and m.out_features == hidden:
            out.append(("attn_output", m))
        else:
            out.append(("attn_q" if index == 0 else "other", m))
    return out
