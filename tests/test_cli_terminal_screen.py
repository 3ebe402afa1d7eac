"""``besser-agent generate`` as a person sees it: the real command in a tmux pane, the screen read
with ``capture-pane`` (what is on screen, in the order it is drawn), answered with ``send-keys``.

A denial during the shipped replay ends the run at once, naming the decision (never this
machine), and no call runs after it; the ``test_api`` card is the last thing on screen when it
asks, and lists its requests."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from test_cli_prompt import command, env

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")

PROMPT = "approve? [y]es / [n]o / [q]uit:"


class Pane:
    """One tmux session running ``argv``; its screen, and keys typed into it."""

    def __init__(self, argv: list[str], cwd: Path):
        self.name = f"besser-{uuid.uuid4().hex[:8]}"
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in env().items() if k.isidentifier())
        line = f"cd {shlex.quote(str(cwd))} && env -i {variables} {shlex.join(argv)}; echo EXIT=$?; sleep 3600"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "220", "-y", "60", line], check=True)

    def screen(self) -> str:
        """Everything the pane shows and has scrolled past, wrapped lines joined."""
        shown = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-5000", "-t", self.name],
                               check=True, capture_output=True, text=True).stdout
        return "\n".join(line.rstrip() for line in shown.splitlines() if line.strip())

    def wait_for_last(self, *endings: str, timeout: float = 300) -> str:
        """The screen once its last line starts with one of ``endings`` (a prompt, the exit line)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            last = screen.splitlines()[-1] if screen else ""
            if any(last.startswith(ending) for ending in endings):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never ended with {endings}:\n{screen[-3000:]}")
            time.sleep(0.2)  # tmux has no notification for a redraw; the screen is the event

    def type(self, keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, keys, "Enter"], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


@pytest.fixture
def pane_for(tmp_path):
    panes: list[Pane] = []

    def start(approve: str) -> tuple[Pane, Path]:
        out = tmp_path / f"run-{len(panes)}"
        panes.append(Pane(command(out, approve), tmp_path))
        return panes[-1], out

    yield start
    for pane in panes:
        pane.close()


def test_a_denial_in_the_replay_stops_it_naming_the_decision_and_runs_nothing_after(pane_for):
    pane, out = pane_for("none")
    screen = pane.wait_for_last(PROMPT)
    card = screen[screen.rindex("approval needed:"):]
    call_id = card.split("call ", 1)[1].split(")", 1)[0]
    pane.type("n")
    screen = pane.wait_for_last("EXIT=")
    assert screen.splitlines()[-1] == "EXIT=1"
    assert f"you denied {call_id} (" in screen and "a recording can only follow the decisions it was recorded with" in screen
    assert "--approve all or a live model" in screen
    assert "the person denied 'write_file' at the terminal; nothing ran" in screen and "on its card" not in screen
    assert "install what is missing" not in screen and "Traceback" not in screen
    assert screen.count(PROMPT) == 1  # asked once: the run stopped at the answer
    events = _events(out)
    denied = next(i for i, e in enumerate(events) if e["type"] == "approval_resolved")
    assert events[denied]["approved"] is False and events[denied]["by"] == "terminal"
    assert not [e for e in events[denied:] if e["type"] == "tool_call"]  # no call after the denial
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["REPLAY_DIVERGED"]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "failed"
    app = out / "app" / "backend"
    assert not (app / "auth.py").exists() and not (app / "deps.py").exists()  # nothing the recording wrote after


def test_the_test_api_card_is_the_last_thing_on_screen_and_lists_its_requests(pane_for):
    pane, out = pane_for("edits")  # edits pass; the test_api card is the one asked
    screen = pane.wait_for_last(PROMPT)
    card = screen[screen.rindex("approval needed:"):]
    assert card.startswith("approval needed: test_api (test, call ")
    lines = card.splitlines()
    assert lines[-1].startswith(PROMPT)  # nothing of the timeline drawn after the question
    assert "  4 requests:" in lines
    assert "    1. POST /auth/register with a JSON body -> expects 201" in lines
    assert "    3. GET /auth/me -> expects 200" in lines and "    4. GET /auth/me -> expects 401" in lines
    before = screen[: screen.rindex("approval needed:")].splitlines()
    assert before[-1].endswith("-> test_api action=run")  # its own timeline line came first
    pane.type("y")
    screen = pane.wait_for_last("EXIT=")
    assert screen.splitlines()[-1] == "EXIT=0", screen[-3000:]
    assert any(e["type"] == "approval_resolved" and e["name"] == "test_api" and e["approved"] for e in _events(out))

