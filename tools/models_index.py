"""Write kvplan/models/family_index.py: the static model_type -> family module index.

    python tools/models_index.py          # rewrite it from every family module's PARSERS
    python tools/models_index.py --check  # exit 1 when it is out of step

A family module is a module of ``kvplan.models`` that lists its parsers in ``PARSERS``; the index names, for
every ``model_type`` a parser claims (its cache layout in ``model_types``, its weights in ``weight_types``), the
one module that claims it. ``kvplan.models`` imports only the family module the index names for a model type,
so start-up does not import fifty families; tests/models/test_registry.py fails when the index is out of step
(run this after adding or changing a family).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = ROOT / "kvplan" / "models" / "family_index.py"


def claims() -> dict[str, list[str]]:
    """Family module -> the model types its PARSERS claim (cache layout or weights)."""
    import kvplan.models as models

    out: dict[str, list[str]] = {}
    for info in sorted(pkgutil.iter_modules(models.__path__), key=lambda m: m.name):
        parsers = getattr(importlib.import_module(f"kvplan.models.{info.name}"), "PARSERS", None)
        if parsers is None:  # generic machinery, not a family
            continue
        for parser in parsers:
            out.setdefault(info.name, []).extend([*parser.model_types, *parser.weight_types])
    return {m: sorted(set(t)) for m, t in out.items() if t}


def render() -> str:
    lines = ['"""The static model_type -> family module index (written by tools/models_index.py: do not edit by hand)."""',
             "",
             "#: Family module -> the model types it answers for (their cache layout, their weights, or both).",
             "FAMILY_INDEX: dict[str, str] = {"]
    for module, types in claims().items():
        text = " ".join(types)
        head = f'    "{module}": '
        if len(head) + len(text) + 3 <= 120:
            lines.append(f'{head}"{text}",')
            continue
        indent = " " * (len(head) + 1)
        parts = textwrap.wrap(text, 120 - len(indent) - 4, break_on_hyphens=False, break_long_words=False)
        lines.append(f'{head}("{parts[0]} "')
        lines += [f'{indent}"{p} "' for p in parts[1:-1]]
        lines.append(f'{indent}"{parts[-1]}"),')
    lines += ["}", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        same = TARGET.exists() and TARGET.read_text() == text
        print("in step" if same else f"{TARGET.relative_to(ROOT)} is out of step: run python tools/models_index.py")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
