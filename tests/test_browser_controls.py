# ruff: noqa: F811 - the browser and server fixtures come from test_browser and are requested by name
"""A real browser on notebook 02: the run view's controls as a person uses them.

JupyterLab 4 on ipykernel 7 (the fixtures of ``test_browser``), notebook 02 copied as committed
and run with Run All Cells; nothing in it is scripted (``BESSER_NOTEBOOK_APPROVER`` is unset), so
every card waits for a click made here. On the DOM it checks: the pending card is pinned first
in its run view (``.besser-pending`` before ``.besser-decided``, the banner counts it) while the
decided call is a one-line row; no body or row holds raw JSON arguments; each decided row shows
its result ("edited calculator.py", "exit 0"); the Cancel button ends a run (its view, static once
the run ended, says cancelled and has no button; its open card's row says you cancelled the run,
from the ``done`` event's ``cancelled_by``); after a kernel restart the view that still had
an open card is detached (``browser_dom.detached``: its pill, card and banner say detached and name
``%besser attach``, no expiry, no broken-link icon or image, no label cut, its buttons take no
click); saved and reloaded, that live run shows its reattach line and no "model not found", and the
finished runs show as they ended. Each state is saved as a screenshot under
``tests/artifacts/browser/lab-ipykernel7-02/``, with the cards' event -> DOM times.
"""

from __future__ import annotations

import json
import re

import pytest
from browser_dom import SEEN_JS, card_latencies, detached, layout, open_page, raw_json, save_latencies
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import (  # noqa: F401
    APPROVE,
    ARTIFACTS,
    LIVE_BUTTON,
    NOTEBOOK_URL,
    STATIC_VIEW,
    browser,
    kernel_ready,
    one_line_rows,
    row,
    save,
    server,
    shoot,
)

pytestmark = pytest.mark.slow

LESSON = "02-controlling-side-effects.ipynb"
OPEN_APPROVE = f".besser-pending .besser-card-open {LIVE_BUTTON}"


def wait_for_open_card(view, timeout: float = 180_000):
    view.locator(OPEN_APPROVE, has_text=APPROVE).first.wait_for(timeout=timeout)


