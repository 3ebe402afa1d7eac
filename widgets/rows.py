"""The run view's decided region: every call no longer waiting, one line each, in call order.

A decided card is its own widget (``ApprovalCard``, folded: it expands to the full card). Calls
that asked no one (reads, task lists, refusals by policy) come in runs; each run of up to
``GROUP`` rows shares one HTML widget, so a long run of reads costs a few widgets, not one each.
A row appears once its call has a result. The common case, a result at the end of the run,
appends in place; anything else (a card folding between rows) lays the region out again.
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as w

from widgets.approval import ApprovalCard
from widgets.cards import row_html
from widgets.state import RunViewState

GROUP = 25  # calls that asked no one, one after another, share a widget of at most this many rows


class DecidedRows:
    def __init__(self, state: RunViewState, cards: Mapping[str, ApprovalCard]):
        self.state = state
        self.cards = cards
        self.box = w.VBox()
        self.box.add_class("besser-decided")
        self._html: dict[str, str] = {}  # the row of each call that asked no one, by row key
        self._groups: dict[str, w.HTML] = {}  # by the first row key of each group
        self._members: dict[str, list[str]] = {}  # first row key -> its rows
        self._group_of: dict[str, str] = {}  # row key -> the first row key of its group
        self._tail: str | None = None  # the group that ends the region, if one does
        self._last = -1  # the row index of the region's last element

    def result(self, key: str) -> bool:
        """A call that asked no one has a (new) result; False when the region must be laid out again."""
        self._html[key] = row_html(*self.state.row(key))
        if key in self._group_of:
            self._fill(self._group_of[key])
            return True
        return self._append(key)

    def _append(self, key: str) -> bool:
        rows = self.state.rows
        index = next((i for i in range(len(rows) - 1, -1, -1) if rows[i] == key), -1)
        if index <= self._last:
            return False
        if self._tail is not None and len(self._members[self._tail]) < GROUP:
            self._members[self._tail].append(key)
            self._group_of[key] = self._tail
            self._fill(self._tail)
        else:
            self._members[key] = [key]
            self._group_of[key] = self._tail = key
            widget = self._group(key)
            self._fill(key)
            self.box.children = (*self.box.children, widget)
        self._last = index
        return True

    def layout(self, folded: Mapping[str, bool]) -> None:
        """Lay the whole region out again: folded cards and groups of rows, in call order."""
        shown: list[w.Widget] = []
        members: dict[str, list[str]] = {}
        group: list[str] = []
        self._tail, self._last = None, -1
        for index, key in enumerate(self.state.rows):
            if key in self.cards:
                if folded.get(key):
                    shown.append(self.cards[key])
                    group, self._tail, self._last = [], None, index
                continue
            if key not in self._html:
                asked, call = self.state.row(key)
                if call is None or call.ok is None:
                    continue
                self._html[key] = row_html(asked, call)
            if not group or len(group) >= GROUP:
                group = members[key] = [key]
                shown.append(self._group(key))
            else:
                group.append(key)
            self._tail, self._last = group[0], index
        before, self._members = self._members, members
        self._group_of = {key: first for first, keys in members.items() for key in keys}
        for first, keys in members.items():
            if before.get(first) != keys:
                self._fill(first)
        if tuple(shown) != self.box.children:
            self.box.children = tuple(shown)

    def _group(self, first: str) -> w.HTML:
        widget = self._groups.get(first)
        if widget is None:
            widget = self._groups[first] = w.HTML()
            widget.add_class("besser-call-rows")
        return widget

    def _fill(self, first: str) -> None:
        value = "".join(self._html[key] for key in self._members.get(first, ()))
        widget = self._groups.get(first)
        if widget is not None and widget.value != value:
            widget.value = value
