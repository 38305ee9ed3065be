"""Upper bounds on sizes and counts, each set from the largest real deployment and said in the error.

Pure floor module: a value past its bound is an :class:`InputError` (exit 2) naming the flag, the
bound and why the bound is where it is, so a typo (``--tp 40960``) never runs for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InputError


@dataclass(frozen=True, kw_only=True, slots=True)
class Limit:
    """An upper bound on an input, with the real deployment it is set from."""

    maximum: int
    why: str
    """The real deployment the bound is set from."""


#: NOTE: the largest NVLink domain announced is 576 GPUs (NVIDIA Rubin Ultra NVL576) and no model
#: has more than 128 KV heads to shard; 1,024 leaves room without admitting typos.
MAX_TP = Limit(maximum=1024, why="above the largest NVLink domain, 576 GPUs in an NVL576 rack")
#: NOTE: the deepest published LLMs have 126 (Llama-3.1-405B) to 160 layers; a stage holds >= 1 layer.
MAX_PP = Limit(maximum=1024, why="a pipeline stage holds at least one layer; the deepest LLMs have about 160")
#: NOTE: the largest single training clusters hold about 200,000 GPUs (2025).
MAX_NUM_GPUS = Limit(maximum=1_048_576, why="about 5x the largest GPU cluster built, about 200,000 GPUs")
#: NOTE: beam search uses 1-16 beams in practice; transformers' examples stop at 64.
MAX_BEAMS = Limit(maximum=1024, why="beam search uses 1-16 beams in practice")
#: NOTE: vLLM's --max-num-seqs defaults to 256-1024; SGLang's largest running batch is in the thousands.
MAX_BATCH = Limit(maximum=16_777_216, why="2**24 sequences, 16,000x vLLM's largest default --max-num-seqs")
#: NOTE: the deepest published LLMs: Llama-3.1-405B 126 layers, PaLM 118, Megatron-Turing NLG 105.
MAX_LAYERS = Limit(maximum=16_384, why="over 100x the deepest published LLM, Llama-3.1-405B with 126 layers")
#: Head counts, head sizes and hidden sizes of `kvplan compare` dims (largest real: 128 heads, 16,384 hidden).
MAX_DIM = Limit(maximum=1_048_576, why="64x the widest published LLM, hidden size 16,384")

#: ``--model``: longer than any path (PATH_MAX 4,096) or Hub id (96 + 1 + 96 characters).
MAX_MODEL_ARG_CHARS = 4096
#: config.json and plan files. Real configs are under 100 KiB (the largest, with label maps, ~1 MiB).
MAX_FILE_BYTES = 16 * 1024**2
#: JSON/YAML nesting. Real configs nest 4 levels, plans 4, reports 6.
MAX_NESTING = 100
#: YAML nodes after alias expansion, in a config or plan (a 10,000-scenario plan has about 30,000).
MAX_YAML_NODES = 500_000
#: Scenarios in a plan: a sweep of 10 models x 10 lengths x 10 batch sizes x 10 deployments.
MAX_SCENARIOS = 10_000
#: A report's YAML nodes, read by `kvplan diff` and never exceeded by what `kvplan check` writes (check refuses a
#: report past it). NOTE: a compact check row has 30-100 nodes (MAX_SCENARIOS rows: at most about 1,000,000), a
#: --full row 300-720 (Nemotron-H, require_fit_on), so about 2,900 --full rows fit.
MAX_REPORT_NODES = 2_097_152
#: A report's bytes, read by `kvplan diff` and never exceeded by what `kvplan check` writes. NOTE: a compact row is
#: 0.3-1 KB of YAML or JSON (MAX_SCENARIOS rows: about 10 MB), a --full row up to 17 KB of JSON.
MAX_REPORT_BYTES = 64 * 1024**2


def check_limit(value: int | None, limit: Limit, what: str) -> None:
    """Raise InputError when ``value`` is past ``limit`` (None passes)."""
    if value is not None and value > limit.maximum:
        raise InputError(
            f"{what} {value:,} is past kvplan's limit of {limit.maximum:,} ({limit.why})",
            f"check the value of {what}",
        )
