# ruff: noqa: F811 - the browser fixture comes from test_browser and is requested by name
"""A real browser: a run view's links open in the page that shows them (issue 31, items 11 and 12).

A notebook (written here, one cell) puts a finished run's folder under the server's root, with
one file the LLM wrote, and shows its run view twice, as a person meets it: the live widget
(its HTML set as is by ipywidgets) and the finished run's static HTML (rendered by the front
end's rendermime). In JupyterLab 4, clicking the file's authorship link in each opens the file
in the same JupyterLab: no new browser tab, a document tab named after the file appears in the
main area with the file's text. In Notebook 7 (one document per tab by design) the click opens
the file in Notebook 7's own editor (``/edit/...``) from the live view and as the file itself
(``/files/...``, Notebook 7's rendermime rewrites the static output's link) from the static one,
never a JupyterLab. The "hosted by" line's
address (``<base_url>/besser-agent/``) answers the browser, logged in by its cookie, with the
status page. Screenshots go to ``tests/artifacts/browser/<front end>-links/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from browser_dom import open_page
from test_browser import ARTIFACTS, NOTEBOOK_URL, STATIC_VIEW, browser, kernel_ready, serving, shoot  # noqa: F401

pytestmark = pytest.mark.slow

NOTEBOOK = "links.ipynb"
LESSON = "01-library-prototyping.ipynb"
RUN_ID = "20250101-000000-c0ffee"
FILE_TEXT = "print('hello from the run view link test')"
LIVE_VIEW = ".besser-run.jupyter-widgets"  # the widget itself (ipywidgets' own class on its element)
CELL = f'''import json, pathlib
from IPython.display import display
from kernel_ext.hosting.bus import EventLog
from widgets.runview import RunView
run = pathlib.Path("besser_runs/{RUN_ID}").resolve()
(run / "app" / "backend").mkdir(parents=True, exist_ok=True)
(run / "app" / "backend" / "main.py").write_text({FILE_TEXT!r} + "\\n")
events = [{{"seq": 1, "run_id": "{RUN_ID}", "ts": 1.0, "type": "run_started", "request": "r", "run_dir": str(run)}},
          {{"seq": 2, "run_id": "{RUN_ID}", "ts": 2.0, "type": "done", "status": "completed",
           "authorship": {{"llm_authored": ["backend/main.py"]}}}}]
(run / "events.jsonl").write_text("".join(json.dumps(e) + "\\n" for e in events))
view = RunView(run_id="{RUN_ID}").replay(EventLog.load("{RUN_ID}", run / "events.jsonl").events)
display(view._repr_mimebundle_(), raw=True)  # the live widget (a finished view displays as static HTML)
display(view.static_bundle(), raw=True)  # the finished run's static HTML
'''


@pytest.fixture
def lab(tmp_path, frontend):
    root = tmp_path / "lab"
    root.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(CELL))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / NOTEBOOK)
    with serving(tmp_path, frontend, root) as server:
        yield server


def run_the_cell(page, url: str, token: str) -> None:
    open_page(page, f"{url}/{NOTEBOOK_URL[page.frontend]}{NOTEBOOK}?token={token}")
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
    kernel_ready(url, token)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    page.locator(STATIC_VIEW).first.wait_for(timeout=120_000)
    page.locator(LIVE_VIEW).first.wait_for(timeout=20_000)


def editor_tab(page):
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="main.py")


def open_in_lab(browser, page, link, shots, name: str) -> None:
    """Click ``link``: the file opens as a tab of this JupyterLab, in this browser tab."""
    pages = len(browser.pages)
    link.click()
    editor_tab(page).first.wait_for(timeout=30_000)
    page.locator(".jp-FileEditor", has_text=FILE_TEXT).first.wait_for(timeout=30_000)
    assert len(browser.pages) == pages and "/lab" in page.url  # the same browser tab, still this JupyterLab
    shoot(page, shots, name)
    editor_tab(page).first.locator(".lm-TabBar-tabCloseIcon").click()
    editor_tab(page).first.wait_for(state="detached")


@pytest.mark.parametrize("frontend", ["lab", "notebook"])
def test_an_authorship_link_opens_the_file_in_the_same_front_end(browser, lab, frontend):
    url, token, _root = lab
    shots = ARTIFACTS / f"{frontend}-links"
    page = browser.new_page()
    tabs = len(browser.pages)  # a persistent context starts with a blank page of its own
    page.frontend = frontend
    page.set_default_timeout(60_000)
    try:
        run_the_cell(page, url, token)
        live = page.locator(LIVE_VIEW).first.locator("a", has_text="backend/main.py")
        static = page.locator(STATIC_VIEW).first.locator("a", has_text="backend/main.py")
        assert live.count() == 1 and static.count() == 1
        assert live.get_attribute("target") is None  # the view asks for no new tab (rendermime may add one: it intercepts)
        if frontend == "lab":
            open_in_lab(browser, page, live, shots, "1-opened-from-the-live-view")
            open_in_lab(browser, page, static, shots, "2-opened-from-the-static-view")
            assert len(browser.pages) == tabs
        else:
            # Notebook 7 opens every document in a tab of its own: the live view's link opens its editor; the
            # static output's link opens the editor too when rendermime's link handler takes the click, or the
            # file itself (``/files/...``, rendermime's rewritten address) when it does not (both were seen on
            # repeated runs of this test; the view's HTML is the same): either way this front end, not /lab
            for which, link, routes in (("live", live, ("edit",)), ("static", static, ("edit", "files"))):
                with browser.expect_page() as opened:
                    link.click()
                shown = opened.value
                shown.wait_for_load_state()
                assert any(f"/{route}/besser_runs/{RUN_ID}/app/backend/main.py" in shown.url for route in routes), shown.url
                assert "/lab" not in shown.url, shown.url
                shown.get_by_text(FILE_TEXT).first.wait_for(timeout=60_000)
                shoot(shown, shots, f"opened-from-the-{which}-view")
                shown.close()
        status = browser.new_page()
        answer = status.goto(f"{url}/besser-agent/")  # the "hosted by" line's address, with the login cookie
        assert answer.status == 200 and "besser-agent is running on this Jupyter server" in status.inner_text("body")
        assert token not in status.content()
        shoot(status, shots, "3-status-page")
        status.close()
    finally:
        if not page.is_closed():
            shoot(page, shots, "last-state")
            (shots / "last-state.html").write_text(page.content())


@pytest.mark.parametrize("frontend", ["lab"])
def test_notebook_01_opens_with_no_unsaved_mark(browser, lab, frontend):
    """Issue 31, item 14: opened in JupyterLab, notebook 01 is not marked unsaved once its kernel is up.

    A control copy with the metadata it used to hold (``language_info`` of one key) is opened first
    and must become marked: the kernel's info arrives and JupyterLab writes it (so the check can fail)."""
    url, token, root = lab
    shipped = Path(__file__).resolve().parent.parent / "notebooks" / LESSON
    control = nbformat.read(shipped, as_version=4)
    control.metadata["language_info"] = {"name": "python"}
    nbformat.write(control, root / "control.ipynb")
    shutil.copy(shipped, root / LESSON)
    page = browser.new_page()
    page.set_default_timeout(60_000)
    open_page(page, f"{url}/lab/tree/control.ipynb?token={token}")
    page.locator(".lm-TabBar-tab.jp-mod-dirty", has_text="control.ipynb").wait_for(timeout=120_000)
    open_page(page, f"{url}/lab/tree/{LESSON}?token={token}")
    page.locator(".jp-RenderedMarkdown h1", has_text="Prototyping a Library backend").first.wait_for()
    kernel_ready(url, token)
    page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=120_000)  # the kernel's info is in
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=LESSON)
    try:
        tab.first.wait_for()  # the document's tab is labelled once its context is ready (not always before the cell renders)
        assert tab.count() == 1 and "jp-mod-dirty" not in (tab.get_attribute("class") or "")
    finally:
        shoot(page, ARTIFACTS / "lab-links", "4-notebook-01-opened-clean")


