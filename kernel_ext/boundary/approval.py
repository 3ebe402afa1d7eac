"""The frozen approval request and the host-side approvers that decide on it.

The executor builds an ``ApprovalRequest``; callers cannot hand one in. Approvers are host
code (a test's always-yes, a notebook's scripted list, the Jupyter card through
``AsyncApprover``), never the model. Approval is per invocation: nothing is remembered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kernel_ext.workspace.versions import FileSnapshot


@dataclass(frozen=True)
class ApprovalRequest:
    """Immutable details of one proposed operation, shown to the approver.

    ``arguments`` pairs each argument name with its value as canonical JSON text, so the
    request holds no mutable object. ``files`` are snapshots of every file the call touches
    or whose content the decision depends on.
    """

    call_id: str
    name: str
    category: str
    arguments: tuple[tuple[str, str], ...]
    files: tuple[FileSnapshot, ...] = ()
    proposal: str = ""
    details: tuple[tuple[str, str], ...] = ()  # the tool's preparation data (e.g. a command's risk), as JSON text

    def argument(self, key: str) -> Any:
        return json.loads(dict(self.arguments)[key])

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view for cards and events (file text is left out; hashes stay)."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "category": self.category,
            "arguments": {k: json.loads(v) for k, v in self.arguments},
            "files": [
                {"path": f.path, "exists": f.exists, "sha256": f.sha256, "problem": f.problem} for f in self.files
            ],
            "proposal": self.proposal,
            "details": {k: json.loads(v) for k, v in self.details},
        }


@dataclass(frozen=True)
class BoundaryEvent:
    """What the executor reports to its observer: ``approval_requested``, ``approval_resolved``, ``dispatch``."""

    kind: str
    call_id: str
    name: str
    request: ApprovalRequest | None = None
    approved: bool | None = None
    reason: str = ""


Approver = Callable[[ApprovalRequest], "bool | Awaitable[bool]"]
Observer = Callable[[BoundaryEvent], "None | Awaitable[None]"]


def always_approve(request: ApprovalRequest) -> bool:
    """For tests and authored demos only: grants every request."""
    return True


def always_deny(request: ApprovalRequest) -> bool:
    """Denies every request (the safe choice when no human is present)."""
    return False


@dataclass
class ScriptedApprover:
    """Answers from an authored list of decisions, in order; denies once the list runs out.

    Used by notebooks in CI (labelled as scripted) where a person would click in a live
    session. ``seen`` records every request, so a test can assert what was asked.
    """

    decisions: list[bool]
    seen: list[ApprovalRequest] = field(default_factory=list)

    def __call__(self, request: ApprovalRequest) -> bool:
        self.seen.append(request)
        return self.decisions.pop(0) if self.decisions else False


class AsyncApprover:
    """Waits for a decision that arrives from elsewhere (an approval card, a REST call).

    ``on_request`` is told about each pending request (to publish a card). ``resolve`` settles
    one request; a second decision for the same call is refused. A ``timeout`` (seconds)
    counts as denial; cancelling the waiting task cancels the request.
    """

    def __init__(
        self,
        on_request: Callable[[ApprovalRequest], Any] | None = None,
        timeout: float | None = None,
    ):
        self.on_request = on_request
        self.timeout = timeout
        self._pending: dict[str, asyncio.Future[bool]] = {}
        self.decided: dict[str, bool | None] = {}
        self.decided_by: dict[str, str] = {}  # call id -> who decided: the resolver's name or "timeout"

    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    async def __call__(self, request: ApprovalRequest) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[request.call_id] = future
        try:
            if self.on_request is not None:
                outcome = self.on_request(request)
                if asyncio.iscoroutine(outcome):
                    await outcome
            try:
                decision = await asyncio.wait_for(asyncio.shield(future), self.timeout)
            except TimeoutError:
                self.decided[request.call_id] = False
                self.decided_by[request.call_id] = "timeout"
                return False
            return decision
        finally:
            self._pending.pop(request.call_id, None)
            if not future.done():
                future.cancel()

    def resolve(self, call_id: str, approved: bool, by: str = "card") -> bool:
        """Settle a pending request; False when there is none (unknown or already decided)."""
        future = self._pending.get(call_id)
        if future is None or future.done():
            return False
        self.decided[call_id] = bool(approved)
        self.decided_by[call_id] = by
        future.set_result(bool(approved))
        return True


def freeze_arguments(arguments: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Deep copy as canonical JSON text: nothing a callback does to the original reaches it."""
    return tuple((key, json.dumps(value, sort_keys=True, ensure_ascii=False)) for key, value in arguments.items())


def thaw_arguments(frozen: Iterable[tuple[str, str]]) -> dict[str, Any]:
    return {key: json.loads(text) for key, text in frozen}
