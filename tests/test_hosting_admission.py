"""Admission: past ``max_concurrent_runs`` a run waits, visibly and in order, and can be cancelled
while it waits; an ended run leaves the live table but stays listed and findable. Real
``RunManager`` and event logs on disk; the bodies are small library bodies that wait for a signal."""

from __future__ import annotations

import asyncio
import json

import pytest
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401

from kernel_ext.errors import ConfigurationError
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings, RunRequest, default_run_limit
from kernel_ext.hosting.summaries import disk_summary, summarize
from kernel_ext.magics.display import RunsTable
from kernel_ext.server.handlers.base import STATE_KEY
from widgets.render import header_html, run_text
from widgets.state import RunViewState


def gated(release: asyncio.Event, started: list[str]):
    async def body(ctx) -> None:
        started.append(ctx.run_id)
        ctx.events.emit("run_started", request="gated", model_name="M")
        (ctx.layout.app_dir / "made.txt").write_text("generated")
        await release.wait()

    return body


async def until(predicate, timeout: float = 30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.01)


async def test_runs_past_the_limit_wait_in_order_with_their_position_and_a_waiting_one_cancels_clean(tmp_path):
    manager = RunManager(tmp_path / "runs", OperatorSettings(max_concurrent_runs=2))
    releases = [asyncio.Event() for _ in range(5)]
    started: list[str] = []
    runs = [manager.start_body(gated(release, started), options=RunRequest(request=f"app {i}")) for i, release in enumerate(releases)]
    await until(lambda: len(started) == 2 and [run.queue_position for run in runs[2:]] == [1, 2, 3])  # every run placed
    assert started == [runs[0].id, runs[1].id]
    assert [run.status for run in runs] == ["running", "running", "queued", "queued", "queued"]
    assert [run.queue_position for run in runs] == [None, None, 1, 2, 3]
    assert summarize(runs[4]).as_json()["queue_position"] == 3 and summarize(runs[4]).request == "app 4"
    assert "queue_position" not in summarize(runs[0]).as_json()
    table = RunsTable(manager.list())._repr_mimebundle_()["text/plain"]
    assert "queued, position 1" in table and "queued, position 3" in table

    # cancelled while it waits: it ends cancelled, never started, generated nothing; the others move up
    assert runs[3].cancel(by="person")
    done = await asyncio.wait_for(runs[3].wait(), 30)
    assert done is not None and done.status == "cancelled" and "never started" in done.summary
    assert done.cancelled_by == "person"  # who cancelled it, said on its done event even in the queue
    assert runs[3].id not in started and not any(runs[3].context.layout.app_dir.iterdir())
    assert [run.queue_position for run in (runs[2], runs[4])] == [1, 2]
    view = RunViewState.replay(runs[3].events.events)
    assert view.status == "cancelled" and view.request == "app 3"
    listed = disk_summary(runs[3].context.layout.run_dir)
    assert listed is not None and listed.status == "cancelled" and listed.request == "app 3"

    # a place frees: the first waiting run starts, and says how long it waited
    releases[0].set()
    await until(lambda: len(started) == 3)
    assert started[2] == runs[2].id and runs[4].queue_position == 1
    admitted = [e for e in runs[2].events.of_type("queued") if e.position == 0]
    assert len(admitted) == 1 and admitted[0].waited_s is not None
    view = RunViewState.replay(runs[4].events.events)
    assert view.status == "queued" and view.status_text == "queued, position 1"
    assert "queued, position 1" in header_html(view) and "[queued, position 1] app 4" in run_text(view)
    view = RunViewState.replay(runs[2].events.events)
    assert view.status == "running" and view.queue_position is None

    for release in releases:
        release.set()
    for run in runs:
        await asyncio.wait_for(run.wait(), 30)
    assert [run.status for run in runs] == ["completed", "completed", "completed", "cancelled", "completed"]
    assert manager.live() == [] and manager.admission.running == 0 and manager.admission.waiting == 0
    listed = {s.id: s for s in manager.list()}
    assert [listed[run.id].status for run in runs] == ["completed", "completed", "completed", "cancelled", "completed"]
    assert listed[runs[4].id].model_name == "M" and listed[runs[4].id].request == "gated"  # past its queued lines
    assert (await manager.find(runs[0].id)) is not None and manager.get(runs[4].id) is not None


