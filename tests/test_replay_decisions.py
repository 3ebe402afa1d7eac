"""A replay follows the decisions it was recorded with. A card answered the other way ends the
run at once, naming the decision as the cause (never this machine), before the turn's next call
runs: through the Python API here, on a terminal in test_cli_terminal_screen.py."""

from __future__ import annotations

import json

import pytest

from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.replay import ReplayProvider, _recorded_denial
from kernel_ext.scenarios import library_jwt

DENIED = "error [approval_denied]: 'write_file' was not approved on its card; nothing ran"


def _exchanges(*contents: str) -> list[dict]:
    """A recording whose second request answers the first reply's calls with ``contents``."""
    calls = [{"id": f"e{i}", "name": "write_file", "arguments": "{}"} for i in range(len(contents))]
    second = {"messages": [{"role": "user", "text": "build it"},
                           {"role": "assistant", "text": "", "tool_calls": calls},
                           *({"role": "tool", "call_id": f"e{i}", "name": "write_file", "content": text,
                              "is_error": text.startswith("error")} for i, text in enumerate(contents))]}
    return [{"request": {"messages": [{"role": "user", "text": "build it"}]}, "events": []}, {"request": second, "events": []}]


@pytest.mark.parametrize(("contents", "index", "expected"), [
    (("wrote backend/a.py",), 0, False),
    ((DENIED,), 0, True),
    (("wrote backend/a.py", DENIED), 1, True),
    (("wrote backend/a.py", DENIED), 0, False),
])
def test_the_recorded_decision_is_read_from_the_next_request(contents, index, expected):
    assert _recorded_denial(_exchanges(*contents), 1, index, len(contents)) is expected


@pytest.mark.parametrize(("position", "index", "count"), [(2, 0, 1), (1, 0, 2), (1, 3, 1)])
def test_a_recording_that_does_not_show_the_decision_says_nothing(position, index, count):
    assert _recorded_denial(_exchanges("wrote backend/a.py"), position, index, count) is None


def test_a_live_or_scripted_provider_never_claims_a_recorded_decision():
    from kernel_ext.providers.scripted import Script, ScriptedProvider

    assert ScriptedProvider(Script.of("s", [])).recorded_denial(0, 1) is None
    replay = ReplayProvider(library_jwt.CASSETTE)
    assert replay.recorded_denial(0, 1) is None  # before any reply: no decision to compare
    replay.position = 2  # the plan and the first tool turn replayed: its two writes were approved when recorded
    assert replay.recorded_denial(0, 2) is False and replay.recorded_denial(1, 2) is False
    assert replay.recorded_denial(0, 1) is None  # another count than the recording's: not this turn


async def test_a_denied_card_ends_the_replay_before_the_turns_next_call(tmp_path):
    out = tmp_path / "run"
    asked: list[str] = []

    def deny_first(request):
        asked.append(request.call_id)
        return False

    run = generate("example:library", library_jwt.REQUEST, run_dir=out, provider=f"replay:{library_jwt.CASSETTE}",
                   approver=deny_first)
    done = await run.wait()
    assert done is not None and done.status == "failed"
    assert len(asked) == 1  # one card: nothing was asked, or run, after the denial
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    denied = next(i for i, e in enumerate(events) if e["type"] == "approval_resolved")
    assert not [e for e in events[denied:] if e["type"] == "tool_call"]
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["REPLAY_DIVERGED"]
    message = errors[0]["message"]
    assert f"denied {asked[0]} (write_file), which was approved when this run was recorded" in message
    assert "a recording can only follow the decisions it was recorded with" in message
    assert "install what is missing" not in message
    assert not (out / "app" / "backend" / "deps.py").exists()
