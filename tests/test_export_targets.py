# ruff: noqa: F811 - fixtures imported from export_fixtures are requested by name
"""Where an export goes, as a person types it, through the Python API, the command line and the magic
(found by an outside attack on the export's target names): an empty target, a trailing slash whose
folder is not there, a folder where the notebook would go, a NUL or a name the file system cannot
encode are each one named INVALID_PATH line, nothing written; a name with a newline or a terminal
escape in it is the person's to choose, and every line that names it (the refusal, the success)
shows those characters escaped, never obeyed, on one line. Folders on the way may be links (a
classroom's home folder often is): they are followed, the file at the end never is.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from export_fixtures import ROOT, RUN_ID, demo_run, folder_state, run_copy  # noqa: F401
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from kernel_ext.hosting.export import ExportRefused, export_run

ENTRIES = ("python", "cli", "magic")


@pytest.fixture
def here(run_copy, tmp_path, monkeypatch) -> Path:
    """The current folder (the store ``besser_runs`` with the demo run beside it); no server configured."""
    monkeypatch.chdir(tmp_path)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def export_to(entry: str, to: str) -> tuple[int, str]:
    """Export the demo run to ``to`` through ``entry``: (0, the success line) or (2, the refusal line)."""
    if entry == "python":
        try:
            return 0, f"exported to {export_run(RUN_ID, to, runs_dir='besser_runs')}"
        except ExportRefused as exc:
            return 2, f"error: {exc.code}: {exc.message}"
    if entry == "cli":
        done = subprocess.run([sys.executable, "-m", "kernel_ext", "export", RUN_ID, "--to", to], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr
        return done.returncode, (done.stdout if done.returncode == 0 else done.stderr).removesuffix("\n")
    shell = InteractiveShell.instance()
    shell.run_line_magic("reload_ext", "kernel_ext")
    try:
        return 0, str(shell.run_line_magic("besser", f"export {RUN_ID} --to {shlex.quote(to)}"))
    except UsageError as exc:
        return 2, f"error: {exc}"


def one_line(text: str) -> bool:
    return "\n" not in text and "\r" not in text and "\x1b" not in text and "\x07" not in text


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("to", "said"), [
    ("", "the target is empty: leave it out to write the run's notebook in the current folder"),
    ("new.ipynb/", "new.ipynb is not a folder"),
    ("missing/", "missing is not a folder"),
    ("taken", "is a folder; name the notebook file to write instead"),
    ("red\x1b[31m\x07", "red\\x1b[31m\\x07 is not a notebook name (it must end in .ipynb)"),
])
def test_a_target_that_cannot_be_the_notebook_is_one_named_line_and_nothing_is_written(entry, to, said, here):
    (here / "taken" / f"{RUN_ID}.ipynb").mkdir(parents=True)  # `--to taken` would put the notebook on a folder
    before = folder_state(here)
    status, line = export_to(entry, to)
    assert status == 2 and line.startswith("error: INVALID_PATH: ") and said in line and one_line(line), line
    assert folder_state(here) == before


CONTROL_NAMES = ("red\x1b[31mshift\x07.ipynb", "two\nlines.ipynb", "back\rover.ipynb")


@pytest.mark.parametrize(("entry", "name"), [(entry, name) for entry in ENTRIES for name in CONTROL_NAMES
                                             if not (entry == "magic" and "\n" in name)])  # a magic's line holds no newline
def test_a_name_with_control_characters_is_written_and_shown_escaped_on_one_line(entry, name, here):
    status, line = export_to(entry, name)
    assert (here / name).is_file()
    if entry == "python":  # the API hands back the path itself (data, not a line shown): exact
        assert (status, line) == (0, f"exported to {name}")
        return
    assert status == 0 and one_line(line), line
    shown = name.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\n", "\\n").replace("\r", "\\x0d")
    assert shown in line


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_folder_typed_with_a_slash_or_a_tilde_is_where_the_notebook_goes(entry, here, monkeypatch):
    monkeypatch.setenv("HOME", str(here / "home"))
    (here / "home" / "notebooks").mkdir(parents=True)
    (here / "out").mkdir()
    assert export_to(entry, "out/")[0] == 0 and (here / "out" / f"{RUN_ID}.ipynb").is_file()
    assert export_to(entry, "~/notebooks/")[0] == 0 and (here / "home" / "notebooks" / f"{RUN_ID}.ipynb").is_file()
    status, line = export_to(entry, "n" * 300 + "/")  # a name too long to look up: one line, not a traceback
    assert status == 2 and line.startswith("error: INVALID_PATH: ") and one_line(line), line


@pytest.mark.parametrize("to", ["nul\0.ipynb", "lone\ud800.ipynb"])
def test_a_name_no_file_system_can_hold_is_one_named_line_from_the_python_api(to, here):
    """(argv and a magic's line cannot carry either: the API is where such a string arrives.)"""
    before = folder_state(here)
    status, line = export_to("python", to)
    assert status == 2 and line.startswith("error: INVALID_PATH: ") and one_line(line), line
    assert folder_state(here) == before


def test_a_folder_on_the_way_may_be_a_link_the_file_at_the_end_never(here):
    (here / "real").mkdir()
    (here / "linked").symlink_to(here / "real")
    assert export_to("cli", "linked/n.ipynb")[0] == 0
    assert (here / "real" / "n.ipynb").is_file()
    (here / "real" / "victim.ipynb").write_text("the person's own")
    (here / "real" / "at-end.ipynb").symlink_to(here / "real" / "victim.ipynb")
    status, line = export_to("cli", "linked/at-end.ipynb")
    assert status == 2 and "is a symbolic link" in line
    assert (here / "real" / "victim.ipynb").read_text() == "the person's own"


def test_a_name_of_bytes_that_are_not_utf8_is_written_and_its_line_printed_on_a_strict_utf8_stream(here):
    """argv gives such bytes as lone surrogates; a stream that encodes strictly (``PYTHONIOENCODING=utf-8``)
    raised on them after the file was written, a traceback and status 1."""
    done = subprocess.run([sys.executable.encode(), b"-m", b"kernel_ext", b"export", RUN_ID.encode(), b"--to", b"\xff\xfe.ipynb"],
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}, check=False)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr
    assert (here.joinpath(os.fsdecode(b"\xff\xfe.ipynb"))).is_file()
    assert done.stdout.decode("utf-8").count("\n") == 1 and "\ufffd\ufffd.ipynb" in done.stdout.decode("utf-8")
