"""Notebook widgets for runs, composed from ipywidgets 8 only (no JS build).

``RunState`` (pure reducer) needs no ipywidgets; the widgets import ipywidgets when first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "RunState": "widgets.state",
    "PhaseTimeline": "widgets.timeline",
    "ApprovalCard": "widgets.approval",
    "RequestReport": "widgets.report",
    "RunView": "widgets.runview",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
