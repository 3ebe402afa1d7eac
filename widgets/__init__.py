"""Notebook widgets for runs, composed from ipywidgets 8 only (no JS build).

``RunViewState`` (pure reducer) needs no ipywidgets; the widgets import ipywidgets when first used.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "RunViewState": "widgets.state",
    "PhaseTimeline": "widgets.timeline",
    "ApprovalCard": "widgets.approval",
    "RequestReport": "widgets.report",
    "RunView": "widgets.runview",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports("widgets", _EXPORTS)
