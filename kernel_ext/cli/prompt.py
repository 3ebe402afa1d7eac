"""The approval card on a terminal: ``generate`` on a TTY asks per card, yes / no / quit.

Each card shows what the boundary froze: the tool and its category, the diff of an edit, or a
command with its risk class. ``y`` approves that one call, ``n`` denies it (the run goes on,
the model sees ``approval_denied``), ``q`` denies it and cancels the run. Categories named by
``--approve`` never reach the prompt. Without a terminal there is nobody to ask: ``announce``
says at the start what will become of the calls that need approval (denied, unless
``--approve`` names their category), so nobody waits on a question that will never be asked.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import IO, Any

from kernel_ext.safetext import shown_text

DIFF_LINES = 60
CATEGORIES_BY_MODE = {
    "none": "",
    "edits": "file edits and generator runs",
    "shell": "file edits, generator runs and shell commands",
    "all": "file edits, generator runs, shell commands and tests",
}


def interactive(stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> bool:
    """A person at a terminal: both ends are TTYs."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    return bool(stdin and stdout and stdin.isatty() and stdout.isatty())


def announce(approve: str) -> str:
    """What happens to the calls that need approval when no terminal can ask."""
    approved = CATEGORIES_BY_MODE.get(approve, "")
    rest = ("every other call that needs approval" if approved
            else "every call that needs approval (file edits, generators, tests, commands)")
    first = f"--approve {approve}: {approved} are approved without asking; " if approved else ""
    return (f"no terminal to ask on: {first}{rest} will be denied, and the run goes on without it"
            + ("" if approved else "; pass --approve edits|shell|all to approve categories in advance"))


def card_text(request: Any) -> str:
    """One card as terminal lines: tool, category, then the diff or the command with its risk."""
    arguments = dict(request.arguments)
    details = {key: json.loads(value) for key, value in request.details}
    lines = [f"approval needed: {request.name} ({request.category}, call {request.call_id})"]
    command = _value(arguments.get("command"))
    if command:
        found = details.get("plan")
        plan: dict[str, Any] = found if isinstance(found, dict) else {}
        risk = details.get("risk") or plan.get("risk") or "unclassified"
        lines.append(f"  command: {command}")
        lines.append(f"  risk: {risk}")
        reasons = plan.get("reasons") or details.get("reasons") or []
        lines.extend(f"    - {reason}" for reason in reasons[:6] if isinstance(reason, str))
    elif _value(arguments.get("path")):
        lines.append(f"  file: {_value(arguments['path'])}")
    lines.extend(request_lines(arguments.get("requests")))
    proposal = (request.proposal or "").splitlines()
    if proposal:
        lines.extend("  " + line for line in proposal[:DIFF_LINES])
        if len(proposal) > DIFF_LINES:
            lines.append(f"  … {len(proposal) - DIFF_LINES} more lines")
    return shown_text("\n".join(lines))


def request_lines(text: str | None) -> list[str]:
    """A test_api card's requests, one line each: method, path, the status it expects."""
    try:
        requests = json.loads(text) if text else None
    except ValueError:
        return []
    if not isinstance(requests, list):
        return []
    lines = [f"  {len(requests)} request{'' if len(requests) == 1 else 's'}:"]
    for number, spec in enumerate(requests[:DIFF_LINES], 1):
        spec = spec if isinstance(spec, dict) else {}
        expected = spec.get("expected_status")
        wanted = "/".join(map(str, expected)) if isinstance(expected, list) else str(expected or "any status")
        body = " with a JSON body" if "json" in spec else ""
        lines.append(f"    {number}. {str(spec.get('method', '?')).upper()} {spec.get('path', '?')}{body} -> expects {wanted}")
    if len(requests) > DIFF_LINES:
        lines.append(f"    … {len(requests) - DIFF_LINES} more requests")
    return lines


class Printed:
    """How far the timeline has printed, so a card is asked after the lines that lead to it
    (the approver is called before the printer wakes for the card's own event)."""

    def __init__(self) -> None:
        self._shown: dict[str, asyncio.Event] = {}
        self.ended = False

    def _flag(self, call_id: str) -> asyncio.Event:
        return self._shown.setdefault(call_id, asyncio.Event())

    def mark(self, event: Any) -> None:
        if event.type == "approval_requested":
            self._flag(event.call_id).set()

    def end(self) -> None:
        self.ended = True
        for flag in self._shown.values():
            flag.set()

    async def reached(self, call_id: str) -> None:
        if not self.ended:
            await self._flag(call_id).wait()


def cancel_once_recorded(run: Any, call_id: str) -> None:
    """Cancel ``run`` as soon as its log holds the decision on ``call_id`` (a listener on the
    log: a cancel landing before that event would leave the person's last answer unrecorded)."""

    def listen(event: Any) -> None:
        if event.type == "approval_resolved" and event.call_id == call_id:
            run.cancel()

    run.events.add_listener(listen)


def _value(text: str | None) -> str:
    if text is None:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""


class TerminalCards:
    """Asks a person at the terminal, one card at a time; after ``q`` every card is denied unasked."""

    def __init__(self, decide: Callable[[str, bool], object], cancel: Callable[[str], object],
                 stdin: IO[str] | None = None, stdout: IO[str] | None = None, printed: Printed | None = None):
        self.decide, self.cancel, self.printed = decide, cancel, printed
        self.stdin, self.stdout = stdin or sys.stdin, stdout or sys.stdout
        self.quit = False
        self._lock = asyncio.Lock()  # one question at a time, even if two cards arrive together

    async def __call__(self, request: Any) -> None:
        async with self._lock:
            if self.quit:
                self.decide(request.call_id, False)
                return
            if self.printed is not None:
                await self.printed.reached(request.call_id)
            self._say(card_text(request))
            answer = await self._ask()
        if answer == "q":
            self.quit = True
            self.decide(request.call_id, False)
            self._say("quit: the run is cancelled")
            self.cancel(request.call_id)
            return
        self.decide(request.call_id, answer == "y")

    async def _ask(self) -> str:
        while True:
            self._say("approve? [y]es / [n]o / [q]uit: ", end="")
            line = await asyncio.to_thread(self.stdin.readline)
            if not line:  # the terminal closed: nobody can answer any more
                self._say("")
                return "q"
            answer = line.strip().lower()[:1]
            if answer in ("y", "n", "q"):
                return answer
            self._say("please answer y, n or q")

    def _say(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.stdout, flush=True)
