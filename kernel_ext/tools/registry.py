"""The catalog of every declared tool, and the per-run list of tools actually offered.

Each tool family is a module exporting ``TOOLS``; adding a family means adding its module
name to ``TOOL_MODULES``. Families are imported lazily so ``%load_ext`` stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from functools import lru_cache

from kernel_ext.tools.base import ToolSpec

TOOL_MODULES: tuple[str, ...] = (
    "kernel_ext.tools.files_read",
    "kernel_ext.tools.files_edit",
    "kernel_ext.tools.files_write",
    "kernel_ext.tools.syntax",
    "kernel_ext.tools.execution",
    "kernel_ext.tools.shell",
    "kernel_ext.tools.model_query",
    "kernel_ext.tools.generators",
    "kernel_ext.tools.api_test",
    "kernel_ext.tools.task_list",
)


class ToolCatalog:
    """An ordered, name-unique set of tool specs."""

    def __init__(self, specs: Iterable[ToolSpec]):
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"tool {spec.name!r} declared twice")
            self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def scoped(self, available: Iterable[str]) -> ToolCatalog:
        """The tools whose preconditions are all present (what a run offers a model)."""
        present = frozenset(available)
        return ToolCatalog(spec for spec in self if spec.offered_in(present))

    def provider_schemas(self) -> list[dict]:
        return [spec.provider_schema() for spec in self]


@lru_cache(maxsize=1)
def default_catalog() -> ToolCatalog:
    """Every tool of every family listed in ``TOOL_MODULES``."""
    specs: list[ToolSpec] = []
    for module_name in TOOL_MODULES:
        specs.extend(importlib.import_module(module_name).TOOLS)
    return ToolCatalog(specs)
