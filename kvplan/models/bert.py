"""BERT-style encoders used as decoders (BERT, RoBERTa, CamemBERT, XLM-RoBERTa, ELECTRA).

These stacks are encoders: as ``*ForMaskedLM`` or a classifier they keep no cache, and kvplan
refuses them. transformers also runs them as causal decoders (``is_decoder``, ``BertLMHeadModel``,
``RobertaForCausalLM``...): then every layer caches multi-head K/V of ``hidden_size //
num_attention_heads`` per head, and with ``add_cross_attention`` (the decoder of an
``encoder-decoder`` model) cross-attention K/V over the encoder output too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from kvplan.errors import ConfigError
from kvplan.models.base import ArchParser, ConfigReader, switch, tied, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import LayerSpec

#: BertConfig defaults of the keys read here; the others differ where ``defaults_by_type`` says.
_BERT = {"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768, "intermediate_size": 3072,
         "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522, "tie_word_embeddings": True,
         "is_decoder": False, "add_cross_attention": False}


def decoder_use(r: ConfigReader) -> str | None:
    """Why this BERT-style config runs as a causal decoder (``is_decoder`` or a causal-LM architecture), or None."""
    if r.raw("is_decoder") is True:
        return "is_decoder is true"
    archs = r.outer.get("architectures") or r.raw("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and (
            archs[0].endswith(("ForCausalLM", "LMHeadModel")) or archs[0] == "BertGenerationDecoder"):
        return f"architectures names {archs[0]}"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class BertLayout:
    """How a BERT-style model differs from BERT in the tensors it holds (its transformers modeling file); every
    member keeps BERT's post- or pre-norm layer: q/k/v/o, intermediate and output, two LayerNorms with bias."""

    positions: str = "learned"
    """``learned``: ``max_position_embeddings`` rows of the embedding width; ``rotary``: RoFormer's sinusoidal
    table of ``max_position_embeddings`` x head dim, kept as a parameter."""
    token_types: bool = True
    """A ``type_vocab_size`` table."""
    embedding_norm: bool = True
    """A LayerNorm on the embeddings (not in Megatron-BERT or XLM-RoBERTa-XL, pre-norm stacks)."""
    final_norm: bool = False
    """A LayerNorm after the last layer (the pre-norm members)."""
    lm_transform: bool = True
    """The LM head's dense + LayerNorm before the vocabulary projection (not in BertGeneration)."""
    pooler: bool = False
    """BigBird's causal LM keeps the pooler (dense with bias)."""
    qkv_bias: str = ""
    """The config key that switches the q/k/v biases (BigBird ``use_bias``); empty: always biased."""
    untied_decoder_bias: bool = True
    """Untied, the vocabulary projection keeps a bias of its own beside the head's ``bias`` parameter (which
    transformers ties to it only with the weights); ELECTRA's and RemBERT's projection has its one bias."""
    final_norm_switch: str = ""
    """The config key that adds the final LayerNorm (X-MOD ``pre_norm``)."""


#: Each member's layout (BERT's where it has no entry).
BERT_LAYOUTS: dict[str, BertLayout] = {
    "bert-generation": BertLayout(token_types=False, lm_transform=False),
    "big_bird": BertLayout(pooler=True, qkv_bias="use_bias"),
    "megatron-bert": BertLayout(embedding_norm=False, final_norm=True),
    "xlm-roberta-xl": BertLayout(embedding_norm=False, final_norm=True),
    "roberta-prelayernorm": BertLayout(final_norm=True),
    "roformer": BertLayout(positions="rotary"),
    "electra": BertLayout(untied_decoder_bias=False),
    "rembert": BertLayout(untied_decoder_bias=False),
    # X-MOD: RoBERTa's layer with per-language adapters (xmod_adapters), a final LayerNorm when pre_norm
    "xmod": BertLayout(final_norm_switch="pre_norm"),
}


