"""A real browser: Debian's Chromium, driven by Playwright, against JupyterLab with the extension.

The test copies notebook 01 into a fresh folder, starts ``jupyter lab`` (or Notebook 7's
``jupyter notebook``) there (loopback, a random token, the extension enabled by the install)
and, as a person would: opens the notebook, runs all cells, waits for the approval card, clicks
**Approve**, and waits for the timeline to reach ``done`` and the request report to render.
Nothing in the notebook is scripted here: the cards are left to the click
(``BESSER_NOTEBOOK_APPROVER`` is unset), and the click lands while the cell awaiting the run is
still busy. On the DOM (``browser_dom``) it checks: the pending card is first (pinned in
``.besser-pending`` before ``.besser-decided``, the banner counts it), the calls decided before
it are one-line rows, no body or row holds raw JSON arguments, and after the run the test_api
row says "N/N requests passed" and the edits "applied"/"created", the run's output having become its
static HTML (the widget gone). It then saves the notebook (Ctrl+S), stops the server and opens the
saved file on a new one (``lab_server.LabServer.restart``: new port, new kernel, no old widget
model): the file holds no widget output, and the page shows the finished run and the request
report (a row opens on its bodies), no "model not found", no reattach line. In JupyterLab it then switches
to JupyterLab Dark and computes WCAG contrast in the page (body, meta, row, badge, narration,
provider line >= 4.5:1). At the pending card (1400 px, JupyterLab's file browser open) no control
or label is cut, the expiry note is one line, and at 980 px the controls wrap instead; the narration
and the provider line are at the notebook's content font size and 4.5:1 in the light theme. After
the run, an edit's diff shows without sideways scrolling and falls back to unified when its own box
narrows; no row line shows a read_id, and the answer hint is gone with the run.
It runs in JupyterLab 4 on ipykernel 7 and on ipykernel 6 (``kernel_flavours``; a kernel spec
on the server's ``JUPYTER_PATH`` points the notebook's ``python3`` at it, and a first cell added
to the copy prints and checks the version), and in Notebook 7 on ipykernel 7. The screenshots,
the measured contrasts and each card's event -> DOM time go to
``tests/artifacts/browser/<front end>-<kernel>/``. When the browser cannot start on a machine,
the test is skipped with the reason printed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import time
from pathlib import Path

import httpx
import nbformat
import pytest
from browser_dom import (
    SEEN_JS,
    card_latencies,
    card_row,
    contrast,
    cut_controls,
    dark_theme,
    diff_box,
    layout,
    open_page,
    raw_json,
    readable,
    save_latencies,
    unaligned,
)
from kernel_flavours import MAJOR, flavour_env, version_check
from lab_server import LabServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "browser"
NOTEBOOK = "01-library-prototyping.ipynb"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
# JupyterLab settings for a quiet, predictable page: no news or update pop-ups.
LIVE_BUTTON = "button.jupyter-button:not([disabled])"
WIDGET = "application/vnd.jupyter.widget-view+json"
STATIC_VIEW = ".jp-OutputArea-output[data-mime-type='text/html'] .besser-run"  # a run view shown as static HTML
APPROVE = re.compile(r"^\s*Approve\s*$")  # the card's own button, not "Approve this and the rest ..."
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False}}


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser(tmp_path):
    """A Chromium context with a fresh profile, or a skip that says why there is none."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        reason = f"the playwright package is not installed ({exc}); pip install -e '.[test]'"
        print(f"skipping the browser test: {reason}")
        pytest.skip(reason)
    executable = chromium_path()
    if executable is None:
        reason = "no chromium on PATH (apt-get install chromium; .ci/run does it)"
        print(f"skipping the browser test: {reason}")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        try:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=executable, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1800},  # tall enough for a whole run view at its pending card
            )
        except Exception as exc:  # noqa: BLE001 - any start failure is a skip with its reason, never a pass
            reason = f"chromium ({executable}) could not start: {str(exc).splitlines()[0]}"
            print(f"skipping the browser test: {reason}")
            pytest.skip(reason)
        try:
            yield context
        finally:
            context.close()


