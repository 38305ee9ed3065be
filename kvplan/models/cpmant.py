"""CPM-Ant (OpenBMB): a pre-norm decoder with learned prompt and segment embeddings and a relative
position bias shared by every layer. Its cache follows the generic rules (``dim_head`` = hidden_size //
num_attention_heads in the released configs), over ``prompt_length`` more tokens than the text: transformers'
CpmAntModel.forward (modeling_cpmant.py) puts that many prompt tokens ahead of every sequence, and they are
cached with it. vLLM, SGLang, TensorRT-LLM and llama.cpp do not run CPM-Ant; kvplan prices its plain layers
for them."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import LayerSpec


class CpmAntParser(ArchParser):
    family = "cpmant"
    model_types = ("cpmant",)
    weight_types = model_types
    #: CpmAntConfig's defaults of the keys weight counting reads.
    defaults = {"prompt_types": 32, "prompt_length": 32, "segment_types": 32, "position_bias_num_buckets": 512}

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        layers = super().build_layers(r)
        prompt = r.first_of("hf_added_tokens", ("prompt_length",))
        r.note(f"CPM-Ant puts prompt_length = {prompt} learned prompt tokens ahead of every sequence (transformers "
               f"modeling_cpmant.py CpmAntModel.forward): the transformers engines (hf-dynamic, hf-static) cache "
               f"{prompt} more tokens than the text; vLLM, SGLang, TensorRT-LLM and llama.cpp do not run CPM-Ant")
        return layers

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """The input embedding (vocabulary + prompt_types x prompt_length prompt tokens), segment embeddings, one
        relative position bias ((segment_types^2 + buckets) x heads), per layer q/k/v/out of heads x dim_head, a
        gated MLP (w_0, w_1, w_out) and two RMSNorm weights, the output norm, and an lm_head over the vocabulary
        (never tied: the input table is longer)."""
        h = r.first_of("hidden_size", ("hidden_size",))
        layers = self.num_layers(r)
        heads = r.first_of("num_attention_heads", ("num_attention_heads",))
        width = heads * r.first_of("head_dim", ("dim_head",))
        ff = r.first_of("intermediate_size", ("dim_ff",))
        vocab = r.first_of("vocab_size", ("vocab_size",))
        prompts = r.first_of("prompt_types", ("prompt_types",)) * r.first_of("prompt_length", ("prompt_length",))
        segments = r.first_of("segment_types", ("segment_types",))
        buckets = r.first_of("position_bias_num_buckets", ("position_bias_num_buckets",))
        parts = [
            WeightPart(name="embed_tokens", matrices=(Matrix(in_features=h, out_features=vocab + prompts),)),
            WeightPart(name="lm_head", matrices=(Matrix(in_features=h, out_features=vocab),)),
            WeightPart(name="position_embeddings", other_parameters=segments * h + (segments * segments + buckets) * heads),
            WeightPart(name="attention", matrices=(Matrix(in_features=h, out_features=width, count=3 * layers),
                                                   Matrix(in_features=width, out_features=h, count=layers))),
            WeightPart(name="mlp", matrices=(Matrix(in_features=h, out_features=ff, count=2 * layers),
                                             Matrix(in_features=ff, out_features=h, count=layers))),
            WeightPart(name="norms", other_parameters=(2 * layers + 1) * h, tp_sharded=False),
        ]
        return count_of(parts, None, None, {"hidden_size": h, "mlp_width": 2 * ff, "qkv_width": 3 * width,
                                            "vocab_size": vocab})


PARSERS: tuple[type[ArchParser], ...] = (CpmAntParser,)
