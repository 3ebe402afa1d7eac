"""``ApprovalCard``: one frozen request, Approve / Deny, then its outcome; decided only once.

The card shows what the boundary froze, through the tool's own body (``widgets.cards``: the diff
of an edit, the command and risk class of a shell call, a test's requests). Once the run's events
say it was decided, the card folds into one row (tool, target, outcome, who decided) with no
buttons; the row expands to the full card and its result. A click disables both buttons at once and hands the
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
from widgets.cards import body_html, card_html, row_html
from widgets.controls import CardControls
from widgets.render import card_text
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
        self._button_row: w.HBox | None = None  # made when first needed: a card replayed decided never shows one
        self._bodies: dict[bool, str] = {}  # with/without syntax colours -> the body (the frozen request never changes)
        self._completing = self._completed = False
        self._controls: CardControls | None = None  # made with the buttons: a card replayed decided never needs them
        super().__init__(children=(self._html,), **kwargs)
        self.add_class("besser-card")
        self._folded: tuple[bool, bool] | None = None  # (folded, its buttons still to come) as last shown
        self.update(card)

    @property
    def _buttons(self) -> w.HBox:
        if self._button_row is None:
            approve = w.Button(description="Approve", button_style="success", icon="check", disabled=self.decided)
            deny = w.Button(description="Deny", button_style="danger", icon="times", disabled=self.decided)
            approve.on_click(lambda _: self.click(True))
            deny.on_click(lambda _: self.click(False))
            self._button_row = w.HBox((approve, deny, *self.controls.widgets))
            self._button_row.add_class("besser-card-buttons")  # wraps rather than cuts a label (``theme``)
        return self._button_row

    @property
    def controls(self) -> CardControls:
        """Expiry and "approve the rest of this kind", beside the buttons (made when first needed)."""
        if self._controls is None:
            self._controls = CardControls(self)
            self._controls.update()
        return self._controls

    @property
    def approve_button(self) -> w.Button:
        return self._buttons.children[0]

    @property
    def deny_button(self) -> w.Button:
        return self._buttons.children[1]

    def _body(self, colour: bool) -> str:
        if colour not in self._bodies:
            self._bodies[colour] = body_html(self.card, colour)
        return self._bodies[colour]

    def _later(self) -> bool:
        """Whether the costly parts of an open card (its buttons, its syntax colours) come one loop
        turn later: where a loop runs (a kernel), a replay folds most cards before that turn and
        never pays for them; a person sees them at once all the same."""
        if self._completed:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._completed = True
            return False
        if not self._completing:
            self._completing = True
            loop.call_soon(self._complete)
        return True

    def _complete(self) -> None:
        self._completed = True
        if not self.folded:
            self._render()

    @property
    def folded(self) -> bool:
        """Shown as one row: the run's events say this card was decided (or can no longer be)."""
        return not self.card.open

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
        for button in self._button_row.children[:2] if self._button_row is not None else ():  # Approve, Deny
            if button.disabled != disabled:
                button.disabled = disabled
        if self._controls is not None:
            self._controls.update()
        folded = self.folded
        later = not folded and self._later()
        if (folded, later) != self._folded:
            self._folded = (folded, later)
            self.children = (self._html,) if folded or later else (self._html, self._buttons)
            self.remove_class("besser-card-decided" if not folded else "besser-card-open")
            self.add_class("besser-card-decided" if folded else "besser-card-open")
        value = self.to_html(live=True)
        if self._html.value != value:
            self._html.value = value

    def to_text(self) -> str:
        return card_text(self.card)

    def to_html(self, live: bool = False) -> str:
        """The card as HTML; ``live``: as the widget shows it (with what shows once detached)."""
        if self.folded:
            return row_html(self.card, None, self._note, body=self._body(False))
        return card_html(self.card, self._note, body=self._body(not self._later()), live=live)
