"""Events: one schema, redacted at construction, numbered, persisted, followed and replayed."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.events import PHASES, make_event, parse_event


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
    assert await asyncio.wait_for(early, 30) == [1, 2, 3, 4]
    assert await asyncio.wait_for(resumed, 30) == [2, 3, 4]


def test_every_string_of_every_event_is_made_valid_and_written_as_ascii(tmp_path):
    """Lone surrogates become U+FFFD; controls other than newline and tab are escaped, in keys too."""
    from kernel_ext.hosting.events import TextEvent, to_json

    nasty = "a\ud800b\x1b[2J\x07\x85\u2028c\r\nd\te"
    events = EventLog("r1", tmp_path / "events.jsonl")
    events.emit("text", text=nasty)
    events.emit("tool_call", call_id="c1", name="write\udfff", arguments={"k\x1b": [nasty, float("nan")]})
    events.append(TextEvent(run_id="r1", text=nasty))  # built by hand: the same validator
    assert events.events[0].text == "a\ufffdb\\x1b[2J\\x07\\x85\u2028c\nd\te"
    assert events.events[1].name == "write\ufffd" and events.events[1].arguments == {"k\\x1b": [events.events[0].text, None]}
    raw = (tmp_path / "events.jsonl").read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 3
    assert [parse_event(line) for line in raw.decode().splitlines()] == events.events
    assert to_json(events.events[2]) == raw.decode().splitlines()[2]


def test_an_event_no_schema_accepts_is_a_named_error_and_the_log_goes_on(tmp_path):
    events = EventLog("r1", tmp_path / "events.jsonl")
    events.emit("cost", cost_usd="a lot")
    events.emit("done", status="no such status")
    assert [(e.type, getattr(e, "code", getattr(e, "status", ""))) for e in events.events] == [("error", "EVENT_INVALID"), ("done", "failed")]
    assert [json.loads(line)["type"] for line in (tmp_path / "events.jsonl").read_text().splitlines()] == ["error", "done"]


def test_a_log_that_cannot_be_written_says_so_in_an_event_and_ends_the_run_failed(tmp_path):
    from kernel_ext.hosting.layout import RunLayout
    from kernel_ext.hosting.run import start_run

    layout = RunLayout.create(tmp_path / "runs")

    async def body(ctx) -> None:
        ctx.events.emit("text", text="first")
        ctx.events.path.unlink()
        ctx.events.close_file()
        ctx.events.path = tmp_path / "no-such-folder" / "file-not-folder" / "events.jsonl"
        (tmp_path / "no-such-folder").write_text("a file where a folder should be")
        ctx.events.emit("text", text="second")  # cannot be written: named, then the run ends
        ctx.events.emit("text", text="never")

    async def go():
        run = start_run(body, layout)
        return run, await asyncio.wait_for(run.wait(), 10)

    run, done = asyncio.run(go())
    kinds = [(e.type, getattr(e, "code", "")) for e in run.events.events]
    assert kinds[-3:] == [("error", "EVENT_LOG_UNWRITABLE"), ("text", ""), ("done", "")], kinds
    assert done.status == "failed" and "cannot be written" in done.summary
    assert not any(getattr(e, "code", "") == "INTERNAL" for e in run.events.events)
