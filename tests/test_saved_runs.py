"""Saved notebooks keep their runs: notebook 01 executed by nbclient (in-process, the labelled
scripted approver), saved to disk and read back as GitHub, nbviewer or nbconvert would read it.
The run view's output must be the run's final state as static ``text/html`` and ``text/plain``
(no widget left for a front end to miss: JupyterLab shows "model not found" for one): completed,
its decisions and its authorship, not the first "starting" frame; the reattach line beside a
live view is emptied."""

from __future__ import annotations

import re

import nbformat
import pytest
from kernel_flavours import flavour_env
from nbclient import NotebookClient
from test_notebooks import NOTEBOOKS, canaries  # noqa: F401

pytestmark = pytest.mark.slow

WIDGET = "application/vnd.jupyter.widget-view+json"


async def test_a_saved_notebook_shows_the_finished_run(tmp_path, canaries):  # noqa: F811
    notebook = nbformat.read(NOTEBOOKS / "01-library-prototyping.ipynb", as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=600, store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    await client.async_execute(env=flavour_env("ipykernel7"))
    saved = tmp_path / "01-saved.ipynb"
    nbformat.write(notebook, saved)

    reopened = nbformat.read(saved, as_version=4)
    cell = next(c for c in reopened.cells if c.cell_type == "code" and c.source.startswith("view = %besser generate"))
    shown = [o for o in cell.outputs if o["output_type"] == "display_data"]
    assert len(shown) == 2 and shown[1]["data"] == {}  # the view, and its reattach line emptied (updated in place)
    data = shown[0]["data"]
    assert WIDGET not in data and set(data) == {"text/html", "text/plain"}
    html, text = data["text/html"], data["text/plain"]
    shown = re.sub(r"<style>.*?</style>", "", html, flags=re.S)  # the stylesheet names every status's class
    assert "completed" in shown and "starting" not in shown
    assert "authorship" in html and "written by the LLM" in html and "generator output" in html  # the authorship line
    assert "test_api" in html  # the decisions: the card the person answered
    assert "validate" in html  # the timeline
    assert "done: completed" in text and "[executed] test_api" in text

    html_export = nbformat.writes(reopened)
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.reads(html_export, as_version=4))
    assert "written by the LLM" in body  # what nbconvert (and so nbviewer) renders
