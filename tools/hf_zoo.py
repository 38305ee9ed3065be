"""transformers as kvplan's oracle: measure what the installed transformers really caches.

    python tools/hf_zoo.py                               # every generation model type -> tests/data/hf_zoo.json
    python tools/hf_zoo.py --only llama gemma3           # a few model types (merged into the existing file)
    python tools/hf_zoo.py --real ../shared/hf_configs    # real config.json files -> tests/data/hf_real.json

Zoo mode enumerates the model types of transformers' auto mappings for causal LM, seq2seq LM and
image-text-to-text, builds each config class with its OWN defaults, and shrinks it to a tiny size
that keeps the cache geometry: fewer layers (one period of the layer pattern: layer_types and every
other per-layer list are cut consistently), small vocabulary, MLP and expert widths, fewer experts,
one-layer vision/audio towers. Heads, KV heads, head dims, windows, latent ranks, state sizes and
conv kernels keep the class defaults. Real mode does the same to each real config.json (only the
keys the file has are edited, so the class defaults still fill in the rest).

Each model is then built with random weights on the CPU (bf16, no network), runs a short greedy
``generate`` (``--prompt`` tokens, ``--new`` tokens, batch ``--batch``; an encoder that reads an image,
as vision-encoder-decoder's ViT does, gets a blank image of its config's ``image_size`` instead of a
prompt), and the cache object it returns is measured: per layer, the bytes of every tensor (distinct storages counted once, by data
pointer). Failures are kept with the exception class and a one-line reason. Each model runs in a
worker subprocess with a per-model alarm, so one bad model cannot hang the run.

The tests (tests/test_hf_zoo.py, tests/test_hf_real.py) compare ``kvplan estimate --engine
hf-dynamic`` with every record. Run this again whenever transformers moves.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
ZOO_JSON = ROOT / "tests" / "data" / "hf_zoo.json"
REAL_JSON = ROOT / "tests" / "data" / "hf_real.json"

#: Auto mappings whose model types generate text (the task recorded with each record).
TASKS = (
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
)
SMALL_VOCAB = 512
SMALL_WIDTH = 64
MAX_EXPERTS = 4
MAX_EXPERTS_PER_TOKEN = 2
MAX_LAYERS = 16
#: Keys that count layers (decoder and encoder stacks alike).
LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "decoder_layers", "encoder_layers",
                    "num_decoder_layers", "num_encoder_layers", "decoder_num_layers", "num_text_layers", "layers")
#: MLP and expert widths: they never reach the cache.
WIDTH_KEYS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_dim", "n_inner",
              "ffn_hidden_size", "expert_intermediate_size", "d_ff", "decoder_ffn_dim", "encoder_ffn_dim",
              "moe_shared_expert_intermediate_size", "dense_intermediate_size", "mlp_hidden_size",
              "shared_intermediate_size", "expert_ffn_hidden_size", "shared_expert_ffn_hidden_size",
              "moe_ffn_hidden_size", "ffn_hidden_dim", "mlp_dim")
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts", "n_experts",
               "num_routed_experts", "num_moe_experts")
EXPERT_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_top_k", "top_k_experts",
                    "n_activated_experts", "num_selected_experts", "moe_k")
#: Sub-configs that are not the language model: their towers shrink to one layer.
TOWER_DEPTH_KEYS = ("num_hidden_layers", "depth", "num_layers", "n_layers", "encoder_layers", "layers")
#: Per-layer bookkeeping on cache layers that is not cached state (counted apart as aux bytes).
INT_DTYPES = ("torch.int64", "torch.int32", "torch.bool", "torch.int8", "torch.uint8", "torch.int16")
PER_MODEL_SECONDS = 90


# --------------------------------------------------------------------------------------------- enumerate

def generation_model_types() -> dict[str, dict[str, str]]:
    """model_type -> {task, model_class} for every generation model type of the installed transformers."""
    from transformers.models.auto import modeling_auto

    found: dict[str, dict[str, Any]] = {}
    # NOTE: seq2seq first: bart, t5, ... also have a decoder-only *ForCausalLM; their own use is seq2seq.
    for task, name in (TASKS[1], TASKS[0], TASKS[2]):
        for model_type, cls in getattr(modeling_auto, name).items():
            cls = cls[0] if isinstance(cls, (list, tuple)) else cls
            found.setdefault(model_type, {"task": task, "model_class": cls, "tasks": []})
            found[model_type]["tasks"].append(task)
    return dict(sorted(found.items()))


# --------------------------------------------------------------------------------------------- shrink

def _minimal_period(rows: list[tuple[Any, ...]]) -> int:
    for p in range(1, len(rows) + 1):
        if all(rows[i] == rows[i % p] for i in range(len(rows))):
            return p
    return len(rows)


def _text_key(config: Any) -> str | None:
    """The attribute of ``config`` that holds the decoder's text config (None: the config itself)."""
    text = config.get_text_config(decoder=True)
    if text is config:
        return None
    for key, value in vars(config).items():
        if value is text:
            return key
    return None


