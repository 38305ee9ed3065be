"""The JSON Schema (draft 2020-12) of every report kvplan writes.

One document covers all commands: the top level checks the common header (``schema_version``,
``kvplan_version``, ``command``) and dispatches on ``command`` to ``$defs/<command>_report``.

To add a command's report: write its ``$defs`` entry in :func:`_defs` (every key listed in
``required``, ``additionalProperties: false``, ``null`` allowed where a key may not apply) and
add the command to :data:`REPORT_DEFS`. To add a key to an existing report: add it to that
report's ``properties`` (``_obj`` makes every property required). A report that gains a key the
schema does not list fails ``tests/test_schema.py``, which is the point: the schema is the
contract CI users validate against. Breaking changes bump ``report.SCHEMA_VERSION``.
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.engines import ENGINES as _ENGINE_PROFILES
from kvplan.report import SCHEMA_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"

#: command -> the ``$defs`` entry describing its report.
REPORT_DEFS: dict[str, str] = {
    "estimate": "estimate_report",
    "models": "models_report",
    "check": "check_report",
    "diff": "diff_report",
    "compare": "compare_report",
    "capacity": "capacity_report",
    "recommend": "recommend_report",
    "gpus": "gpus_report",
    "verify": "verify_report",
}

Schema = dict[str, Any]

INT = {"type": "integer"}
NONNEG = {"type": "integer", "minimum": 0}
POS = {"type": "integer", "minimum": 1}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
NUM = {"type": "number"}
#: Every engine profile (kvplan.engines.ENGINES), so a new profile cannot be missed here.
ENGINES = {"enum": list(_ENGINE_PROFILES)}


def nullable(schema: Schema) -> Schema:
    """``schema`` or ``null``: for keys that are always present but may not apply."""
    return {"anyOf": [schema, {"type": "null"}]}


def ref(name: str) -> Schema:
    return {"$ref": f"#/$defs/{name}"}


def _obj(properties: dict[str, Schema], *, description: str | None = None) -> Schema:
    """A closed object whose keys are all required (kvplan reports never omit a key)."""
    schema: Schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    if description:
        schema["description"] = description
    return schema


def _header(command: str) -> dict[str, Schema]:
    return {
        "schema_version": {"const": SCHEMA_VERSION},
        "kvplan_version": STR,
        "command": {"const": command},
    }


def _defs() -> dict[str, Schema]:
    estimate_layer = _obj({
        "kind": STR,
        "count": POS,
        "layer_indices": STR,
        "num_kv_heads": {**nullable(NONNEG), "description": "KV heads of the model (as the engine caches them)"},
        "num_kv_heads_per_gpu": {**nullable(NONNEG), "description": "KV heads one tensor-parallel rank keeps"},
        "head_dim_k": nullable(NONNEG),
        "head_dim_v": nullable(NONNEG),
        "window": nullable(POS),
        "tokens_held": {**nullable(NONNEG), "description": "tokens one sequence keeps in each layer"},
        "bytes_per_token": {**nullable(NONNEG), "description": "one token in one layer, summed over all TP ranks"},
        "bytes_per_token_per_gpu": {**nullable(NONNEG), "description": "one token in one layer on one TP rank"},
        "state_bytes_per_seq": nullable(NONNEG),
        "bytes": {**NONNEG, "description": "the whole group, whole batch, all GPUs (and offloaded bytes)"},
        "detail": nullable(STR),
    })
    estimate_report = _obj(
        {
            **_header("estimate"),
            "model": _obj({
                "id": STR,
                "model_type": STR,
                "family": nullable(STR),
                "architecture": nullable(STR),
                "source": {"enum": ["file", "bundled", "hub", "gguf", "hub-gguf"]},
                "location": STR,
                "revision": nullable(STR),
                "num_hidden_layers": POS,
                "max_context_len": nullable(POS),
            }),
            "inputs": _obj({
                "batch": POS,
                "seq_len": nullable(POS),
                "seq_len_source": STR,
                "kv_dtype": STR,
                "kv_dtype_source": STR,
                "state_dtype": STR,
                "encoder_len": nullable(POS),
                "encoder_len_source": nullable(STR),
                "overrides": {"type": "object", "description": "--set overrides, as given"},
                # deployment: kvplan.adjust.Deployment, echoed as given
                "engine": ENGINES,
                "tp": POS,
                "pp": POS,
                "dp": {**POS, "description": "data-parallel replicas sharing the batch (--dp); layers and per-GPU "
                       "figures are then the busiest replica's (ceil(batch / dp) sequences), totals every replica's"},
                "enable_dp_attention": {**BOOL, "description": "SGLang --enable-dp-attention: the --dp ranks split "
                                        "the --tp GPUs (attention tp = tp / dp) instead of each holding tp GPUs"},
                "block_size": nullable(POS),
                "beams": POS,
                "prompt_len": nullable(POS),
                "share_prefix": BOOL,
                "shared_prefix_tokens": NONNEG,
                "no_window": BOOL,
                "quant_group_size": POS,
                "residual_length": POS,
                "offload": nullable(STR),
                "max_num_batched_tokens": nullable(POS),
                "max_num_seqs": nullable(POS),
                "ubatch_size": nullable(POS),
                "kv_unified": BOOL,
                "swa_full_tokens_ratio": nullable(NUM),
                "max_cache_len": nullable(POS),
            }),
            "layers": {"type": "array", "items": estimate_layer},
            "totals": _obj({
                "kv_cache_bytes": {**NONNEG, "description": "the whole cache: every layer, sequence and GPU, CPU part included"},
                "bytes_per_sequence": NONNEG,
                "bytes_per_token": NONNEG,
                "state_bytes": NONNEG,
                "cross_attention_bytes": NONNEG,
                "kv_cache_bytes_per_gpu": {**NONNEG, "description": "the most loaded GPU (largest rank), on the GPU"},
                "peak_bytes": {**NONNEG, "description": "transient peak, all GPUs (>= kv_cache_bytes)"},
                "peak_bytes_per_gpu": {**NONNEG, "description": "transient peak of the most loaded GPU"},
                "cpu_bytes": {**NONNEG, "description": "bytes offloaded to host memory, all ranks"},
            }),
            "adjustments": {
                "type": "array",
                "items": _obj({"name": STR, "reason": STR, "before_bytes": NONNEG, "after_bytes": NONNEG,
                               "scope": {"enum": ["all_gpus", "per_gpu"],
                                         "description": "all_gpus: the whole cache; per_gpu: the most loaded GPU"}}),
            },
            "provenance": {
                "type": "array",
                "items": _obj({"field": STR, "value": {"type": ["integer", "string", "boolean"]}, "source": STR}),
            },
            "notes": {"type": "array", "items": STR},
        },
        description="`kvplan estimate`: the KV cache of one model for one set of inputs.",
    )
    models_report = _obj(
        {
            **_header("models"),
            "models": {
                "type": "array",
                "items": _obj({
                    "id": STR,
                    "alias": STR,
                    "model_type": STR,
                    "num_hidden_layers": POS,
                    "num_kv_heads": nullable(NONNEG),
                    "head_dim": nullable(NONNEG),
                    "layers": STR,
                    "max_context_len": nullable(POS),
                    "kv_dtype": STR,
                    "bytes_per_token": NONNEG,
                    "bytes_per_token_at_max_context": {
                        **nullable(NONNEG),
                        "description": "one sequence's bytes at max_context_len over its tokens (windows and state in)",
                    },
                    "state_bytes_per_seq": nullable(POS),
                }),
            },
        },
        description="`kvplan models`: the bundled models, one line of geometry each.",
    )
    check_compact_scenario = _obj(
        {
            "name": STR,
            "inputs": {"type": "object", "description": "the inputs the plan sets for the scenario (its own keys and "
                       "the plan's defaults), resolved (sizes in bytes, tokens as ints); an input not set is not listed"},
            "budgets": {"type": "object", "description": "the budgets the plan sets for the scenario, resolved"},
            "kv_cache_bytes": {**NONNEG, "description": "the whole cache: every layer, sequence and GPU"},
            "kv_cache_bytes_per_gpu": {**NONNEG, "description": "the most loaded GPU"},
            "fits": {**nullable(BOOL), "description": "the batch fits on the require_fit_on GPUs; null without it"},
            "max_concurrent_requests": {**nullable(NONNEG), "description": "requests of seq_len tokens that fit at once "
                                        "on the require_fit_on GPUs; null without it"},
            "passed": BOOL,
            "gates": {"type": "array", "items": _obj({
                "name": STR,
                "limit": {"description": "the budget as written in the plan, resolved (bytes, a count, or {gpu, num_gpus})"},
                "actual": {"description": "the computed value the budget is compared with"},
                "passed": BOOL,
            })},
        },
        description="one scenario in a row (the default report)",
    )
    gate = _obj({
        "name": STR,
        "limit": {"description": "the budget as written in the plan, resolved (bytes, a count, or {gpu, num_gpus})"},
        "actual": {"description": "the computed value the budget is compared with"},
        "passed": BOOL,
        "message": STR,
    })
    check_full_scenario = _obj(
        {
            "name": STR,
            "inputs": {"type": "object", "description": "every input of a scenario, resolved (sizes in bytes, tokens as "
                       "ints); null when not set"},
            "budgets": {"type": "object", "description": "every budget of a scenario, resolved; null when not set"},
            "kv_cache_bytes": NONNEG,
            "kv_cache_bytes_per_gpu": NONNEG,
            "passed": BOOL,
            "gates": {"type": "array", "items": gate},
            "estimate": ref("estimate_report"),
            "capacity": nullable(ref("capacity_report")),
        },
        description="one scenario with its whole estimate and capacity reports (kvplan check --full)",
    )
    check_report = _obj(
        {
            **_header("check"),
            "plan": STR,
            "generated_at": nullable(STR),
            "passed": BOOL,
            "num_failed": NONNEG,
            "scenarios": {"type": "array", "items": {"oneOf": [check_compact_scenario, check_full_scenario]}},
        },
        description="`kvplan check`: every scenario of a plan file with its budgets, one compact row each (--full: "
        "with its estimate and capacity reports).",
    )
    diff_scenario = _obj({
        "name": STR,
        "status": {"enum": ["unchanged", "changed", "added", "removed"]},
        "old_kv_cache_bytes": nullable(NONNEG),
        "new_kv_cache_bytes": nullable(NONNEG),
        "change_bytes": nullable(INT),
        "ratio": nullable(NUM),
        "old_kv_cache_bytes_per_gpu": {**nullable(NONNEG), "description": "most loaded GPU; null without a per-GPU budget"},
        "new_kv_cache_bytes_per_gpu": {**nullable(NONNEG), "description": "most loaded GPU; null without a per-GPU budget"},
        "change_bytes_per_gpu": nullable(INT),
        "inputs_changed": {
            "type": "array",
            "items": _obj({"field": STR, "old": {}, "new": {}}),
        },
        "over_threshold": BOOL,
    })
    diff_report = _obj(
        {
            **_header("diff"),
            "old": STR,
            "new": STR,
            "max_increase": nullable(STR),
            "passed": BOOL,
            "scenarios": {"type": "array", "items": diff_scenario},
        },
        description="`kvplan diff`: what changed per scenario between two reports.",
    )
    return {
        "estimate_report": estimate_report,
        "models_report": models_report,
        "check_report": check_report,
        "diff_report": diff_report,
        "compare_report": _compare_def(estimate_layer),
        **_capacity_defs(),
        **_verify_defs(),
    }


def _verify_defs() -> dict[str, Schema]:
    """`kvplan verify` (kvplan/verify/report.py ``verify_report``)."""
    layer = _obj({
        "index": NONNEG,
        "kind": STR,
        "num_kv_heads": nullable(POS),
        "num_query_heads": nullable(POS),
        "head_dim_k": nullable(POS),
        "head_dim_v": nullable(POS),
        "window": nullable(POS),
        "cache_tokens": nullable(POS),
        "blocks_per_seq": nullable(POS),
        "peak_blocks_per_seq": nullable(NONNEG),
        "predicted_bytes": NONNEG,
        "measured_bytes": NONNEG,
    })
    rank = _obj({"rank": NONNEG, "predicted_bytes": NONNEG, "measured_bytes": NONNEG, "match": BOOL})
    counter = {
        "predicted": nullable(NONNEG),
        "measured": nullable(INT),
        "peak": nullable(INT),
        "relative_error": nullable(NUM),
        "tolerance": NUM,
    }
    verify = _obj({
        "layout": {"enum": ["dynamic", "static", "paged", "sliding", "quantized"]},
        "engine": STR,
        "device": {"enum": ["cpu", "cuda"]},
        "device_name": STR,
        "torch_version": STR,
        "transformers_version": nullable(STR),
        "distributed_backend": nullable({"enum": ["gloo", "nccl"]}),
        "predicted_bytes": NONNEG,
        "measured_bytes": NONNEG,
        "match": BOOL,
        "ranks": {"type": "array", "items": rank, "minItems": 1},
        "weights_shared": BOOL,
        "weight_bytes": NONNEG,
        "allocated": _obj(counter, description="CUDA memory_allocated() growth with only the cache alive; null on the CPU"),
        "reserved": _obj({**counter, "judged": BOOL},
                         description="CUDA memory_reserved() growth after empty_cache(); judged for preallocated layouts"),
        "step_seconds": nullable(NUM),
        "bandwidth_floor_seconds": nullable(NUM),
        "bandwidth_fraction": nullable(NUM),
        "passed": BOOL,
    })
    model = _obj({
        "id": STR, "model_type": STR, "family": STR, "architecture": nullable(STR), "source": STR, "location": STR,
        "revision": nullable(STR), "num_hidden_layers": POS, "max_context_len": nullable(POS),
    })
    inputs = _obj({
        "layout": STR, "engine": STR, "device": STR, "layers": POS, "layers_total": POS, "batch": POS, "beams": POS,
        "prompt_len": POS, "gen_len": NONNEG, "seq_len": POS, "max_cache_len": POS, "block_size": POS,
        "kv_dtype": STR, "kv_dtype_source": STR, "state_dtype": STR, "quant_group_size": nullable(POS),
        "residual_length": nullable(POS), "tp": POS, "overrides": {"type": "object"},
    })
    report = _obj(
        {
            **_header("verify"),
            "model": model,
            "inputs": inputs,
            "layers": {"type": "array", "items": layer},
            "verify": verify,
            "notes": {"type": "array", "items": STR},
        },
        description="`kvplan verify`: a real decode's cache against kvplan's prediction for the same layers.",
    )
    # NOTE: --engine llama.cpp reports llama.cpp's caches, not a decode's layers: the other shape of verify_report.
    return {"verify_report": {"anyOf": [report, _verify_llamacpp_def(model)]}}


def _verify_llamacpp_def(model: Schema) -> Schema:
    """`kvplan verify --engine llama.cpp` (kvplan/verify/llamacpp.py ``verify_report``)."""
    count = nullable(NONNEG)
    cache = _obj({
        "name": {"enum": ["base", "swa", "recurrent", "csa", "hca", "lid", "csa_state", "hca_state", "lid_state"]},
        "kind": {"enum": ["kv", "recurrent", "state"]},
        "match": BOOL,
        "differences": {"type": "array", "items": STR},
        **{f"{side}_{key}": count for key in ("cells", "layers", "seqs", "streams") for side in ("measured", "predicted")},
        "k_type": nullable(STR), "v_type": nullable(STR),
        **{f"{side}_{key}": {**count, "description": "bytes of the cache (recurrent: k = R, v = S); measured only "
                             "with --measure tensors"}
           for key in ("k_bytes", "v_bytes", "bytes", "buffer_bytes") for side in ("measured", "predicted")},
        **{f"logged_{key}": {**nullable(STR), "description": "MiB as llama.cpp printed them (%.2f)"}
           for key in ("k_mib", "v_mib", "mib", "buffer_mib")},
        "layer_indices": {"type": "array", "items": NONNEG},
        "logged_line": nullable(STR),
        "predicted_line": nullable(STR),
    })
    inputs = _obj({
        "engine": {"const": "llama.cpp"}, "gguf": STR, "ctx_size": NONNEG, "n_ctx": POS, "parallel": POS,
        "cache_type_k": STR, "cache_type_v": STR, "flash_attn": {"enum": ["on", "off", "auto"]}, "kv_unified": BOOL,
        "ubatch_size": POS, "n_gpu_layers": INT, "swa_full": BOOL, "measure": {"enum": ["log", "buffers", "tensors"]},
    })
    verify = _obj({
        "engine": {"const": "llama.cpp"},
        "llama_cpp_python": nullable(STR),
        "measure": {"enum": ["log", "buffers", "tensors"]},
        "resolution_bytes": nullable(POS),
        "measured_bytes": nullable(NONNEG),
        "predicted_bytes": nullable(NONNEG),
        "refused": nullable(STR),
        "predicted_refusal": nullable(STR),
        "logged_lines": {"type": "array", "items": STR},
        "predicted_lines": {"type": "array", "items": STR},
        "passed": BOOL,
        "reason": nullable(STR),
    })
    return _obj(
        {
            **_header("verify"),
            "model": model,
            "inputs": inputs,
            "caches": {"type": "array", "items": cache},
            "verify": verify,
            "notes": {"type": "array", "items": STR},
        },
        description="`kvplan verify --engine llama.cpp`: each cache the real llama.cpp made against kvplan's "
        "llama.cpp profile.",
    )


def _capacity_defs() -> dict[str, Schema]:
    """`kvplan capacity` (kvplan/capacity.py ``capacity_report``) and `kvplan gpus`."""
    engines = ENGINES
    part = _obj({"name": STR, "parameters": NONNEG, "bytes": NONNEG, "storage": STR})
    capacity_report = _obj({
        **_header("capacity"),
        "model": _obj({
            "id": STR, "model_type": STR, "family": nullable(STR), "architecture": nullable(STR),
            "source": {"enum": ["file", "bundled", "hub", "gguf", "hub-gguf"]}, "location": STR, "revision": nullable(STR),
            "num_hidden_layers": POS, "max_context_len": nullable(POS),
        }),
        "inputs": _obj({
            "gpu": nullable(STR), "gpu_memory_bytes": nullable(POS), "gpu_memory_source": nullable(STR),
            "gpu_bandwidth_bytes_per_s": nullable(POS),
            "num_gpus": nullable(POS), "tp": POS, "pp": POS, "engine": engines, "kv_dtype": STR,
            "kv_dtype_source": STR, "dtype": STR, "max_model_len": POS, "max_model_len_source": STR, "batch": POS,
            "block_size": nullable(POS), "gpu_memory_utilization": nullable(NUM), "mem_fraction_static": nullable(NUM),
            "free_gpu_memory_fraction": nullable(NUM), "max_num_batched_tokens": nullable(POS),
            "reserve_bytes": nullable(NONNEG), "kv_budget_bytes": nullable(NONNEG),
            "engine_version": nullable(STR), "dp": POS, "enable_dp_attention": BOOL,
        }),
        "weights": _obj({
            "source": nullable({"enum": ["config", "safetensors", "--weights-bytes", "gguf", "llama.cpp rule"]}),
            "parameters": nullable(NONNEG), "language_parameters": nullable(NONNEG),
            "vision_parameters": nullable(NONNEG), "active_parameters": nullable(NONNEG),
            "bytes": nullable(NONNEG), "vision_bytes": nullable(NONNEG), "bytes_per_gpu": nullable(NONNEG),
            "dtype": nullable(STR), "checkpoint_dtype": nullable(STR), "quantization": nullable(STR),
            "num_experts": nullable(POS),
            "experts_per_token": nullable(POS), "parts": {"type": "array", "items": part},
        }),
        "budget": _obj({
            "formula": STR, "gpu_memory_bytes": nullable(POS), "usable_bytes": NONNEG,
            "weights_bytes_per_gpu": nullable(NONNEG), "activation_bytes": NONNEG, "non_torch_bytes": NONNEG,
            "reserve_bytes": NONNEG,
            "kv_bytes_per_gpu": {**INT, "description": "negative when weights and reserve exceed the memory"},
            "terms": {"type": "array", "items": _obj({"name": STR, "bytes": NONNEG, "source": STR}),
                      "description": "the subtracted terms of a derived budget and where each rule comes from"},
            "uncertainty_bytes": {**nullable(NONNEG), "description": "how much larger the engine's budget is on its other "
                                  "kernel paths (vLLM: FlashInfer's sampler, unpadded MXFP4)"},
        }),
        "capacity": _obj({
            "fits": BOOL, "block_size": POS, "num_blocks": NONNEG, "max_tokens": NONNEG, "max_concurrency": NUM,
            "max_concurrent_requests": NONNEG, "max_context_len": NONNEG,
            "max_context_limit": {"enum": ["memory", "model maximum", "any length"]}, "min_tp": nullable(POS),
            "min_num_gpus": nullable(POS), "kv_bytes_per_request": NONNEG, "kv_bytes_needed": NONNEG,
            "kv_bytes_available": INT, "decode_bytes_per_step": nullable(NONNEG),
            "decode_floor_seconds": nullable(NUM), "decode_tokens_per_s": nullable(NUM),
            "engine_log": _engine_log_def(),
            "stages": {**nullable({"type": "array", "items": _obj({
                "stage": NONNEG, "ranks": {"type": "array", "items": NONNEG}, "num_layers": NONNEG,
                "weights_bytes_per_gpu": nullable(NONNEG), "kv_budget_bytes": NONNEG, "low_rank": NONNEG,
                "num_blocks": nullable(NONNEG)})}),
                "description": "per pipeline stage when ranks differ (pp > 1 or --kv-budget per rank): its global ranks, "
                "layers, weights per GPU, the KV room of its rank with the least (low_rank) and the blocks that makes"},
            "limiting_rank": {**nullable(NONNEG), "description": "the rank whose room sizes the pool (null: ranks alike)"},
            "kv_bytes_available_range": {**nullable({"type": "array", "items": NONNEG, "minItems": 2, "maxItems": 2}),
                                         "description": "a derived budget's reach, [less what the engine measures "
                                         "beyond kvplan's terms, more on its other kernel paths]; null when given"},
            "num_blocks_range": {**nullable({"type": "array", "items": NONNEG, "minItems": 2, "maxItems": 2}),
                                 "description": "the blocks each end of kv_bytes_available_range makes"},
            "max_concurrency_range": {**nullable({"type": "array", "items": NUM, "minItems": 2, "maxItems": 2}),
                                      "description": "the max concurrency each end of kv_bytes_available_range makes"},
        }),
        "log_comparison": nullable(_log_comparison_def()),
        "suggestions": {"type": "array", "items": STR},
        "notes": {"type": "array", "items": STR},
    })
    gpu = _obj({"name": STR, "vendor": STR, "memory_bytes": POS, "bandwidth_bytes_per_s": POS,
                "aliases": {"type": "array", "items": STR}, "source": STR, "memory_source": STR})
    gpus_report = _obj({**_header("gpus"), "gpus": {"type": "array", "items": gpu}})
    return {"capacity_report": capacity_report, "gpus_report": gpus_report,
            "recommend_report": _recommend_def(capacity_report["properties"]["model"])}


def _recommend_def(model: Schema) -> Schema:
    """`kvplan recommend` (kvplan/report/recommend.py ``recommend_report``)."""
    layout: dict[str, Schema] = {"gpu": STR, "engine": ENGINES, "num_gpus": POS, "nodes": POS, "tp": POS, "pp": POS, "dp": POS}
    deployment = _obj({
        "rank": POS, **layout, "kv_dtype": STR,
        "max_concurrency": {**NUM, "description": "requests of max_model_len the pool holds (capacity's figure x dp)"},
        "max_concurrent_requests": NONNEG, "headroom": NONNEG,
        "max_context": {**NONNEG, "description": "the longest context `concurrency` requests fit (capacity's max_context_len)"},
        "kv_bytes_per_gpu": INT, "kv_bytes_needed_per_gpu": NONNEG, "weights_bytes_per_gpu": nullable(NONNEG),
        "decode_floor_ms": {**nullable(NUM), "description": "a floor, not a prediction: bytes one decode step reads / "
                            "memory bandwidth"},
        "cost_per_hour": nullable(NUM), "command": STR, "engine_log": {"type": "array", "items": STR},
        "smaller_fails": nullable(STR), "notes": {"type": "array", "items": STR},
    })
    rejected = _obj({**layout, "kv_dtype": STR, "reason": STR})
    return _obj({
        **_header("recommend"),
        "model": model,
        "inputs": _obj({
            "max_model_len": POS, "concurrency": POS, "gpus": {"type": "array", "items": STR},
            "engines": {"type": "array", "items": ENGINES},
            "kv_dtypes": {"type": "object", "additionalProperties": {"type": "array", "items": STR}},
            "max_gpus": POS, "gpus_per_node": POS, "nodes": nullable(POS),
            "prices": nullable({"type": "object", "additionalProperties": NUM}), "max_itl_ms": nullable(NUM),
            "top": NONNEG,
        }),
        "candidates": NONNEG,
        "deployments": {"type": "array", "items": deployment},
        "rejected": {"type": "array", "items": rejected},
        "notes": {"type": "array", "items": STR},
    }, description="`kvplan recommend`: deployments best first, each with its launch command, and the layouts "
       "rejected with the reason.")


def _engine_log_def() -> Schema:
    """``capacity.engine_log`` (kvplan/engine_log.py): the engine's start-up KV lines and their numbers."""
    # NOTE: DeepSeek-V4 (llama_kv_cache_dsv4) adds its compressed caches (csa, hca, lid) and its compressor states:
    # a state's cells are its rows per stream, its K and V the float32 kv and score tensors; only a state has a
    # ratio and a row width (the two keys are absent from the caches).
    llama_cache = _obj({"name": {"enum": ["base", "swa", "csa", "hca", "lid", "csa_state", "hca_state", "lid_state"]},
                        "cells": NONNEG, "layers": NONNEG, "seqs": POS, "streams": POS, "k_type": STR,
                        "k_bytes": NONNEG, "v_type": STR, "v_bytes": NONNEG,
                        "ratio": {**POS, "description": "DeepSeek-V4 compressor states only: the compression ratio"},
                        "width": {**NONNEG, "description": "DeepSeek-V4 compressor states only: n_embd_state"}})
    llama_cache["required"] = [key for key in llama_cache["required"] if key not in ("ratio", "width")]
    return _obj({
        "engine": ENGINES, "version": {**nullable(STR), "description": "engine release whose log format the lines follow"},
        "lines": {"type": "array", "items": STR, "description": "the lines, verbatim in form, with kvplan's numbers"},
        "available_kv_bytes": nullable(INT), "num_blocks": nullable(NONNEG),
        "gpu_kv_cache_tokens": {**nullable(NONNEG), "description": "vLLM 'GPU KV cache size: N tokens'"},
        "max_concurrency": {**nullable(NUM), "description": "vLLM 'Maximum concurrency for T tokens per request'"},
        "bytes_per_block": {**nullable(POS), "description": "vLLM: bytes of one block id over all layers' tensors"},
        "num_kv_cache_groups": {**nullable(POS), "description": "vLLM hybrid allocator groups (0.10-0.20 divide by it)"},
        "max_total_num_tokens": {**nullable(NONNEG), "description": "SGLang '#tokens'"},
        "kv_size_bytes": nullable(NONNEG), "latent_size_bytes": nullable(NONNEG), "index_size_bytes": nullable(NONNEG),
        "k_size_bytes": nullable(NONNEG), "v_size_bytes": nullable(NONNEG),
        "llama_caches": {"type": "array", "items": llama_cache},
        "buffers": {"type": "array", "items": _obj({"device": STR, "bytes": NONNEG})},
        "paged_kv_max_tokens": {**nullable(NONNEG), "description": "TensorRT-LLM 'Allocated X GiB ... (N)'"},
        "allocated_bytes": nullable(NONNEG), "tokens_per_block": nullable(POS),
    })


