"""The run manager's own promises (``hosting/manager.py``), each on a real ``RunManager`` with real
event logs on disk: a finished run is loaded once per version of its log (concurrent requests share
the load, a changed log is read again, the last few stay loaded); listings name every run, live and
on disk; a stopping server cancels what still runs and says so; recovery closes a torn log on a
line of its own and removes a killed publish's temporaries. Bodies are small library bodies."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernel_ext.hosting.manager import INTERRUPTED_SUMMARY, LOADED_RUNS_KEPT, RunManager
from kernel_ext.hosting.options import OperatorSettings, RunRequest
from kernel_ext.workspace.publish import TEMP_MARKER


def body(release: asyncio.Event | None = None):
    async def run(ctx) -> None:
        ctx.events.emit("run_started", request="an app", model_name="M")
        if release is not None:
            await release.wait()

    return run


async def finished_runs(runs_dir, count: int) -> list[str]:
    """``count`` runs hosted to their end by one manager; their ids, oldest first."""
    host = RunManager(runs_dir, OperatorSettings(max_concurrent_runs=4))
    runs = [host.start_body(body()) for _ in range(count)]
    for run in runs:
        assert (await asyncio.wait_for(run.wait(), 30)).status == "completed"
    return [run.id for run in runs]


async def test_a_finished_run_is_loaded_once_per_version_of_its_log_and_concurrent_finds_share_it(tmp_path):
    (run_id,) = await finished_runs(tmp_path / "runs", 1)
    manager = RunManager(tmp_path / "runs")  # a server started later: the run is on disk only
    first, second = await asyncio.gather(manager.find(run_id), manager.find(run_id))
    assert first is not None and first is second and first.id == run_id and first.status == "completed"
    assert manager._loading == {}  # the shared load is forgotten once it ended
    assert await manager.find(run_id) is first and manager.get(run_id) is first  # loaded, and kept
    with open(tmp_path / "runs" / run_id / "events.jsonl", "a", encoding="utf-8") as log:
        log.write("\n")  # a new version of the log (its size changed): read again
    again = await manager.find(run_id)
    assert again is not None and again is not first and again.id == run_id
    assert manager.get(run_id) is again
    assert await manager.find("20990101-000000-000000") is None and manager.get("20990101-000000-000000") is None


async def test_the_last_runs_found_stay_loaded_and_the_least_recent_is_dropped(tmp_path):
    ids = await finished_runs(tmp_path / "runs", LOADED_RUNS_KEPT + 1)
    manager = RunManager(tmp_path / "runs")
    loaded = {run_id: await manager.find(run_id) for run_id in ids[:LOADED_RUNS_KEPT]}
    assert await manager.find(ids[0]) is loaded[ids[0]]  # used again: now the most recent
    await manager.find(ids[-1])  # one past the number kept: the least recently used goes
    assert await manager.find(ids[0]) is loaded[ids[0]]
    assert all([await manager.find(run_id) is loaded[run_id] for run_id in ids[2:LOADED_RUNS_KEPT]])
    assert await manager.find(ids[1]) is not loaded[ids[1]]  # read again from its folder


async def test_a_live_run_is_found_as_itself_and_listed_with_the_runs_on_disk(tmp_path):
    done_ids = await finished_runs(tmp_path / "runs", 2)
    manager = RunManager(tmp_path / "runs")
    release = asyncio.Event()
    live = manager.start_body(body(release), options=RunRequest(request="a live one"))
    assert await manager.find(live.id) is live and manager.get(live.id) is live
    expected = sorted([*done_ids, live.id])  # by id: the time it started, then its random part
    assert [s.id for s in manager.list()] == expected
    assert [s.id for s in await manager.summaries()] == expected
    listed = json.loads(await manager.listing_json())["runs"]
    assert [entry["id"] for entry in listed] == expected
    assert [entry["status"] for entry in listed] == ["completed" if i in done_ids else live.status for i in expected]
    assert {s.id: s.status for s in await manager.summaries()}[live.id] == live.status in ("queued", "running")
    release.set()
    await asyncio.wait_for(live.wait(), 30)


async def test_a_stopping_server_cancels_every_run_still_going_and_says_so(tmp_path):
    manager = RunManager(tmp_path / "runs", OperatorSettings(max_concurrent_runs=1))
    releases = [asyncio.Event(), asyncio.Event()]
    running = manager.start_body(body(releases[0]))
    queued = manager.start_body(body(releases[1]))
    ended = manager.start_body(body())
    releases[1].set()
    while not running.events.of_type("run_started") or queued.queue_position != 1:
        await asyncio.sleep(0.01)
    await manager.shutdown(timeout=30)
    for run in (running, queued):
        assert run.task is not None and run.task.done()
        assert run.status == "cancelled" and run.events.events[-1].cancelled_by == "server"
        said = [e.text for e in run.events.of_type("text")]
        assert said == ["the Jupyter server is stopping; this run is cancelled"]
    assert ended.status == "cancelled"  # it was still waiting for its place too
    assert manager.live() == []


async def test_shutdown_leaves_a_run_that_already_ended_as_it_ended(tmp_path):
    manager = RunManager(tmp_path / "runs")
    run = manager.start_body(body())
    await asyncio.wait_for(run.wait(), 30)
    before = (run.context.layout.run_dir / "events.jsonl").read_bytes()
    await manager.shutdown(timeout=30)
    assert run.status == "completed" and (run.context.layout.run_dir / "events.jsonl").read_bytes() == before


def _unfinished(runs_dir, run_id: str, tail: str) -> tuple:
    folder = runs_dir / run_id
    (folder / "app").mkdir(parents=True)
    line = json.dumps({"seq": 1, "run_id": run_id, "ts": 1.0, "type": "run_started", "request": "r", "model_name": "M"})
    (folder / "events.jsonl").write_text(line + tail, encoding="utf-8")
    return folder, line


def test_recovery_closes_a_torn_log_on_a_line_of_its_own(tmp_path, caplog):
    runs = tmp_path / "runs"
    (runs / "0-not-a-run").mkdir(parents=True)  # sorted first, each skipped without ending the walk
    finished, _ = _unfinished(runs, "20230101-000000-00000a", "\n")
    with open(finished / "events.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"seq": 2, "run_id": finished.name, "ts": 2.0, "type": "done", "status": "completed",
                              "summary": "s"}) + "\n")
    closed, _ = _unfinished(runs, "20230101-000000-00000b", "\n")  # a done, then a torn line: closed all the same
    with open(closed / "events.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"seq": 2, "run_id": closed.name, "ts": 2.0, "type": "done", "status": "completed",
                              "summary": "s"}) + '\n{"seq": 3')
    untouched = {folder: (folder / "events.jsonl").read_bytes() for folder in (finished, closed)}
    caplog.set_level("INFO", logger="kernel_ext.hosting.manager")
    torn, torn_line = _unfinished(runs, "20240101-000000-00000a", '\n{"seq": 2, "run_id": "20240101')
    whole, whole_line = _unfinished(runs, "20240101-000000-00000b", "\n")
    assert RunManager(runs).recover() == [torn.name, whole.name]
    assert all((folder / "events.jsonl").read_bytes() == kept for folder, kept in untouched.items())
    said = [r.getMessage() for r in caplog.records if r.name == "kernel_ext.hosting.manager"]
    assert said == [f"run {name} was in flight when the server stopped: marked interrupted" for name in (torn.name, whole.name)]
    for folder, kept in ((torn, [torn_line, '{"seq": 2, "run_id": "20240101']), (whole, [whole_line])):
        lines = (folder / "events.jsonl").read_text(encoding="utf-8").split("\n")
        assert lines[:-2] == kept and lines[-1] == ""  # the torn line kept whole; no blank line added
        done = json.loads(lines[-2])
        assert done["type"] == "done" and done["status"] == "interrupted" and done["summary"] == INTERRUPTED_SUMMARY
    assert RunManager(runs).recover() == []  # closed once


def test_recovery_removes_the_temporaries_of_a_killed_publish_and_nothing_else(tmp_path, caplog):
    caplog.set_level("INFO", logger="kernel_ext.hosting.manager")
    folder, _ = _unfinished(tmp_path / "runs", "20240101-000000-00000a", "\n")
    (folder / "app" / "pkg").mkdir()
    temporary = folder / "app" / "pkg" / f".main.py{TEMP_MARKER}0123456789ab"
    temporary.write_text("half")
    (folder / "app" / "pkg" / "main.py").write_text("whole")
    (folder / "app" / ".hidden").write_text("kept")
    assert RunManager(tmp_path / "runs").recover() == [folder.name]
    assert not temporary.exists() and (folder / "app" / "pkg" / "main.py").read_text() == "whole"
    assert (folder / "app" / ".hidden").read_text() == "kept"
    assert f"run {folder.name}: removed 1 temporaries of interrupted writes" in [r.getMessage() for r in caplog.records]


def test_recovery_closes_an_empty_log_with_its_done_line_alone(tmp_path):
    folder = tmp_path / "runs" / "20240101-000000-00000a"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(b"")  # the server died before the first event was written
    assert RunManager(tmp_path / "runs").recover() == [folder.name]
    (line,) = (folder / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["status"] == "interrupted" and (folder / "events.jsonl").read_bytes().count(b"\n") == 1


def test_start_holds_the_request_to_the_operators_settings_before_a_folder_exists(tmp_path):
    """``start`` (the magics' in-process path) resolves the body under this manager's operator: a
    model outside the operator's root is refused by name and no run folder is made."""
    from kernel_ext.hosting.requests import RequestRefused

    (tmp_path / "models").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "m.py").write_text("x = 1\n")
    manager = RunManager(tmp_path / "runs", OperatorSettings(model_root=str(tmp_path / "models")))
    with pytest.raises(RequestRefused) as refused:
        manager.start(RunRequest(request="an app", model_path=str(tmp_path / "elsewhere" / "m.py")))
    assert refused.value.code == "MODEL_PATH_OUTSIDE_ROOT"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


