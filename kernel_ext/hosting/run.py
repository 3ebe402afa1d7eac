"""A run you can follow, await, approve into, or cancel: the handle every front end shares.

The server extension, the magics (in-process mode), the command line and the Python API all
start runs here. A run is an asyncio task executing a *body* (the orchestrator, or an authored
scenario) with a ``RunContext``: its folder, its event log, and the ``AsyncApprover`` through
which approval cards (or a scripted host approver) answer. The body never touches transport.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ext.boundary.approval import AsyncApprover, Verdict
from kernel_ext.hosting.bus import EventLog, EventLogUnwritable
from kernel_ext.hosting.events import ApprovalRequested, ApprovalResolved, DoneEvent, QueuedEvent
from kernel_ext.hosting.layout import RunLayout

if TYPE_CHECKING:
    from kernel_ext.hosting.requests import HostedRequest

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What a run body gets: where to work, where to report, how to ask a human."""

    layout: RunLayout
    events: EventLog
    approver: AsyncApprover
    options: HostedRequest | None = None  # the request the run was started with (None: a library body)
    started_at: float = field(default_factory=time.monotonic)
    timed_out: str = ""  # why the run's runtime budget ended it (set by ``keep_runtime``'s deadline)
    cancelled_by: str = ""  # who cancelled it (``Run.cancel``), said on its ``done``
    # sha256 of the request's JSON, once: a request can hold megabytes of model_json, and every
    # summary (each GET of the run) named it (0.3-0.5 s on the loop each; red team 2)
    fingerprint: str | None = field(default=None, repr=False)

    def request_fingerprint(self) -> str | None:
        """The request's fingerprint (``requests.fingerprint``), computed at most once."""
        from kernel_ext.hosting.options import RunRequest, ScenarioRequest
        from kernel_ext.hosting.requests import fingerprint

        if self.fingerprint is None and isinstance(self.options, (RunRequest, ScenarioRequest)):
            self.fingerprint = fingerprint(self.options)
        return self.fingerprint

    def keep_runtime(self, seconds: float | None) -> None:
        """From now (the run was admitted), its runtime budget bounds every approval card: a card
        still open past it is withdrawn and the run's task ends ``timeout``, freeing its place."""
        if seconds is None:
            return
        task = asyncio.current_task()
        self.approver.deadline = time.monotonic() + seconds

        def overdue() -> None:
            self.timed_out = f"the run's runtime budget ({seconds:g} s) was spent while an approval card waited"
            if task is not None:
                task.cancel()

        self.approver.on_overdue = overdue

    @property
    def run_id(self) -> str:
        return self.layout.run_id

    @property
    def known_secrets(self) -> tuple[str, ...]:
        """The run's secrets (given to ``start_run``): its event log redacts them, its boundary refuses them."""
        return self.events.known_secrets

    def add_secrets(self, values: Iterable[str]) -> None:
        """Learn more secrets of this run (the provider's key, resolved after the run started)."""
        self.events.known_secrets = tuple(sorted({*self.events.known_secrets, *(v for v in values if v)}))


RunBody = Callable[[RunContext], Awaitable[None]]