def _nested_model_key(config: Any) -> str | None:
    """The attribute of a config without a layer count of its own that holds a whole model's config with a text
    config that has one (PI05Config's ``vlm_config``, a PaliGemmaConfig), or None."""
    for key, value in vars(config).items():
        if hasattr(value, "get_text_config") and value is not config:
            text = value.get_text_config(decoder=True)
            if text is not value and _layer_count(text) is not None:
                return key
    return None


def _layer_count(text_config: Any) -> int | None:
    for key in ("num_hidden_layers", "decoder_layers", "num_decoder_layers", "num_layers", "n_layer", "n_layers", "layers"):
        with contextlib.suppress(Exception):
            value = getattr(text_config, key)
            if isinstance(value, int) and value > 0:
                return value
    return None


#: Per-layer lists that never shape the cache: they do not set the period of the layer pattern.
NOT_CACHE_WORDS = ("intermediate", "sparsity", "mlp", "moe", "expert", "ffn", "dense")


def _pattern_lists(d: dict[str, Any], total: int) -> dict[str, Any]:
    return {k: v for k, v in _per_layer_lists(d, total).items() if not any(w in k for w in NOT_CACHE_WORDS)}


def _layer_keyed(d: dict[str, Any], total: int) -> dict[str, dict[Any, Any]]:
    """Dicts keyed by layer index (``per_layer_config`` = {"05": {"head_dim": 512}, ...})."""
    return {k: v for k, v in d.items() if isinstance(v, dict) and v and k not in ("id2label", "label2id")
            and all(isinstance(i, str) and i.isdigit() and int(i) < total for i in v)}


def _per_layer_lists(d: dict[str, Any], total: int) -> dict[str, Any]:
    return {k: v for k, v in d.items()
            if (isinstance(v, list) and len(v) == total and total > 1)
            or (isinstance(v, str) and len(v) == total and total > 1 and "pattern" in k)}


def choose_layers(text_dict: dict[str, Any], total: int) -> int:
    """Few layers that keep one period of the layer pattern (all per-layer lists together)."""
    lists = _pattern_lists(text_dict, total)
    for key, value in _layer_keyed(text_dict, total).items():
        by_index = {int(i): v for i, v in value.items()}
        lists[key] = [by_index.get(i) for i in range(total)]
    keep = 2
    if lists:
        rows = [tuple(json.dumps(v[i]) for v in lists.values()) for i in range(total)]
        period = _minimal_period(rows)
        if 2 * period <= total:  # repeats at least twice: one period keeps the pattern
            keep = max(keep, period)
        else:  # irregular: the shortest prefix that shows every kind of layer
            firsts: dict[tuple[Any, ...], int] = {}
            for i, row in enumerate(rows):
                firsts.setdefault(row, i)
            keep = max(keep, min(MAX_LAYERS, max(firsts.values()) + 1))
    for key, value in text_dict.items():  # a short list of block types that tiles the layers (RecurrentGemma)
        if isinstance(value, list) and 1 < len(value) < total and ("types" in key or "pattern" in key):
            keep = max(keep, len(value))
    for key, value in text_dict.items():  # patterns given as a period (Jamba attn_layer_period, ...)
        if (isinstance(value, int) and not isinstance(value, bool) and 1 < value <= MAX_LAYERS
                and any(w in key for w in ("period", "interval", "pattern", "_every", "frequency"))):
            offset = text_dict.get(key.replace("period", "offset"), 0) if "period" in key else 0
            keep = max(keep, value, (offset if isinstance(offset, int) else 0) + 1)
    shared = text_dict.get("num_kv_shared_layers")
    if isinstance(shared, int) and 0 < shared < total:
        keep = max(keep, 2 * keep)  # one period that caches, then one that reuses it
    return min(total, keep, MAX_LAYERS) if keep <= MAX_LAYERS else min(total, keep)