def _log_comparison_def() -> Schema:
    """``capacity.log_comparison`` (kvplan/logparse.py, ``--compare-log``): logged figures beside kvplan's."""
    row = _obj({
        "figure": STR, "line_no": POS, "logged": STR, "predicted": nullable(STR),
        "difference": {**nullable(NUM), "description": "kvplan - logged, in the logged unit (GiB, MiB, tokens, x)"},
        "match": BOOL, "cause": nullable(STR),
    })
    return _obj({"source": STR, "engine": ENGINES, "version_hint": nullable(STR),
                 "rows": {"type": "array", "items": row}, "matches": NONNEG, "differs": NONNEG})


def _compare_def(layer: Schema) -> Schema:
    """`kvplan compare`: one entry per attention layout (kvplan/compare.py ``compare_report``)."""
    variant = _obj({
        "name": STR,
        "kind": {"enum": ["mha", "gqa", "mqa", "mla", "swa", "hybrid", "model"]},
        "description": STR,
        "num_kv_heads": nullable(POS),
        "head_dim_k": nullable(POS),
        "head_dim_v": nullable(POS),
        "kv_lora_rank": nullable(POS),
        "qk_rope_head_dim": nullable(NONNEG),
        "window": nullable(POS),
        "local_layers_per_global": nullable(POS),
        "num_attention_layers": NONNEG,
        "kv_dtype": {**STR, "description": "this variant's KV dtype (they differ with --kv-dtype bf16,fp8)"},
        "bytes_per_token": NONNEG,
        "kv_cache_bytes": NONNEG,
        "kv_cache_bytes_per_gpu": {**NONNEG, "description": "on the most loaded GPU; equals kv_cache_bytes on one GPU"},
        "ratio_to_mha": NUM,
        "decode_read_bytes_per_step": NONNEG,
        "sweep": {
            "type": "array",
            "items": _obj({"seq_len": POS, "kv_cache_bytes": NONNEG, "ratio_to_mha": NUM}),
        },
        "layers": {"type": "array", "items": layer},
    })
    return _obj(
        {
            **_header("compare"),
            "model": _obj({
                "id": STR,
                "model_type": STR,
                "family": nullable(STR),
                "architecture": nullable(STR),
                "source": {"enum": ["file", "bundled", "hub", "gguf", "hub-gguf", "dims", "example"]},
                "location": STR,
                "revision": nullable(STR),
                "num_hidden_layers": POS,
                "max_context_len": nullable(POS),
            }),
            "inputs": _obj({
                "base": STR,
                "num_attention_layers": POS,
                "num_attention_heads": POS,
                "head_dim_k": POS,
                "head_dim_v": POS,
                "batch": POS,
                "seq_len": POS,
                "seq_len_source": STR,
                "kv_dtype": STR,
                "kv_dtype_source": STR,
                "engine": ENGINES,
                "tp": POS,
                "pp": POS,
                "block_size": nullable(POS),
                "sweep_seq_lens": {"type": "array", "items": POS},
                "gpu_mem_bytes": nullable(NONNEG),
                "plot": nullable(STR),
            }),
            "mha_kv_cache_bytes": NONNEG,
            "variants": {"type": "array", "items": variant},
            "notes": {"type": "array", "items": STR},
        },
        description="`kvplan compare`: attention layouts side by side at one model size.",
    )


def report_schema() -> Schema:
    """The JSON Schema of every kvplan report, dispatching on its ``command`` key."""
    defs = _defs()
    missing = set(REPORT_DEFS.values()) - set(defs)
    assert not missing, f"REPORT_DEFS names undefined $defs: {sorted(missing)}"
    return {
        "$schema": DRAFT,
        "$id": f"urn:kvplan:report:{SCHEMA_VERSION}",
        "title": f"kvplan report, schema_version {SCHEMA_VERSION}",
        "description": "Every report kvplan writes (--format json/yaml, --output). Sizes are integer "
        "bytes; every key is always present, null when it does not apply.",
        "type": "object",
        "required": ["schema_version", "kvplan_version", "command"],
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION},
            "kvplan_version": STR,
            "command": {"enum": sorted(REPORT_DEFS)},
        },
        "allOf": [
            {
                "if": {"properties": {"command": {"const": command}}, "required": ["command"]},
                "then": ref(def_name),
            }
            for command, def_name in sorted(REPORT_DEFS.items())
        ],
        "$defs": defs,
    }


def schema_json() -> str:
    return json.dumps(report_schema(), indent=2) + "\n"
