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
row says "N/N requests passed" and the edits "applied"/"created". In JupyterLab it then switches
to JupyterLab Dark and computes WCAG contrast in the page (body, meta, row, badge >= 4.5:1).
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
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import nbformat
import pytest
from browser_dom import SEEN_JS, card_latencies, contrast, dark_theme, layout, raw_json, save_latencies
from kernel_flavours import MAJOR, flavour_env, version_check

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
APPROVE = re.compile(r"^\s*Approve\s*$")  # the card's own button, not "Approve this and the rest ..."
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False}}


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    """``jupyter lab`` or ``jupyter notebook`` (7) on a copy of a lesson, with the extension; (url, token, root)."""
    root = tmp_path / "lab"
    root.mkdir()
    copy_lesson(root, flavour, lesson)
    kernel_spec(tmp_path / "jupyter-path", flavour)
    config_dir = tmp_path / "jupyter-config"
    for name, settings in LAB_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    token, port = secrets.token_hex(16), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BESSER_AGENT_", "BESSER_NOTEBOOK_", "JUPYTER"))}
    env.update({"JUPYTER_CONFIG_DIR": str(config_dir), "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
                "JUPYTER_PATH": str(tmp_path / "jupyter-path"),  # searched before the environment's specs
                "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
                "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces")})
    argv = [str(Path(sys.executable).with_name("jupyter")), frontend, "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--ServerApp.port_retries=0"]
    if os.getuid() == 0:
        argv.append("--allow-root")
    with open(tmp_path / "jupyterlab.log", "wb") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(argv, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/status", headers={"Authorization": f"token {token}"}, timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"jupyter {frontend} did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.2)
        extensions = httpx.get(f"{url}/besser-agent/config", headers={"Authorization": f"token {token}"}, timeout=10)
        assert extensions.status_code == 200, "the besser-agent server extension is not loaded"
        yield url, token, root
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


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
    page.goto(f"{url}/{NOTEBOOK_URL[frontend]}{NOTEBOOK}?token={token}")
    try:
        run_the_lesson(page, url, token, root, shots, MAJOR[flavour])
        if frontend == "lab":
            dark_contrast(page, shots)
    finally:
        shoot(page, shots, "last-state")  # whatever the page showed at the end (a failure's evidence)


def kernel_ready(url: str, token: str, timeout: float = 120) -> None:
    """Until the page's kernel reports idle (asked of the server: the same for every front end)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = httpx.get(f"{url}/api/sessions", headers={"Authorization": f"token {token}"}, timeout=5).json()
        if sessions and all(s["kernel"]["execution_state"] == "idle" for s in sessions):
            return
        time.sleep(0.2)
    raise AssertionError(f"no idle kernel within {timeout} s")


def run_the_lesson(page, url: str, token: str, root: Path, shots: Path, major: str) -> None:
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
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    shoot(page, shots, "1-approval-card", view, element=True)  # docs/run-view.png (make screenshot)
    approve.first.click()

    done = page.get_by_text("done: completed").first
    done.wait_for(timeout=300_000)
    header = page.locator(".widget-html-content", has_text="hosted by the Jupyter server").first
    header.get_by_text("completed").first.wait_for()  # the run view's header, fed over SSE by the server
    timeline = page.locator(".widget-html-content", has_text="provider: replay").first
    assert "validate" in timeline.inner_text() and "sandbox:" in timeline.inner_text()
    header.evaluate("element => element.scrollIntoView({block: 'start'})")
    shoot(page, shots, "2-timeline-done")
    shoot(page, shots, "3-done-authorship", page.locator(".widget-html-content", has_text="authorship").first)

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

    report = page.get_by_text("5/5 requests passed").first
    report.wait_for(timeout=180_000)
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
    assert samples, "the test_api card was never seen open"


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
