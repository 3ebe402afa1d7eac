"""A run folder is untrusted: its ``events.jsonl`` is read, appended to and stat'ed as that file
and nothing else, by every entry point that reaches it. A link (to a log of another run, or to a
host file), a FIFO or a folder planted at that name is no run: ``GET runs/{id}`` and its events
answer 404 without waiting on a FIFO, a restarted server's recovery neither reads nor appends
through it, and the file a link names is unchanged on disk."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, runs_dir  # noqa: F401
from tornado.httpclient import HTTPClientError

from kernel_ext.hosting.bus import EventLog, EventLogUnwritable
from kernel_ext.hosting.events import make_event, to_json
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.stored import read_log

RUN_ID = "20240101-000000-00000a"
OUTSIDE_RUN = "20240101-000000-00000b"


def _log(run_id: str, finished: bool) -> str:
    events = [make_event("run_started", run_id, request="an app", model_name="Library")]
    if finished:
        events.append(make_event("done", run_id, status="completed", summary="done"))
    return "".join(to_json(e.model_copy(update={"seq": i})) + "\n" for i, e in enumerate(events, 1))


def _plant(shape: str, runs: Path, outside: Path) -> Path:
    """``runs/RUN_ID`` whose events.jsonl is ``shape``; returns the file a link would reach."""
    folder = runs / RUN_ID
    folder.mkdir(parents=True)
    target = outside / "events.jsonl"
    target.write_text(_log(OUTSIDE_RUN, finished=False))  # an unfinished log: recovery would append to it
    log = folder / "events.jsonl"
    if shape == "link-to-log":
        log.symlink_to(target)
    elif shape == "link-to-fifo":
        os.mkfifo(outside / "fifo")
        log.symlink_to(outside / "fifo")
    elif shape == "fifo":
        os.mkfifo(log)
    elif shape == "folder":
        log.mkdir()
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SHAPES = ["link-to-log", "link-to-fifo", "fifo", "folder"]


@pytest.mark.parametrize("shape", SHAPES)
def test_recovery_and_the_python_api_never_read_or_append_through_it(shape, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _plant(shape, tmp_path / "runs", outside)
    before = _digest(target)
    manager = RunManager(tmp_path / "runs")
    done = threading.Event()
    found: list[object] = []

    def work() -> None:  # a FIFO opened blocking would hold this thread: the test fails named, never hangs
        found.extend([manager.recover(), manager.get(RUN_ID), len(read_log(RUN_ID, tmp_path / "runs" / RUN_ID / "events.jsonl"))])
        done.set()

    threading.Thread(target=work, daemon=True).start()
    assert done.wait(60), f"{shape}: reading the planted log blocked"
    assert found == [[], None, 0]
    assert _digest(target) == before  # nothing appended through a link


def test_a_log_swapped_for_a_link_after_start_is_not_appended_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host file\n")
    path = tmp_path / "run" / "events.jsonl"
    events = EventLog(RUN_ID, path)
    events.emit("run_started", request="an app", model_name="Library")
    events.close_file()
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(EventLogUnwritable, match="symbolic link"):  # reopened: refused by name (EVENT_LOG_UNWRITABLE)
        events.emit("phase", phase="select", status="started")
    assert outside.read_text() == "host file\n"


@pytest.mark.parametrize("shape", SHAPES)
async def test_rest_answers_404_and_never_waits(shape, jp_fetch, runs_dir, tmp_path):  # noqa: F811
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _plant(shape, runs_dir, outside)
    before = _digest(target)
    for route in (("runs", RUN_ID), ("runs", RUN_ID, "events")):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("besser-agent", *route, request_timeout=60)
        assert refused.value.code == 404
    assert _digest(target) == before