def copy_lesson(root: Path, flavour: str, name: str = NOTEBOOK) -> None:
    """A lesson (notebook 01 unless named) as committed, with a first cell that proves which kernel runs it."""
    notebook = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    proof = "import ipykernel\nprint('kernel: ipykernel', ipykernel.__version__)\n" + version_check(flavour)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(proof))
    nbformat.write(notebook, root / name)


def kernel_spec(data_dir: Path, flavour: str) -> None:
    """For ipykernel 6: a ``python3`` spec in ``JUPYTER_PATH`` (searched first) that starts it."""
    if flavour == "ipykernel7":
        return
    spec = data_dir / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    env = {"PYTHONPATH": flavour_env(flavour)["PYTHONPATH"]}
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "env": env, "display_name": "Python 3", "language": "python"}))


# (front end, kernel): both front ends on the installed kernel, and JupyterLab on ipykernel 6
SETUPS = [pytest.param("lab", "ipykernel7", id="lab-ipykernel7"),
          pytest.param("lab", "ipykernel6", id="lab-ipykernel6"),
          pytest.param("notebook", "ipykernel7", id="notebook7-ipykernel7")]
NOTEBOOK_URL = {"lab": "lab/tree/", "notebook": "notebooks/"}  # where each front end opens a notebook


@pytest.fixture
def lesson() -> str:
    """The notebook the server is started on (a test parametrizes ``lesson`` for another)."""
    return NOTEBOOK


@pytest.fixture
def server(tmp_path, frontend, flavour, lesson):
    """A ``LabServer`` on a copy of a lesson (unpacks as (url, token, root))."""
    root = tmp_path / "lab"
    root.mkdir()
    copy_lesson(root, flavour, lesson)
    kernel_spec(tmp_path / "jupyter-path", flavour)
    with serving(tmp_path, frontend, root) as lab:
        yield lab


@contextlib.contextmanager
def serving(tmp_path: Path, frontend: str, root: Path):
    """A started ``LabServer`` on ``root`` with quiet JupyterLab settings, stopped on leaving."""
    for name, settings in LAB_SETTINGS.items():
        path = tmp_path / "jupyter-config" / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    lab = LabServer(tmp_path, frontend, root)
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


def shoot(page, folder: Path, name: str, locator=None, element: bool = False) -> Path:
    """A screenshot of the page (``locator`` scrolled into view first), or of the element alone."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    if locator is not None:
        locator.scroll_into_view_if_needed()
    if element and locator is not None:
        locator.screenshot(path=str(path))
    else:
        page.screenshot(path=str(path))
    return path


def one_line_rows(state: dict) -> None:
    """Every closed decided row is one line tall (under two lines of its own text)."""
    assert state["row_heights"], "no decided rows"
    assert max(state["row_heights"]) < 2 * state["line_height"], state


def row(view, tool: str):
    """The decided row of ``tool`` (its ``span.besser-row-tool`` says exactly that)."""
    name = re.compile(rf"^\s*{re.escape(tool)}\s*$")
    return view.locator(".besser-decided details.besser-row").filter(
        has=view.page.locator("span.besser-row-tool", has_text=name))


@pytest.mark.parametrize(("frontend", "flavour"), SETUPS)
def test_notebook_01_in_a_real_browser(browser, server, frontend, flavour):
    url, token, root = server
    shots = ARTIFACTS / f"{frontend}-{flavour}"
    page = browser.new_page()
    page.set_default_timeout(60_000)
    page.add_init_script(SEEN_JS)  # when each open card first appears (the bench's event -> DOM figure)
    open_page(page, f"{url}/{NOTEBOOK_URL[frontend]}{NOTEBOOK}?token={token}")
    try:
        run_the_lesson(page, url, token, root, shots, MAJOR[flavour], frontend)
        page = reopened(browser, page, server, frontend, shots)
        if frontend == "lab":
            dark_contrast(page, shots)
    finally:
        last = next((p for p in reversed(browser.pages) if not p.is_closed()), None)
        if last is not None:
            shoot(last, shots, "last-state")  # whatever the page showed at the end (a failure's evidence)


def kernel_ready(url: str, token: str, timeout: float = 120) -> None:
    """Until the page's kernel reports idle (asked of the server: the same for every front end)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = httpx.get(f"{url}/api/sessions", headers={"Authorization": f"token {token}"}, timeout=5).json()
        if sessions and all(s["kernel"]["execution_state"] == "idle" for s in sessions):
            return
        time.sleep(0.2)
    raise AssertionError(f"no idle kernel within {timeout} s")