@pytest.mark.parametrize(("frontend", "flavour", "lesson"), [("lab", "ipykernel7", LESSON)])
def test_notebook_02_controls_in_a_real_browser(browser, server, frontend, flavour, lesson):
    url, token, root = server
    shots = ARTIFACTS / f"{frontend}-{flavour}-02"
    page = browser.new_page()
    page.set_default_timeout(60_000)
    page.add_init_script(SEEN_JS)
    open_page(page, f"{url}/{NOTEBOOK_URL[frontend]}{LESSON}?token={token}")
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
    default.locator(OPEN_APPROVE, has_text=APPROVE).first.click()
    row(default, "edit").wait_for(timeout=120_000)
    wait_for_open_card(default)  # the second card (test) is now the pending one
    pinned = layout(default)
    assert pinned["pending_before_decided"] and pinned["first_card_pending"], pinned  # the pending card is first
    assert pinned["open_in_pending"] == 1 and pinned["open_elsewhere"] == 0, pinned
    assert re.search(r"\b1 approval waits for you\b", pinned["banner"] or ""), pinned["banner"]
    one_line_rows(pinned)  # the decided edit (and the read before it): one line each
    assert "test" in default.locator(".besser-pending .besser-card-open").inner_text()
    assert raw_json(default) == []
    shoot(page, shots, "2-pending-card-first", default)
    default.locator(OPEN_APPROVE, has_text=APPROVE).first.click()
    default.locator(".besser-badge", has_text="completed").first.wait_for(timeout=120_000)
    edit, test = row(default, "edit"), row(default, "test")
    edit.locator(".besser-row-outcome", has_text=re.compile(r"^edited calculator\.py")).wait_for(timeout=60_000)  # the scenario's own words
    test.locator(".besser-row-outcome", has_text=re.compile(r"^exit 0\b")).wait_for(timeout=60_000)
    assert "decided by you" in edit.inner_text() and "decided by you" in test.inner_text()
    assert default.locator(".besser-pending .besser-card").count() == 0 and default.locator(f".besser-card {LIVE_BUTTON}").count() == 0
    one_line_rows(layout(default))
    assert raw_json(default) == []
    test.locator("summary.besser-row-line").click()  # the row expands to its card: the command and its result
    assert "exit 0" in test.locator("div.besser-result.besser-result-ok b").first.inner_text()
    shoot(page, shots, "3-rows-with-results", default)

    # Experiment 3: instead of answering, cancel the run
    denied = views.nth(2)
    wait_for_open_card(denied)
    denied.locator("button.besser-cancel:not([disabled])").click()
    page.locator(STATIC_VIEW).nth(2).wait_for(timeout=60_000)  # it ended: the cell awaiting it shows it static
    denied = views.nth(2)
    denied.locator(".besser-badge", has_text="cancelled").first.wait_for()
    assert denied.locator("button").count() == 0  # nothing left to click
    assert re.search(r"\bcancelled\b", denied.inner_text())
    assert denied.locator(".besser-pending .besser-card").count() == 0  # the card folded into its row
    cancelled = row(denied, "edit").locator("summary.besser-row-line").inner_text()
    assert "cancelled" in cancelled and "you cancelled the run" in cancelled and "nobody" not in cancelled, cancelled
    shoot(page, shots, "4-run-cancelled", denied)
    run_id = denied.locator("b").first.inner_text().removeprefix("run ").strip()  # the header's "run ID"
    last = [json.loads(line) for line in (root / "besser_runs" / run_id / "events.jsonl").read_text().splitlines()][-1]
    assert last["type"] == "done" and last["status"] == "cancelled" and last["cancelled_by"] == "person"  # who: on the event

    # Experiment 4: its card is open; the kernel restarts under it
    stale = views.nth(3)
    wait_for_open_card(stale)
    stale_id = stale.locator("b").first.inner_text().removeprefix("run ").strip()
    samples = card_latencies(page, sorted((root / "besser_runs").iterdir()))
    save_latencies(shots, samples)
    assert len(samples) >= 3, samples  # every card seen open: two in experiment 1, one each in 3 and 4
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…?$")).first.click()
    page.locator(".jp-Dialog-button", has_text="Restart").first.click()
    page.locator(".besser-run.jupyter-widgets-disconnected").first.wait_for(timeout=60_000)
    old = views.nth(3)
    assert "jupyter-widgets-disconnected" in (old.get_attribute("class") or "")
    seen = detached(old)
    (shots / "detached.json").write_text(json.dumps(seen, indent=1))
    shoot(page, shots, "5-detached-after-restart", old)
    assert seen["pills"][0] == "detached" and "waiting" not in " ".join(seen["pills"]), seen  # the pill, and the card's
    assert len(seen["banners"]) == 1 and seen["banners"][0].startswith("detached"), seen  # not "answer below"
    assert f"%besser attach {stale_id}" in seen["banners"][0], seen  # the one command that brings it back
    assert seen["notes"] == [], seen  # no expiry on a card nobody here can answer
    assert seen["broken_icons"] == 0 and seen["broken_images"] == 0, seen
    assert seen["cut"] == [], seen  # every label whole
    approve = old.locator(".besser-pending .besser-card-open button", has_text=APPROVE).first
    assert approve.evaluate("b => getComputedStyle(b).pointerEvents") == "none"  # a click does nothing, visibly
    with pytest.raises(PlaywrightTimeout):  # and takes no click: the pointer never reaches it
        approve.click(timeout=3_000)

    # Saved and reloaded: the live run's widget model is gone; the finished runs show as they ended
    save(page, root / LESSON, lambda notebook: len([o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
                                                      if '<div class="besser-run">' in o.get("data", {}).get("text/html", "")]) == 4)
    page.reload()
    kernel_ready(url, token)
    line = page.locator(".besser-reattach").first
    line.wait_for()
    visible = [el.inner_text() for el in page.locator(".besser-reattach").all() if el.is_visible()]
    assert len(visible) == 1 and f"%besser attach {stale_id}" in visible[0], visible  # the live run's way back, only there
    assert [el for el in page.get_by_text("model not found").all() if el.is_visible()] == []
    assert page.get_by_text("Answer each card").count() == 0  # the hint is the live view's banner, never a line left behind
    assert page.locator(STATIC_VIEW).count() == 3  # experiments 1-3 ended in the cells that awaited them
    line.scroll_into_view_if_needed()
    shoot(page, shots, "6-reloaded-live-run")
