"""Saved notebooks keep their runs: notebook 01 executed by nbclient (in-process, the labelled
scripted approver), saved to disk and read back as GitHub, nbviewer or nbconvert would read it.
The ``text/html`` (and ``text/plain``) stored beside the run view's widget must be the run's
final state: completed, its decisions and its authorship, not the first "starting" frame."""

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
    (output,) = cell.outputs  # one output, updated in place (not a second copy appended)
    data = output["data"]
    assert WIDGET in data and output["output_type"] == "display_data"
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