async def test_a_run_cancelled_as_it_was_admitted_hands_its_place_on(tmp_path):
    manager = RunManager(tmp_path / "runs", OperatorSettings(max_concurrent_runs=1))
    release, started = asyncio.Event(), []
    first = manager.start_body(gated(release, started))
    second = manager.start_body(gated(release, started))
    third = manager.start_body(gated(release, started))
    await until(lambda: started == [first.id] and third.queue_position == 2)
    release.set()  # the first ends; the second is admitted in the same step it is cancelled
    await until(lambda: first.task.done())
    second.cancel()
    await asyncio.wait_for(asyncio.gather(second.wait(), third.wait()), 30)
    assert third.status == "completed" and manager.admission.running == 0


def test_the_limit_is_the_operators_with_a_default_from_the_machine():
    assert OperatorSettings.from_environment({}).max_concurrent_runs == default_run_limit() >= 2
    assert OperatorSettings.from_environment({"BESSER_MAX_CONCURRENT_RUNS": "7"}).max_concurrent_runs == 7
    assert OperatorSettings.from_environment({"BESSER_MAX_CONCURRENT_RUNS": "7"}, max_concurrent_runs=3).max_concurrent_runs == 3
    for bad in ("0", "many", "-1"):
        with pytest.raises(ConfigurationError, match="BESSER_MAX_CONCURRENT_RUNS"):
            OperatorSettings.from_environment({"BESSER_MAX_CONCURRENT_RUNS": bad})


@pytest.mark.parametrize("extension_config", [{"max_concurrent_runs": 1}], indirect=True)
async def test_the_answer_to_a_post_already_says_queued(jp_fetch, jp_serverapp, runs_dir):  # noqa: F811
    """A run that will wait is answered ``queued`` with its position, never ``running``."""
    body = json.dumps({"kind": "generate", "request": "held", "provider": "none", "model_path": "example:library"})
    answers = [json.loads((await jp_fetch("besser-agent", "runs", method="POST", body=body)).body)["run"] for _ in range(2)]
    assert answers[0]["status"] == "running"
    assert answers[1]["status"] == "queued" and answers[1]["queue_position"] == 1, answers[1]
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    for answer in reversed(answers):
        run = manager.get(answer["id"])
        run.cancel()
        await run.wait()


def test_a_place_is_told_on_every_move_near_the_front_and_when_it_halves_further_back():
    from kernel_ext.hosting.admission import EXACT_PLACES, Admission, worth_telling

    assert not worth_telling(5, 5) and not worth_telling(EXACT_PLACES, EXACT_PLACES)  # no move: nothing to tell
    assert worth_telling(EXACT_PLACES + 2, EXACT_PLACES)  # arriving at the last exact place is told
    assert worth_telling(3, 2) and worth_telling(EXACT_PLACES + 1, EXACT_PLACES)
    assert not worth_telling(100, 99) and not worth_telling(127, 64)  # further back, the same half: not told
    assert worth_telling(128, 127) and worth_telling(64, 63)  # the place halved: told
    with pytest.raises(ValueError, match="^a run limit is at least 1$"):
        Admission(0)
    assert Admission(None).limit is None and Admission(1).limit == 1


