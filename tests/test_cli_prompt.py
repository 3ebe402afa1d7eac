"""``python -m kernel_ext generate`` asks per card on a terminal (a real pseudo-terminal, the real
command, the shipped Library JWT recording), and says at the start what happens to approvals
when there is no terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernel_ext.cli.prompt import announce
from kernel_ext.scenarios import library_jwt

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "approve? [y]es / [n]o / [q]uit: "


def env() -> dict[str, str]:
    values = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("BESSER_LLM_PROVIDER", "BESSER_LLM_CASSETTE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "BESSER_LLM_ENABLE_SHELL_TOOLS"):
        values.pop(name, None)
    return values


def command(out: Path, approve: str, provider: str = f"replay:{library_jwt.CASSETTE}") -> list[str]:
    return [sys.executable, "-m", "kernel_ext", "generate", "example:library", library_jwt.REQUEST, "--out", str(out),
            "--provider", provider, "--approve", approve]


class Terminal:
    """The command on a pseudo-terminal: what it printed, and lines typed into it."""

    def __init__(self, argv: list[str], cwd: Path):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(argv, cwd=cwd, env=env(), stdin=slave, stdout=slave, stderr=slave,
                                        start_new_session=True)
        os.close(slave)
        self.output = ""

    def read_until(self, text: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear:\n{self.output[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the other end closed
                    chunk = b""
                if not chunk and self.process.poll() is not None:
                    raise AssertionError(f"the command ended before {text!r}:\n{self.output[-3000:]}")
                self.output += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return self.output

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self, timeout: float = 300) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    self.output += os.read(self.master, 65536).decode("utf-8", "replace").replace("\r\n", "\n")
                except OSError:
                    break
        code = self.process.wait(max(deadline - time.monotonic(), 1))
        os.close(self.master)
        return code


def resolved(out: Path) -> list[tuple[str, bool, str]]:
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return [(e["name"], e["approved"], e["by"]) for e in events if e["type"] == "approval_resolved"]


def test_a_terminal_is_asked_per_card_and_yes_runs_the_call(tmp_path):
    out = tmp_path / "run"
    terminal = Terminal(command(out, "edits"), tmp_path)
    before = terminal.read_until(PROMPT)
    card = before[before.rindex("approval needed:"):]
    assert card.startswith("approval needed: test_api (test, call ")
    assert "no terminal to ask on" not in before
    terminal.type("maybe")  # not an answer: asked again
    terminal.read_until("please answer y, n or q")
    terminal.type("y")
    code = terminal.finish()
    assert code == 0, terminal.output[-3000:]
    assert "done: completed" in terminal.output and "Traceback" not in terminal.output
    assert ("test_api", True, "terminal") in resolved(out)
    assert all(by in ("auto", "terminal") for _, _, by in resolved(out))


def test_quit_denies_the_card_and_cancels_the_run(tmp_path):
    out = tmp_path / "run"
    terminal = Terminal(command(out, "none"), tmp_path)
    before = terminal.read_until(PROMPT)
    card = before[before.rindex("approval needed:"):]
    assert "(edit, call " in card or "(generate, call " in card
    terminal.type("q")
    code = terminal.finish()
    assert code == 1, terminal.output[-4000:]
    assert "quit: the run is cancelled" in terminal.output and "done: cancelled" in terminal.output, terminal.output[-4000:]
    assert "Traceback" not in terminal.output
    decisions = resolved(out)
    assert len(decisions) == 1 and decisions[0][1:] == (False, "terminal")
    last = json.loads((out / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "done" and last["status"] == "cancelled"


def test_without_a_terminal_the_first_line_says_what_happens_to_approvals(tmp_path):
    for approve in ("none", "edits"):
        process = subprocess.Popen(command(tmp_path / approve, approve, provider="none"), cwd=tmp_path, env=env(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            first = process.stdout.readline().rstrip("\n")
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
            process.stdout.close()
        assert first == announce(approve)
    assert "will be denied" in announce("none") and "--approve edits|shell|all" in announce("none")
    assert announce("edits").startswith("no terminal to ask on: --approve edits: file edits and generator runs are approved")


def test_the_help_says_what_generate_gives_a_person():
    """``besser-agent --help`` in plain words: the whole pipeline, not a phase number (issue 31, item 10)."""
    shown = subprocess.run([sys.executable, "-m", "kernel_ext", "--help"], env=env(), capture_output=True, text=True, check=True).stdout
    line = " ".join(shown.split("generate", 1)[1].split("scenario", 1)[0].split())
    assert "Phase 1" not in line
    assert "build a working app from a model" in line and "the whole run" in line and "wait for your yes" in line