WIDE, NARROW = {"width": 1400, "height": 1800}, {"width": 980, "height": 1800}  # the projector; a half screen


def fits_at_1400(page, view, card, shots: Path, frontend: str) -> None:
    """At 1400 px with JupyterLab's file browser open: no control cut, the expiry note on one line;
    narrower still, the controls wrap rather than cut. The narration and the provider line are at
    the notebook's content size and read at 4.5:1 or more (light theme; the dark one: ``dark_contrast``)."""
    if frontend == "lab":
        assert page.locator(".jp-FileBrowser").first.is_visible()  # the file browser is open beside the notebook
    assert cut_controls(view) == [], cut_controls(view)
    row = card_row(card)
    assert row["cut"] == [] and row["note_lines"] is not None and row["note_lines"] < 1.6, row  # whole, and one line
    sizes = readable(view)
    assert all(not m.get("missing") and m["px"] >= m["content"] - 0.1 for m in sizes), sizes
    measured = contrast(view)
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "light-contrast.json").write_text(json.dumps({"contrast": measured, "font": sizes}, indent=1))
    assert all(not m.get("missing") for m in measured), measured
    assert [m for m in measured if m["ratio"] < 4.5] == [], measured
    page.set_viewport_size(NARROW)
    try:
        card.scroll_into_view_if_needed()
        assert cut_controls(view) == [] and card_row(card)["cut"] == [], card_row(card)  # wrapped onto a second line
        shoot(page, shots, "1b-approval-card-narrow", card, element=True)
    finally:
        page.set_viewport_size(WIDE)


def diff_falls_back(page, view, shots: Path) -> None:
    """An edit's diff: side by side once its own box fits both sides of its longest line, unified
    below that; either way never scrolled sideways (this diff's lines fit the box unified at 1400 px).
    The box is widened in place (the viewport stays 1400 px): what decides is the box's own width."""
    edit = row(view, "modify_file").first
    edit.locator("summary.besser-row-line").click()
    diff = edit.locator(".besser-diff").first
    diff.wait_for()
    at_1400 = diff_box(diff)
    diff.evaluate("box => { box.style.width = '1800px'; box.style.maxWidth = 'none'; }")  # its own box wider, same viewport
    try:
        wide = diff_box(diff)
        shoot(page, shots, "2b-diff-wide", diff, element=True)
    finally:
        diff.evaluate("box => { box.style.width = ''; box.style.maxWidth = ''; }")
    diff.scroll_into_view_if_needed()
    shoot(page, shots, "2c-diff-at-1400", diff, element=True)
    (shots / "diff-widths.json").write_text(json.dumps({"at_1400": at_1400, "wide": wide}, indent=1))
    assert wide["shown"] == ["besser-diff-split"] and not wide["scrolls"], wide
    assert at_1400["shown"] == ["besser-diff-unified"] and not at_1400["scrolls"], at_1400  # fell back, by its own width
    for box in (wide, at_1400):  # code reads from the left, added lines tinted (not JupyterLab's own table look)
        assert box["code_align"] in (["left"], ["start"]) and box["added"], box
        assert all(colour not in ("rgba(0, 0, 0, 0)", "transparent") for colour in box["added"]), box
    edit.locator("summary.besser-row-line").click()  # folded again