class Run:
    """One running (or finished) run. ``status`` is derived from its events, never stored twice."""

    def __init__(self, context: RunContext, task: asyncio.Task[None] | None = None):
        self.context = context
        self.task = task

    @property
    def id(self) -> str:
        return self.context.run_id

    @property
    def events(self) -> EventLog:
        return self.context.events

    @property
    def status(self) -> str:
        last = self.events.events[-1] if self.events.events else None
        if isinstance(last, DoneEvent):
            return last.status
        if self.task is None or self.task.done():
            return "interrupted"
        if self.queue_position is not None:
            return "queued"
        return "waiting_for_approval" if self.context.approver.pending() else "running"

    @property
    def queue_position(self) -> int | None:
        """Where the run waits to be admitted (1 = next), from its last event; None once it runs."""
        last = self.events.events[-1] if self.events.events else None
        if isinstance(last, QueuedEvent) and last.position > 0 and self.task is not None and not self.task.done():
            return last.position
        return None

    def pending_approvals(self) -> tuple[str, ...]:
        return self.context.approver.pending()

    def decide(
        self, call_id: str, approved: bool, by: str = "card", *, digest: str | None = None, rest_of_kind: bool = False,
    ) -> Verdict:
        """Settle a pending approval, once. ``digest`` (the card's ``request_digest``) binds the
        decision to the frozen request shown; ``rest_of_kind`` also approves the rest of its
        category for this run (never shell; ``boundary/grants.py``). A refusal is a false
        ``Verdict`` naming why."""
        verdict = self.context.approver.resolve(call_id, approved, by, digest, rest_of_kind=rest_of_kind)
        if verdict.code != "NO_SUCH_APPROVAL":
            return verdict
        # a reloaded run: its approver never saw the request
        for event in reversed(self.events.of_type("approval_resolved", "approval_requested")):
            if isinstance(event, ApprovalResolved) and event.call_id == call_id:
                return Verdict(False, "ALREADY_DECIDED", f"{call_id!r} was already decided; a decision is final")
            if isinstance(event, ApprovalRequested) and event.call_id == call_id:
                return Verdict(False, "APPROVAL_CLOSED", f"{call_id!r} can no longer be decided: the run is {self.status}")
        return verdict

    def cancel(self, by: str = "host") -> bool:
        """End the run; ``by`` (``person``, ``server``, ``host``) goes on its ``done`` event, so the
        view can say who cancelled it rather than "nobody"."""
        if self.task is None or self.task.done():
            return False
        self.context.cancelled_by = self.context.cancelled_by or by
        self.task.cancel()
        return True

    async def wait(self) -> DoneEvent | None:
        """Wait for the run to end; the ``done`` event (None if the run was interrupted)."""
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)
        last = self.events.events[-1] if self.events.events else None
        return last if isinstance(last, DoneEvent) else None


def start_run(
    body: RunBody,
    layout: RunLayout,
    *,
    options: HostedRequest | None = None,
    approval_timeout: float | None = None,
    known_secrets: tuple[str, ...] = (),
) -> Run:
    """Start ``body`` as a task on the running loop; every ending emits exactly one ``done``."""
    events = EventLog(layout.run_id, layout.events_path, known_secrets)
    context = RunContext(layout, events, AsyncApprover(timeout=approval_timeout), options)
    run = Run(context)
    run.task = asyncio.get_running_loop().create_task(_guarded(body, context), name=f"besser-run-{layout.run_id}")
    run.task.add_done_callback(lambda _task: _close_unstarted(events))
    return run


def _close_unstarted(events: EventLog) -> None:
    """A task cancelled before its first step never ran ``_guarded``: end its log here, so
    followers and the status see ``cancelled`` instead of waiting forever."""
    if not events.closed:
        events.emit("error", code="CANCELLED", message="the run was cancelled before it started")
        events.emit("done", status="cancelled", summary="cancelled before it started")
    events.close_file()


async def _guarded(body: RunBody, context: RunContext) -> None:
    events = context.events
    try:
        await body(context)
    except asyncio.CancelledError:
        if context.timed_out:  # our own cancel: the budget ended it, nobody cancelled it
            if not events.closed:
                events.emit("error", code="RUNTIME_BUDGET_SPENT", message=context.timed_out)
                events.emit("done", status="timeout", summary=context.timed_out)
            return
        if not events.closed:
            events.emit("error", code="CANCELLED", message="the run was cancelled")
            events.emit("done", status="cancelled", summary="cancelled before it finished", cancelled_by=context.cancelled_by)
        raise
    except EventLogUnwritable as exc:  # already said by its own ``error`` event
        if not events.closed:
            events.emit("done", status="failed", summary=f"the run stopped: {exc}")
    except Exception as exc:  # a bug in a body must still end the run visibly
        log.exception("run %s failed", context.run_id)
        if not events.closed:
            events.emit("error", code="INTERNAL", message=f"{type(exc).__name__}: {exc}")
            events.emit("done", status="failed", summary="the run stopped on an internal error")
    else:
        if not events.closed:
            events.emit("done", status="completed")
    finally:
        events.close_file()


def load_finished(run_dir: Path) -> Run:
    """A run reloaded from its folder (after a restart): its events replay; nothing runs."""
    layout = RunLayout(Path(run_dir))
    events = EventLog.load(layout.run_id, layout.events_path)
    return Run(RunContext(layout, events, AsyncApprover()), task=None)