def shrink_text(d: dict[str, Any], total: int, keep: int, notes: list[str], width: int | None = SMALL_WIDTH) -> None:
    """Cut ``d`` (a text config dict) to ``keep`` layers and small widths, in place."""
    for key in LAYER_COUNT_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > keep:
            notes.append(f"{key} {value} -> {keep}")
            d[key] = keep
    if keep < total:
        per_layer = _per_layer_lists(d, total)
        for key, value in per_layer.items():
            d[key] = value[:keep]
            notes.append(f"{key} cut to the first {keep}")
        for key, value in _layer_keyed(d, total).items():
            d[key] = {i: v for i, v in value.items() if int(i) < keep}
            notes.append(f"{key} kept the layers below {keep}")
        for key, value in list(d.items()):  # per-layer lists with the MTP layers' entries at the end
            extra = len(value) - total if isinstance(value, list) else 0
            if 0 < extra <= 2 and total > 2 and any(w in key for w in ("layer", "ratio", "type", "pattern")):
                d[key] = value[:keep] + value[total:]
                notes.append(f"{key} cut to the first {keep} and its last {extra} (MTP)")
        for key, value in list(d.items()):  # lists of layer indices (attention layers of a hybrid, ...)
            if (isinstance(value, list) and value and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
                    and any(w in key for w in ("layer", "idx", "indices", "indexes")) and max(value) >= keep
                    and key not in per_layer):
                d[key] = [i for i in value if i < keep]
                notes.append(f"{key} kept the indices below {keep}")
    shared = d.get("num_kv_shared_layers")
    if isinstance(shared, int) and 0 < shared and keep < total:
        new = max(1, min(keep - 1, math.ceil(shared * keep / total)))
        d["num_kv_shared_layers"] = new
        notes.append(f"num_kv_shared_layers {shared} -> {new}")
    if isinstance(d.get("vocab_size"), int) and d["vocab_size"] > SMALL_VOCAB:
        notes.append(f"vocab_size {d['vocab_size']} -> {SMALL_VOCAB}")
        d["vocab_size"] = SMALL_VOCAB
    for key in WIDTH_KEYS if width else ():
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > width:
            d[key] = width
            notes.append(f"{key} {value} -> {width}")
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            d[key] = [min(v, width) for v in value]
    experts = None
    for key in EXPERT_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_EXPERTS:
            d[key] = MAX_EXPERTS
            experts = MAX_EXPERTS
            notes.append(f"{key} {value} -> {MAX_EXPERTS}")
    for key in EXPERT_TOPK_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_EXPERTS_PER_TOKEN:
            d[key] = MAX_EXPERTS_PER_TOKEN
            notes.append(f"{key} {value} -> {MAX_EXPERTS_PER_TOKEN}")
    if experts is not None:
        for key in ("n_group", "topk_group", "num_expert_group", "moe_n_group", "moe_topk_group"):
            if isinstance(d.get(key), int) and d[key] > 1:
                notes.append(f"{key} {d[key]} -> 1")
                d[key] = 1


def shrink_tower(d: dict[str, Any], name: str, notes: list[str], width: int | None = SMALL_WIDTH) -> None:
    """A vision/audio tower never reaches the decoder's cache: one layer, small MLP."""
    for key in TOWER_DEPTH_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            d[key] = 1
            notes.append(f"{name}.{key} {value} -> 1")
            for k, v in list(d.items()):  # the tower's own layer_types
                if isinstance(v, list) and len(v) == value and "type" in k:
                    d[k] = v[:1]
    for key in WIDTH_KEYS if width else ():
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > width:
            d[key] = width
            notes.append(f"{name}.{key} {value} -> {width}")
    for key, value in list(d.items()):  # layer indices into the tower (deepstack_visual_indexes, ...)
        if (isinstance(value, list) and value and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
                and any(w in key for w in ("layer", "idx", "indices", "indexes"))):
            d[key] = [i for i in value if i < 1] or [0]
        elif isinstance(value, dict) and value and all(str(i).isdigit() for i in value):  # per_layer_config
            d[key] = {i: v for i, v in value.items() if int(i) < 1}


def token_ids(d: dict[str, Any]) -> list[str]:
    return [k for k, v in d.items() if isinstance(k, str) and (k.endswith("_token_id") or k.endswith("_token_index") or k.endswith("_id"))
            and ((isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, list))]


def remap_token_ids(d: dict[str, Any], vocab: int, notes: list[str], taken: dict[int, int]) -> None:
    """Special token ids at or past the small vocabulary move to the top of it (distinct ones stay distinct)."""
    for key in token_ids(d):
        value = d[key]
        if isinstance(value, list):
            if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                d[key] = [_remap(v, vocab, taken) for v in value]
            continue
        new = _remap(value, vocab, taken)
        if new != value:
            notes.append(f"{key} {value} -> {new}")
            d[key] = new


def _remap(value: int, vocab: int, taken: dict[int, int]) -> int:
    if value < vocab // 2 or value < 0:
        return value
    if value not in taken:
        taken[value] = vocab - 1 - len(taken)
    return taken[value]


