"""``model_type`` -> the family module that answers for it, and that module's parsers.

Each family module (``llama.py``, ``qwen.py``, ``gemma.py``...) lists its parsers in ``PARSERS``: a parser's
``model_types`` are the types whose cache layout it reads, its ``weight_types`` those whose weights it counts.
:data:`~kvplan.models.family_index.FAMILY_INDEX` (written by tools/models_index.py) names the one module of every
type, so a lookup imports that module alone: start-up imports one family, not fifty.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

from kvplan.models.base import ArchParser
from kvplan.models.family_index import FAMILY_INDEX

#: ``model_type`` -> the name of its family module.
MODULE_OF: Mapping[str, str] = {t: module for module, types in FAMILY_INDEX.items() for t in types.split()}


def family_module(name: str) -> ModuleType:
    """The family module ``kvplan.models.<name>``, imported on first use."""
    return importlib.import_module(f"kvplan.models.{name}")


def family_parsers() -> list[type[ArchParser]]:
    """Every family module's ``PARSERS``, in module-name order (imports them all)."""
    return [parser for name in sorted(FAMILY_INDEX) for parser in family_module(name).PARSERS]


class Registry(Mapping[str, type[ArchParser]]):
    """``model_type`` -> its parser for one role: the cache layout (``model_types``) or the weight count
    (``weight_types``). A lookup imports only the family module the index names; iterating imports them all."""

    def __init__(self, role: str) -> None:
        self._role = role
        self._found: dict[str, type[ArchParser]] = {}
        self._all: dict[str, type[ArchParser]] | None = None

    def __getitem__(self, model_type: str) -> type[ArchParser]:
        found = self._found.get(model_type)
        if found is None:
            module = MODULE_OF.get(model_type)
            if module is None:
                raise KeyError(model_type)
            found = next((p for p in family_module(module).PARSERS if model_type in getattr(p, self._role)), None)
            if found is None:  # the module counts the type's weights but reads no cache of it (or the reverse)
                raise KeyError(model_type)
            self._found[model_type] = found
        return found

    def _every(self) -> dict[str, type[ArchParser]]:
        if self._all is None:
            registry: dict[str, type[ArchParser]] = {}
            for parser in family_parsers():
                for model_type in getattr(parser, self._role):
                    assert model_type not in registry, f"{model_type} claimed by {registry[model_type]} and {parser}"
                    registry[model_type] = parser
            self._all = registry
        return self._all

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())


#: ``model_type`` -> the parser that reads its cache layout.
REGISTRY: Mapping[str, type[ArchParser]] = Registry("model_types")
#: ``model_type`` -> the parser that counts its weights (the same family module as its cache layout's).
WEIGHT_REGISTRY: Mapping[str, type[ArchParser]] = Registry("weight_types")
