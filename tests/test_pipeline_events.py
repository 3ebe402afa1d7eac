"""Events: one schema, redacted at construction, numbered, persisted, followed and replayed."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernel_ext.pipeline.bus import EventLog
from kernel_ext.pipeline.events import PHASES, make_event, parse_event


def test_secrets_never_enter_an_event():
    event = make_event(
        "tool_call",
        "r1",
        known_secrets=("hunter2-secret-value",),
        call_id="c1",
        name="test_api",
        summary="login with hunter2-secret-value",
        arguments={"headers": {"Authorization": "Bearer abc.def.ghijklmnop"}, "api_key": "sk-live-1234567890abcdef", "max_tokens": 5},
    )
    text = event.model_dump_json()
    assert "hunter2-secret-value" not in text and "abc.def" not in text and "sk-live" not in text
    assert event.arguments["max_tokens"] == 5


def test_unknown_fields_and_types_are_rejected():
    with pytest.raises(KeyError):
        make_event("no_such_type", "r1")
    with pytest.raises(ValueError):
        make_event("phase", "r1", phase="deploy", status="started")


def test_log_numbers_persists_and_reloads(tmp_path):
    path = tmp_path / "events.jsonl"
    events = EventLog("r1", path)
    events.emit("run_started", request="an app")
    for phase in PHASES:
        events.emit("phase", phase=phase, status="started")
    events.emit("done", status="completed")
    assert [e.seq for e in events.events] == list(range(1, 8))
    with pytest.raises(RuntimeError):
        events.emit("text", text="after done")
    lines = path.read_text().splitlines()
    assert len(lines) == 7 and json.loads(lines[-1])["type"] == "done"
    # a torn last line (crash mid-write) is dropped on reload
    with open(path, "a") as handle:
        handle.write('{"type": "text", "seq": 8')
    reloaded = EventLog.load("r1", path)
    assert [e.model_dump() for e in reloaded.events] == [e.model_dump() for e in events.events]
    assert parse_event(lines[1]).type == "phase"


async def test_follow_resumes_after_a_sequence_and_streams_live():
    events = EventLog("r1")
    events.emit("run_started", request="x")
    events.emit("text", text="one")

    async def collect(after):
        return [e.seq async for e in events.follow(after)]

    early = asyncio.create_task(collect(0))
    resumed = asyncio.create_task(collect(1))
    await asyncio.sleep(0.01)
    events.emit("text", text="two")
    await asyncio.sleep(0.01)
    events.emit("done", status="completed")
    assert await asyncio.wait_for(early, 2) == [1, 2, 3, 4]
    assert await asyncio.wait_for(resumed, 2) == [2, 3, 4]
