"""A person's controls on a run view: Cancel, a card's expiry, "approve the rest of this kind".

``RunControls`` sits under the run's header: a Cancel button (hidden when the view cannot
cancel, disabled once the run ended) and a line that only shows when the front end has lost
the kernel behind the view (after a restart): the view is then marked *detached* (its pill and
banner say so, with the command that brings it back: ``render.detached_banner_html``) and its
buttons stop taking clicks. That part is CSS (``theme``) on ipywidgets' own
``jupyter-widgets-disconnected`` class, so it works with no kernel at all. ``CardControls`` add to an approval card: when an
unanswered card counts as denied, and the rest-of-kind button (``boundary/grants.py``: never
for shell commands). Nothing here decides anything: clicks go through the card or the view.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from kernel_ext.boundary.grants import refusal
from widgets.render import esc

if TYPE_CHECKING:
    from widgets.state import RunViewState

log = logging.getLogger(__name__)

VIEW_CLASS = "besser-run"  # the RunView's own class: the detached rules (``theme``) apply under it only
KIND_WORDS = {"edit": "file edits", "generate": "generator runs", "test": "test runs"}


class RunControls(w.HBox):
    """Cancel, and the detached notice, for one ``RunView``."""

    def __init__(self, view: Any, **kwargs: Any):
        self.view = view
        self._message = ""
        self.label = w.HTML()
        self.cancel_button = w.Button(description="Cancel run", icon="stop", tooltip="end this run; its cards count as denied",
                                      layout=w.Layout(width="auto"))  # the label whole, never cut
        self.cancel_button.add_class("besser-cancel")
        self.cancel_button.on_click(lambda _: self.cancel())
        super().__init__(children=(self.cancel_button, self.label), **kwargs)
        self.update(view.state)

    def cancel(self) -> None:
        """Ask the run's host to cancel it; the run's own ``done`` (cancelled) says when it did."""
        cancel = getattr(self.view, "cancel_run", None)
        if cancel is None or self.view.state.finished:
            return
        self.cancel_button.disabled = True
        self._say("cancelling…")
        try:
            outcome = cancel()
        except Exception as exc:  # noqa: BLE001 - shown here, never raised into the kernel
            self._refused(exc)
            return
        if isinstance(outcome, concurrent.futures.Future) or asyncio.isfuture(outcome):
            outcome.add_done_callback(self._settled)

    def _settled(self, future: Any) -> None:
        try:
            if future.result() is False:
                self._refused(RuntimeError("the run was not running any more"))
        except Exception as exc:  # noqa: BLE001
            self._refused(exc)

    def _refused(self, exc: BaseException) -> None:
        log.warning("cancel of run %s not delivered: %s", self.view.state.run_id, exc)
        self.cancel_button.disabled = self.view.state.finished
        self._say(f"not cancelled: {exc}")

    def update(self, state: RunViewState) -> None:
        can_cancel = getattr(self.view, "cancel_run", None) is not None
        self.cancel_button.layout.display = None if can_cancel and not state.finished else "none"
        if state.finished:
            self.cancel_button.disabled = True
            self._message = ""
        self._say(self._message)

    def _say(self, message: str) -> None:
        self._message = message
        value = f"<span class='besser-live'>{esc(message)}</span>" if message else ""
        if self.label.value != value:
            self.label.value = value


class CardControls:
    """The parts an approval card adds beside Approve / Deny."""

    def __init__(self, card: Any):  # an ``ApprovalCard`` (which builds these controls)
        self.card = card
        kind = KIND_WORDS.get(card.card.category, f"{card.card.category} calls")
        self.rest_button = w.Button(description=f"Approve this and the rest of the {kind} in this run",
                                    tooltip="only this run, only this kind of call; never shell commands",
                                    layout=w.Layout(width="auto"))
        self.rest_button.add_class("besser-approve-rest")
        self.rest_button.on_click(lambda _: card.click(True, rest_of_kind=True))
        self.label = w.HTML()
        self.widgets = (self.rest_button, self.label)

    def update(self) -> None:
        view, decided = self.card.card, self.card.decided
        grantable = not refusal(view.name, view.category)
        self.rest_button.layout.display = None if grantable and not decided else "none"
        if self.rest_button.disabled != decided:
            self.rest_button.disabled = decided
        note = getattr(view, "note", "")
        expires = getattr(view, "expires_at", None)
        if note:
            text = note
        elif expires and view.open:
            text = f"expires at {time.strftime('%H:%M:%S', time.localtime(expires))} unless answered (then denied)"
        else:
            text = ""
        value = f"<small class='besser-card-note'>{esc(text)}</small>" if text else ""
        if self.label.value != value:
            self.label.value = value
