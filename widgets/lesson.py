"""Helpers for the teaching notebooks: who answers the approval cards, and what each call saw.

In a live session a person clicks Approve or Deny on each card. A notebook executed
unattended (CI, ``nbclient``) cannot wait for a person, so there a *scripted host approver*
clicks the same buttons in an authored order and says so in the output. Which of the two
answers is chosen once per notebook, from ``BESSER_NOTEBOOK_APPROVER`` (``person`` unless set
to ``scripted``); nothing a run or a model says changes it.

``answer_cards`` awaits the run either way (for a person, the view's banner says to answer the
cards and that the cell waits: it is part of the view, so it goes when the run ends, also in a
saved notebook reopened with no kernel); a person's click reaches the card while the cell
waits (ipykernel 7.4+ dispatches widget messages next to a running cell; on ipykernel 6 the
view's waiting loop passes them on, see ``widgets.kernel_comms``). A view not yet displayed is
shown in the cell that awaits it, so that cell's output becomes the finished run's static HTML
when it ends (``widgets.snapshot``: a reopened notebook shows the run without a kernel).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

APPROVER_VARIABLE = "BESSER_NOTEBOOK_APPROVER"
MODES = ("person", "scripted")


def approver_mode(environ: Mapping[str, str] | None = None) -> str:
    """``person`` (a human clicks) or ``scripted`` (a labelled host script clicks)."""
    value = (os.environ if environ is None else environ).get(APPROVER_VARIABLE, "").strip().lower()
    return value if value in MODES else "person"


async def answer_cards(
    view: Any,
    mode: str,
    decisions: Iterable[bool] | None = None,
    *,
    timeout: float | None = None,
    say: Any = print,
) -> Any:
    """Let the run's cards be answered, then return its final ``RunViewState``.

    ``person``: a one-line hint, then wait (no timeout unless given) while you click.
    ``scripted``: click ``decisions`` in order as the cards appear (``None``: approve every
    card); a card beyond the list is denied, the safe answer when nobody decided.
    """
    if mode not in MODES:
        raise ValueError(f"approver mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not getattr(view, "display_ids", None) and _in_a_kernel():
        from IPython.display import display

        display(view)  # shown where it is awaited (see the module's note)
    if mode == "person":
        awaited = getattr(view, "set_awaited", None)
        if awaited is not None:
            awaited(True)  # the hint is the view's banner: it goes with the last open card, even with no kernel
        try:
            return await view.wait(timeout)
        finally:
            if awaited is not None:
                awaited(False)  # the wait stopped (or the run ended): no cell waits any more
    script = None if decisions is None else list(decisions)
    limit = 600.0 if timeout is None else timeout
    while not view.state.finished:
        try:
            card = await view.wait_for_approval(limit)
        except RuntimeError:  # the run ended without asking again
            break
        approved = True if script is None else (script.pop(0) if script else False)
        say(f"scripted host approver: {'approve' if approved else 'deny'} {card.card.name} ({card.card.category}, {card.call_id})")
        (card.approve_button if approved else card.deny_button).click()
    return await view.wait(limit)


def _in_a_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def observations(view: Any) -> str:
    """Each call of the run with its outcome and observation, in the order they were made."""
    lines = []
    for call in view.state.calls.values():
        outcome = "ok" if call.ok else (call.error_code or "running")
        card = view.state.card_for(call.call_id)
        asked = f" · card: {card.outcome}" if card is not None else " · no card"
        lines.append(f"{call.call_id} {call.name} -> {outcome}{asked}")
        if call.result:
            lines.extend("    " + line for line in call.result.splitlines()[:6])
    done = view.state.done or {}
    lines.append(f"run: {done.get('status', view.state.status)}")
    return "\n".join(lines)
