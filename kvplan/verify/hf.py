"""``kvplan verify --engine transformers``: build the real Hugging Face model from the config with
random weights, run ``generate()``, and measure the cache object it returns.

An independent cross-check of kvplan's own decode and of its ``hf-dynamic`` / ``hf-static`` engine
profiles (``kvplan estimate --engine hf-dynamic``). Imports torch and transformers (the extra
``kvplan[transformers]``); nothing imports this module at load time.

``generate(max_new_tokens=N)`` never feeds the last generated token back, so its cache holds
``P + N - 1`` tokens (measured, tests/test_arch_fam1_oracle.py): kvplan's ``--gen-len G`` decode steps map to ``N = G + 1``.
Sizes that never reach the cache are shrunk so a big model's layers fit a small machine: the
vocabulary and the MLP/expert widths. Each shrink is kept only if kvplan parses the same cache
geometry from the shrunk config, and the report lists them.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kvplan.adjust import Deployment
from kvplan.calc import estimate
from kvplan.errors import InputError, KvplanError
from kvplan.modelref import load_raw_config
from kvplan.models import apply_overrides, parse_config
from kvplan.verify.decode import (
    MEMORY_FRACTION,
    TORCH_DTYPES,
    VerifyOOM,
    _is_oom,
    _progress,
    available_bytes,
    resolve_device,
    storage_bytes,
)
from kvplan.verify.predict import VerifyPlan
from kvplan.verify.report import RankMeasurement, VerifyMeasurement

#: Layouts transformers has a cache class for that kvplan predicts (DynamicCache, StaticCache).
ENGINE_LAYOUTS = {"dynamic": "hf-dynamic", "static": "hf-static"}
SMALL_VOCAB = 512
SMALL_WIDTH = 64
#: Widths of MLPs and experts: they never touch the cache (checked per config, see ``shrink``).
WIDTH_KEYS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_dim", "n_inner",
              "ffn_hidden_size", "expert_intermediate_size")
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")
#: Cache attributes that hold cached state (not bookkeeping such as ``_sliding_window_tensor``).
STATE_ATTRS = ("keys", "values", "indexer_keys", "conv_states", "recurrent_states")


def transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def check_supported(plan: VerifyPlan, *, gpu: bool) -> None:
    if plan.layout not in ENGINE_LAYOUTS:
        raise InputError(
            f"--engine transformers measures DynamicCache and StaticCache, not the {plan.layout} layout",
            "use --layout dynamic or --layout static with --engine transformers (or drop --engine)",
        )
    if plan.tp > 1:
        raise InputError("--engine transformers runs one process; it has no --tp", "drop --tp, or drop --engine")
    if plan.layout == "dynamic" and plan.gen_tokens == 0 and any(
        layer.window is not None and plan.prompt_tokens >= layer.window for layer in plan.layers
    ):
        raise InputError(
            "with --gen-len 0 a sliding layer of DynamicCache still holds the whole prompt, a transient the "
            "hf-dynamic profile reports as its peak, not as its cache",
            "use --gen-len 1 or more with --engine transformers (kvplan's own decode predicts --gen-len 0)",
        )
    if plan.kv_dtype.name not in ("fp32", "fp16", "bf16"):
        raise InputError(
            f"--engine transformers caches in the model dtype; --kv-dtype {plan.kv_dtype.name} is not one",
            "use --kv-dtype auto, fp32, fp16 or bf16 with --engine transformers",
        )


def prepare_config(raw: Mapping[str, Any], overrides: Mapping[str, Any], plan: VerifyPlan,
                   parse: Any) -> tuple[dict[str, Any], list[str]]:
    """The config to build: overrides applied, the first ``plan.num_layers`` layers, shrunk widths.

    ``parse(config) -> layer specs`` is kvplan's own parser: a shrink is kept only when the parsed
    cache geometry does not change.
    """
    config = dict(raw)
    nested = next((k for k in NESTED_TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
    if nested is not None:
        inner = {k[len(nested) + 1:] if k.startswith(nested + ".") else k: v
                 for k, v in overrides.items() if k.startswith(nested + ".") or "." not in k}
        outer = {k: v for k, v in overrides.items() if "." in k and not k.startswith(nested + ".")}
        config = apply_overrides(config, outer)
        config[nested] = apply_overrides(dict(config[nested]), inner)
    else:
        config = apply_overrides(config, overrides)
    text = dict(config[nested]) if nested else config

    total = plan.num_layers_total
    counted = [key for key in LAYER_COUNT_KEYS if text.get(key) == total]
    for key in counted or ["num_hidden_layers"]:  # a sparse text_config leaves it to the class default
        text[key] = plan.num_layers
    for key, value in list(text.items()):
        per_layer = isinstance(value, list) or (isinstance(value, str) and "pattern" in key)
        if per_layer and len(value) == total and plan.num_layers < total:
            text[key] = value[: plan.num_layers]  # layer_types, no_rope_layers, hybrid_override_pattern...

    def build(candidate: dict[str, Any]) -> dict[str, Any]:
        if nested is None:
            return candidate
        return {**config, nested: candidate}

    def result(candidate: dict[str, Any]) -> dict[str, Any]:
        # NOTE: a multimodal wrapper caches only its language model: build that from its text config.
        if nested is not None and isinstance(candidate.get("model_type"), str):
            return {**candidate, "dtype": candidate.get("dtype") or config.get("dtype") or config.get("torch_dtype")}
        return build(candidate)

    wanted = [layer.spec for layer in plan.layers]
    shrunk: list[str] = []
    if isinstance(text.get("vocab_size"), int) and text["vocab_size"] > SMALL_VOCAB:
        shrunk.append(f"vocab_size {text['vocab_size']:,} -> {SMALL_VOCAB}")
        text["vocab_size"] = SMALL_VOCAB
    for key, value in list(text.items()):
        if key.endswith("_token_id") and isinstance(value, int) and value >= SMALL_VOCAB:
            text[key] = 0
        elif key.endswith("_token_id") and isinstance(value, list):
            text[key] = [0]
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        text.setdefault(key, 0)  # class defaults (Phi-3: 32000) would point outside the small vocabulary
    for key in WIDTH_KEYS:
        value = text.get(key)
        if isinstance(value, int) and value > SMALL_WIDTH:
            candidate = {**text, key: SMALL_WIDTH}
            if list(parse(build(candidate))) == wanted:
                text = candidate
                shrunk.append(f"{key} {value:,} -> {SMALL_WIDTH}")
    return result(text), shrunk


def _cache_tensors(layer: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for attr in STATE_ATTRS:
        value = getattr(layer, attr, None)
        values = value.values() if isinstance(value, dict) else [value]
        found.extend(v for v in values if isinstance(v, torch.Tensor))
    return found


def measure_cache(cache: Any) -> tuple[int, ...]:
    """Bytes of the distinct storages of each cache layer (deduplicated by data pointer across layers)."""
    seen: set[int] = set()
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise KvplanError(f"transformers returned a {type(cache).__name__} without .layers", "this is a kvplan bug")
    return tuple(storage_bytes(_cache_tensors(layer), seen) for layer in layers)


class _Streamer:
    """generate()'s streamer hook: advance the progress bar once for the prompt and once per new token."""

    def __init__(self, advance: Any) -> None:
        self.advance = advance

    def put(self, value: Any) -> None:
        self.advance()

    def end(self) -> None:
        pass


