"""xLSTM (``xlstm``, xLSTMConfig; NX-AI xLSTM-7B): every block is an mLSTM layer with a fixed recurrent state.

Per layer and sequence the state is the matrix memory C ``(num_heads, qk_head_dim, v_head_dim)``, the
normaliser n ``(num_heads, qk_head_dim)`` and the stabiliser m ``(num_heads, 1)`` (transformers' xLSTMCache),
where ``qk_head_dim = round_up(hidden_size * qk_dim_factor, 64) // num_heads`` and ``v_head_dim`` likewise with
``v_dim_factor``. transformers allocates the cache in the model dtype and copies each step's state into it (the
kernels compute it in ``inference_state_dtype``); kvplan prices it in the state dtype of the engine profile.

Weights (transformers xLSTM): per block a pre-norm, q/k (qk_dim) and v/output gate (v_dim) projections, input and
forget gate pre-activations (one per head, with bias), a per-head output norm, the output projection, a pre-FFN
norm and a gated FFN of ``round_up(hidden_size * ffn_proj_factor, ffn_round_up_to_multiple_of)``; a final norm
and an untied head; ``use_bias`` adds biases to every projection and to the three norms of a block.
"""

from __future__ import annotations

from kvplan.models.base import STATE, ArchParser, ConfigReader, embeddings, switch, vocab_of
from kvplan.models.tensors import Matrix, WeightCount, WeightPart, count_of
from kvplan.specs import StateSpec


def _round_up(value: float, multiple: int) -> int:
    """xLSTMConfig's round_up_to_next_multiple_of."""
    return int(((value + multiple - 1) // multiple) * multiple)


class XlstmParser(ArchParser):
    """mLSTM blocks only: a per-head matrix memory, normaliser and stabiliser per layer, no K/V cache."""

    family = "xlstm"
    model_types = ("xlstm",)
    #: xLSTMConfig defaults.
    defaults = {"hidden_size": 4096, "num_hidden_layers": 32, "num_heads": 8, "qk_dim_factor": 0.5,
                "v_dim_factor": 1.0, "vocab_size": 50304, "tie_word_embeddings": False, "ffn_proj_factor": 2.667,
                "ffn_round_up_to_multiple_of": 64, "use_bias": False}
    weight_types = ("xlstm",)
    #: xLSTMModel builds num_blocks blocks (num_hidden_layers mirrors it when absent)
    LAYERS = ("num_blocks", "num_hidden_layers")
    HIDDEN = ("hidden_size", "embedding_dim")

    def layer_kinds(self, r: ConfigReader, num_layers: int) -> list[str]:
        r.note("xLSTM: every block keeps a fixed mLSTM state (matrix memory C, normaliser n, stabiliser m), "
               "no K/V cache")
        return [STATE] * num_layers

    def _dims(self, r: ConfigReader) -> tuple[int, int, int, int]:
        """(hidden, heads, qk_dim, v_dim): xLSTMConfig.qk_dim / v_dim round the factor times hidden up to 64."""
        hidden = r.first_of("hidden_size", self.HIDDEN)
        heads = r.first_of("num_heads", ("num_heads",))
        qk = _round_up(hidden * r.first_of("qk_dim_factor", ("qk_dim_factor",), kind="ratio"), 64)
        v = _round_up(hidden * r.first_of("v_dim_factor", ("v_dim_factor",), kind="ratio"), 64)
        return hidden, heads, qk, v

    def state_spec(self, r: ConfigReader, index: int) -> StateSpec:
        _hidden, heads, qk, v = self._dims(r)
        return StateSpec(mixer="mlstm", shapes=(("C", (heads, qk // heads, v // heads)), ("n", (heads, qk // heads)),
                                                 ("m", (heads, 1))))

    def count_weights(self, r: ConfigReader, model_type: str) -> WeightCount:
        hidden, heads, qk, v = self._dims(r)
        layers = self.num_layers(r)
        ffn = _round_up(hidden * r.first_of("ffn_proj_factor", ("ffn_proj_factor",), kind="ratio"),
                        r.first_of("ffn_round_up_to_multiple_of", ("ffn_round_up_to_multiple_of",)))
        bias = switch(r, "use_bias", False)
        parts = embeddings(r, hidden)
        parts.append(WeightPart(name="attention", matrices=(
            Matrix(in_features=hidden, out_features=qk, count=2 * layers),  # q, k
            Matrix(in_features=hidden, out_features=v, count=2 * layers),  # v, output gate
            Matrix(in_features=hidden, out_features=heads, count=2 * layers),  # input and forget gates
            Matrix(in_features=v, out_features=hidden, count=layers)),  # out_proj
            other_parameters=(2 * heads + v + ((2 * qk + 2 * v + hidden) if bias else 0)) * layers))
        parts.append(WeightPart(name="mlp", matrices=(Matrix(in_features=hidden, out_features=ffn, count=2 * layers),
                                                      Matrix(in_features=ffn, out_features=hidden, count=layers)),
                                other_parameters=(2 * ffn + hidden) * layers if bias else 0))
        # pre-mLSTM and pre-FFN norms (and the per-head output norm) take a bias with use_bias; transformers builds
        # the final out_norm whatever add_out_norm says
        norm_bias = (2 * hidden + v) * layers if bias else 0
        parts.append(WeightPart(name="norms", other_parameters=2 * hidden * layers + hidden + norm_bias, tp_sharded=False))
        return count_of(parts, None, None, {"hidden_size": hidden, "mlp_width": ffn, "qkv_width": 2 * qk + 2 * v,
                                            "vocab_size": vocab_of(r)})


PARSERS: tuple[type[ArchParser], ...] = (XlstmParser,)
