"""``PhaseTimeline``: the five phases with status and durations, the current tool call, and a
meter (runtime, cost, tokens, turns) with the provider label and the sandbox tier."""

from __future__ import annotations

import ipywidgets as w

from widgets.base import StaticFallback
from widgets.render import timeline_html, timeline_text
from widgets.state import RunViewState


class PhaseTimeline(StaticFallback, w.VBox):
    def __init__(self, state: RunViewState | None = None, **kwargs):
        self._html = w.HTML()
        super().__init__(children=(self._html,), **kwargs)
        self.state = state if state is not None else RunViewState()
        self.update(self.state)

    def update(self, state: RunViewState) -> None:
        self.state = state
        value = timeline_html(state)
        if self._html.value != value:
            self._html.value = value

    def to_text(self) -> str:
        return timeline_text(self.state)

    def to_html(self) -> str:
        return timeline_html(self.state)
