"""Plan files for `kvplan check`: read with ``yaml.safe_load``, validated field by field.

A plan is a mapping with a ``scenarios:`` list (and optional ``defaults:`` merged under every
scenario). Scenario keys mirror the CLI flags with underscores (``--seq-len`` -> ``seq_len``).
Every mistake is an :class:`InputError` naming the file, the line, the scenario and the field;
unknown keys and wrong types are never ignored.
"""

from __future__ import annotations

import difflib
import os.path
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvplan.errors import InputError, KvplanError
from kvplan.hubref import validate_revision
from kvplan.limits import MAX_SCENARIOS
from kvplan.safeload import AmbiguousNumber, load_yaml, read_bounded_text
from kvplan.units import parse_size, parse_tokens

#: Top-level keys of a plan file.
PLAN_KEYS = ("scenarios", "defaults")

Path_ = tuple[Any, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One scenario key: what it accepts and how it resolves."""

    name: str
    kind: str
    """``inputs`` (the estimate's flags, also fed to the capacity run), ``capacity`` (capacity-only flags,
    need ``require_fit_on``), ``budget`` (a gate), or ``meta``."""
    types: tuple[type, ...]
    """YAML value types accepted (bool is never an int)."""
    expects: str
    """How the accepted values read in an error message."""
    resolve: Callable[[Any, str], Any] | None = None
    """Turns the YAML value into the resolved value; raises InputError with the flag name."""


def _positive_int(value: Any, what: str) -> int:
    if value < 1:
        raise InputError(f"{what} must be at least 1, got {value}")
    return int(value)


def _non_negative(value: Any, what: str) -> Any:
    if value < 0:
        raise InputError(f"{what} must be 0 or more, got {value}")
    return value


def _tokens(value: Any, what: str) -> int:
    return parse_tokens(value, what=what)


def _size(value: Any, what: str) -> int:
    return parse_size(value, what=what)


def _str(value: Any, what: str) -> str:
    if not value.strip():
        raise InputError(f"{what} must not be empty")
    return str(value)


def _revision(value: Any, what: str) -> str:
    return validate_revision(value, what=what)


def _overrides(value: Any, what: str) -> dict[str, Any]:
    for key in value:
        if not isinstance(key, str):
            raise InputError(f"{what} keys must be config field names, got {key!r}")
    return dict(value)


def _fit_on(value: Any, what: str) -> dict[str, Any]:
    unknown = [key for key in value if key not in ("gpu", "num_gpus")]
    if unknown:
        raise InputError(f"{what} has unknown key {unknown[0]!r}", "require_fit_on takes gpu and num_gpus")
    gpu = value.get("gpu")
    if not isinstance(gpu, str) or not gpu.strip():
        raise InputError(f"{what}.gpu must be a GPU name, got {gpu!r}", "e.g. require_fit_on: {gpu: H100-80GB, num_gpus: 1}")
    num_gpus = value.get("num_gpus")
    if num_gpus is not None and (isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1):
        raise InputError(f"{what}.num_gpus must be a positive integer, got {num_gpus!r}")
    return {"gpu": gpu, "num_gpus": num_gpus}


def _offload(value: Any, what: str) -> str:
    return str(value)  # 0.25 or layers:N, parsed as --offload parses it


def _fraction(value: Any, what: str) -> float:
    return float(value)


_INT = (int,)
_TEXT = (str,)
_BOOL = (bool,)
_INT_OR_TEXT = (int, str)
_NUMBER = (int, float)

#: Every scenario key. ``inputs`` mirror the `kvplan estimate` flags (and feed the capacity run of
#: ``require_fit_on``); ``capacity`` keys mirror `kvplan capacity` flags and need ``require_fit_on``;
#: budgets are the gates.
FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field(name="name", kind="meta", types=_TEXT, expects="a string", resolve=_str),
        Field(name="strict", kind="meta", types=_BOOL, expects="true or false (true: refuse a config whose core "
              "geometry comes from architecture defaults, as --strict)"),
        Field(name="allow_defaults", kind="meta", types=_BOOL, expects="true or false (true: size a config whose "
              "layer count, heads or hidden size come from architecture defaults, as --allow-defaults)"),
        Field(name="model", kind="inputs", types=_TEXT, expects="a model id, alias or config path", resolve=_str),
        Field(name="revision", kind="inputs", types=_TEXT, expects="a Hub revision string", resolve=_revision),
        Field(name="gguf_file", kind="inputs", types=_TEXT, expects="a .gguf file name in the model's Hub repo",
              resolve=_str),
        Field(name="batch", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="seq_len", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 4096 or 32k",
              resolve=_tokens),
        Field(name="kv_dtype", kind="inputs", types=_TEXT, expects="a dtype name such as auto, bf16 or fp8",
              resolve=_str),
        Field(name="encoder_len", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 1500",
              resolve=_tokens),
        Field(name="set", kind="inputs", types=(dict,), expects="a mapping of config overrides, as --set",
              resolve=_overrides),
        # deployment: kvplan.adjust.deployment_from_flags, as `kvplan estimate` passes them
        Field(name="engine", kind="inputs", types=_TEXT, expects="an engine name such as vllm or llama.cpp",
              resolve=_str),
        Field(name="tp", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="pp", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="block_size", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="beams", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="prompt_len", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 2k", resolve=_tokens),
        Field(name="share_prefix", kind="inputs", types=_BOOL, expects="true or false"),
        Field(name="shared_prefix_tokens", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 1k",
              resolve=_tokens),
        Field(name="no_window", kind="inputs", types=_BOOL, expects="true or false"),
        Field(name="quant_group_size", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="residual_length", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="offload", kind="inputs", types=(int, float, str), expects="a fraction such as 0.25, or layers:N",
              resolve=_offload),
        Field(name="max_num_batched_tokens", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 8k",
              resolve=_tokens),
        Field(name="max_num_seqs", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="dp", kind="inputs", types=_INT, expects="a positive integer (data-parallel replicas)",
              resolve=_positive_int),
        Field(name="ubatch_size", kind="inputs", types=_INT, expects="a positive integer", resolve=_positive_int),
        Field(name="kv_unified", kind="inputs", types=_BOOL, expects="true or false"),
        Field(name="no_mla", kind="inputs", types=_BOOL, expects="true or false"),
        Field(name="enable_prefix_caching", kind="inputs", types=_BOOL, expects="true or false (unset: the vLLM "
              "version's default)"),
        Field(name="cache_type_v", kind="inputs", types=(str,), expects="a llama.cpp cache type such as q8_0",
              resolve=_str),
        Field(name="swa_full_tokens_ratio", kind="inputs", types=_NUMBER, expects="a number such as 0.8",
              resolve=_fraction),
        Field(name="max_cache_len", kind="inputs", types=_INT_OR_TEXT, expects="a token count such as 8k",
              resolve=_tokens),
        Field(name="n_gpu_layers", kind="inputs", types=_INT, expects="a layer count, 0 or more (llama.cpp -ngl)",
              resolve=_non_negative),
        Field(name="no_kv_offload", kind="inputs", types=_BOOL, expects="true or false (llama.cpp -nkvo)"),
        Field(name="flash_attn", kind="inputs", types=_TEXT, expects="on, off or auto (llama.cpp -fa)", resolve=_str),
        # capacity: `kvplan capacity` flags, used with require_fit_on
        Field(name="gpu_memory_utilization", kind="capacity", types=_NUMBER, expects="a number such as 0.9",
              resolve=_fraction),
        Field(name="mem_fraction_static", kind="capacity", types=_NUMBER, expects="a number such as 0.88",
              resolve=_fraction),
        Field(name="free_gpu_memory_fraction", kind="capacity", types=_NUMBER, expects="a number such as 0.9",
              resolve=_fraction),
        Field(name="reserve", kind="capacity", types=_INT_OR_TEXT, expects="a size such as 2GiB", resolve=_size),
        Field(name="kv_budget", kind="capacity", types=_INT_OR_TEXT, expects="a size such as 3.8125GiB", resolve=_size),
        Field(name="weights_bytes", kind="capacity", types=_INT_OR_TEXT, expects="a size such as 16GB", resolve=_size),
        Field(name="weights_from", kind="capacity", types=_TEXT, expects="auto, config or safetensors", resolve=_str),
        Field(name="weights_quant", kind="capacity", types=_TEXT, expects="a llama.cpp file type: Q4_K_M, Q8_0 ...",
              resolve=_str),
        Field(name="dtype", kind="capacity", types=_TEXT, expects="a weight dtype: auto, bfloat16, float16 or float32",
              resolve=_str),
        Field(name="enable_dp_attention", kind="capacity", types=_BOOL, expects="true or false"),
        Field(name="enforce_eager", kind="capacity", types=_BOOL, expects="true or false (vLLM --enforce-eager)"),
        Field(name="quantization", kind="capacity", types=_TEXT, expects="a method such as fp8 (--quantization)",
              resolve=_str),
        Field(name="cpu_offload_gb", kind="capacity", types=_NUMBER, expects="GiB, 0 or more (--cpu-offload-gb)",
              resolve=_non_negative),
        # budgets
        Field(name="max_kv_bytes", kind="budget", types=_INT_OR_TEXT, expects="a size such as 40GiB or 42949672960",
              resolve=_size),
        Field(name="max_kv_bytes_per_gpu", kind="budget", types=_INT_OR_TEXT, expects="a size such as 40GiB",
              resolve=_size),
        Field(name="require_fit_on", kind="budget", types=(dict,), expects="a mapping {gpu: NAME, num_gpus: N}",
              resolve=_fit_on),
        Field(name="min_concurrency", kind="budget", types=_INT, expects="a positive integer",
              resolve=_positive_int),
    )
}

REQUIRED = ("name", "model")


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    index: int
    """Position in the plan's ``scenarios`` list (errors find its line from it)."""
    inputs: dict[str, Any]
    """Resolved inputs, keyed as in FIELDS; every input key present, None when not set."""
    budgets: dict[str, Any]
    """Resolved budgets; every budget key present, None when not set."""
    strict: bool = False
    """Refuse a model whose core geometry comes from architecture defaults (``strict: true``, as --strict)."""
    allow_defaults: bool = False
    """Size a model whose layers, heads or hidden size come from architecture defaults (as --allow-defaults)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    path: str
    scenarios: tuple[Scenario, ...]
    base_dir: str = "."
    """The plan file's folder: ``model: ./config.json`` paths are relative to it."""
    text: str = field(default="", repr=False, compare=False)
    """The plan's YAML, read again for the line of an error (:meth:`line_of`)."""

    def model_location(self, model: str) -> str:
        """``model`` as load_geometry takes it: a local path (``./x``, ``../x``, ``*.json``, ``*.gguf``) is joined
        to the plan's folder; a Hub id or alias is left alone."""
        if os.path.isabs(model) or not (model.startswith(("./", "../")) or model.lower().endswith((".json", ".gguf"))):
            return model
        return os.path.normpath(os.path.join(self.base_dir, model))

    def input_paths(self) -> tuple[str, ...]:
        """Every model the scenarios name, as given and as located (a path, or a Hub id that names no file): what
        ``--output`` may not overwrite."""
        named = {scenario.inputs["model"] for scenario in self.scenarios if scenario.inputs.get("model")}
        return tuple(sorted(named | {self.model_location(model) for model in named}))

    def line_of(self, *path: Any) -> int | None:
        """1-based line of the key or list item at ``path`` (``"scenarios", 2, "batch"``) in the plan file: that
        of its nearest enclosing node the file has when the key is not written there (a default)."""
        return line_of(self.text, path)


def _compose(text: str) -> Any:
    """The YAML node tree of ``text`` (a plan already loaded within kvplan.safeload's bounds), None when
    there is none. Errors only: loading a plan builds no node tree it keeps."""
    import yaml

    try:
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


def line_of(text: str, path: Path_) -> int | None:
    """1-based line of the key (a string step) or list item (an int step) at ``path`` in the YAML ``text``,
    or of the nearest enclosing node written there; None for no document."""
    import yaml

    node = _compose(text)
    if node is None:
        return None
    line = node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(step)]
            if not found:
                break
            key_node, node = found[-1]
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _key_on_line(text: str, line: int) -> Path_:
    """The path of the deepest key written on ``line`` (1-based), () when none is."""
    import yaml

    best: Path_ = ()
    stack: list[tuple[Any, Path_]] = [(_compose(text), ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key_path = path + (key_node.value if isinstance(key_node, yaml.ScalarNode) else "?",)
                if key_node.start_mark.line + 1 == line and len(key_path) > len(best):
                    best = key_path
                stack.append((value_node, key_path))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, path + (index,)) for index, item in enumerate(node.value))
    return best