class BertParser(ArchParser):
    """Only as a decoder (is_decoder, *ForCausalLM, *LMHeadModel): MHA K/V per layer; encoder use refused."""

    family = "bert"
    model_types = ("bert", "roberta", "camembert", "xlm-roberta", "electra", "bert-generation", "big_bird",
                   "data2vec-text", "ernie", "megatron-bert", "rembert", "roberta-prelayernorm", "roc_bert", "roformer",
                   "xlm-roberta-xl")
    defaults = _BERT
    #: Where each config class's defaults differ from BertConfig's (transformers 5.24).
    defaults_by_type: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "roberta": {"vocab_size": 50265},
        "electra": {"num_attention_heads": 4, "hidden_size": 256, "intermediate_size": 1024, "embedding_size": 128},
        "bert-generation": {"num_hidden_layers": 24, "num_attention_heads": 16, "hidden_size": 1024,
                            "intermediate_size": 4096, "vocab_size": 50358},
        "big_bird": {"max_position_embeddings": 4096, "vocab_size": 50358, "use_bias": True},
        "ernie": {"use_task_id": False, "task_type_vocab_size": 3},
        "megatron-bert": {"num_hidden_layers": 24, "num_attention_heads": 16, "hidden_size": 1024,
                          "intermediate_size": 4096, "vocab_size": 29056},
        "rembert": {"num_hidden_layers": 32, "num_attention_heads": 18, "hidden_size": 1152, "intermediate_size": 4608,
                    "vocab_size": 250300, "tie_word_embeddings": False, "input_embedding_size": 256,
                    "output_embedding_size": 1664},
        "roberta-prelayernorm": {"vocab_size": 50265},
        "roc_bert": {"enable_pronunciation": True, "enable_shape": True, "concat_input": True,
                     "pronunciation_embed_dim": 768, "pronunciation_vocab_size": 910, "shape_embed_dim": 512,
                     "shape_vocab_size": 24858},
        "roformer": {"max_position_embeddings": 1536, "vocab_size": 50000},
        "xlm-roberta-xl": {"num_hidden_layers": 36, "num_attention_heads": 32, "hidden_size": 2560,
                           "intermediate_size": 10240, "max_position_embeddings": 514, "type_vocab_size": 1,
                           "vocab_size": 250880},
        "xmod": {"pre_norm": False, "adapter_reduction_factor": 2, "adapter_layer_norm": False,
                 "languages": ["en_XX"]},
    }
    #: ``xmod`` (X-MOD): counted here; its cache is the generic rules' (CACHE_NOT_READ).
    weight_types = (*model_types, "xmod")
    sliding_window_applies = False
    KV_HEADS = ()
    HEAD_DIM = ()

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        why = decoder_use(r)
        if why is None:
            raise ConfigError(
                f"{r.source_name}: model_type {r.raw('model_type')!r} is an encoder-only model; it keeps no KV cache",
                "kvplan sizes decoder caches; a BERT-style model caches only as a decoder (is_decoder: true, "
                "or a *ForCausalLM / *LMHeadModel architecture)",
            )
        r.note(f"{why}: the BERT-style stack runs as a causal decoder, multi-head K/V in every layer")
        layers = super().build_layers(r)
        if r.raw("add_cross_attention") is True:
            dims = self.attention_dims(r)
            r.note("add_cross_attention is true: every layer also caches cross-attention K/V over the encoder output")
            layers += [self.cross_spec(dims)] * len(layers)
        return layers

    def encoder_len(self, r: ConfigReader) -> int | None:
        if r.raw("add_cross_attention") is True:
            return r.optional("encoder_len", ("max_position_embeddings",))
        return None

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Word, position and token-type embeddings (of ``embedding_size`` with a projection: ELECTRA, RoFormer;
        RemBERT's ``input_embedding_size``), the layers (q/k/v/o, intermediate and output with biases, two
        LayerNorms with bias; cross-attention blocks with ``add_cross_attention``), the LM head transform (dense +
        LayerNorm; RemBERT's of ``output_embedding_size``) and the decoder bias; the rest as the member's
        :class:`BertLayout` says."""
        layout = BERT_LAYOUTS.get(model_type, BertLayout())
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        emb = r.optional("embedding_size", ("input_embedding_size", "embedding_size")) or h
        out = r.optional("output_embedding_size", ("output_embedding_size",)) or emb
        vocab = vocab_of(r)
        cross = r.raw("add_cross_attention") is True
        blocks = layers * (2 if cross else 1)
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=emb, out_features=vocab),))]
        if not tied(r) or out != emb:
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=out, out_features=vocab),),
                                    other_parameters=vocab if layout.untied_decoder_bias else 0))
        # position and type tables, the embedding LayerNorm, the projection to the hidden size
        other = 2 * emb * int(layout.embedding_norm) + (emb * h + h if emb != h else 0)
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        other += positions * (h // heads if layout.positions == "rotary" else emb)
        if layout.token_types:
            other += r.first_of("type_vocab_size", ("type_vocab_size",)) * emb
        other += self.extra_embeddings(r, model_type, h)
        parts.append(WeightPart(name="position_embeddings", other_parameters=other))
        qkv_bias = switch(r, layout.qkv_bias, True) if layout.qkv_bias else True
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=h, out_features=h, count=4 * blocks),),
                                other_parameters=(4 if qkv_bias else 1) * h * blocks + 2 * h * blocks))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=inner, count=layers),
                                                      Matrix(in_features=inner, out_features=h, count=layers)),
                                other_parameters=(inner + h) * layers))
        # LM head transform: dense h -> out with bias, LayerNorm; the decoder bias over the vocabulary
        head = (h * out + out + 2 * out) if layout.lm_transform else 0
        final = layout.final_norm or bool(layout.final_norm_switch and switch(r, layout.final_norm_switch, False))
        norms = 2 * h * layers + head + vocab + 2 * h * int(final)
        parts.append(WeightPart(name="norms", other_parameters=norms, tp_sharded=False))
        if model_type == "xmod":
            parts.append(xmod_adapters(r, h, layers))
        if layout.pooler:
            parts.append(WeightPart(name="pooler", matrices=(Matrix(in_features=h, out_features=h),), other_parameters=h))
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h, "vocab_size": vocab})

    def bare_model_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The stack as ``AutoModel`` builds it (the encoder of an ``encoder-decoder``): no LM head (transform,
        decoder bias, untied lm_head) but the pooler (dense h x h with bias)."""
        counted = self.count_weights(r, model_type)
        h = r.first_of("hidden_size", ("hidden_size",))
        emb = r.optional("embedding_size", ("embedding_size",)) or h
        head = h * emb + emb + 2 * emb + vocab_of(r)
        parts = [replace(p, other_parameters=p.other_parameters - head) if p.name == "norms" else p
                 for p in counted.parts if p.name != "lm_head"]
        parts.append(WeightPart(name="pooler", matrices=(Matrix(in_features=h, out_features=h),), other_parameters=h))
        return replace(counted, parts=parts)

    def extra_embeddings(self, r: ConfigReader, model_type: str, h: int) -> int:
        """ERNIE's task-type table (``use_task_id``); RoCBert's pronunciation and shape tables and the layer that
        maps their concatenation with the word embedding back to the hidden size (``concat_input``)."""
        if model_type == "ernie" and switch(r, "use_task_id", False):
            return r.first_of("task_type_vocab_size", ("task_type_vocab_size",)) * h
        if model_type != "roc_bert":
            return 0
        pron = r.first_of("pronunciation_embed_dim", ("pronunciation_embed_dim",))
        shape = r.first_of("shape_embed_dim", ("shape_embed_dim",))
        total = r.first_of("pronunciation_vocab_size", ("pronunciation_vocab_size",)) * pron
        total += r.first_of("shape_vocab_size", ("shape_vocab_size",)) * shape
        if switch(r, "concat_input", True):
            width = h + (pron if switch(r, "enable_pronunciation", True) else 0) \
                + (shape if switch(r, "enable_shape", True) else 0)
            total += width * h + h
        return total


def xmod_adapters(r: ConfigReader, h: int, layers: int) -> WeightPart:
    """X-MOD's adapters (modeling_xmod.py XmodOutput): per layer and per entry of ``languages``, dense1 (h -> h //
    ``adapter_reduction_factor``) and dense2 back, both biased; with ``adapter_layer_norm`` a LayerNorm per layer."""
    languages = len(r.first_of("languages", ("languages",), kind="list"))
    bottleneck = h // r.first_of("adapter_reduction_factor", ("adapter_reduction_factor",))
    norm = 2 * h if switch(r, "adapter_layer_norm", False) else 0
    r.note(f"X-MOD: {languages} language adapter(s) of width {bottleneck} in each of the {layers} layers, all resident")
    return WeightPart(name="adapters", matrices=(Matrix(in_features=h, out_features=bottleneck, count=languages * layers),
                                                 Matrix(in_features=bottleneck, out_features=h, count=languages * layers)),
                      other_parameters=((bottleneck + h) * languages + norm) * layers)


class ModernBertDecoderParser(ArchParser):
    """ModernBERT as a causal decoder: its cache follows the generic rules (``layer_types``, ``sliding_window``)."""

    family = "modernbert_decoder"
    model_types = ("modernbert-decoder",)
    weight_types = model_types
    #: ModernBertDecoderConfig's defaults of the keys weight counting reads.
    defaults = {"tie_word_embeddings": True, "norm_bias": False, "attention_bias": False, "mlp_bias": False,
                "classifier_bias": False, "decoder_bias": True}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Token embeddings and their LayerNorm, pre-norm layers (q/k/v/Wo; a GLU MLP of Wi (2 x intermediate) and
        Wo; the first layer has no attention norm), a final norm, the LM head's dense + norm and the decoder bias."""
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        vocab = vocab_of(r)
        ln = 2 * h if switch(r, "norm_bias", False) else h
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=h, out_features=vocab),))]
        if not tied(r):
            parts.append(WeightPart(name="lm_head", matrices=(Matrix(in_features=h, out_features=vocab),)))
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=h, out_features=h, count=4 * layers),),
                                other_parameters=4 * h * layers if switch(r, "attention_bias", False) else 0))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=2 * inner, count=layers),
                                                      Matrix(in_features=inner, out_features=h, count=layers)),
                                other_parameters=(2 * inner + h) * layers if switch(r, "mlp_bias", False) else 0))
        # per layer an MLP norm and (from layer 1) an attention norm; embedding, final and LM-head norms
        norms = (2 * layers - 1 + 3) * ln + (h if switch(r, "classifier_bias", False) else 0) \
            + (vocab if switch(r, "decoder_bias", True) else 0)
        parts.append(WeightPart(name="norms", matrices=(Matrix(in_features=h, out_features=h),), other_parameters=norms,
                                tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": 2 * inner, "qkv_width": 3 * h,
                                            "vocab_size": vocab})


