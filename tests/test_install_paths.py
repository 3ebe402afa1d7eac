"""The ways in that do not go through ``make``: a plain ``pip install`` and Binder's ``postBuild``.

Each runs in a fresh venv built once per session (``install_fixtures``), from a directory
outside this checkout, with a bare environment, and first proves that the package it runs is
the installed copy (``kernel_ext.__file__`` under the venv's site-packages), not this tree.
The main job must complete there: ``besser-agent demo`` with no extras installed, notebook 01
under nbclient after Binder's install, with the labelled scripted approver answering its card.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from install_fixtures import Env, failed
from test_notebooks import check_library, output_texts

# The session's fresh environments are built inside the first test that asks (pip's own bounds: 600 s
# for the wheel, 1,800 s for an install), so these tests get those bounds and some room.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]

NOTEBOOK_01 = "notebooks/01-library-prototyping.ipynb"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
WHERE = "import kernel_ext, sys; print(kernel_ext.__file__); print(sys.prefix)"
# Executes a notebook under nbclient inside the environment under test (its python, its kernel).
RUN_NOTEBOOK = """
import sys, nbformat
from nbclient import NotebookClient
source, target, workdir = sys.argv[1:4]
notebook = nbformat.read(source, as_version=4)
notebook.cells.insert(0, nbformat.v4.new_code_cell("import kernel_ext, sys\\nprint('kernel_ext from', kernel_ext.__file__)"))
client = NotebookClient(notebook, kernel_name="python3", timeout=600, store_widget_state=True, allow_errors=True,
                        resources={"metadata": {"path": workdir}})
client.execute()
nbformat.write(notebook, target)
"""


def site_packages(env: Env) -> Path:
    (found,) = (env.prefix / "lib").glob("python3*/site-packages")
    return found


def assert_installed_copy_runs(env: Env, cwd: Path) -> None:
    done = env.run(env.bin / "python", "-c", WHERE, cwd=cwd)
    assert done.returncode == 0, failed("import kernel_ext", done)
    where, prefix = done.stdout.split()
    assert Path(where).is_relative_to(site_packages(env)), f"kernel_ext came from {where}, not the installed copy"
    assert Path(prefix) == env.prefix


# -- pip install of the wheel, no extras ------------------------------------------------------


def test_the_demo_completes_after_a_plain_pip_install(wheel_env, tmp_path):
    assert_installed_copy_runs(wheel_env, tmp_path)
    done = wheel_env.run("besser-agent", "demo", "--out", tmp_path / "demo", cwd=tmp_path)
    assert done.returncode == 0, failed("besser-agent demo", done)
    assert "done: completed" in done.stdout and "Traceback" not in done.stdout + done.stderr
    last = json.loads((tmp_path / "demo" / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "done" and last["status"] == "completed"

    listed = wheel_env.run("jupyter", "server", "extension", "list", cwd=tmp_path)
    assert listed.returncode == 0, failed("jupyter server extension list", listed)
    text = ANSI.sub("", listed.stdout + listed.stderr)
    assert re.search(r"^\s*kernel_ext enabled\s*$", text, re.MULTILINE), text
    assert re.search(r"^\s*kernel_ext \S+ OK\s*$", text, re.MULTILINE), text


def test_a_machine_without_fastapi_gets_one_plain_line(wheel_env, tmp_path):
    """The replay meets a machine that lacks what the recording's had: one line names it, and
    the run ends at once (a hard-linked copy of the installed venv, fastapi uninstalled)."""
    clone = Env(tmp_path / "venv")
    if subprocess.run(["cp", "-al", str(wheel_env.prefix), str(clone.prefix)], check=False).returncode != 0:
        shutil.rmtree(clone.prefix, ignore_errors=True)
        shutil.copytree(wheel_env.prefix, clone.prefix, symlinks=True)
    removed = clone.run(clone.bin / "python", "-m", "pip", "uninstall", "--yes", "--quiet", "fastapi", cwd=tmp_path)
    assert removed.returncode == 0, failed("pip uninstall fastapi", removed)
    assert list(site_packages(wheel_env).glob("fastapi-*.dist-info")), "the shared environment lost fastapi"
    assert_installed_copy_runs(clone, tmp_path)

    done = clone.run(clone.bin / "python", "-m", "kernel_ext", "demo", "--out", tmp_path / "demo", cwd=tmp_path)
    assert done.returncode == 1, failed("demo without fastapi", done)
    said = [line for line in done.stdout.splitlines() if "REPLAY_DIVERGED" in line]
    assert len(said) == 1, done.stdout
    assert "the app could not start here: fastapi is missing on this machine" in said[0], said[0]
    assert "done: failed - the run stopped on the error above" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    events = [json.loads(line) for line in (tmp_path / "demo" / "events.jsonl").read_text().splitlines()]
    assert [e["code"] for e in events if e["type"] == "error"] == ["REPLAY_DIVERGED"]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "failed"


# -- Binder: postBuild's install, then notebook 01 --------------------------------------------


def test_notebook_01_completes_after_binders_install(binder_env, tmp_path):
    assert_installed_copy_runs(binder_env, tmp_path)
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()  # no user-level kernelspec or config can stand in for the environment's own
    executed = tmp_path / "01-executed.ipynb"
    start = binder_env.source / "binder" / "start"  # repo2docker's entrypoint: demo mode
    done = binder_env.run(start, binder_env.bin / "python", "-c", RUN_NOTEBOOK, binder_env.source / NOTEBOOK_01, executed,
                          workdir, cwd=workdir, timeout=1800, HOME=str(home), BESSER_NOTEBOOK_APPROVER="scripted")
    assert done.returncode == 0, failed("nbclient on notebook 01", done)

    notebook = nbformat.read(executed, as_version=4)
    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(notebook.cells) for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    stderr = [o.get("text") for c in notebook.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not stderr, stderr
    first = "".join(output_texts(nbformat.v4.new_notebook(cells=[notebook.cells[0]])))
    assert Path(first.split("kernel_ext from ", 1)[1].strip()).is_relative_to(site_packages(binder_env)), first
    assert "Traceback" not in "\n".join(output_texts(notebook))
    check_library(notebook, workdir)  # the lesson's own checks: the card answered, done: completed, 5/5 requests
