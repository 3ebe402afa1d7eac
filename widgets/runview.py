"""``RunView``: a run in one widget: header, pending cards, timeline, decided calls, tasks, findings, done.

Cards waiting for a person are pinned under the header (the header's banner counts them); every
call decided, auto-approved or refused folds into one row, in call order, below the timeline.

Fed one event at a time through ``apply`` (from the SSE follower, an in-process listener or a
replayed ``events.jsonl``); the pure ``RunViewState`` reducer decides what changed and only those
parts are re-rendered. ``wait`` and ``wait_for_approval`` let a notebook cell (or a test)
await the run without blocking the kernel, and let card clicks through while they wait. A failing render never reaches the run: ``apply``
logs and carries on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

import ipywidgets as w

from widgets import snapshot
from widgets.approval import ApprovalCard, Decide
from widgets.base import StaticFallback
from widgets.cards import row_html
from widgets.controls import VIEW_CLASS, RunControls
from widgets.kernel_comms import pass_widget_messages, queueing_kernel
from widgets.lifecycle import StoppedWaiting, in_a_cell
from widgets.render import (
    done_html,
    findings_html,
    header_html,
    run_text,
    tasks_html,
    texts_html,
)
from widgets.rows import DecidedRows
from widgets.state import RunEvent, RunViewState
from widgets.theme import STYLE
from widgets.timeline import PhaseTimeline

log = logging.getLogger(__name__)


class RunView(StaticFallback, w.VBox):
    def __init__(
        self,
        *,
        run_id: str = "",
        decide: Decide | None = None,
        cancel: Callable[[], object] | None = None,
        note: str = "",
        link_base: str | None = None,
        **kwargs,
    ):
        self.state = RunViewState(run_id=run_id)
        self.decide = decide
        self.cancel_run = cancel
        self.note = note
        self.link_base = link_base
        self.awaited = False  # a notebook cell waits on this run (``lesson.answer_cards``): the banner says so
        self.follower: object = None  # the background task following the run, if any (kept referenced)
        self.timeline = PhaseTimeline(self.state)
        self._header = w.HTML()
        self._pending_box = w.VBox()  # cards waiting for a person, pinned at the top
        self._folded: dict[str, bool] = {}
        self._texts = w.HTML()
        self._tasks = w.HTML()
        self._findings = w.HTML()
        self._done = w.HTML()
        self._cards: dict[str, ApprovalCard] = {}
        self._rows = DecidedRows(self.state, self._cards)  # every other call, one line each, in call order
        self._decided_box = self._rows.box
        self.controls = RunControls(self)
        super().__init__(
            children=(w.HTML(STYLE), self._header, self.controls, self._pending_box, self.timeline, self._texts,
                      self._decided_box, self._tasks, self._findings, self._done),
            **kwargs,
        )
        self.add_class(VIEW_CLASS)
        self._pending_box.add_class("besser-pending")
        self._render({"header"})

    # -- feeding --------------------------------------------------------------------------

    def apply(self, event: RunEvent) -> set[str]:
        """Fold in one event and re-render what it changed; never raises into the caller."""
        try:
            changed = self.state.apply(event)
            if changed:
                self._render(changed)
            return changed
        except Exception:
            log.exception("RunView could not apply an event")
            return set()

    def replay(self, events: Iterable[RunEvent]) -> RunView:
        for event in events:
            self.apply(event)
        return self

    def set_awaited(self, awaited: bool) -> None:
        """Whether a cell waits on this run: the banner over its cards says so (and goes with them)."""
        if awaited != self.awaited:
            self.awaited = awaited
            self._render({"header"})

    def set_note(self, note: str) -> None:
        """A transport line under the header (mode, reconnecting, fallbacks)."""
        self.note = note
        self._render({"header"})

    # -- reading --------------------------------------------------------------------------

    @property
    def cards(self) -> list[ApprovalCard]:
        return list(self._cards.values())

    def card(self, call_id: str) -> ApprovalCard:
        """The latest card of ``call_id`` (cards are keyed by their own key, see ``RunViewState``)."""
        return self._cards[self.state.card_of_call.get(call_id, call_id)]

    async def wait(self, timeout: float | None = None) -> RunViewState:
        """Until the run's ``done`` arrives here (polls; works from any loop); then the saved
        output shows the final state (``snapshot``). An interrupt stops the wait, not the run."""
        await self._until(lambda: self.state.finished, timeout, self.state.run_id)
        snapshot.refresh(self)
        return self.state

    async def wait_for_approval(self, timeout: float | None = None) -> ApprovalCard:
        """The first card still waiting for a decision (from this view's point of view)."""
        await self._until(lambda: any(not c.decided for c in self._cards.values()) or self.state.finished, timeout,
                          self.state.run_id)
        open_cards = [c for c in self._cards.values() if not c.decided]
        if not open_cards:
            raise RuntimeError(f"run {self.state.run_id} ended ({self.state.status}) without another approval")
        return open_cards[0]

    @staticmethod
    async def _until(predicate: Callable[[], bool], timeout: float | None, run_id: str = "") -> None:
        """Poll ``predicate``; meanwhile a person's clicks reach the cards (see ``kernel_comms``).
        A cancelled wait (the cell was interrupted) ends as one ``StoppedWaiting`` line."""
        deadline = None if timeout is None else time.monotonic() + timeout
        kernel = queueing_kernel()
        try:
            while not predicate():
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"not reached within {timeout} s")
                if kernel is not None and await pass_widget_messages(kernel):
                    continue  # a click may have decided a card: look again before sleeping
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            if not in_a_cell():
                raise
            raise StoppedWaiting(run_id) from None

    # -- rendering ------------------------------------------------------------------------

    def _render(self, changed: set[str]) -> None:
        state = self.state
        if "header" in changed:
            _set(self._header, header_html(state, self.note, live=True, awaited=self.awaited,
                                           cancellable=self.cancel_run is not None))
            self.controls.update(state)
        if changed & {"timeline", "meter"}:
            self.timeline.update(state)
        if "cards" in changed or any(name.startswith("card:") for name in changed):
            for key, card_state in state.approvals.items():
                if key not in self._cards:
                    self._cards[key] = ApprovalCard(card_state, self.decide)
        relayout = "cards" in changed
        for name in changed:
            if name.startswith("card:"):
                key = name[5:]
                if key in self._cards and key in state.approvals:
                    self._cards[key].update(state.approvals[key])
                    relayout |= self._folded.get(key) != self._cards[key].folded
            elif name.startswith("row:"):
                relayout |= not self._rows.result(name[4:])  # a call that asked no one has its result
        if relayout:
            self._layout()
        if "texts" in changed:
            _set(self._texts, texts_html(state))
        if "tasks" in changed:
            _set(self._tasks, tasks_html(state))
        if "findings" in changed:
            _set(self._findings, findings_html(state))
        if "done" in changed:
            _set(self._done, done_html(state, self.link_base))

    def _layout(self) -> None:
        """Open cards in the pinned region; every other call, in order, in the decided region."""
        pending: list[w.Widget] = []
        for key, card in self._cards.items():
            self._folded[key] = card.folded
            if not card.folded:
                pending.append(card)
        if tuple(pending) != self._pending_box.children:
            self._pending_box.children = tuple(pending)
        self._rows.layout(self._folded)

    def _ipython_display_(self) -> None:
        """Shown under a display id, so the saved output can follow the run to its end (``snapshot``)."""
        snapshot.show(self)

    def to_text(self) -> str:
        return run_text(self.state, self.note)

    def to_html(self) -> str:
        rows = [self._cards[key].to_html() if key in self._cards else row_html(*self.state.row(key)) for key in self.state.rows]
        pending = [card.to_html() for card in self._cards.values() if not card.folded]
        return "".join(
            part
            for part in (
                STYLE,
                '<div class="besser-run">',
                header_html(self.state, self.note),
                f'<div class="besser-pending">{"".join(pending)}</div>' if pending else "",
                self.timeline.to_html(),
                texts_html(self.state),
                f'<div class="besser-decided">{"".join(r for k, r in zip(self.state.rows, rows, strict=True) if not _open(self, k))}</div>',
                tasks_html(self.state),
                findings_html(self.state),
                done_html(self.state, self.link_base),
                "</div>",
            )
            if part
        )


def _open(view: RunView, key: str) -> bool:
    return key in view._cards and not view._cards[key].folded


def _set(widget: w.HTML, value: str) -> None:
    if widget.value != value:
        widget.value = value
