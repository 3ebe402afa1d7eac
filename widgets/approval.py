"""``ApprovalCard``: one frozen request, Approve / Deny, then its outcome; decided only once.

The card shows what the boundary froze (tool, copied arguments, the diff of an edit, the
command and risk class of a shell call). A click disables both buttons at once and hands the
decision to ``decide(call_id, approved, digest=...)``: the REST client (server mode) or
``run.decide`` (in-process); the digest binds it to the request this card shows. That may
answer a bool (or a ``Verdict``), an awaitable or a ``concurrent.futures.Future``; a false
answer means it was refused (already decided, expired, another request). The outcome comes later from the run's
events (executed, denied, stale input, expired, cancelled) through ``update``. Only a failure
to deliver the decision enables the buttons again. Nothing here prints.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any, Protocol

import ipywidgets as w

from widgets.base import StaticFallback
from widgets.controls import CardControls
from widgets.render import card_html, card_text
from widgets.state import ApprovalView

log = logging.getLogger(__name__)

class Decide(Protocol):
    """Sends a card's decision; ``digest`` binds it to the request shown. The answer may be a
    bool or a ``Verdict``, a future or coroutine of one, or None (sent, nothing to report)."""

    def __call__(self, call_id: str, approved: bool, digest: str | None = None, rest_of_kind: bool = False) -> object: ...
    # ``rest_of_kind=True`` is passed only for a rest-of-kind click (widgets/controls.py).


class ApprovalCard(StaticFallback, w.VBox):
    def __init__(self, card: ApprovalView, decide: Decide | None = None, **kwargs):
        self.card = card
        self._decide = decide
        self._sent: bool | None = None  # the decision this card sent, if any
        self._note = ""
        self._html = w.HTML()
        self.approve_button = w.Button(description="Approve", button_style="success", icon="check")
        self.deny_button = w.Button(description="Deny", button_style="danger", icon="times")
        self.approve_button.on_click(lambda _: self.click(True))
        self.deny_button.on_click(lambda _: self.click(False))
        self.controls = CardControls(self)
        super().__init__(
            children=(self._html, w.HBox((self.approve_button, self.deny_button, *self.controls.widgets))),
            layout=w.Layout(border="1px solid #d0d7de", padding="4px", margin="4px 0"),
            **kwargs,
        )
        self.add_class("besser-card")
        self.update(card)

    @property
    def call_id(self) -> str:
        return self.card.call_id

    @property
    def decided(self) -> bool:
        return self._sent is not None or not self.card.open

    # -- decisions ------------------------------------------------------------------------

    def approve(self) -> None:
        self.click(True)

    def deny(self) -> None:
        self.click(False)

    def click(self, approved: bool, *, rest_of_kind: bool = False) -> None:
        if self.decided:
            return
        self._sent = approved
        self._note = "approved; waiting for the outcome" if approved else "denied"
        self._render()
        if self._decide is None:
            self._undelivered("no backend to send the decision to")
            return
        try:
            extra: dict[str, Any] = {"digest": self.card.digest} if self.card.digest else {}  # older logs have none
            if rest_of_kind:  # only this click passes it: a decide function without it still takes every other
                extra["rest_of_kind"] = True
            result = self._decide(self.call_id, approved, **extra)
        except Exception as exc:  # noqa: BLE001 - shown on the card, never raised into the kernel
            self._undelivered(f"{type(exc).__name__}: {exc}")
            return
        self._settle(result)

    def _settle(self, result: object) -> None:
        if isinstance(result, concurrent.futures.Future):
            result.add_done_callback(self._settled_future)
        elif asyncio.isfuture(result) or asyncio.iscoroutine(result):
            asyncio.ensure_future(result).add_done_callback(self._settled_future)
        elif result is not None and not result:  # False, or a refused Verdict
            reason = getattr(result, "reason", "") or "this request was already decided, or it expired"
            self._note = f"not accepted: {reason}"
            self._render()

    def _settled_future(self, future: concurrent.futures.Future[object] | asyncio.Future[object]) -> None:
        try:
            self._settle(future.result())
        except Exception as exc:  # noqa: BLE001
            self._undelivered(f"{type(exc).__name__}: {exc}")

    def _undelivered(self, reason: str) -> None:
        log.warning("approval for %s not delivered: %s", self.call_id, reason)
        self._sent = None
        self._note = f"the decision was not delivered ({reason}); try again"
        self._render()

    # -- rendering ------------------------------------------------------------------------

    def update(self, card: ApprovalView) -> None:
        """New state from the run's events (outcome, who decided)."""
        self.card = card
        if not card.open:
            self._note = "" if card.outcome not in ("approved",) else "approved; waiting for the outcome"
        self._render()

    def _render(self) -> None:
        disabled = self.decided
        for button in (self.approve_button, self.deny_button):
            if button.disabled != disabled:
                button.disabled = disabled
        self.controls.update()
        value = card_html(self.card, self._note)
        if self._html.value != value:
            self._html.value = value

    def to_text(self) -> str:
        return card_text(self.card)

    def to_html(self) -> str:
        return card_html(self.card, self._note)