async def test_a_request_that_goes_away_does_not_cancel_the_others_shared_load(tmp_path):
    (run_id,) = await finished_runs(tmp_path / "runs", 1)
    manager = RunManager(tmp_path / "runs")
    leaving = asyncio.ensure_future(manager.find(run_id))
    staying = asyncio.ensure_future(manager.find(run_id))
    await asyncio.sleep(0)  # one turn of the loop: both are awaiting the one load now
    assert list(manager._loading) == [run_id]
    leaving.cancel()
    found = await asyncio.wait_for(staying, 30)
    assert leaving.cancelled() and found is not None and found.id == run_id and found.status == "completed"


async def test_a_stopping_server_waits_for_a_run_that_will_not_end_no_longer_than_its_bound(tmp_path):
    manager = RunManager(tmp_path / "runs")
    started, let_go = asyncio.Event(), asyncio.Event()

    async def stubborn(ctx) -> None:  # a body that holds on past its cancel (a tool finishing its step)
        ctx.events.emit("run_started", request="an app", model_name="M")
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await let_go.wait()
            raise

    run = manager.start_body(stubborn)
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.wait_for(manager.shutdown(timeout=0.1), 20)  # returns with the run still ending
    assert run.task is not None and not run.task.done() and run.context.cancelled_by == "server"
    let_go.set()
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "cancelled"


