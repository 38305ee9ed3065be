"""The BART lineage: encoder-decoder transformers with learned or sinusoidal positions and a
decoder of ``decoder_layers`` layers that attends to itself and to the encoder output (BART, mBART,
Marian, Pegasus, Pegasus-X, BigBird-Pegasus, M2M-100, NLLB-MoE, Blenderbot(-Small), PLBart, MVP,
LED, FSMT, ProphetNet, SeamlessM4T text), and any ``*ForCausalLM`` of an encoder-decoder. The decoder-only
members of the same lineage (TrOCR, XGLM, Kosmos-2 / Kosmos-2.5 text models) are read in xglm.py.

The encoder keeps no cache. Cross-attention holds the encoder output's K/V for every decoder
layer, sized by the encoder length, not by the generated length. A ``*ForCausalLM`` architecture
(``BartForCausalLM``, ``WhisperForCausalLM``) runs the decoder alone: no cross-attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kvplan.models.base import ArchParser, ConfigReader, embeddings, switch, tied, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import LayerSpec

#: The BART layout's defaults (transformers ``BartConfig``); the others differ where ``_BY_TYPE`` says.
_BART = {"decoder_layers": 12, "decoder_attention_heads": 16, "d_model": 1024, "encoder_layers": 12,
         "decoder_ffn_dim": 4096, "encoder_ffn_dim": 4096, "max_position_embeddings": 1024,
         "tie_word_embeddings": True, "is_encoder_decoder": True}
#: Each config class's defaults of the keys the cache layout and the weight count read.
_BY_TYPE: dict[str, dict[str, Any]] = {
    "bart": {}, "mbart": {}, "marian": {"share_encoder_decoder_embeddings": True}, "pegasus": {}, "m2m_100": {},
    "nllb_moe": {"num_experts": 128, "encoder_sparse_step": 4, "decoder_sparse_step": 4, "router_bias": False},
    "nllb-moe": {"num_experts": 128, "encoder_sparse_step": 4, "decoder_sparse_step": 4, "router_bias": False},
    "mvp": {"use_prompt": False, "prompt_length": 100, "prompt_mid_dim": 800},
    "fsmt": {"tie_word_embeddings": False, "pad_token_id": 1},
    "blenderbot": {"decoder_layers": 24, "decoder_attention_heads": 32, "d_model": 2560, "encoder_layers": 2,
                   "decoder_ffn_dim": 10240, "encoder_ffn_dim": 10240, "max_position_embeddings": 128},
    "blenderbot-small": {"decoder_layers": 8, "d_model": 512, "encoder_layers": 8, "decoder_ffn_dim": 2048,
                         "encoder_ffn_dim": 2048, "max_position_embeddings": 512},
    "plbart": {"decoder_layers": 6, "decoder_attention_heads": 12, "d_model": 768, "encoder_layers": 6,
               "decoder_ffn_dim": 3072, "encoder_ffn_dim": 3072},
    "bigbird_pegasus": {"decoder_layers": 16, "encoder_layers": 16, "max_position_embeddings": 4096,
                        "use_bias": False},
    "pegasus_x": {"decoder_layers": 16, "encoder_layers": 16, "max_position_embeddings": 16384,
                  "num_global_tokens": 32},
    "led": {"max_decoder_position_embeddings": 1024, "max_encoder_position_embeddings": 16384},
    "prophetnet": {"num_decoder_layers": 12, "num_decoder_attention_heads": 16, "hidden_size": 1024,
                   "num_encoder_layers": 12, "max_position_embeddings": 512, "ngram": 2, "num_buckets": 32},
    "seamless_m4t": {"decoder_layers": 24, "hidden_size": 1024, "encoder_layers": 24, "decoder_ffn_dim": 8192,
                     "encoder_ffn_dim": 8192, "max_source_positions": 4096},
    "seamless_m4t_v2": {"decoder_layers": 24, "hidden_size": 1024, "encoder_layers": 24, "decoder_ffn_dim": 8192,
                        "encoder_ffn_dim": 8192, "max_position_embeddings": 4096},
}


@dataclass(frozen=True, kw_only=True, slots=True)
class StackLayout:
    """How one member of the BART lineage differs from BART in the tensors it holds (its transformers modeling
    file): BART itself is learned positions offset by 2, a LayerNorm on the embeddings of each stack, biases
    on every attention projection and a ``final_logits_bias`` over the vocabulary."""

    position_offset: int | None = 2
    """Rows of each stack's position table beyond ``max_position_embeddings`` (None: a sinusoidal table the
    model does not keep as a parameter); ``-1``: ``pad_token_id + 1`` rows (FSMT)."""
    embedding_norm: bool = True
    """``layernorm_embedding`` after the embeddings of each stack."""
    final_norm: bool = False
    """``layer_norm`` after the last layer of each stack (pre-norm members)."""
    logits_bias: bool = True
    """The ``final_logits_bias`` buffer (one value per vocabulary entry) saved with the checkpoint."""
    attention_bias: bool | str = True
    """Biases on q/k/v/out, or the config key that says (BigBird-Pegasus ``use_bias``)."""
    encoder_global_qkv: bool = False
    """LED: q/k/v projections (with biases) for the global tokens in every encoder layer."""
    encoder_layer_norms: int = 2
    """LayerNorms per encoder layer (Pegasus-X adds one for its global tokens)."""
    causal_head_tied: bool = True
    """Whether the ``*ForCausalLM`` (decoder alone) ties its lm_head when the config does (BigBird-Pegasus's
    never does: its class declares no tied weights)."""


#: Each member's layout (BART's where it has no entry).
STACK_LAYOUTS: dict[str, StackLayout] = {
    "mbart": StackLayout(final_norm=True),
    "marian": StackLayout(position_offset=0, embedding_norm=False),
    "pegasus": StackLayout(position_offset=0, embedding_norm=False, final_norm=True),
    "blenderbot": StackLayout(position_offset=0, embedding_norm=False, final_norm=True),
    "blenderbot-small": StackLayout(position_offset=0),
    "led": StackLayout(position_offset=0, encoder_global_qkv=True),
    "bigbird_pegasus": StackLayout(position_offset=0, attention_bias="use_bias", causal_head_tied=False),
    "pegasus_x": StackLayout(position_offset=None, embedding_norm=False, final_norm=True, logits_bias=False,
                             attention_bias=False, encoder_layer_norms=3),
    "m2m_100": StackLayout(position_offset=None, embedding_norm=False, final_norm=True, logits_bias=False),
    "nllb_moe": StackLayout(position_offset=None, embedding_norm=False, final_norm=True, logits_bias=False),
    "nllb-moe": StackLayout(position_offset=None, embedding_norm=False, final_norm=True, logits_bias=False),
    "fsmt": StackLayout(position_offset=-1, embedding_norm=False, logits_bias=False),
    "prophetnet": StackLayout(position_offset=0, logits_bias=False),
}
#: The members :meth:`EncoderDecoderParser.count_weights` counts exactly (transformers' meta-device count).
EXACT_TYPES = frozenset({"bart", "mbart", "marian", "pegasus", "blenderbot", "blenderbot-small", "plbart", "mvp",
                         "led", "bigbird_pegasus", "pegasus_x", "m2m_100", "nllb_moe", "nllb-moe", "fsmt",
                         "prophetnet"})

#: Outer model types whose language model is the bare ``BartModel`` (no ``final_logits_bias``) under their own
#: lm_head.
BARE_MODEL_WRAPPERS = frozenset({"florence2"})


def causal_only(r: ConfigReader) -> str | None:
    """The ``*ForCausalLM`` architecture that runs an encoder-decoder's decoder alone, if the config names one."""
    archs = r.outer.get("architectures") or r.raw("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0].endswith("ForCausalLM"):
        return archs[0]
    return None


class EncoderDecoderParser(ArchParser):
    """Decoder self-attention + cross-attention over the encoder per decoder layer; `*ForCausalLM`: self only."""

    family = "encoder_decoder"
    model_types: ClassVar[tuple[str, ...]] = tuple(_BY_TYPE)
    defaults = _BART
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = _BY_TYPE
    weight_types: ClassVar[tuple[str, ...]] = tuple(_BY_TYPE)
    LAYERS: ClassVar[tuple[str, ...]] = ("decoder_layers", "num_decoder_layers", "num_layers", "layers")
    HEADS: ClassVar[tuple[str, ...]] = ("decoder_attention_heads", "num_decoder_attention_heads", "attention_heads")
    HIDDEN: ClassVar[tuple[str, ...]] = ("d_model", "hidden_size", "embed_dim")
    KV_HEADS: ClassVar[tuple[str, ...]] = ("decoder_num_key_value_heads",)
    MAX_CONTEXT: ClassVar[tuple[str, ...]] = ("max_target_positions", "max_decoder_position_embeddings", "max_position_embeddings")
    ENCODER_LEN: ClassVar[tuple[str, ...]] = ("max_source_positions", "max_encoder_position_embeddings", "max_position_embeddings")

    def has_encoder(self, r: ConfigReader) -> bool:
        """Whether generation runs an encoder whose output the decoder cross-attends to."""
        arch = causal_only(r)
        if arch:
            r.note(f"architectures names {arch}: the decoder runs alone, without cross-attention")
            return False
        return True

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        dims = self.attention_dims(r)
        self_attn = self.full_spec(dims)
        if not self.has_encoder(r):
            return [self_attn] * num_layers
        r.note(
            "encoder-decoder: each decoder layer caches self-attention K/V (grows with generated tokens) "
            "and cross-attention K/V over the encoder output (fixed by the encoder length)"
        )
        return [self_attn] * num_layers + [self.cross_spec(dims)] * num_layers

    def encoder_len(self, r: ConfigReader) -> int | None:
        if not self.has_encoder(r):
            return None
        return r.optional("encoder_len", self.ENCODER_LEN)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """BART layout: token embedding (+ lm_head unless tied), encoder layers (self-attention, MLP) and
        decoder layers (self- and cross-attention, MLP), q/k/v/o and fc1/fc2 with biases, LayerNorms with
        bias; each member's position tables, extra norms and extra tensors as its :class:`StackLayout` says."""
        if model_type not in EXACT_TYPES:
            return self.approximate_weights(r, model_type)
        layout = STACK_LAYOUTS.get(model_type, StackLayout())
        d = r.first_of("hidden_size", self.HIDDEN)
        dec = self.num_layers(r)
        enc = 0 if not self.has_encoder(r) else r.first_of(
            "encoder_layers", ("encoder_layers", "num_encoder_layers"))
        dec_ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim", "ffn_dim"))
        enc_ffn = r.first_of("encoder_ffn_dim", ("encoder_ffn_dim",)) if enc else 0
        ln = 2 * d  # LayerNorm weight + bias
        stacks = 2 if enc else 1
        parts, vocab_size = self.vocab_parts(r, model_type, d, layout, encoder=bool(enc))
        bias = layout.attention_bias if isinstance(layout.attention_bias, bool) \
            else switch(r, layout.attention_bias, False)
        attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
        attn_other = 4 * d * attn_blocks if bias else 0
        attention = [Matrix(in_features=d, out_features=d, count=4 * attn_blocks)]
        if layout.encoder_global_qkv and enc:  # LED: query_global, key_global, value_global
            attention.append(Matrix(in_features=d, out_features=d, count=3 * enc))
            attn_other += 3 * d * enc
        if model_type == "prophetnet":  # the n-gram self-attention's relative position projection (with bias)
            buckets = r.first_of("num_buckets", ("num_buckets",))
            heads = r.first_of("num_attention_heads", self.HEADS)
            attention.append(Matrix(in_features=d, out_features=buckets * heads, count=dec))
            attn_other += buckets * heads * dec
        parts.append(WeightPart(name="attention", matrices=tuple(attention), other_parameters=attn_other))
        parts += self.mlp_parts(r, model_type, d, enc, dec, enc_ffn, dec_ffn)
        norms = (layout.encoder_layer_norms * enc + 3 * dec) * ln
        norms += stacks * ln * (int(layout.embedding_norm) + int(layout.final_norm))
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        positions = self.position_rows(r, model_type, layout, enc)
        if positions:
            parts.append(WeightPart(name="position_embeddings", other_parameters=positions * d))
        if enc:
            r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": dec_ffn, "qkv_width": 3 * d,
                                            "vocab_size": vocab_size})

    def vocab_parts(self, r: ConfigReader, model_type: str, d: int, layout: StackLayout, *,
                    encoder: bool) -> tuple[list[WeightPart], int]:
        """Token embeddings, lm_head and ``final_logits_bias`` (the encoder-decoder's; a ``*ForCausalLM`` has
        none): one shared table, or (FSMT; Marian without ``share_encoder_decoder_embeddings``) a source table
        and a target table."""
        is_tied = tied(r)
        if model_type == "fsmt":
            src = r.first_of("src_vocab_size", ("src_vocab_size",))
            tgt = r.first_of("tgt_vocab_size", ("tgt_vocab_size",))
            tables, head = ([tgt] if is_tied else [src, tgt]), tgt  # tied: the encoder reads the target table
        elif model_type == "marian" and not switch(r, "share_encoder_decoder_embeddings", True):
            src = vocab_of(r)
            tgt = r.optional("decoder_vocab_size", ("decoder_vocab_size",)) or src
            tables, head = [src, tgt], tgt
        else:
            tables, head = [vocab_of(r)], vocab_of(r)
            if encoder and not is_tied:
                tables *= 3
                r.note("tie_word_embeddings is false: transformers keeps the shared embedding and the encoder's "
                       "and the decoder's own copies, untied, besides the lm_head")
        parts = [WeightPart(name="embed_tokens", matrices=tuple(Matrix(in_features=d, out_features=v) for v in tables))]
        # the lm_head's matrix unless tied to the (target) embedding; ``final_logits_bias`` beside it
        head_tied = is_tied and (encoder or layout.causal_head_tied)
        if not encoder and not head_tied and tied(r):
            r.note(f"{model_type}'s *ForCausalLM keeps its own lm_head whatever tie_word_embeddings says")
        matrices = () if head_tied else (Matrix(in_features=d, out_features=head),)
        # a composite that wraps the bare BartModel and holds its own lm_head (Florence-2) has no final_logits_bias
        wrapped = str(r.outer.get("model_type", "")) in BARE_MODEL_WRAPPERS
        bias = head if layout.logits_bias and encoder and not wrapped else 0
        if matrices or bias:
            parts.append(WeightPart(name="lm_head", matrices=matrices, other_parameters=bias))
        return parts, head

    def mlp_parts(self, r: ConfigReader, model_type: str, d: int, enc: int, dec: int, enc_ffn: int,
                  dec_ffn: int) -> list[WeightPart]:
        """fc1/fc2 with biases; NLLB-MoE swaps every ``*_sparse_step``-th layer's for ``num_experts`` of them
        and a router; MVP with ``use_prompt`` adds the decoder's self- and cross-attention prompt MLPs."""
        sparse = {"enc": 0, "dec": 0}
        parts: list[WeightPart] = []
        if model_type in ("nllb_moe", "nllb-moe"):
            experts = r.first_of("num_experts", ("num_experts",))
            for stack, count, ffn in (("enc", enc, enc_ffn), ("dec", dec, dec_ffn)):
                key = f"{'encoder' if stack == 'enc' else 'decoder'}_sparse_step"
                step = r.first_of(key, (key,), required=False, kind="count") or 0
                sparse[stack] = sum(1 for i in range(count) if step and (i + 1) % step == 0)
                n = sparse[stack]
                if n:
                    parts.append(WeightPart(name="experts", matrices=(
                        Matrix(in_features=d, out_features=ffn, count=experts * n),
                        Matrix(in_features=ffn, out_features=d, count=experts * n)),
                        other_parameters=(ffn + d) * experts * n))
                    parts.append(WeightPart(name="router", matrices=(Matrix(in_features=d, out_features=experts, count=n),),
                                            other_parameters=experts * n if switch(r, "router_bias", False) else 0,
                                            tp_sharded=False))
            r.note(f"NLLB-MoE: {experts} experts in {sparse['enc']} encoder and {sparse['dec']} decoder layers, "
                   "all resident")
        dense_enc, dense_dec = enc - sparse["enc"], dec - sparse["dec"]
        parts.insert(0, WeightPart(name="mlp", matrices=(
            Matrix(in_features=d, out_features=dec_ffn, count=dense_dec),
            Matrix(in_features=dec_ffn, out_features=d, count=dense_dec),
            Matrix(in_features=d, out_features=enc_ffn, count=dense_enc),
            Matrix(in_features=enc_ffn, out_features=d, count=dense_enc)),
            other_parameters=(dec_ffn + d) * dense_dec + (enc_ffn + d) * dense_enc))
        if model_type == "mvp" and switch(r, "use_prompt", False):
            length = r.first_of("prompt_length", ("prompt_length",))
            mid = r.first_of("prompt_mid_dim", ("prompt_mid_dim",))
            out = 2 * dec * d
            r.note("use_prompt: the decoder's self- and cross-attention prompts are counted (transformers' MvpModel "
                   "builds no encoder prompt)")
            parts.append(WeightPart(name="prompts", matrices=(
                Matrix(in_features=d, out_features=mid, count=2), Matrix(in_features=mid, out_features=out, count=2)),
                other_parameters=2 * (length * d + mid + out)))
        return parts

    def position_rows(self, r: ConfigReader, model_type: str, layout: StackLayout, enc: int) -> int:
        """Rows of the position tables the model keeps as parameters (both stacks), plus ProphetNet's n-gram
        embeddings and Pegasus-X's global-token embeddings."""
        rows = 0
        if model_type == "pegasus_x" and enc:
            rows += r.first_of("num_global_tokens", ("num_global_tokens",))
        if model_type == "prophetnet":
            rows += r.first_of("ngram", ("ngram",))
        if layout.position_offset is None:
            return rows
        offset = layout.position_offset
        if offset == -1:
            offset = r.first_of("pad_token_id", ("pad_token_id",), kind="count") + 1
        if model_type == "led":
            rows += r.first_of("max_decoder_position_embeddings", ("max_decoder_position_embeddings",))
            if enc:
                rows += r.first_of("max_encoder_position_embeddings", ("max_encoder_position_embeddings",))
            return rows
        per_stack = r.first_of("max_position_embeddings", ("max_position_embeddings",)) + offset
        return rows + per_stack * (2 if enc else 1)

    def approximate_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The members not yet checked against transformers (SeamlessM4T text, TrOCR, XGLM, Kosmos-2 text):
        BART's layers, position tables not counted."""
        d = r.first_of("hidden_size", self.HIDDEN)
        dec = self.num_layers(r)
        enc = 0 if not self.has_encoder(r) else r.first_of(
            "encoder_layers", ("encoder_layers", "num_encoder_layers"))
        dec_ffn = r.first_of("decoder_ffn_dim", ("decoder_ffn_dim", "ffn_dim"))
        enc_ffn = r.first_of("encoder_ffn_dim", ("encoder_ffn_dim",)) if enc else 0
        attn_blocks = enc + 2 * dec  # encoder self, decoder self, decoder cross
        parts = embeddings(r, d)
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=d, out_features=d, count=4 * attn_blocks),),
                                other_parameters=4 * d * attn_blocks))
        parts.append(WeightPart(name="mlp", matrices=(
            Matrix(in_features=d, out_features=dec_ffn, count=dec), Matrix(in_features=dec_ffn, out_features=d, count=dec),
            Matrix(in_features=d, out_features=enc_ffn, count=enc), Matrix(in_features=enc_ffn, out_features=d, count=enc)),
            other_parameters=(dec_ffn + d) * dec + (enc_ffn + d) * enc))
        parts.append(WeightPart(name="norms", other_parameters=(2 * enc + 3 * dec + 2) * 2 * d, tp_sharded=False))
        r.note("BART-style weights: position tables (learned or sinusoidal, per family) are not counted")
        if enc:
            r.note(f"encoder-decoder: {enc} encoder and {dec} decoder layers counted; the encoder stays resident")
        return count_of(parts, None, None, {"hidden_size": d, "mlp_width": dec_ffn, "qkv_width": 3 * d,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (EncoderDecoderParser,)
