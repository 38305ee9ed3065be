"""YAML in and out through libyaml's C loader and dumper when PyYAML was built with them (its wheels
are), the pure-Python ones otherwise. Both write the same bytes for kvplan's reports
(``tests/test_yamlio.py`` checks saved reports against each); PyYAML is imported on first use.
"""

from __future__ import annotations

import re
from typing import Any

#: The dump options of every report: key order kept, UTF-8 text as is, lines folded at 100 columns.
DUMP_OPTIONS: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "width": 100}


def safe_loader(*, pure: bool = False) -> Any:
    """``yaml.CSafeLoader`` (libyaml), or ``yaml.SafeLoader`` when absent or ``pure``."""
    import yaml

    return yaml.SafeLoader if pure else getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_dumper(*, pure: bool = False) -> Any:
    """``yaml.CSafeDumper`` (libyaml), or ``yaml.SafeDumper`` when absent or ``pure``."""
    import yaml

    return yaml.SafeDumper if pure else getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """``yaml.safe_load``. A document libyaml rejects is parsed again by the pure-Python loader, so
    the error (message and line) is the one PyYAML's own parser gives."""
    import yaml

    loader = safe_loader()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        if loader is yaml.SafeLoader:
            raise
    return yaml.load(text, Loader=yaml.SafeLoader)


def compose(text: str) -> Any:
    """``yaml.compose`` with the safe loader (nodes with line marks)."""
    import yaml

    loader = safe_loader()
    try:
        return yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        if loader is yaml.SafeLoader:
            raise
    return yaml.compose(text, Loader=yaml.SafeLoader)


#: Characters libyaml and PyYAML always write alike: printable, no line break, no tab. A string with
#: any other character is double-quoted, and the two fold long double-quoted lines differently.
_NOT_PLAIN_TEXT = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")


def _c_writes_alike(data: Any) -> bool:
    """Whether every string in ``data`` (keys included) is plain text the C emitter writes byte for byte
    as the pure-Python one does."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _NOT_PLAIN_TEXT.search(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def dump(data: Any, *, pure: bool = False) -> str:
    """``yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)``: through libyaml when
    it writes the same bytes (every string plain text), else through PyYAML's own emitter."""
    import yaml

    dumper = safe_dumper(pure=pure or not _c_writes_alike(data))
    return yaml.dump(data, Dumper=dumper, **DUMP_OPTIONS)