def shrink_config(raw: dict[str, Any], built: Any, width: int | None = SMALL_WIDTH
                  ) -> tuple[dict[str, Any], list[str], int, int]:
    """A copy of the config dict ``raw`` shrunk as the module docstring says; ``built`` is its config object."""
    d = copy.deepcopy(raw)
    notes: list[str] = []
    tkey = _text_key(built)
    text_config = built.get_text_config(decoder=True)
    total = _layer_count(text_config)
    inner_model = _nested_model_key(built) if total is None else None
    if inner_model is not None:  # pi05: a whole PaliGemma under vlm_config, its text_config the decoder
        d[inner_model], notes, total, keep = shrink_config(raw[inner_model], getattr(built, inner_model), width)
        for key, value in d.items():
            if key != inner_model and isinstance(value, dict) and ("model_type" in value or key.endswith("_config")):
                shrink_tower(value, key, notes, width)
        return d, notes, total, keep
    if total is None:
        raise ValueError("no layer count on the text config")
    if tkey is not None and not isinstance(d.get(tkey), dict):
        d[tkey] = {}  # a sparse real config: the class default text config, shrunk through its own keys
    text = d[tkey] if tkey is not None else d
    full_text = text_config.to_dict()
    keep = choose_layers(full_text, total)  # the built config's lists: what transformers will cache
    if tkey is not None and not text:
        text.update({k: full_text[k] for k in (*LAYER_COUNT_KEYS, "vocab_size") if k in full_text})
    if not any(isinstance(text.get(k), int) for k in LAYER_COUNT_KEYS):  # a sparse real text_config
        text.update({k: full_text[k] for k in LAYER_COUNT_KEYS if isinstance(full_text.get(k), int)})
    if isinstance(full_text.get("vocab_size"), int):
        text.setdefault("vocab_size", full_text["vocab_size"])
    shrink_text(text, total, keep, notes, width)
    vocab = text.get("vocab_size", SMALL_VOCAB)
    taken: dict[int, int] = {}
    remap_token_ids(text, vocab if isinstance(vocab, int) else SMALL_VOCAB, notes, taken)
    for key, value in d.items():
        if key == tkey or not isinstance(value, dict):
            continue
        if "model_type" in value or key.endswith("_config"):
            if key in ("encoder", "decoder", "text_encoder"):  # encoder-decoder wrappers: both sides are text-ish
                sub_total = value.get("num_hidden_layers") or value.get("num_layers") or 2
                shrink_text(value, sub_total, min(2, sub_total), notes, width)
                remap_token_ids(value, value.get("vocab_size", SMALL_VOCAB), notes, taken)
            else:
                shrink_tower(value, key, notes, width)
    if tkey is not None:
        if isinstance(d.get("vocab_size"), int) and d["vocab_size"] > SMALL_VOCAB:
            d["vocab_size"] = vocab
        remap_token_ids(d, vocab if isinstance(vocab, int) else SMALL_VOCAB, notes, taken)
    return d, notes, total, keep


# --------------------------------------------------------------------------------------------- measure

