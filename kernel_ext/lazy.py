"""Lazy package exports: a package names its public objects without importing their modules.

``%load_ext kernel_ext`` must stay fast, so packages whose modules pull in BESSER, httpx or
ipywidgets resolve their public names on first use. One implementation for every package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a name to its module's full name."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def dir_() -> list[str]:
        return sorted(set(exports) | {"__doc__", "__name__"})

    return getattr_, dir_
