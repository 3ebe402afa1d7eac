"""A disk that fills in the middle of a write: the tools' atomic publish, and the run's event log.

The workspace (and a run folder) live on a real 4 MB tmpfs in a private mount namespace
(``tests/tiny_disk.py``), filled to ~256 KB free before the writes. One scenario run per
module (``tiny_disk_child.fill_during_write``); the tests read what it observed.

Also here: the state a crash between a publish's temporary write and its rename leaves (the
process killed for real at that point), and what recovery and the run archive make of it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tiny_disk import PACKAGE_PARENT, run_on_tiny_disk, tiny_disk_cause

from kernel_ext.hosting.bus import EventLog
from kernel_ext.server.handlers.archive import write_archive
from kernel_ext.hosting.manager import RunManager
from kernel_ext.workspace import is_temp_name

tiny_disk = pytest.mark.skipif(tiny_disk_cause() is not None, reason=f"no private tmpfs: {tiny_disk_cause()}")


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory) -> dict:
    if tiny_disk_cause() is not None:
        pytest.skip(f"no private tmpfs: {tiny_disk_cause()}")
    base = tmp_path_factory.mktemp("full-disk")
    return run_on_tiny_disk("fill_during_write", base / "ws", "4m", str(base / "ws" / "runs"))


@tiny_disk
def test_a_write_cut_by_a_full_disk_is_a_named_refusal_and_leaves_the_old_file(full_disk):
    for name in ("write_big", "replace_big", "modify_big"):
        seen = full_disk[name]
        assert (seen["ok"], seen["code"]) == (False, "execution_failed") and "No space left" in seen["message"], (name, seen)
    assert full_disk["big_exists"] is False  # a new file is all or nothing
    assert full_disk["keep_intact"]  # the edited file keeps every old byte
    assert full_disk["temps_left"] == []  # the publish cleaned its temporary up
    assert full_disk["small_write_still_refused_or_ok"]["ok"]  # what fits still goes through


@tiny_disk
def test_an_event_log_on_a_full_disk_stays_readable_and_recovers(full_disk):
    events = full_disk["events"]
    assert events["disk_count"] > 0 and events["disk_seqs_in_order"]  # whole lines up to the failure, in order
    assert events["recovered"] and events["after_last"] == ["done", "interrupted"]  # closed by the next start


@tiny_disk
def test_a_run_whose_log_cannot_be_written_still_ends_for_its_followers(full_disk):
    events = full_disk["events"]
    assert events["memory_last"] == "done" and events["done"] == "failed", events


CRASH_IN_PUBLISH = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from kernel_ext.workspace import Workspace, publish
module = sys.modules["kernel_ext.workspace.publish"]
def crash(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # the server dies between the temporary write and the rename
module.os.rename = crash
module._link_new = crash
publish(Workspace(sys.argv[2]), sys.argv[3], b"NEW CONTENT\\n" * 1000)
"""


def test_temporaries_of_an_interrupted_publish_are_gone_after_recovery(tmp_path):
    run_id = "20250102-030405-c0ffee"
    run_dir = tmp_path / "runs" / run_id
    app = run_dir / "app"
    (app / "backend").mkdir(parents=True)
    (app / "backend" / "main_api.py").write_text("OLD = 1\n")
    log = EventLog(run_id, run_dir / "events.jsonl")
    log.emit("run_started", request="crash test")
    log.close_file()
    for target in ("backend/main_api.py", "backend/new_module.py"):  # a replace and a create, each killed mid-publish
        done = subprocess.run([sys.executable, "-c", CRASH_IN_PUBLISH, PACKAGE_PARENT, str(app), target], check=False)
        assert done.returncode == -9
    assert (app / "backend" / "main_api.py").read_text() == "OLD = 1\n" and not (app / "backend" / "new_module.py").exists()
    left = [p.name for p in app.rglob("*") if is_temp_name(p.name)]
    assert len(left) == 2, left  # the crash really left its temporaries (the premise of this test)
    assert RunManager(tmp_path / "runs").recover() == [run_id]
    out = io.BytesIO()
    write_archive(run_dir, out)
    shipped = zipfile.ZipFile(io.BytesIO(out.getvalue())).namelist()
    assert not [n for n in shipped if is_temp_name(os.path.basename(n))], shipped
    assert not [p for p in app.rglob("*") if is_temp_name(p.name)]
    assert json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])["status"] == "interrupted"
    assert Path(app / "backend" / "main_api.py").read_text() == "OLD = 1\n"