def run_transformers(plan: VerifyPlan, config: dict[str, Any], shrunk: list[str], *, gpu: bool = False, seed: int = 0,
                     progress: bool = False, max_memory: int | None = None) -> VerifyMeasurement:
    """Build the Hugging Face model from ``config`` with random weights, generate, measure its cache."""
    try:
        import transformers
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            GenerationConfig,
            StaticCache,
        )
    except ImportError:
        raise InputError("--engine transformers needs the transformers package",
                         "pip install '.[transformers]' in the kvplan checkout (or: pip install transformers)") from None
    check_supported(plan, gpu=gpu)
    transformers.logging.set_verbosity_error()  # its deprecation chatter is not kvplan's output
    device = resolve_device(gpu, 1)
    dtype = TORCH_DTYPES[plan.kv_dtype.name]
    with tempfile.TemporaryDirectory(prefix="kvplan-hf-") as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        try:
            hf_config = AutoConfig.from_pretrained(tmp)
            with torch.device("meta"):
                meta = AutoModelForCausalLM.from_config(hf_config, dtype=dtype)
        except (ValueError, KeyError, TypeError, AttributeError, ImportError, OSError) as exc:
            raise InputError(
                f"transformers {transformers.__version__} cannot build {plan.geometry.model_id} as a causal LM: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "drop --engine transformers to verify with kvplan's own decode",
            ) from None
    weight_bytes = sum(t.numel() * t.element_size() for t in (*meta.parameters(), *meta.buffers()))
    del meta
    free = available_bytes(device)
    budget = int(free * MEMORY_FRACTION) if max_memory is None else min(max_memory, int(free * MEMORY_FRACTION))
    # NOTE: the cache, one more copy while torch.cat grows a layer, and the logits of the prefill.
    needed = weight_bytes + 3 * plan.predicted_bytes + 4 * plan.rows * plan.prompt_tokens * SMALL_VOCAB * 4
    if needed > budget:
        raise InputError(
            f"the transformers model needs about {needed:,} bytes ({weight_bytes:,} of weights), more than the "
            f"{budget:,} bytes it may use on {device.type}",
            "try a smaller --layers, --batch or --prompt-len",
        )

    torch.manual_seed(seed)
    model = None
    try:
        model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype).to(device).eval()
        vocab = model.get_input_embeddings().num_embeddings
        ids = torch.randint(0, vocab, (plan.batch, plan.prompt_tokens), device=device)
        new_tokens = plan.gen_tokens + 1
        generation = GenerationConfig(
            max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=plan.beams,
            num_return_sequences=1, pad_token_id=0, bos_token_id=None,
            eos_token_id=None, use_cache=True, return_dict_in_generate=True,
        )
        kwargs: dict[str, Any] = {"attention_mask": torch.ones_like(ids)}
        if plan.layout == "static":
            # NOTE: past_key_values works from 5.15 on (5.24 prefers cache= and warns, silenced below).
            kwargs["past_key_values"] = StaticCache(config=model.config, max_cache_len=plan.max_cache_tokens)
        with _progress(progress and plan.beams == 1, plan) as advance, torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers' deprecation notices are not kvplan's output
            if progress and plan.beams == 1:
                kwargs["streamer"] = _Streamer(advance)
            out = model.generate(ids, generation_config=generation, **kwargs)
        cache = getattr(out, "cache", None)
        cache = out.past_key_values if cache is None else cache
        generated = out.sequences.shape[1] - plan.prompt_tokens
    except (ValueError, NotImplementedError) as exc:
        raise InputError(
            f"transformers {transformers.__version__} refused to generate with this config: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            "try another --layers or --layout, or drop --engine transformers to verify with kvplan's own decode",
        ) from None
    except (RuntimeError, MemoryError) as exc:
        if not (isinstance(exc, MemoryError) or _is_oom(exc)):
            raise
        model = None
        raise VerifyOOM(
            f"ran out of memory on {device} in transformers' generate()",
            "try a smaller --layers or --batch; the memory was freed",
        ) from None
    layer_bytes = measure_cache(cache)
    notes = [(
        f"--engine transformers: {type(model).__name__} built from the config with random weights "
        f"(transformers {transformers.__version__}), generate(max_new_tokens={new_tokens}) holds prompt + "
        f"{new_tokens} - 1 tokens; measured: the storages of its {type(cache).__name__}"
    )]
    if shrunk:
        notes.append("shrunk (never cached, the parsed cache geometry is unchanged): " + ", ".join(shrunk))
    if generated != new_tokens:
        notes.append(f"generate() stopped after {generated} of {new_tokens} new tokens")
    if len(layer_bytes) != plan.num_layers:
        notes.append(f"the transformers cache has {len(layer_bytes)} layers, the plan {plan.num_layers}: "
                     "per-layer bytes are not comparable, the total is")
        kept = layer_bytes[: plan.num_layers]
        layer_bytes = (*kept, *(0,) * (plan.num_layers - len(kept)))
        layer_bytes = (*layer_bytes[:-1], layer_bytes[-1] + sum(measure_cache(cache)) - sum(layer_bytes))
    if any(layer.kind == "mla" for layer in plan.layers):
        from packaging.version import Version

        if Version(transformers.__version__) < Version("5.15"):
            notes.append(
                f"transformers {transformers.__version__} caches MLA as decompressed per-head K and V; kvplan "
                "predicts the latent that transformers >= 5.15 caches"
            )
    if device.type == "cuda":
        notes.append("--engine transformers measures the cache tensors only, not the CUDA allocator")
    profile, profile_bytes = profile_prediction(plan)
    rank = RankMeasurement(rank=0, measured_bytes=sum(layer_bytes), layer_bytes=layer_bytes,
                           peak_blocks=tuple(None for _ in plan.layers))
    return VerifyMeasurement(
        device=device.type, device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        backend=None, torch_version=str(torch.__version__), weight_bytes=weight_bytes, ranks=(rank,),
        engine="transformers", transformers_version=str(transformers.__version__), notes=tuple(notes),
        weights_shared=False, profile=profile, profile_bytes=profile_bytes,
    )