class GitParser(ArchParser):
    """GIT (GenerativeImage2Text): a BERT-style causal text decoder over CLIP image tokens; its cache follows
    the generic rules."""

    family = "git"
    model_types = ("git",)
    weight_types = model_types
    #: GitConfig's and GitVisionConfig's defaults of the keys weight counting reads.
    defaults = {"tie_word_embeddings": False}
    VISION_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                       "image_size": 224, "patch_size": 16}

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Word and position embeddings with a LayerNorm, BERT's post-norm layers, the output projection (with a
        bias; tied to the word embedding when the config says), and the projection of the image features
        (dense + LayerNorm); the CLIP image encoder is counted by :meth:`vision_weights`."""
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        inner = r.first_of("intermediate_size", ("intermediate_size",))
        vocab = vocab_of(r)
        parts = [WeightPart(name="embed_tokens", matrices=(Matrix(in_features=h, out_features=vocab),))]
        parts.append(WeightPart(name="lm_head", matrices=() if tied(r) else (Matrix(in_features=h, out_features=vocab),),
                                other_parameters=vocab))
        positions = r.first_of("max_position_embeddings", ("max_position_embeddings",))
        parts.append(WeightPart(name="position_embeddings", other_parameters=positions * h + 2 * h))
        parts.append(WeightPart(name="attention", matrices=(Matrix(in_features=h, out_features=h, count=4 * layers),),
                                other_parameters=4 * h * layers))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=inner, count=layers),
                                                      Matrix(in_features=inner, out_features=h, count=layers)),
                                other_parameters=(inner + h) * layers))
        parts.append(WeightPart(name="norms", other_parameters=4 * h * layers, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": inner, "qkv_width": 3 * h, "vocab_size": vocab})

    def vision_weights(self, outer: Mapping[str, Any], r: ConfigReader, text_hidden: int) -> list[WeightPart] | None:
        """GitVisionModel (CLIP's ViT: class and position embeddings, a patch convolution without bias, pre- and
        post-LayerNorms, layers with biased q/k/v/o and MLP), the visual projection into the text model, and one
        temporal embedding per image when ``num_image_with_embedding`` is set."""
        v = ConfigReader(outer["vision_config"], source_name=r.source_name, prefix="vision_config.",
                         defaults=self.VISION_DEFAULTS, defaults_name="git_vision_model")
        h = v.first_of("hidden_size", ("hidden_size",))
        layers = v.first_of("num_hidden_layers", ("num_hidden_layers",))
        inner = v.first_of("intermediate_size", ("intermediate_size",))
        patch = v.first_of("patch_size", ("patch_size",))
        channels = v.first_of("num_channels", ("num_channels",))
        positions = (v.first_of("image_size", ("image_size",)) // patch) ** 2 + 1
        frames = r.optional("num_image_with_embedding", ("num_image_with_embedding",)) or 0
        tower = WeightPart(name="vision_tower", vision=True, matrices=(
            Matrix(in_features=channels * patch * patch, out_features=h),
            Matrix(in_features=h, out_features=h, count=4 * layers),
            Matrix(in_features=h, out_features=inner, count=layers), Matrix(in_features=inner, out_features=h, count=layers)),
            other_parameters=h + positions * h + 4 * h + (4 * h + inner + h + 4 * h) * layers + frames * h)
        projector = WeightPart(name="projector", vision=True, matrices=(Matrix(in_features=h, out_features=text_hidden),),
                               other_parameters=3 * text_hidden)
        r.note(f"vision tower (GIT's CLIP ViT, {layers} layers) reported separately as weights.vision_*")
        return [tower, projector]


#: Model types counted here whose cache no parser here reads, and why.
CACHE_NOT_READ = {"xmod": "BERT-style MHA in every layer: the generic rules read its cache"}

PARSERS: tuple[type[ArchParser], ...] = (BertParser, ModernBertDecoderParser, GitParser)