def _storage(t: Any) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _tensors(obj: Any, prefix: str, out: list[tuple[str, Any]], depth: int = 0) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out.append((prefix, obj))
    elif depth > 3:
        return
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _tensors(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _tensors(v, f"{prefix}[{i}]", out, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type) and depth > 0:
        for k, v in vars(obj).items():
            _tensors(v, f"{prefix}.{k}" if prefix else k, out, depth + 1)


def _layer_record(layer: Any, index: int, group: str, seen: set[int],
                  extra: list[tuple[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    import torch

    found: list[tuple[str, Any]] = []
    own = vars(layer).items() if hasattr(layer, "__dict__") and not isinstance(layer, torch.Tensor) else [("", layer)]
    for k, v in [*own, *extra]:  # a bare tensor is a layer of its own (RWKV's state list)
        _tensors(v, k, found, 1)
    tensors: dict[str, Any] = {}
    state = aux = 0
    for name, t in found:
        ptr, nbytes = _storage(t)
        is_aux = name.startswith("_") or str(t.dtype) in INT_DTYPES
        counted = 0 if ptr in seen or nbytes == 0 else nbytes
        if nbytes:
            seen.add(ptr)
        tensors[name] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
                         "logical_bytes": t.numel() * t.element_size(), "storage_bytes": counted, "aux": is_aux}
        if is_aux:
            aux += counted
        else:
            state += counted
    return {"index": index, "group": group, "class": type(layer).__name__, "bytes": state, "aux_bytes": aux,
            "tensors": tensors}


def _is_tensor(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.Tensor)


def measure_module_states(model: Any) -> list[dict[str, Any]]:
    """Recurrent states a model keeps on its modules instead of in the cache generate() returns (RecurrentGemma's
    ``rg_lru.recurrent_states`` and ``conv1d_state``): tensors in a module's own attributes whose name says state."""
    import torch

    seen: set[int] = set()
    records = []
    for name, module in model.named_modules():
        held = {k: v for k, v in vars(module).items() if "state" in k and isinstance(v, torch.Tensor)}
        if held:
            records.append(_layer_record(held, -1, f"module:{name}", seen))
    return records


def measure_cache(cache: Any) -> list[dict[str, Any]]:
    """Per layer: bytes of the distinct storages of every tensor (shared storage counted once)."""
    seen: set[int] = set()
    groups: list[tuple[str, Any]]
    if hasattr(cache, "self_attention_cache") and hasattr(cache, "cross_attention_cache"):
        groups = [("self", cache.self_attention_cache), ("cross", cache.cross_attention_cache)]
    else:
        groups = [("self", cache)]
    layers: list[dict[str, Any]] = []
    for group, c in groups:
        if hasattr(c, "layers") and isinstance(c.layers, (list, tuple)):
            # per-layer lists a Cache subclass keeps beside .layers (MiniMaxCache.linear_cache[i])
            # (a layer past the last of .layers holds only such entries: MiniMaxCache's trailing lightning layers)
            count = max(len(c.layers), len(c) if hasattr(c, "__len__") else 0, 1)
            extra: dict[int, list[tuple[str, Any]]] = {}
            for k, v in vars(c).items():
                if k != "layers" and isinstance(v, list) and 0 < len(v) <= count:
                    for i, item in enumerate(v):
                        extra.setdefault(i, []).append((f"{k}[{i}]", item))
            own = list(c.layers) + [{} for _ in range(len(c.layers), max(extra, default=-1) + 1)]
            layers += [_layer_record(layer, i, group, seen, extra.get(i, [])) for i, layer in enumerate(own)]
        elif isinstance(c, (list, tuple)):  # legacy tuple-of-tuples caches; RWKV's list of state tensors, each
            # [batch, hidden, layers] and so of no one layer (index -1)
            layers += [_layer_record(layer, -1 if _is_tensor(layer) else i, group, seen) for i, layer in enumerate(c)]
        else:  # a model's own cache class: every tensor attribute, lists split per layer
            for k, v in vars(c).items():
                found: list[tuple[str, Any]] = []
                _tensors(v, k, found, 1)
                if found:
                    rec = _layer_record({k: v}, -1, f"{group}:{k}", seen)
                    layers.append(rec)
    return layers


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout("over the per-model time limit (--timeout)")


def _pick_prompt_ids(d: dict[str, Any], vocab: int, count: int) -> list[int]:
    special: set[int] = set()
    stack = [d]
    while stack:
        cur = stack.pop()
        for k, v in cur.items():
            if isinstance(v, dict):
                stack.append(v)
            elif k in token_ids(cur):
                special.update([v] if isinstance(v, int) else [x for x in v if isinstance(x, int)])
    ids = [i for i in range(4, vocab) if i not in special]
    return [ids[(7 * j) % min(len(ids), 200)] for j in range(count)]


@contextlib.contextmanager
def no_init_weights() -> Any:
    from transformers.initialization import no_init_weights as skip

    with skip():
        yield


def _build_config(model_type: str, d: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **{k: v for k, v in d.items() if k != "model_type"})


PROBE_WIDTH = 96


class _Stage:
    """Where a run failed: config, shrunk config, build, generate or measure."""

    def __init__(self) -> None:
        self.name = "config"


def _generation_classes(model_type: str, first: str | None) -> list[str]:
    from transformers.models.auto import modeling_auto

    classes = [first] if first else []
    for _, name in (TASKS[1], TASKS[0], TASKS[2]):
        cls = getattr(modeling_auto, name).get(model_type)
        cls = cls[0] if isinstance(cls, (list, tuple)) else cls
        if cls and cls not in classes:
            classes.append(cls)
    return classes


def _generate(model: Any, config: Any, rec_config: dict[str, Any], prompt: int, new: int, batch: int) -> Any:
    import torch

    text = config.get_text_config(decoder=True)
    vocab = getattr(text, "vocab_size", None) or SMALL_VOCAB
    ids = torch.tensor([_pick_prompt_ids(rec_config, min(vocab, SMALL_VOCAB), prompt)] * batch)
    gen: dict[str, Any] = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, num_beams=1, use_cache=True,
                               return_dict_in_generate=True)
    pad = getattr(text, "pad_token_id", None)
    eos = getattr(text, "eos_token_id", None)
    gen["pad_token_id"] = pad if isinstance(pad, int) else (eos if isinstance(eos, int) else 0)
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        gen["decoder_start_token_id"] = gen["pad_token_id"]
    pixels = image_input(model, config, batch)
    with torch.no_grad():
        if pixels is not None:  # the encoder reads an image: the prompt is the decoder start token alone
            return model.generate(pixel_values=pixels.to(model.dtype), **gen)
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **gen)


def image_input(model: Any, config: Any, batch: int) -> Any:
    """A blank image batch for an encoder-decoder whose encoder reads ``pixel_values`` (vision-encoder-decoder),
    sized by the encoder config's ``num_channels`` and ``image_size`` (an int, or [height, width]); else None."""
    import torch

    encoder = getattr(config, "encoder", None)
    if not getattr(config, "is_encoder_decoder", False) or getattr(model, "main_input_name", None) != "pixel_values":
        return None
    size = getattr(encoder, "image_size", None)
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    return torch.zeros(batch, getattr(encoder, "num_channels", 3), height, width)


def _measure(spec: dict[str, Any], built: Any, base: dict[str, Any], width: int | None, prompt: int, new: int,
             batch: int, dtype_name: str, stage: _Stage) -> dict[str, Any]:
    """Shrink ``base`` (widths to ``width``), build, generate, measure: the fields of one record."""
    import torch
    import transformers

    model_type = spec["model_type"]
    stage.name = "shrink"
    shrunk, notes, total, keep = shrink_config(base, built, width)
    if shrunk.pop("quantization_config", None) is not None:  # fp8/fp4 weights need a GPU; the KV dtype is --dtype
        notes.append("quantization_config dropped")
    tkey = _text_key(built)
    for d in (shrunk, shrunk.get(tkey) if tkey is not None else None):
        if isinstance(d, dict):  # one dtype, whichever key the file used (mamba-2.8b-hf says torch_dtype float32)
            d["dtype"] = dtype_name
            if "torch_dtype" in d:
                d["torch_dtype"] = dtype_name
    out: dict[str, Any] = {"num_layers_default": total, "num_layers": keep, "shrink": notes}
    stage.name = "shrunk config"
    config = _build_config(model_type, shrunk)
    text = config.get_text_config(decoder=True)
    got = _layer_count(text)
    # LongCat counts two attention sublayers per layer; a default of one period (bloom 2, nemotron_h 4) is kept whole
    if got is None or got < keep or (got >= total and keep < total):
        raise ValueError(f"shrunk config has {got} layers, wanted {keep} of {total}")
    out["num_layers"] = keep = got
    full_lists = _pattern_lists(built.get_text_config(decoder=True).to_dict(), total)
    for key, value in _pattern_lists(text.to_dict(), keep).items():
        if key in full_lists and list(value) != list(full_lists[key])[:keep]:
            raise ValueError(f"shrunk {key} {value} is not the first {keep} of {full_lists[key]}")
    rec_config = config.to_dict() if spec.get("raw") is None else shrunk
    for big in ("id2label", "label2id"):
        rec_config.pop(big, None)
    out["config"] = rec_config
    dtype = getattr(torch, dtype_name)
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))  # WhisperForCausalLM resets it on the config
    attempts = [(c, config) for c in _generation_classes(model_type, spec.get("model_class"))]
    if text is not config:  # a multimodal wrapper: its language model alone holds the same cache
        attempts += [(c, text) for c in _generation_classes(text.model_type, None)[:1]]
    if not attempts:
        raise ValueError(f"no generation class for model_type {model_type}")
    first: BaseException | None = None
    for cls_name, cfg in attempts:
        try:
            stage.name = "build"
            torch.manual_seed(0)
            with no_init_weights():
                model = getattr(transformers, cls_name)._from_config(cfg, dtype=dtype)
            fill_weights(model)
            model.eval()
            stage.name = "generate"
            result = _generate(model, cfg, rec_config, prompt, new, batch)
            break
        except _Timeout:
            raise
        except Exception as exc:
            first = first or exc
            continue
    else:
        assert first is not None
        raise first
    out["model_class"] = cls_name
    if spec.get("raw") is None and not rec_config.get("architectures"):
        rec_config["architectures"] = [spec.get("model_class") or cls_name]  # as every Hub config.json says
    if cfg is not config:
        out["built_as"] = f"text config ({text.model_type}) alone"
    cache = getattr(result, "past_key_values", None)
    if cache is None:
        raise ValueError(f"generate returned no past_key_values ({type(result).__name__})")
    stage.name = "measure"
    out["cache_class"] = type(cache).__name__
    layers = measure_cache(cache) + measure_module_states(model)
    with contextlib.suppress(Exception):
        out["cache_tokens"] = int(cache.get_seq_length())
    if out["cache_class"] == "EncoderDecoderCache":
        out["encoder_decoder"] = True
        out["encoder_tokens"] = prompt
        pixels = image_input(model, cfg, batch)
        if pixels is not None:  # the encoder length follows from the image size: kvplan must derive it from config
            out["encoder_input"] = f"pixel_values {list(pixels.shape)}"
            cross = [t["shape"] for layer in layers if layer["group"] == "cross" for t in layer["tensors"].values()]
            out["encoder_tokens"] = cross[0][-2] if cross else None
    if enc_dec and not out.get("encoder_decoder"):
        rec_config["architectures"] = [cls_name]  # the decoder-only variant was measured (WhisperForCausalLM)
    out["sequences_len"] = int(result.sequences.shape[-1])
    out["layers"] = layers
    out["total_bytes"] = sum(layer["bytes"] for layer in layers)
    out["aux_bytes"] = sum(layer["aux_bytes"] for layer in layers)
    return out