def profile_prediction(plan: VerifyPlan) -> tuple[str, int]:
    """kvplan's prediction for the transformers cache: ``estimate --engine hf-dynamic|hf-static``."""
    profile = ENGINE_LAYOUTS[plan.layout]
    deployment = Deployment(engine=profile, beams=plan.beams, prompt_len=plan.prompt_tokens,
                            max_cache_len=plan.max_cache_tokens if plan.layout == "static" else None)
    result = estimate(plan.geometry, batch=plan.batch, seq_len=plan.seq_tokens, kv_dtype=plan.kv_dtype_name,
                      deployment=deployment)
    return profile, result.kv_cache_bytes_per_gpu


def cross_check(plan: VerifyPlan, model: str, *, revision: str | None, token: str | None,
                overrides: Mapping[str, Any], gpu: bool, seed: int, progress: bool,
                max_memory: int | None) -> VerifyMeasurement:
    """Load the raw config of ``model`` again, prepare it, build and measure (the command's entry point)."""
    check_supported(plan, gpu=gpu)
    raw, _source, model_id = load_raw_config(model, revision=revision, token=token)
    config, shrunk = prepare_config(
        raw, overrides, plan, lambda cfg: parse_config(cfg, model_id=model_id).layers,
    )
    return run_transformers(plan, config, shrunk, gpu=gpu, seed=seed, progress=progress, max_memory=max_memory)
