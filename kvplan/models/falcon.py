"""TII Falcon: Falcon 7B/40B/180B (also the original RefinedWeb remote-code form) and Falcon-H1,
a parallel hybrid of attention and Mamba-2 in every layer. Falcon-Mamba is read by mamba.py."""

from __future__ import annotations

from kvplan.models.base import ArchParser, ConfigReader, hidden_of, vocab_of
from kvplan.models.decoder import classic_decoder
from kvplan.models.mamba import MAMBA2_DEFAULTS, Mamba2Keys, hybrid_weights, read_mamba2_state
from kvplan.models.tensors import WeightCount, WeightPart, count_of
from kvplan.specs import LayerSpec, StateSpec


class FalconParser(ArchParser):
    """Falcon: ``new_decoder_architecture`` uses ``num_kv_heads`` groups; otherwise ``multi_query`` (default true) = 1 head."""

    family = "falcon"
    model_types = ("falcon", "RefinedWeb", "RefinedWebModel")
    defaults = {
        "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
        "max_position_embeddings": 2048,
    }
    defaults_by_type = {"falcon": {"tie_word_embeddings": True}, "RefinedWeb": {"tie_word_embeddings": True}}
    weight_types = ("falcon", "RefinedWeb")

    def kv_heads(self, r: ConfigReader, heads: int) -> int:
        if r.raw("new_decoder_architecture") is True:
            value = r.optional("num_kv_heads", self.KV_HEADS)
            if value is None:
                r.record("num_kv_heads", heads, "derived: new_decoder_architecture without num_kv_heads")
                r.note("new_decoder_architecture without num_kv_heads: num_kv_heads = num_attention_heads")
                return heads
            # NOTE: transformers up to 5.24 cached K/V broadcast to every query head; 5.25's modeling_falcon caches
            # the num_kv_heads groups and repeats them only inside attention (repeat_kv), as vLLM does (measured).
            r.note("new_decoder_architecture: num_kv_heads groups, as vLLM and transformers 5.25 cache them")
            return value
        multi_query = r.raw("multi_query")
        if multi_query is True:
            r.record("num_kv_heads", 1, r.where("multi_query"))
            r.note("multi_query is true: one KV head (MQA)")
            return 1
        if multi_query is False:
            r.record("num_kv_heads", heads, "derived: multi_query is false, so num_kv_heads = num_attention_heads")
            return heads
        value = r.optional("num_kv_heads", self.KV_HEADS)
        if value is not None:
            return value
        r.record("num_kv_heads", 1, "default of falcon: multi_query = true")
        r.note("multi_query is not in the config; using the falcon default multi_query = true: one KV head")
        return 1

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Falcon: fused query_key_value; ``new_decoder_architecture`` (and RefinedWeb, Falcon-40B's original
        remote-code form, whose ``n_head_kv`` groups and two LayerNorms per layer are that architecture)
        has num_kv_heads K/V groups, else one K/V head under ``multi_query``; biases only when ``bias``."""
        new_arch = r.raw("new_decoder_architecture") is True or model_type == "RefinedWeb"
        if model_type == "RefinedWeb":
            r.note("RefinedWeb (RWForCausalLM) is Falcon's new decoder architecture: n_head_kv K/V groups, "
                   "a LayerNorm each for attention and MLP")

        def kv_width(hidden: int, head_dim: int) -> int:
            if new_arch:
                return r.first_of("num_kv_heads", ("num_kv_heads", "n_head_kv")) * head_dim
            return head_dim if r.raw("multi_query") is not False else hidden

        # one shared input LayerNorm when attention and MLP run in parallel (the 7B form)
        shared_ln = r.raw("parallel_attn") is not False and not new_arch
        return classic_decoder(r, "falcon", inner_aliases=("ffn_hidden_size",), kv_width=kv_width,
                               bias=r.raw("bias") is True, norms_per_layer=1 if shared_ln else 2)


class FalconH1Parser(ArchParser):
    """Falcon-H1: a parallel hybrid, every decoder layer runs attention and a Mamba-2 mixer side by side.

    Each layer therefore holds a K/V cache and a Mamba state. The specs list the attention caches of
    layers 0..N-1, then their states, so entry ``i`` belongs to decoder layer ``i % N``.
    """

    family = "falcon_h1"
    model_types = ("falcon_h1",)
    defaults = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 8192, "mamba_d_ssm": 1024, **MAMBA2_DEFAULTS,
        "vocab_size": 128000, "intermediate_size": 14336, "tie_word_embeddings": False,
    }
    weight_types = ("falcon_h1",)
    MAMBA = Mamba2Keys(d_inner=("mamba_d_ssm",))

    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        num_layers = self.num_layers(r)
        attention = self.full_spec(self.attention_dims(r))
        state = self.state_spec(r, 0)
        r.note(
            "falcon_h1 is a parallel hybrid: every decoder layer has an attention K/V cache and a Mamba-2 state"
        )
        return [attention] * num_layers + [state] * num_layers

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        return read_mamba2_state(r, self.MAMBA, self.HIDDEN)

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        """Every layer: GQA attention and a Mamba-2 mixer side by side (its RMSNorm only with
        ``mamba_rms_norm``), then a gated MLP; an input and a pre-MLP RMSNorm."""
        layers = self.num_layers(r)
        parts, width = hybrid_weights(r, self, self.MAMBA, n_mamba=layers, n_attn=layers,
                                      gated_norm=r.raw("mamba_rms_norm") is True, mlp_layers=layers)
        hidden = hidden_of(r)
        parts.append(WeightPart(name="norms", other_parameters=(2 * layers + 1) * hidden, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": r.first_of(
            "intermediate_size", ("intermediate_size",)), "qkv_width": width, "vocab_size": vocab_of(r)})


#: Model types read here whose weights no parser here counts under that name, and why.
WEIGHTS_NOT_COUNTED = {"RefinedWebModel": "remote code: not counted"}

PARSERS: tuple[type[ArchParser], ...] = (FalconParser, FalconH1Parser)
