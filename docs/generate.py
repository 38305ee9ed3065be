"""Regenerate every generated part of README.md and docs/ (cog blocks), or check that none is stale.

    python docs/generate.py           # rewrite the outputs in place (cog -r over every file with a cog block)
    python docs/generate.py --check   # exit 1 when an output is stale (tests/test_docs.py runs this)

Each cog block imports the helpers below: ``show`` runs a real ``kvplan`` command (offline, at 80
columns, no colour) and prints it as a console session; the table helpers read kvplan's registries.
A command that exits with another code than the block expects stops the run, so a renamed flag
never ends up in the docs as an error message.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The terminal width every captured output is rendered at.
WIDTH = 80
GGUF_NAME = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"


# ---- running kvplan ---------------------------------------------------------------------------------
def _env(width: int) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": str(width), "LINES": "50", "HF_HUB_OFFLINE": "1", "NO_COLOR": "1",
           "TERM": "dumb", "PYTHONPATH": str(ROOT)}
    for name in ("FORCE_COLOR", "KVPLAN_DEBUG", "HF_ENDPOINT", "HF_TOKEN"):
        env.pop(name, None)
    return env


def run(args: list[str], *, cwd: Path | None = None, width: int = WIDTH, expect: int = 0) -> tuple[str, str]:
    """(stdout, stderr) of ``kvplan ARGS``; raises when the exit code is not ``expect``."""
    result = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True,
                            env=_env(width), cwd=cwd or ROOT, check=False)
    if result.returncode != expect:
        raise RuntimeError(f"`kvplan {shlex.join(args)}` exited {result.returncode}, expected {expect}:\n"
                           f"{result.stdout}{result.stderr}")
    return _clean(result.stdout), _clean(result.stderr)


def _clean(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines())


def _prompt(command: str, pipe: str = "", width: int = WIDTH) -> str:
    """``$ kvplan ...`` (and a ``| ...`` pipe), broken with backslashes before ``width`` columns, a flag
    kept on the line of its value."""
    words: list[str] = []
    for word in shlex.split(command):
        word = shlex.quote(word)
        if words and words[-1].startswith("-") and " " not in words[-1] and not word.startswith("-"):
            words[-1] += " " + word
        else:
            words.append(word)
    if pipe:
        words.append(pipe)
    lines, line = [], "$ kvplan"
    for word in words:
        if len(line) + 1 + len(word) > width - 2 and line != "$ kvplan":
            lines.append(line + " \\")
            line = "    " + word
        else:
            line += " " + word
    return "\n".join([*lines, line])


def show(command: str, *, stderr: bool = True, head: int | None = None, cwd: Path | None = None,
         files: Mapping[str, str] | None = None, jq: str | None = None, grep: str | None = None,
         expect: int = 0) -> str:
    """A console block: ``$ kvplan COMMAND`` and what it printed (stdout, then stderr).

    ``head`` keeps the first lines and marks the cut with ``...``; ``files`` are written into a scratch
    folder the command runs in; ``jq`` shows one path of the JSON report (``.a.b[]``), as ``| jq -r``
    would print it; ``grep`` keeps the lines of stdout that match a regular expression, as ``| grep -E``."""
    args = shlex.split(command)
    out, err = run(args, cwd=scratch(files) if files else cwd, expect=expect)
    pipe = f"| jq -r '{jq}'" if jq is not None else f"| grep -E '{grep}'" if grep is not None else ""
    prompt = _prompt(command, pipe)
    if jq is not None:
        text = "\n".join(_jq(json.loads(out), jq))
    elif grep is not None:
        text = "\n".join(line for line in out.splitlines() if re.search(grep, line))
    else:
        text = out + (("\n" if out else "") + err if stderr and err else "")
        lines = text.splitlines()
        if head is not None and len(lines) > head:
            text = "\n".join([*lines[:head], "..."])
    return fence(f"{prompt}\n{text}", "console")


def _jq(value: Any, path: str) -> Iterator[str]:
    items, many = [value], False  # ``.a[].b``: every ``b`` of the list ``a``, as jq -r prints them
    for key in path.strip(".").split("."):
        items = [item[key.removesuffix("[]")] for item in items]
        if key.endswith("[]"):
            items, many = [x for item in items for x in item], True
    for item in items if many else items[:1]:
        yield item if isinstance(item, str) else json.dumps(item)


def output(command: str, *, stderr: bool = False, lang: str = "") -> str:
    """Only what ``kvplan COMMAND`` prints, in a plain block (for long YAML or help texts)."""
    out, err = run(shlex.split(command))
    return fence(out + ("\n" + err if stderr and err else ""), lang)


def fence(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text}\n```"


def scratch(files: Mapping[str, str]) -> Path:
    """A scratch folder holding ``files`` (name -> text), for commands that share inputs and outputs."""
    folder = Path(tempfile.mkdtemp(prefix="kvplan-docs-"))
    atexit.register(shutil.rmtree, folder, True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@cache
def gguf_dir() -> Path:
    """A folder holding a sparse stand-in of the GGUF the examples use (tools/gguf_stand_in.py: the real
    file's metadata and tensor table, the 4.9 GB of tensor data left as a hole)."""
    folder = scratch({})
    subprocess.run([sys.executable, str(ROOT / "tools" / "gguf_stand_in.py"), str(folder / GGUF_NAME)],
                   check=True, capture_output=True, env=_env(WIDTH))
    return folder


# ---- tables from the registries ---------------------------------------------------------------------
def command_names() -> list[str]:
    """Every command of ``kvplan``, in the order ``kvplan --help`` lists them."""
    import typer.main

    from kvplan.cli import app

    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def cli_reference() -> str:
    """``kvplan --help`` and every command's ``--help``, each under its own heading."""
    parts = ["## kvplan\n", output("--help")]
    for name in command_names():
        parts += [f"\n## kvplan {name}\n", output(f"{name} --help")]
    return "\n".join(parts)


def _first_sentence(doc: str | None) -> str:
    text = " ".join((doc or "").split("\n\n")[0].split())
    if not text:
        return "standard K/V per layer"
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def architectures_table() -> str:
    """One row per family parser: the file that holds it (its model types' cache layout and weights), the model
    types it reads, how many weight counts are exact against transformers, and what is special (the first sentence
    of its docstring, or of its module's)."""
    from kvplan.models import PARSERS

    data = ROOT / "tests" / "data"
    counted = {t for t, r in json.loads((data / "hf_zoo_weights.json").read_text())["records"].items()
               if "parameters" in r}
    misses = set(json.loads((data / "hf_zoo_weights_misses.json").read_text()))
    rows = ["| file | model_type values | weights exact | what is special |", "|---|---|---|---|"]
    for parser in sorted(PARSERS, key=lambda p: (p.__module__, p.family, p.model_types)):
        measured = [t for t in parser.model_types if t in counted]
        exact = [t for t in measured if t not in misses]
        weights = f"{len(exact)} of {len(measured)}" if measured else "-"
        types = ", ".join(f"`{t}`" for t in parser.model_types)
        weights_only = [t for t in parser.weight_types if t not in parser.model_types]
        if weights_only:
            types += "; weights only: " + ", ".join(f"`{t}`" for t in weights_only)
        path = parser.__module__.replace(".", "/") + ".py"
        doc = (parser.__doc__ or "").strip() or sys.modules[parser.__module__].__doc__  # else the family module's
        rows.append(f"| `{path}` | {types} | {weights} | {_first_sentence(doc)} |")
    return "\n".join(rows)


def oracle_summary() -> str:
    """The transformers oracle's figures, counted from its records (tests/data/hf_zoo*.json)."""
    data = ROOT / "tests" / "data"
    zoo = json.loads((data / "hf_zoo.json").read_text())
    measured = [t for t, r in zoo["records"].items() if "error" not in r]
    misses = json.loads((data / "hf_zoo_misses.json").read_text())
    weights = json.loads((data / "hf_zoo_weights.json").read_text())
    counted = [t for t, r in weights["records"].items() if "parameters" in r]
    weight_misses = json.loads((data / "hf_zoo_weights_misses.json").read_text())
    real = json.loads((data / "hf_real.json").read_text())
    real_misses = json.loads((data / "hf_real_misses.json").read_text())
    exact, exact_w = len(measured) - len(misses), len(counted) - len(weight_misses)
    lines = [
        f"With transformers {zoo['transformers_version']}, **{exact} of the {len(measured)} measurable model "
        f"types are exact ({100 * exact / len(measured):.1f} %)** in the KV cache, of {len(zoo['records'])} "
        f"generation model types ({len(zoo['records']) - len(measured)} could not be built or run from their own "
        f"defaults); {len(real['records']) - len(real_misses)} of {len(real['records'])} shrunk real configs are "
        f"exact. Weights (transformers {weights['transformers_version']}, every generation model type built on the "
        f"meta device): **{exact_w} of the {len(counted)} model types transformers can build are exact "
        f"({100 * exact_w / len(counted):.1f} %)**, of {len(weights['records'])}.",
        "",
        *(["| model type | KV cache miss, and why |", "|---|---|",
           *(f"| `{t}` | {reason} |" for t, reason in sorted(misses.items()))] if misses
          else ["No KV cache misses: every measurable model type is exact (tests/data/hf_zoo_misses.json is empty)."]),
        "",
        "| model type | weight count miss, and why |",
        "|---|---|",
        *(f"| `{t}` | {reason} |" for t, reason in sorted(weight_misses.items())),
    ]
    return "\n".join(lines)


def models_table() -> str:
    """The bundled models (``kvplan models``): layers, KV heads, context, bytes per token."""
    from kvplan.catalog import models_report
    from kvplan.units import format_bytes

    rows = [
        "| model (Hub id) | alias | layers | KV heads × head dim | max context | KV per token, full attention "
        "| KV per token at max context |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in models_report()["models"]:
        heads = "-" if row["num_kv_heads"] is None else (
            f"latent {row['head_dim']}" if "mla" in row["layers"] else f"{row['num_kv_heads']} × {row['head_dim']}"
        )
        per_token = format_bytes(row["bytes_per_token"]) if row["bytes_per_token"] else "-"
        if row["state_bytes_per_seq"]:
            per_token += f" + {format_bytes(row['state_bytes_per_seq'])}/seq state"
        ctx = "-" if row["max_context_len"] is None else f"{row['max_context_len']:,}"
        at_max = row["bytes_per_token_at_max_context"]
        at_max_text = "-" if at_max is None else format_bytes(at_max)
        rows.append(
            f"| `{row['id']}` | `{row['alias']}` | {row['layers']} | {heads} | {ctx} | {per_token} ({row['kv_dtype']}) "
            f"| {at_max_text} |"
        )
    return "\n".join(rows)


def _type_of(node: dict[str, Any], defs: dict[str, Any]) -> str:
    node = _resolve(node, defs)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " or ".join(dict.fromkeys(_type_of(n, defs) for n in node[key]))
    kind = node.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {_type_of(node.get('items', {}), defs)}"
    if kind == "integer" and "minimum" in node:
        return f"integer ≥ {node['minimum']}"
    if kind == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type_of(node['additionalProperties'], defs)}"
    return kind


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    return node


def _object_of(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema inside ``node`` (through refs, ``null`` alternatives and arrays), if any."""
    node = _resolve(node, defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            found = [o for o in (_object_of(n, defs) for n in node[key]) if o is not None]
            return found[0] if len(found) == 1 else None
    if node.get("type") == "array":
        return _object_of(node.get("items", {}), defs)
    return node if "properties" in node else None


def _rows(node: dict[str, Any], defs: dict[str, Any], prefix: str) -> Iterator[str]:
    for key, child in node["properties"].items():
        resolved = _resolve(child, defs)
        many = resolved.get("type") == "array" or any(
            _resolve(n, defs).get("type") == "array" for n in resolved.get("anyOf", []))
        path = f"{prefix}{key}"
        obj = _object_of(child, defs)
        kind = "object" if obj is not None and not many else ("array of objects" if obj is not None else
                                                              _type_of(child, defs))
        if obj is not None and any(_resolve(n, defs).get("type") == "null" for n in resolved.get("anyOf", [])):
            kind += " or null"
        yield f"| `{path}` | {kind} |"
        if obj is not None:
            yield from _rows(obj, defs, f"{path}[]." if many else f"{path}.")


def schema_reference() -> str:
    """Every key of every report, from ``kvplan schema``: one table per command."""
    out, _ = run(["schema"])
    schema = json.loads(out)
    defs = schema["$defs"]
    parts = [f"{schema['description']}", ""]
    for name in sorted(defs):
        command = name.removesuffix("_report")
        shapes = [_resolve(n, defs) for n in defs[name].get("anyOf", [defs[name]])]
        parts += [f"## `{command}`", ""]
        for number, shape in enumerate(shapes, 1):
            if len(shapes) > 1:
                parts += [f"Shape {number} of {len(shapes)}: {shape.get('description', '')}".rstrip(": "), ""]
            parts += ["| key | type |", "|---|---|", *_rows(shape, defs, ""), ""]
    return "\n".join(parts).rstrip()


def gpu_table() -> str:
    """The GPU catalog (``kvplan gpus --format json``)."""
    out, _ = run(["gpus", "--format", "json"])
    gpus = json.loads(out)["gpus"]
    keys = [k for k in ("name", "aliases", "memory_bytes", "bandwidth_bytes_per_s", "memory_source") if k in gpus[0]]
    rows = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for gpu in gpus:
        cells = []
        for key in keys:
            value = gpu[key]
            if key == "memory_bytes":
                value = f"{value / 2**30:.2f} GiB"
            elif key == "bandwidth_bytes_per_s" and value is not None:
                value = f"{value / 1e9:,.0f} GB/s"
            elif isinstance(value, list):
                value = ", ".join(f"`{v}`" for v in value)
            cells.append(str(value).replace("|", "\\|"))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


#: What each bound of kvplan/limits.py applies to (a name missing here is shown as the constant).
LIMIT_FLAGS = {
    "MAX_TP": "`--tp` / `--tensor-parallel-size`", "MAX_PP": "`--pp` / `--pipeline-parallel-size`",
    "MAX_NUM_GPUS": "`--num-gpus`", "MAX_BEAMS": "`--beams`", "MAX_BATCH": "`--batch`",
    "MAX_LAYERS": "layers in a config, `compare --layers`", "MAX_DIM": "`compare --heads/--head-dim/--hidden-size`",
    "MAX_MODEL_ARG_CHARS": "`--model`, characters", "MAX_FILE_BYTES": "config.json and plan files, bytes",
    "MAX_NESTING": "JSON / YAML nesting, levels", "MAX_YAML_NODES": "YAML nodes, aliases expanded",
    "MAX_SCENARIOS": "scenarios in a `kvplan check` plan",
    "MAX_REPORT_NODES": "report YAML nodes (`kvplan diff` reads, `kvplan check` writes at most)",
    "MAX_REPORT_BYTES": "report files, bytes (`kvplan diff` reads, `kvplan check` writes at most)",
}


def limits_table() -> str:
    """The bounds of kvplan/limits.py: what each applies to, its value, and why it is there."""
    import kvplan.limits as limits

    source = (ROOT / "kvplan" / "limits.py").read_text(encoding="utf-8").splitlines()
    rows = ["| what | limit | why |", "|---|---:|---|"]
    for i, line in enumerate(source):
        name = line.partition(" = ")[0].partition(":")[0].strip()
        if not name.startswith("MAX_") or line.startswith((" ", "#")):
            continue
        value = getattr(limits, name)
        if isinstance(value, limits.Limit):
            maximum, why = value.maximum, value.why
        else:
            comment, j = [], i - 1
            while j >= 0 and source[j].startswith("#:"):
                comment.insert(0, source[j].removeprefix("#:").strip().removeprefix("NOTE:").strip())
                j -= 1
            why = " ".join(comment)
            for mark in (": ", ". "):  # the comment names the thing first: keep what follows
                if mark in why.rstrip("."):
                    why = why.split(mark, 1)[1]
                    break
            maximum = value
        rows.append(f"| {LIMIT_FLAGS.get(name, f'`{name}`')} | {maximum:,} | {why} |")
    return "\n".join(rows)


def _markdown_doc(doc: str) -> str:
    """A docstring's reST roles (``:class:`~a.B` ``) as Markdown code."""
    return re.sub(r":\w+:`~?([\w.]+)`", lambda m: f"`{m[1]}`", doc)


def api_reference() -> str:
    """Each name of ``kvplan.__all__``: its signature, one parameter a line, and its docstring."""
    import dataclasses
    import importlib
    import inspect

    import kvplan

    api = importlib.import_module("kvplan.api")
    parts = []
    for name in sorted((n for n in kvplan.__all__ if not n.startswith("_")), key=lambda n: (n[0].isupper(), n)):
        obj = getattr(kvplan, name)
        if inspect.ismodule(obj):
            obj = getattr(api, name)
        params = list(inspect.signature(obj).parameters.values())
        lines, star = [], False
        for param in params:
            if param.kind is param.KEYWORD_ONLY and not star:
                lines.append("    *,")
                star = True
            text = param.name
            if param.annotation is not param.empty:
                text += f": {param.annotation}"
            if param.default is not param.empty:
                default = "..." if param.default is dataclasses.MISSING else repr(param.default)
                text += f" = {default}"
            lines.append(f"    {text},")
        kind = "class" if inspect.isclass(obj) else "def"
        ret = inspect.signature(obj).return_annotation
        tail = "" if kind == "class" or ret is inspect.Signature.empty else f" -> {ret}"
        head = f"{kind} kvplan.{name}("
        signature = head + ")" + tail if not lines else head + "\n" + "\n".join(lines) + "\n)" + tail
        parts += [f"## `kvplan.{name}`", "", fence(signature, "python"), "",
                  _markdown_doc(inspect.getdoc(obj) or ""), ""]
    return "\n".join(parts).rstrip()


def module_map() -> str:
    """Every module of the package with the first sentence of its docstring, folder by folder."""
    rows = ["| module | what it holds |", "|---|---|"]
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        rows.append(f"| `{rel}` | {_first_sentence(doc) if doc else ''} |")
    return "\n".join(rows)


def include(path: str, *, shift: int = 1) -> str:
    """A Markdown file of the repository, headings pushed down ``shift`` levels, links to files that are not
    pages of this site kept as text."""
    text = (ROOT / path).read_text(encoding="utf-8")
    text = re.sub(r"^(#+) ", lambda m: "#" * (len(m[1]) + shift) + " ", text, flags=re.M)
    text = re.sub(r"(?<!!)\[([^\]]+)\]\((?!https?://|#)[^)]+\)", r"\1", text)
    return text.strip()


# ---- the command ------------------------------------------------------------------------------------
def generated_files() -> list[Path]:
    """README.md and every page under docs/ that holds a cog block."""
    pages = sorted(p for p in DOCS.rglob("*.md") if "[[[cog" in p.read_text(encoding="utf-8"))
    return [ROOT / "README.md", *pages]


def main(argv: list[str]) -> int:
    from cogapp import Cog

    check = "--check" in argv
    files = [str(p.relative_to(ROOT)) for p in generated_files()]
    os.chdir(ROOT)
    sys.path.insert(0, str(DOCS))
    return Cog().main(["cog", "--check" if check else "-r", "--verbosity=1", *files])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