def saved_live_view(root: Path) -> None:
    """A notebook saved while its run was live: the widget's output (model id, text and HTML beside it) and
    the reattach line, as the kernel sent them (``widgets.snapshot.show``)."""
    from widgets.snapshot import reattach_bundle

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    cell = nbformat.v4.new_code_cell("view = %besser generate example:library 'x'")
    widget = {"model_id": "0123456789abcdef0123456789abcdef", "version_major": 2, "version_minor": 0}
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": widget, "text/plain": "run r1",
                                                     "text/html": "<div class='besser-run'><b>run r1</b> as it was saved</div>"}),
        nbformat.v4.new_output("display_data", data=reattach_bundle("r1")),
    ]
    notebook.cells.append(cell)
    nbformat.write(notebook, root / "saved.ipynb")


@pytest.mark.parametrize(("frontend", "trusted"), [("lab", False), ("lab", True), ("notebook", False)])
def test_a_live_view_reopened_shows_its_saved_html_or_its_reattach_line(browser, lab, frontend, trusted, tmp_path):
    """Issue 31 (the brief's item 5): a notebook saved with a live run, reopened on a new server with no kernel.
    Untrusted (never signed here), the front end renders the widget output's saved HTML, and the reattach line
    shows under it; trusted, the widget renders "model not found", which the line's stylesheet hides. Never
    a visible "model not found"."""
    import subprocess
    import sys

    url, token, root = lab
    saved_live_view(root)
    if trusted:
        env = {"JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"), "PATH": ""}
        subprocess.run([str(Path(sys.executable).with_name("jupyter")), "trust", str(root / "saved.ipynb")], env=env, check=True)
    page = browser.new_page()
    page.set_default_timeout(60_000)
    open_page(page, f"{url}/{NOTEBOOK_URL[frontend]}saved.ipynb?token={token}")
    line = page.locator(".besser-reattach", has_text="%besser attach r1")
    line.first.wait_for()
    if trusted:
        page.get_by_text("model not found").first.wait_for(state="attached")  # the widget tried, and failed
    else:
        page.locator(STATIC_VIEW, has_text="as it was saved").first.wait_for()
    assert [t for t in page.get_by_text("model not found").all() if t.is_visible()] == []
    assert line.first.is_visible()
    shoot(page, ARTIFACTS / f"{frontend}-links", f"5-saved-live-view-{'trusted' if trusted else 'untrusted'}")