_NOISE: list[Any] = []


def fill_weights(model: Any) -> None:
    """Cheap random weights: a slice of one shared N(0, 0.02) buffer per matrix, 1 for scales, 0 for biases.

    transformers' own initialisation (uniform, then normal, in bf16 on a CPU) costs more than the
    generate itself; the cache never depends on the values.
    """
    import torch

    if not _NOISE:
        _NOISE.append(torch.randn(1 << 22, generator=torch.Generator().manual_seed(0)) * 0.02)
    noise = _NOISE[0]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.is_floating_point():
                continue
            if p.ndim <= 1:
                p.fill_(0.0 if name.endswith("bias") else 1.0)
                continue
            flat = p.view(-1)
            for start in range(0, flat.numel(), noise.numel()):
                part = flat[start:start + noise.numel()]
                part.copy_(noise[: part.numel()])


def _shapes(layers: list[dict[str, Any]]) -> list[Any]:
    return [sorted((n, t["shape"], t["dtype"]) for n, t in layer["tensors"].items()) for layer in layers]


def run_one(spec: dict[str, Any], prompt: int, new: int, batch: int, dtype_name: str) -> dict[str, Any]:
    """Build, shrink, generate and measure one model (in the worker process).

    A cache holding more than keys and values (recurrent state, conv state, indexer keys) is measured
    again with the MLP widths at a second small size: if any shape moves, the widths feed the cache
    (Mamba's ``intermediate_size`` is its inner width), and the record keeps them at their defaults.
    """
    import transformers

    rec: dict[str, Any] = {"model_type": spec["model_type"], "task": spec.get("task"), "status": "error",
                           "batch": batch, "prompt_tokens": prompt, "new_tokens": new, "dtype": dtype_name,
                           "transformers_version": transformers.__version__}
    if spec.get("source"):
        rec["source"] = spec["source"]
    stage = _Stage()
    try:
        if spec.get("raw") is not None:
            base = spec["raw"]
            built = _build_config(spec["model_type"], base)
        else:
            built = _build_config(spec["model_type"], {})
            base = built.to_dict()
        got = _measure(spec, built, base, SMALL_WIDTH, prompt, new, batch, dtype_name, stage)
        if any(name not in ("keys", "values") and not t["aux"]
               for layer in got["layers"] for name, t in layer["tensors"].items()):
            probe = _measure(spec, built, base, PROBE_WIDTH, prompt, new, batch, dtype_name, stage)
            if _shapes(probe["layers"]) != _shapes(got["layers"]):
                got = _measure(spec, built, base, None, prompt, new, batch, dtype_name, stage)
                got["width_probe"] = f"the cache moved with MLP widths {SMALL_WIDTH} vs {PROBE_WIDTH}: widths kept"
            else:
                got["width_probe"] = f"same cache with MLP widths {SMALL_WIDTH} and {PROBE_WIDTH}"
        rec.update(got)
        rec["status"] = "ok"
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = str(exc).strip()
        rec["error"] = {"stage": stage.name, "type": type(exc).__name__,
                        "reason": (text.splitlines()[0] if text else "")[:300],
                        "where": traceback.extract_tb(exc.__traceback__)[-1].filename.split("site-packages/")[-1]
                        if exc.__traceback__ else None}
    return rec