def load_plan(path: Path) -> Plan:
    """Read and validate a plan file; raise InputError naming the line, scenario and field."""
    import yaml

    label = str(path)
    text = read_bounded_text(path, label=f"plan file {label}", what="plan file")
    try:
        # NOTE: bounded (size, depth, aliases expanded, recursion) before anything is built.
        data = load_yaml(text, label=label, plain_numbers=True)
    except AmbiguousNumber as exc:
        where = f" line {exc.mark.line + 1}" if exc.mark is not None else ""
        raise InputError(
            f"{label}{where}: {_field_at(text, exc.mark)}{exc.value} is {exc.meaning:,} in YAML 1.1 ({exc.form}), "
            "not the decimal number the command line reads",
            "write the number in plain decimal digits without a leading zero, e.g. 10000",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "constructor for the tag" in str(problem):
            tag = str(problem).split("tag", 1)[1].strip().strip("'\"")
            raise InputError(
                f"{label}{where}: {_field_at(text, mark)}the YAML tag {tag!r} is not allowed in a plan file",
                "plan files hold plain data (strings, numbers, lists, mappings); remove the tag",
            ) from None
        raise InputError(f"{label}{where}: not valid YAML: {problem}", "check the indentation and quoting") from None
    plan = parse_plan(data, label=label, text=text)
    return replace(plan, base_dir=str(path.parent))


def _field_at(text: str, mark: Any) -> str:
    """``scenario #1: 'model': `` for the key on ``mark``'s line (empty when none is found)."""
    path = _key_on_line(text, mark.line + 1) if mark is not None else ()
    if not path:
        return ""
    scenario = f"scenario #{path[1] + 1}: " if len(path) > 2 and path[0] == "scenarios" else ""
    return f"{scenario}{path[-1]!r}: "


def parse_plan(data: Any, *, label: str = "<plan>", text: str = "") -> Plan:
    """Validate already-loaded plan data; ``text``, the YAML it was read from, gives errors their line."""

    def at(path: Path_) -> str:
        line = line_of(text, path) if text else None
        return f"{label} line {line}" if line else label

    if not isinstance(data, dict):
        raise InputError(
            f"{at(())}: a plan file must be a mapping with a 'scenarios:' list, got {_type_name(data)}",
            "start the file with `scenarios:` followed by a list of `- name: ... model: ...` entries",
        )
    for key in data:
        if key not in PLAN_KEYS:
            raise InputError(
                f"{at((key,))}: unknown top-level key {key!r}",
                f"a plan file has {', '.join(repr(k) for k in PLAN_KEYS)}{_did_you_mean(key, PLAN_KEYS)}",
            )
    if "scenarios" not in data:
        raise InputError(f"{label}: missing the 'scenarios:' list", "add `scenarios:` with at least one `- name: ...` entry")
    scenarios = data["scenarios"]
    if not isinstance(scenarios, list) or not scenarios:
        raise InputError(
            f"{at(('scenarios',))}: 'scenarios' must be a non-empty list, got {_type_name(scenarios)}",
            "each entry is a mapping such as `- name: chat\\n  model: meta-llama/Llama-3.1-8B`",
        )
    if len(scenarios) > MAX_SCENARIOS:
        raise InputError(
            f"{at(('scenarios',))}: {len(scenarios):,} scenarios, past kvplan's limit of {MAX_SCENARIOS:,} per plan (the "
            "report `kvplan diff` reads back stays within its size limit)", "split the plan into several files")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InputError(f"{at(('defaults',))}: 'defaults' must be a mapping, got {_type_name(defaults)}")
    default_values = _check_keys(defaults, "defaults", ("defaults",), at, allow_name=False)

    result: list[Scenario] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(scenarios):
        path: Path_ = ("scenarios", index)
        if not isinstance(entry, dict):
            raise InputError(
                f"{at(path)}: scenario #{index + 1} must be a mapping, got {_type_name(entry)}",
                "write `- name: chat` then the scenario's keys indented below it",
            )
        raw_name = entry.get("name")
        who = f"scenario {raw_name!r}" if isinstance(raw_name, str) else f"scenario #{index + 1}"
        values = _check_keys(entry, who, path, at, allow_name=True)
        merged = {**default_values, **values}
        for key in REQUIRED:
            if key not in merged:
                raise InputError(f"{at(path)}: {who} has no {key!r}", f"add `{key}: ...` to the scenario")
        name = merged["name"]
        needs_fit = [k for k in merged if FIELDS[k].kind == "capacity" or k == "min_concurrency"]
        if needs_fit and "require_fit_on" not in merged:
            raise InputError(
                f"{at(path + (needs_fit[0],))}: {who}: {needs_fit[0]!r} only applies with require_fit_on",
                "add require_fit_on: {gpu: H100, num_gpus: 1} (the GPUs the capacity is checked on)",
            )
        if name in seen:
            raise InputError(f"{at(path + ('name',))}: scenario name {name!r} is used twice", "scenario names must be unique")
        seen[name] = index
        result.append(
            Scenario(
                name=name,
                index=index,
                inputs={k: merged.get(k) for k, f in FIELDS.items() if f.kind in ("inputs", "capacity")},
                budgets={k: merged.get(k) for k, f in FIELDS.items() if f.kind == "budget"},
                strict=merged.get("strict") is True,
                allow_defaults=merged.get("allow_defaults") is True,
            )
        )
    return Plan(path=label, scenarios=tuple(result), text=text)


def _check_keys(
    entry: dict[Any, Any], who: str, path: Path_, at: Callable[[Path_], str], *, allow_name: bool
) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    for key, value in entry.items():
        if key not in FIELDS or (key == "name" and not allow_name):
            known = [k for k in FIELDS if allow_name or k != "name"]
            raise InputError(
                f"{at(path + (key,))}: {who}: unknown key {key!r}",
                _did_you_mean(key, known).strip(" ()").capitalize() or f"known keys: {', '.join(known)}",
            )
        spec = FIELDS[key]
        if isinstance(value, bool) is not (bool in spec.types) or not isinstance(value, spec.types):
            raise InputError(
                f"{at(path + (key,))}: {who}: {key!r} must be {spec.expects}, got {_type_name(value)}"
                + ("" if value is None else f" {value!r}"),
                _type_hint(spec),
            )
        try:
            resolved[key] = spec.resolve(value, key) if spec.resolve else value
        except KvplanError as exc:
            raise InputError(f"{at(path + (key,))}: {who}: {exc.message}", exc.hint) from None
    return resolved


def _type_hint(spec: Field) -> str:
    if spec.types == _BOOL:
        return f"write {spec.name}: true or {spec.name}: false"
    if spec.types == _INT:
        return f"write {spec.name}: 8 (a plain number, no quotes)"
    return f"e.g. {spec.name}: " + {"seq_len": "32k", "encoder_len": "1500", "max_kv_bytes": "40GiB",
                                     "max_kv_bytes_per_gpu": "40GiB", "set": "{num_key_value_heads: 8}",
                                     "require_fit_on": "{gpu: H100-80GB, num_gpus: 1}"}.get(spec.name, "text")


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "nothing (null)"}.get(type(value), type(value).__name__)


def _did_you_mean(key: Any, known: Any) -> str:
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""