def run_the_lesson(page, url: str, token: str, root: Path, shots: Path, major: str, frontend: str) -> None:
    page.locator(".jp-RenderedMarkdown h1", has_text="Prototyping a Library backend").first.wait_for()
    kernel_ready(url, token)

    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

    page.get_by_text(f"kernel: ipykernel {major}.").first.wait_for(timeout=120_000)
    approve = page.locator(f".besser-pending .besser-card-open {LIVE_BUTTON}", has_text=APPROVE)
    approve.first.wait_for(timeout=180_000)
    view = page.locator(".besser-run").first  # the notebook's one run view
    card = view.locator(".besser-pending .besser-card-open").first
    card.locator(".besser-body-test table.besser-requests").wait_for()  # test_api: its requests as a table
    assert "test_api" in card.inner_text()
    note = card.locator(".besser-card-note", has_text="expires at")
    note.wait_for(timeout=30_000)  # the note's text is its own widget update: it may follow the buttons by a message
    assert note.count() == 1  # the operator's timeout, on the card
    pinned = layout(view)
    assert pinned["pending_before_decided"] and pinned["first_card_pending"], pinned  # the pending card is first
    assert pinned["open_in_pending"] == 1 and pinned["open_elsewhere"] == 0, pinned
    assert re.search(r"\b1 approval waits for you\b.*test_api", pinned["banner"] or ""), pinned["banner"]
    one_line_rows(pinned)  # the calls decided before it (edits auto-approved by --approve edits): one line each
    assert any("decided by the run's --approve setting" in text for text in pinned["rows"]), pinned["rows"]
    assert raw_json(view) == []
    assert re.search(r"answer below with Approve or Deny; this cell waits until the run ends", pinned["banner"]), pinned["banner"]
    assert "call id" not in card.inner_text() and "call c" not in card.inner_text()  # the call's id: folded away
    assert re.match(r"call id: c\d+ \(test\)$", card.locator(".besser-ids").first.text_content()), card.evaluate("c => c.textContent")
    fits_at_1400(page, view, card, shots, frontend)
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    shoot(page, shots, "1-approval-card", view, element=True)  # docs/run-view.png (make screenshot)
    approve.first.click()

    view = page.locator(STATIC_VIEW).first  # the run ended: its output is now the finished run as static HTML
    view.wait_for(timeout=300_000)
    assert page.locator(".besser-run").count() == 1  # the widget it replaced is gone from the page
    view.locator(".besser-badge", has_text="completed").first.wait_for()
    shown = view.inner_text()
    assert "hosted by the Jupyter server" in shown and "provider: replay" in shown  # the run view, fed over SSE by the server
    assert "validate" in shown and "sandbox:" in shown
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    shoot(page, shots, "2-timeline-done")
    shoot(page, shots, "3-done-authorship", view.get_by_text("authorship", exact=True))

    assert page.get_by_text("answer below").count() == 0 and page.get_by_text("Answer each card").count() == 0  # the run ended
    assert "read_id" not in " ".join(view.locator("summary.besser-row-line").all_inner_texts())  # ids: in the folds only
    diff_falls_back(page, view, shots)

    answered = row(view, "test_api")
    answered.locator(".besser-row-outcome", has_text=re.compile(r"\d+/\d+ requests? passed")).wait_for(timeout=60_000)
    assert answered.count() == 1 and "decided by you" in answered.locator(".besser-row-by").inner_text()
    assert view.locator(".besser-pending .besser-card").count() == 0 and view.locator("div.besser-banner").count() == 0
    assert view.locator(f".besser-card {LIVE_BUTTON}").count() == 0  # decided: no live button anywhere
    edits = [row(view, tool).locator(".besser-row-outcome").all_inner_texts() for tool in ("write_file", "modify_file")]
    assert any(re.match(r"(applied|created)\b", text) for texts in edits for text in texts), edits
    finished = layout(view)
    one_line_rows(finished)
    assert raw_json(view) == []
    answered.locator("summary.besser-row-line").click()  # the row expands to the full card with its result
    result = answered.locator("div.besser-result.besser-result-ok b").first
    assert re.search(r"\d+/\d+ requests? passed", result.inner_text()), result.inner_text()
    assert answered.locator(".besser-body-test table.besser-requests").is_visible()
    shoot(page, shots, "4-test-api-row-expanded", answered)

    report = page.locator(".besser-request-report").first
    report.wait_for(timeout=180_000)
    assert "5/5 requests passed" in report.inner_text()
    shoot(page, shots, "5-request-report", report)

    assert page.locator("text=Traceback").count() == 0
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    runs = list((root / "besser_runs").iterdir())
    assert len(runs) == 1, runs  # hosted by the server extension, under the server's root
    last = json.loads((runs[0] / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "done" and last["status"] == "completed"
    resolved = [json.loads(line) for line in (runs[0] / "events.jsonl").read_text().splitlines() if '"approval_resolved"' in line]
    assert [(e["name"], e["approved"], e["by"]) for e in resolved if e["name"] == "test_api"] == [("test_api", True, "card")]
    samples = card_latencies(page, runs)
    save_latencies(shots, samples)
    assert samples, ("the test_api card was never seen open", page.evaluate("window.__besserSeen || {}"))  # what was seen


def save(page, path: Path, saved) -> None:
    """Save the notebook as a person does (Ctrl+S on it), until the file on disk is ``saved``."""
    before = path.stat().st_mtime_ns
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 60
    while not (path.stat().st_mtime_ns != before and saved_yet(path, saved)):
        assert time.monotonic() < deadline, "the notebook was not saved with its finished run"
        time.sleep(0.2)


def saved_yet(path: Path, saved) -> bool:
    """Whether the file on disk is ``saved``; a file the server is still writing (empty or cut) is not yet."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except (nbformat.reader.NotJSONError, json.JSONDecodeError):
        return False
    return bool(saved(notebook))


def outputs_of(notebook, start: str) -> list[dict]:
    return next(c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(start)).outputs


def reopened(browser, page, server, frontend: str, shots: Path):
    """Save, stop the server, and open the saved notebook on a new one (a new kernel, none of the
    old widget models): the finished run and its request report show as they ended."""
    path = server.root / NOTEBOOK

    def static(notebook) -> bool:
        view = outputs_of(notebook, "view = %besser generate")
        return bool(view) and WIDGET not in view[0]["data"] and "done: completed" in view[0]["data"].get("text/plain", "")

    save(page, path, static)
    saved = nbformat.read(path, as_version=4)
    widgets = [c.source.splitlines()[0] for c in saved.cells if c.cell_type == "code" for o in c.outputs if WIDGET in o.get("data", {})]
    assert widgets == [], widgets  # nothing in the saved notebook needs a widget model to show
    assert "5/5 requests passed" in outputs_of(saved, "%%test_api")[0]["data"]["text/html"]
    page.close()
    server.restart()
    url, token, _ = server
    page = browser.new_page()
    page.set_default_timeout(60_000)
    open_page(page, f"{url}/{NOTEBOOK_URL[frontend]}{NOTEBOOK}?token={token}")
    view = page.locator(STATIC_VIEW).first
    view.wait_for()
    kernel_ready(url, token)  # a fresh kernel: the old widget models are gone with the old one
    view.scroll_into_view_if_needed()  # JupyterLab renders a cell's content once it is near the screen
    view.locator(".besser-badge", has_text="completed").first.wait_for()
    assert "written by the LLM" in view.inner_text() and "test_api" in view.inner_text()
    assert page.get_by_text("model not found").count() == 0 and page.get_by_text("Error displaying widget").count() == 0
    assert unaligned(view) == [], unaligned(view)  # the phase strip and tables read from the left, not JupyterLab's right
    assert [line for line in page.locator(".besser-reattach").all() if line.is_visible()] == []  # a finished run needs no way back
    report = page.locator(".besser-request-report").first
    report.scroll_into_view_if_needed()
    report.get_by_text("5/5 requests passed").wait_for()
    login = report.locator("details.besser-req").nth(2)  # POST /auth/login: opens on its bodies
    login.locator("summary").click()
    assert "access_token" in login.locator(".besser-req-detail").inner_text()
    cells = [cell.inner_text() for cell in login.locator("summary > span").all()]
    assert cells[1:5] == ["POST", "/auth/login", "200", "200"] and cells[-1] == "passed", cells  # its own columns
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    shoot(page, shots, "7-reopened-on-a-new-server")
    shoot(page, shots, "8-report-reopened", report)
    return page


def dark_contrast(page, shots: Path) -> None:
    """JupyterLab Dark: the view's text, meta text, a row and a badge meet WCAG AA (4.5:1) on what is under them."""
    dark_theme(page)
    view = page.locator(".besser-run").first
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    measured = contrast(view)
    (shots / "dark-contrast.json").write_text(json.dumps(measured, indent=1))
    shoot(page, shots, "6-dark-theme", view, element=True)
    assert all(not m.get("missing") for m in measured), measured
    low = [m for m in measured if m["ratio"] < 4.5]
    assert not low, low
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"  # the theme is dark