def worker(specs_path: str, out_path: str, prompt: int, new: int, batch: int, dtype: str, timeout: int) -> None:
    import warnings

    import torch
    import transformers

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    specs = json.loads(Path(specs_path).read_text())
    with open(out_path, "a") as out:
        for spec in specs:
            signal.alarm(timeout)
            start = time.monotonic()
            try:
                rec = run_one(spec, prompt, new, batch, dtype)
            finally:
                signal.alarm(0)
            rec["seconds"] = round(time.monotonic() - start, 1)
            out.write(json.dumps(rec) + "\n")
            out.flush()


def run_all(specs: list[dict[str, Any]], args: argparse.Namespace, partial: Path) -> list[dict[str, Any]]:
    """Run ``specs`` in chunks of worker subprocesses, ``args.jobs`` at a time; a hung chunk is killed.

    Every finished record is appended to ``partial`` at once; ``--resume`` skips the ones already there.
    """
    def key(spec: dict[str, Any]) -> str:
        return spec.get("key") or spec["model_type"]

    results: dict[str, dict[str, Any]] = {}
    if args.resume and partial.exists():
        for line in partial.read_text().splitlines():
            rec = json.loads(line)
            results[rec.pop("key")] = rec
    todo = [s for s in specs if key(s) not in results]
    chunks = [todo[i:i + args.chunk] for i in range(0, len(todo), args.chunk)]
    tmp = Path(tempfile.mkdtemp(prefix="hf-zoo-"))

    def keep(k: str, rec: dict[str, Any]) -> None:
        results[k] = rec
        with open(partial, "a") as f:
            f.write(json.dumps({"key": k, **rec}) + "\n")

    def run_chunk(n: int, chunk: list[dict[str, Any]]) -> None:
        pending = list(chunk)
        while pending:
            sp, op = tmp / f"in{n}.json", tmp / f"out{n}.jsonl"
            sp.write_text(json.dumps(pending))
            op.write_text("")
            cmd = [sys.executable, __file__, "--worker", str(sp), str(op), "--prompt", str(args.prompt),
                   "--new", str(args.new), "--batch", str(args.batch), "--dtype", args.dtype,
                   "--timeout", str(args.timeout)]
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            limit = (args.timeout + 30) * len(pending) + 60
            try:
                _, err = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            done = [json.loads(line) for line in op.read_text().splitlines() if line.strip()]
            for spec, rec in zip(pending, done, strict=False):
                keep(key(spec), rec)
                print(f"{rec['status']:5} {rec.get('seconds', 0):5.1f}s {key(spec)}"
                      + (f"  {rec['error']['type']}: {rec['error']['reason'][:90]}" if rec["status"] != "ok" else ""),
                      flush=True)
            if len(done) < len(pending):  # the worker died on pending[len(done)]
                bad = pending[len(done)]
                tail = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["worker died"]
                keep(key(bad), {"model_type": bad["model_type"], "task": bad.get("task"), "status": "error",
                                "error": {"stage": "worker", "type": "WorkerDied",
                                          "reason": f"exit {proc.returncode}: {tail[0][:250]}"}})
                print(f"error  died {key(bad)}: {tail[0][:90]}", flush=True)
                pending = pending[len(done) + 1:]
            else:
                pending = []

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda nc: run_chunk(*nc), enumerate(chunks)))
    return [results[key(s)] for s in specs if key(s) in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", type=Path, help="a folder of real config.json files (writes hf_real.json)")
    parser.add_argument("--only", nargs="*", help="model types (zoo) or file stems (real) to run; merged into out")
    parser.add_argument("--out", type=Path, help="output JSON (default tests/data/hf_zoo.json or hf_real.json)")
    parser.add_argument("--prompt", type=int, default=5, help="prompt tokens P")
    parser.add_argument("--new", type=int, default=2, help="generated tokens N (the cache holds P + N - 1)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at once")
    parser.add_argument("--chunk", type=int, default=12, help="models per worker process")
    parser.add_argument("--timeout", type=int, default=PER_MODEL_SECONDS, help="seconds per model before it is given up")
    parser.add_argument("--resume", action="store_true", help="skip the records of an interrupted run (*.partial.jsonl)")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker, args.prompt, args.new, args.batch, args.dtype, args.timeout)
        return 0
    import transformers

    start = time.monotonic()
    if args.real:
        out = args.out or REAL_JSON
        specs = []
        for path in sorted(args.real.glob("*.json")):
            raw = json.loads(path.read_text())
            mt = raw.get("model_type")
            if not isinstance(mt, str) or (args.only and path.stem not in args.only):
                continue
            specs.append({"key": path.stem, "model_type": mt, "raw": raw, "source": path.name, "task": None})
    else:
        out = args.out or ZOO_JSON
        types = generation_model_types()
        specs = [{"model_type": mt, **info} for mt, info in types.items() if not args.only or mt in args.only]
    partial = out.with_suffix(".partial.jsonl")
    records = run_all(specs, args, partial)
    keyed = {(r.get("source") and Path(r["source"]).stem) or r["model_type"]: r for r in records}
    if args.only and out.exists():
        old = json.loads(out.read_text())["records"]
        keyed = {**old, **keyed}
    ok = sum(r["status"] == "ok" for r in keyed.values())
    doc = {"transformers_version": transformers.__version__, "prompt_tokens": args.prompt, "new_tokens": args.new,
           "batch": args.batch, "dtype": args.dtype, "generated_by": "tools/hf_zoo.py",
           "measured": ok, "records": dict(sorted(keyed.items()))}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    partial.unlink(missing_ok=True)
    print(f"{ok} of {len(keyed)} measured in {time.monotonic() - start:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
