# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""A large finished run, read after a restart, does not stall the server.

Red-team finding (verified): ``load_finished`` parsed all of ``events.jsonl`` on the event loop,
once per request: a 48 MB run stalled ``GET config`` 0.41 s (one request) to 2.63 s (ten), and
four concurrent ``GET runs/{id}/events`` 1.81 s. A ~30 MB log (12 MB of ordinary events and three
6 MB ones, over the 4 MiB reload limit) is planted for a finished run before a fresh server
starts on that runs folder (what a restart sees); then event streams, run lookups, listings and
``GET config`` are fired at once while ``LoopLag`` ticks on the server's loop. The lag stays
under 100 ms, the log is loaded once for all of them, and every answer is right: each event in
order, the oversized ones as named ``EVENT_TOO_LARGE`` stand-ins, the run ``completed``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    parse_sse_text,
    runs_dir,
    server_api,
)

from kernel_ext.hosting.bus import MAX_LOADED_LINE_BYTES, EventLog
from kernel_ext.hosting import manager as manager_module
from kernel_ext.server.handlers.base import STATE_KEY

from .loop_lag import LoopLag

RUN_ID = "20261201-101010-abcdef"
SMALL, HUGE = 20_000, (5_000, 12_000, 19_000)  # ordinary events; positions of 6 MB ones among them


def line(seq: int, type_: str, **fields) -> bytes:
    event = {"seq": seq, "run_id": RUN_ID, "ts": 1_700_000_000.0 + seq, "type": type_, **fields}
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


@pytest.fixture
def planted(runs_dir: Path) -> Path:
    """A finished run's folder with a ~30 MB log, written before the server starts."""
    run_dir = runs_dir / RUN_ID
    (run_dir / "app").mkdir(parents=True)
    lines = [line(1, "run_started", request="a large run", model_name="library")]
    filler = "lorem ipsum dolor sit amet " * 22
    for n in range(SMALL):
        if n in HUGE:
            lines.append(line(len(lines) + 1, "text", text="y" * (6 << 20)))
        lines.append(line(len(lines) + 1, "text", text=f"{n} {filler}"))
    lines.append(line(len(lines) + 1, "done", status="completed", summary="finished before the restart"))
    (run_dir / "events.jsonl").write_bytes(b"".join(lines))
    return run_dir


async def test_a_large_finished_run_is_served_without_stalling_the_loop(planted, jp_fetch, jp_serverapp, runs_dir, tmp_path,
                                                                        monkeypatch):
    total = 1 + SMALL + len(HUGE) + 1
    loads: list[Path] = []
    real = manager_module.load_finished
    monkeypatch.setattr(manager_module, "load_finished", lambda run_dir: loads.append(run_dir) or real(run_dir))
    paths = [*[f"runs/{RUN_ID}/events"] * 4, *[f"runs/{RUN_ID}"] * 4, *["runs"] * 2, *["config"] * 10]
    transfers = []
    for n, path in enumerate(paths):  # a query makes each URL its own, so its answer can be told apart
        transfers += [f"{server_api(jp_serverapp)}{path}?probe={n}", "-o", str(tmp_path / f"answer-{n}")]
    async with LoopLag() as lag:
        # The client is curl, one process fetching every URL at once: a client is not the server's work.
        client = await asyncio.create_subprocess_exec(
            "curl", "-s", "-m", "60", "--parallel", "--parallel-immediate", "--parallel-max", "50",
            "-H", f"Authorization: token {jp_serverapp.identity_provider.token}", "-w", "%{url_effective} %{http_code}\\n",
            *transfers, stdout=asyncio.subprocess.PIPE)
        start = time.time()
        printed, _ = await asyncio.wait_for(client.communicate(), 120)
        end = time.time()
    lag.check(start, end, "serving a large finished run")
    assert sorted(printed.decode().split()[1::2]) == ["200"] * len(paths), printed
    assert loads == [planted]  # once, for all eight requests that needed the log
    answers = [(tmp_path / f"answer-{n}").read_text() for n in range(len(paths))]

    for stream in answers[:4]:
        frames = [f for f in parse_sse_text(stream) if "data" in f]
        assert [f["id"] for f in frames] == [str(f["data"]["seq"]) for f in frames]
        events = [f["data"] for f in frames]
        assert [e["seq"] for e in events] == list(range(1, total + 1))
        stand_ins = [e for e in events if e["type"] == "error"]
        assert [e["code"] for e in stand_ins] == ["EVENT_TOO_LARGE"] * 3
        assert all("text" in e["message"] and str(MAX_LOADED_LINE_BYTES) in e["message"] for e in stand_ins)
        assert events[-1]["type"] == "done" and events[-1]["status"] == "completed"
    for found in answers[4:8]:
        run = json.loads(found)["run"]
        assert run["status"] == "completed" and run["events"] == total and not run["live"]
    for listing in answers[8:10]:
        (run,) = json.loads(listing)["runs"]
        assert run["id"] == RUN_ID and run["status"] == "completed" and run["events"] == total
        assert run["request"] == "a large run" and run["summary"] == "finished before the restart"
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    held = manager.get(RUN_ID).events.events  # the cached log: no event over the reload limit is held
    assert max(len(getattr(e, "text", "")) for e in held) < MAX_LOADED_LINE_BYTES and len(loads) == 1
    assert sorted(p.name for p in runs_dir.iterdir()) == [RUN_ID]
    assert all(json.loads(answer)["runs_dir"] == str(runs_dir) for answer in answers[10:])


@pytest.mark.parametrize("last", ["done", "torn"])
def test_an_oversized_last_line_keeps_how_the_run_ended(tmp_path, last):
    """The reload stand-in of a huge ``done`` is still a ``done`` with its status; a torn one is dropped."""
    path = tmp_path / "events.jsonl"
    huge_done = line(2, "done", status="blocked", summary="z" * 2000)
    path.write_bytes(line(1, "run_started", request="r") + (huge_done if last == "done" else huge_done[:1500]))
    log = EventLog.load(RUN_ID, path, max_line_bytes=1000)
    if last == "torn":  # a crash mid-write: dropped like any torn last line, so recovery closes the run
        assert [e.type for e in log.events] == ["run_started"] and not log.closed
        return
    assert [e.type for e in log.events] == ["run_started", "done"] and log.closed
    assert log.events[-1].status == "blocked" and log.events[-1].seq == 2
    assert "over the 1000-byte limit" in log.events[-1].summary
