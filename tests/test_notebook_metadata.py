"""The shipped notebooks open clean: JupyterLab writes the kernel's ``language_info`` and the kernel
spec into a notebook's metadata when its kernel starts, and a notebook whose saved metadata
differs opens marked unsaved (issue 31, item 14: notebook 01 held only ``{"name": "python"}``).
Here a real kernel's ``kernel_info_reply`` is compared with each notebook's metadata, every key
(the Python ``version`` too, which JupyterLab also writes: a Python other than the one the
notebooks were saved with still marks them, which this test names); the browser side is in
test_browser_links.py (notebook 01 opened in JupyterLab has no dirty mark)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from export_fixtures import demo_run, run_copy  # noqa: F401 - fixtures requested by name
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from kernel_ext.hosting.export import export_run

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_info():
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.kernel_info(reply=True, timeout=60)
        yield reply["content"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_a_notebook_holds_what_its_kernel_reports(path, kernel_info):
    metadata = nbformat.read(path, as_version=4).metadata
    reported = dict(kernel_info["language_info"])
    saved = dict(metadata["language_info"])
    assert {k: v for k, v in saved.items() if k != "version"} == {k: v for k, v in reported.items() if k != "version"}
    if saved.get("version") != reported.get("version"):
        pytest.xfail(f"saved with Python {saved.get('version')}, this kernel is {reported.get('version')}: JupyterLab marks it unsaved")
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert metadata["kernelspec"] == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def test_an_exported_run_holds_what_its_kernel_reports(run_copy, tmp_path, kernel_info):  # noqa: F811
    """``besser-agent export`` writes the same metadata, so a handed-in run opens unmarked too."""
    metadata = nbformat.read(export_run(run_copy, tmp_path), as_version=4).metadata
    assert metadata["language_info"] == kernel_info["language_info"]
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert metadata["kernelspec"] == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
