"""Write kvplan/models/family_index.py: the static model_type -> family module index.

    python tools/models_index.py          # rewrite it from every family module's PARSERS
    python tools/models_index.py --check  # exit 1 when it is out of step

``kvplan.models`` imports only the family module the index names for a model type, so start-up does not
import thirty families; tests/test_models_index.py fails when a family module claims a type the index
does not name (run this after adding or changing a family).
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


def claims(attribute: str) -> dict[str, list[str]]:
    """Family module -> the model types its PARSERS claim under ``attribute``."""
    import kvplan.models as models

    out: dict[str, list[str]] = {}
    for info in sorted(pkgutil.iter_modules(models.__path__), key=lambda m: m.name):
        if info.name in models.GENERIC_MODULES:
            continue
        for parser in importlib.import_module(f"kvplan.models.{info.name}").PARSERS:
            out.setdefault(info.name, []).extend(getattr(parser, attribute))
    return {m: sorted(set(t)) for m, t in out.items() if t}


def _table(name: str, doc: str, index: dict[str, list[str]]) -> str:
    lines = [f"#: {doc}", f"{name}: dict[str, str] = {{"]
    for module, types in index.items():
        text = " ".join(types)
        head = f'    "{module}": '
        if len(head) + len(text) + 3 <= 120:
            lines.append(f'{head}"{text}",')
            continue
        parts = textwrap.wrap(text, 120 - 14, break_on_hyphens=False, break_long_words=False)
        lines.append(f'{head}("{parts[0]} "')
        lines += [f'             "{p} "' for p in parts[1:-1]]
        lines.append(f'             "{parts[-1]}"),')
    lines.append("}")
    return "\n".join(lines)


def render() -> str:
    return "\n".join([
        '"""The static model_type -> family module index (written by tools/models_index.py: do not edit by hand)."""',
        "",
        _table("CACHE_INDEX", "Family module -> the model types whose cache layout its ``PARSERS`` read.",
               claims("model_types")),
        _table("WEIGHT_INDEX", "Family module -> the model types whose weights its ``PARSERS`` count.",
               claims("weight_types")),
        "",
    ])


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