async def test_the_queue_tells_each_run_its_place_its_cancel_and_its_start_and_hands_a_place_on():
    """``Admission`` alone, limit 1, with real event logs: four runs queue behind one, one is cancelled
    in the middle, one is cancelled in the very moment it was let in (its place goes to the next)."""
    import time

    from kernel_ext.hosting.admission import Admission
    from kernel_ext.hosting.bus import EventLog

    admission = Admission(1)
    logs = {name: EventLog(name) for name in "ABCDE"}
    inside: list[str] = []
    release = {name: asyncio.Event() for name in "ABCDE"}

    async def run(name: str) -> None:
        async with admission.slot(logs[name], f"request {name}"):
            inside.append(name)
            await release[name].wait()

    def queued(name: str) -> list[tuple]:
        return [(e.position, e.limit) for e in logs[name].events if e.type == "queued"]

    started = time.monotonic()
    tasks = {name: asyncio.create_task(run(name)) for name in "ABCDE"}
    await poll(lambda: admission.waiting == 4)  # each task entered the admission (waiting runs are parked on a future)
    assert inside == ["A"] and admission.running == 1 and admission.waiting == 4
    assert [queued(n) for n in "BCDE"] == [[(1, 1)], [(2, 1)], [(3, 1)], [(4, 1)]]
    assert [e.request for e in logs["C"].events] == ["request C"]

    tasks["C"].cancel()
    await asyncio.gather(tasks["C"], return_exceptions=True)
    error, done = logs["C"].events[-2:]
    assert (error.type, error.code, error.message) == ("error", "CANCELLED", "the run was cancelled while it waited in the queue")
    assert (done.type, done.status, done.summary) == ("done", "cancelled", "cancelled while queued; it never started")
    assert queued("B") == [(1, 1)] and queued("D") == [(3, 1), (2, 1)] and queued("E") == [(4, 1), (3, 1)]

    release["A"].set()
    await tasks["A"]  # A's exit let B in (its future is set): B is cancelled before it resumes
    tasks["B"].cancel()
    await asyncio.gather(tasks["B"], return_exceptions=True)
    await poll(lambda: "D" in inside)
    assert inside == ["A", "D"] and admission.running == 1 and admission.waiting == 1  # B's place went to D, E waits
    assert logs["B"].events[-1].type == "queued" and queued("B") == [(1, 1)]  # B never said it started
    admitted = logs["D"].events[-1]
    assert (admitted.type, admitted.position, admitted.limit) == ("queued", 0, 1)
    assert 0 <= admitted.waited_s <= time.monotonic() - started + 0.001 and admitted.waited_s == round(admitted.waited_s, 3)
    assert queued("E") == [(4, 1), (3, 1), (2, 1), (1, 1)]  # B let in, then D in its place
    release["D"].set()
    release["E"].set()
    await asyncio.gather(tasks["D"], tasks["E"])
    assert inside == ["A", "D", "E"] and admission.running == 0 and admission.waiting == 0


async def test_a_deep_queue_lets_runs_in_first_come_first_served_and_tells_the_far_back_only_when_its_place_halves():
    from kernel_ext.hosting.admission import Admission
    from kernel_ext.hosting.bus import EventLog

    admission = Admission(1)
    names = [f"r{i:02}" for i in range(21)]
    logs = {name: EventLog(name) for name in names}
    release = {name: asyncio.Event() for name in names}
    inside: list[str] = []

    async def run(name: str) -> None:
        async with admission.slot(logs[name]):
            inside.append(name)
            await release[name].wait()

    tasks = [asyncio.create_task(run(name)) for name in names]
    await poll(lambda: admission.waiting == 20)
    for step, name in enumerate(names):
        assert inside == names[: step + 1]  # one at a time, in order of arrival
        release[name].set()
        await tasks[step]
        if step + 1 < len(names):
            await poll(lambda: len(inside) == step + 2)
    last = [e.position for e in logs[names[-1]].events if e.type == "queued"]
    assert last == [20, 15, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]  # past EXACT_PLACES, told only when the place halves
    assert all(e.limit == 1 for e in logs[names[-1]].events if e.type == "queued")


async def test_the_start_says_how_long_the_run_waited_to_the_millisecond(monkeypatch):
    """A wait under a second is not told as none: ``waited_s`` keeps milliseconds. The admission's
    clock is read once, when the run is let in; the test sets what it reads relative to the
    moment the run queued, so the figure is exact whatever the machine's load."""
    from types import SimpleNamespace

    from kernel_ext.hosting import admission as admission_module
    from kernel_ext.hosting.admission import Admission
    from kernel_ext.hosting.bus import EventLog

    admission = Admission(1)
    logs = {name: EventLog(name) for name in "AB"}
    release = asyncio.Event()

    async def run(name: str) -> None:
        async with admission.slot(logs[name]):
            await release.wait()

    tasks = [asyncio.create_task(run(name)) for name in "AB"]
    await poll(lambda: admission.waiting == 1)
    queued_at = admission._waiting[0].since
    monkeypatch.setattr(admission_module, "time", SimpleNamespace(monotonic=lambda: queued_at + 0.7504))
    release.set()
    await asyncio.gather(*tasks)
    started = [e for e in logs["B"].events if e.type == "queued" and e.position == 0]
    assert len(started) == 1 and started[0].waited_s == 0.75
