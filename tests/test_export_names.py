# ruff: noqa: F811 - fixtures imported from export_fixtures and jupyter_fixtures are requested by name
"""Names a person types are validated (issue 28, item 7), through every entry point of the export.

A run is named by its id and matched against the run store: ``../x`` (even when ``x`` is a real run
outside the store), an absolute path, ``..``, a link in the store, an unknown id are each one named
refusal (``INVALID_RUN_ID`` or ``RUN_NOT_FOUND``) from the Python API, the command line, the magic
and REST, and the disk is unchanged. The notebook goes into the current folder unless a path is
given, and never through a link: a planted link at the output name is refused, ``--force`` or not,
and the file it points at is unchanged. Every other magic taking a run id refuses the same names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from export_fixtures import ROOT, RUN_ID, demo_run, folder_state, run_copy  # noqa: F401
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config  # noqa: F401
from tornado.httpclient import HTTPClientError

from kernel_ext.hosting.export import ExportRefused, export_run

OUTSIDE = "outside-run-1"
NAMES = {"parent": f"../elsewhere/{OUTSIDE}", "absolute": "{tmp}/elsewhere/" + OUTSIDE, "dots": "..",
         "unknown": "no-such-run", "link": "linked-run-1", "nested": f"{RUN_ID}/app"}
ENTRIES = ("python", "cli", "magic", "rest")
REFUSED = {"INVALID_RUN_ID", "RUN_NOT_FOUND", "NOT_FOUND"}


@pytest.fixture
def runs_dir(tmp_path) -> Path:  # the server hosts the store the demo run was copied into
    return tmp_path / "besser_runs"


@pytest.fixture
def store(run_copy, tmp_path, monkeypatch) -> Path:
    """The store with the demo run, a real run outside it and a link in it to that run; cwd is ``tmp``."""
    outside = tmp_path / "elsewhere" / OUTSIDE
    shutil.copytree(run_copy, outside, symlinks=True)
    (run_copy.parent / "linked-run-1").symlink_to(outside)
    monkeypatch.chdir(tmp_path)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return run_copy.parent


def magic(line: str) -> object:
    shell = InteractiveShell.instance()
    shell.run_line_magic("reload_ext", "kernel_ext")  # a fresh backend: this test's folder and environment
    return shell.run_line_magic("besser", line)


async def export_by(entry: str, name: str, *extra: str, fetch=None) -> str:
    """Export run ``name`` through ``entry``; the refusal's code (raises if it was not refused)."""
    if entry == "python":
        try:
            to = next((e for e in extra if not e.startswith("-")), None)
            export_run(name, to, force="--force" in extra, runs_dir="besser_runs")
        except ExportRefused as exc:
            assert "\n" not in exc.message
            return exc.code
    elif entry == "cli":
        done = subprocess.run([sys.executable, "-m", "kernel_ext", "export", name, *extra], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        if done.returncode:
            assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
            return done.stderr.removeprefix("error: ").split(":", 1)[0]
    elif entry == "magic":
        try:
            magic(" ".join(["export", f"'{name}'", *(f"--to {e}" if not e.startswith("-") else e for e in extra)]))
        except UsageError as exc:
            assert "\n" not in str(exc)
            return str(exc).split(":", 1)[0]
    else:
        try:
            await fetch("besser-agent", "runs", name, "export")
        except HTTPClientError as exc:
            assert exc.code == 404
            return json.loads(exc.response.body)["code"]
    raise AssertionError(f"{entry} exported {name!r}")


@pytest.fixture
def served(request, store):
    return request.param, (request.getfixturevalue("jp_fetch") if request.param == "rest" else None)


@pytest.mark.parametrize("served", ENTRIES, indirect=True)
@pytest.mark.parametrize("case", sorted(NAMES))
async def test_a_typed_run_name_is_matched_against_the_store(served, case, store, tmp_path):
    entry, fetch = served
    name = NAMES[case].format(tmp=tmp_path)
    before = folder_state(tmp_path)
    assert await export_by(entry, name, fetch=fetch) in REFUSED
    assert folder_state(tmp_path) == before


@pytest.mark.parametrize("entry", ("python", "cli", "magic"))
async def test_the_export_never_writes_through_a_planted_link(entry, store, tmp_path):
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.write_text("the person's own file")
    (tmp_path / f"{RUN_ID}.ipynb").symlink_to(victim)  # at the default name, in the current folder
    (tmp_path / "given.ipynb").symlink_to(victim)  # at a name given explicitly
    before = folder_state(tmp_path)
    for extra in ((), ("--force",), ("given.ipynb",), ("given.ipynb", "--force")):
        args = [*extra] if entry != "cli" or not extra or extra[0] != "given.ipynb" else ["--to", *extra]
        assert await export_by(entry, RUN_ID, *args) == "INVALID_PATH", extra
    assert folder_state(tmp_path) == before and victim.read_text() == "the person's own file"


def test_the_default_notebook_goes_into_the_current_folder(store, tmp_path):
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "export", RUN_ID], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"{RUN_ID}.ipynb").is_file() and str(tmp_path / f"{RUN_ID}.ipynb") in done.stdout


@pytest.mark.parametrize("line", ["attach {name}", "generate example:library a backend --base-run {name}"])
@pytest.mark.parametrize("case", ["parent", "absolute", "dots", "nested"])
def test_every_magic_taking_a_run_id_refuses_a_path(line, case, store, tmp_path):
    before = folder_state(tmp_path)
    with pytest.raises(UsageError, match=r"^INVALID_RUN_ID: "):
        magic(line.format(name=f"'{NAMES[case].format(tmp=tmp_path)}'"))
    with pytest.raises(UsageError, match=r"^INVALID_RUN_ID: "):
        InteractiveShell.instance().run_cell_magic("test_api", f"--run '{NAMES[case].format(tmp=tmp_path)}'", "GET /\n")
    assert folder_state(tmp_path) == before