async def test_a_run_is_given_the_managers_secrets_approval_timeout_and_id(tmp_path):
    """The secret wiring: a key the operator named is cut from every event the run writes, on disk too."""
    key = "operator-" + "k3y" * 8
    manager = RunManager(tmp_path / "runs", OperatorSettings(approval_timeout_s=123.0), known_secrets=(key,))

    async def leaky(ctx) -> None:
        ctx.events.emit("run_started", request=f"use {key}", model_name="M")
        ctx.events.emit("text", text=f"the endpoint echoed {key}")

    run = manager.start_body(leaky, run_id="20240101-000000-00000c")
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "completed" and run.id == "20240101-000000-00000c"
    log = (tmp_path / "runs" / run.id / "events.jsonl").read_text(encoding="utf-8")
    assert key not in log and "the endpoint echoed [redacted]" in log
    assert run.context.approver.timeout == 123.0
    other = RunManager(tmp_path / "runs", approval_timeout=4.5).start_body(leaky)
    assert other.context.approver.timeout == 4.5
    await asyncio.wait_for(other.wait(), 30)


async def test_a_queued_run_names_what_it_asked_for(tmp_path):
    from kernel_ext.hosting.options import ScenarioRequest

    manager = RunManager(tmp_path / "runs", OperatorSettings(max_concurrent_runs=1))
    release = asyncio.Event()
    first = manager.start_body(body(release))
    waiting = [manager.start_body(body(), options=options) for options in (ScenarioRequest(), None, RunRequest(request="app"))]
    while [run.queue_position for run in waiting] != [1, 2, 3]:
        await asyncio.sleep(0.01)
    asked = [run.events.of_type("queued")[0].request for run in waiting]
    assert asked == ["scenario side-effects", "", "app"]
    release.set()
    for run in (first, *waiting):
        await asyncio.wait_for(run.wait(), 30)


async def test_a_run_that_ended_here_is_found_as_itself_and_named_the_last_ended(tmp_path):
    manager = RunManager(tmp_path / "runs")
    run = manager.start_body(body())
    await asyncio.wait_for(run.wait(), 30)
    while manager.live():  # the task's done callback runs a loop turn after the task ends
        await asyncio.sleep(0)
    assert manager.last_ended is run and manager.get(run.id) is run and await manager.find(run.id) is run


async def test_get_loads_a_run_once_per_version_of_its_log(tmp_path):
    (run_id,) = await finished_runs(tmp_path / "runs", 1)
    manager = RunManager(tmp_path / "runs")
    first = manager.get(run_id)
    assert first is not None and first.id == run_id and first.status == "completed" and manager.get(run_id) is first
    with open(tmp_path / "runs" / run_id / "events.jsonl", "a", encoding="utf-8") as log:
        log.write("\n")
    again = manager.get(run_id)
    assert again is not None and again is not first and again.id == run_id and manager.get(run_id) is again
    assert await manager.find(run_id) is again and manager.get("20990101-000000-000000") is None
