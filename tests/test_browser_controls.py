# ruff: noqa: F811 - the browser and server fixtures come from test_browser and are requested by name
"""A real browser on notebook 02: the run view's controls as a person uses them.

JupyterLab 4 on ipykernel 7 (the fixtures of ``test_browser``), notebook 02 copied as committed
and run with Run All Cells; nothing in it is scripted (``BESSER_NOTEBOOK_APPROVER`` is unset), so
every card waits for a click made here. On the DOM it checks: the pending card is first in its
run view; a decided card shows its result ("executed") with no live button; the Cancel button
ends a run (its view says cancelled, no button stays live); and after a kernel restart the view
that still had an open card is marked detached (its buttons take no clicks). Each state is
saved as a screenshot under ``tests/artifacts/browser/lab-ipykernel7-02/``.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser import ARTIFACTS, NOTEBOOK_URL, browser, kernel_ready, server, shoot  # noqa: F401

pytestmark = pytest.mark.slow

LESSON = "02-controlling-side-effects.ipynb"
LIVE_BUTTON = "button.jupyter-button:not([disabled])"
APPROVE = re.compile(r"^\s*Approve\s*$")  # the card's own button, not "Approve this and the rest ..."


def card_texts(view) -> list[str]:
    return [card.inner_text() for card in view.locator(".besser-cards > .besser-card").all()]


def wait_for_open_card(view, timeout: float = 180_000):
    view.locator(f".besser-card {LIVE_BUTTON}", has_text=APPROVE).first.wait_for(timeout=timeout)


@pytest.mark.parametrize(("frontend", "flavour", "lesson"), [("lab", "ipykernel7", LESSON)])
def test_notebook_02_controls_in_a_real_browser(browser, server, frontend, flavour, lesson):
    url, token, root = server
    shots = ARTIFACTS / f"{frontend}-{flavour}-02"
    page = browser.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{url}/{NOTEBOOK_URL[frontend]}{LESSON}?token={token}")
    try:
        drive_the_lesson(page, url, token, root, shots)
    finally:
        shoot(page, shots, "last-state")


def drive_the_lesson(page, url, token, root, shots) -> None:
    page.locator(".jp-RenderedMarkdown h1", has_text="Controlling side effects").first.wait_for()
    kernel_ready(url, token)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    views = page.locator(".besser-run")

    # Experiment 1: two cards, approved one after the other
    default = views.nth(0)
    wait_for_open_card(default)
    shoot(page, shots, "1-edit-card-pending", default)
    default.locator(f".besser-card {LIVE_BUTTON}", has_text=APPROVE).first.click()
    page.wait_for_function(
        "view => view.querySelectorAll('.besser-cards > .besser-card').length === 2", arg=default.element_handle())
    wait_for_open_card(default)
    cards = default.locator(".besser-cards > .besser-card")
    assert cards.nth(0).locator(LIVE_BUTTON, has_text=APPROVE).count() == 1  # the pending card is first
    assert cards.nth(1).locator(LIVE_BUTTON).count() == 0 and "edit" in cards.nth(1).inner_text()
    shoot(page, shots, "2-pending-card-first", default)
    cards.nth(0).locator(LIVE_BUTTON, has_text=APPROVE).click()
    default.get_by_text("done").first.wait_for(timeout=120_000)
    page.wait_for_function(
        "view => [...view.querySelectorAll('.besser-cards > .besser-card')].every(c => c.innerText.includes('executed'))",
        arg=default.element_handle(), timeout=60_000)
    texts = card_texts(default)
    assert len(texts) == 2 and all("executed" in t for t in texts)  # each card shows its result
    assert default.locator(f".besser-card {LIVE_BUTTON}").count() == 0
    shoot(page, shots, "3-cards-with-results", default)

    # Experiment 3: instead of answering, cancel the run
    denied = views.nth(2)
    wait_for_open_card(denied)
    denied.locator("button.besser-cancel:not([disabled])").click()
    denied.locator(".widget-html-content", has_text="cancelled").first.wait_for(timeout=60_000)
    page.wait_for_function("view => !view.querySelector('button.jupyter-button:not([disabled]):not(.besser-approve-rest)')"
                           " || [...view.querySelectorAll('button:not([disabled])')].every(b => b.offsetParent === null)",
                           arg=denied.element_handle(), timeout=60_000)
    assert re.search(r"\bcancelled\b", denied.inner_text())
    shoot(page, shots, "4-run-cancelled", denied)
    runs = sorted((root / "besser_runs").iterdir())
    last = [json.loads(line) for line in (runs[2] / "events.jsonl").read_text().splitlines()][-1]
    assert last["type"] == "done" and last["status"] == "cancelled"

    # Experiment 4: its card is open; the kernel restarts under it
    stale = views.nth(3)
    wait_for_open_card(stale)
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…?$")).first.click()
    page.locator(".jp-Dialog-button", has_text="Restart").first.click()
    detached = page.locator(".besser-run.jupyter-widgets-disconnected")
    detached.first.wait_for(timeout=60_000)
    old = views.nth(3)
    assert "jupyter-widgets-disconnected" in (old.get_attribute("class") or "")
    notice = old.locator(".besser-detached")
    assert notice.is_visible() and "detached" in notice.inner_text() and "%besser attach" in notice.inner_text()
    approve = old.locator(".besser-card button", has_text=APPROVE).first
    assert approve.evaluate("b => getComputedStyle(b).pointerEvents") == "none"  # a click does nothing, visibly
    shoot(page, shots, "5-detached-after-restart", old)
