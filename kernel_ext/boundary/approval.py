"""The frozen approval request and the host-side approvers that decide on it.

The executor builds an ``ApprovalRequest``; callers cannot hand one in. Approvers are host
code (a test's always-yes, a notebook's scripted list, the Jupyter card through
``AsyncApprover``), never the model. Approval is per invocation: nothing is remembered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kernel_ext.boundary.grants import KindGrants
from kernel_ext.workspace.versions import FileSnapshot

log = logging.getLogger(__name__)

WITHDRAWN_NOTE = "withdrawn: the run's runtime budget was spent while this card waited"


# Who denied a call, as the tool result says it to the model and the timeline shows it to a person
# (the ``by`` of ``approval_resolved``): a person's "no" is named as theirs, never the host's.
_DENIED_BY = {
    "card": "the person denied {name} on its card",
    "terminal": "the person denied {name} at the terminal",
    "timeout": "nobody answered the card for {name} before it expired",
    "host": "the program running this run denied {name}",
}


def denial_words(name: str, by: str) -> str:
    """Why ``name`` did not run, naming who decided (``by``); the executor's ``approval_denied`` message."""
    words = _DENIED_BY.get(by, "{name} was not approved")
    return f"{words.format(name=repr(name))}; nothing ran"


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
    run_id: str = ""  # the run that asks: part of the digest, so a decision settles only this run's request

    def argument(self, key: str) -> Any:
        return json.loads(dict(self.arguments)[key])

    @property
    def digest(self) -> str:
        """sha256 of the frozen request as shown (call id, tool, arguments, file hashes, proposal)
        and of the run that asks. A decision names it, so it can only settle the very request the
        person saw, in that run (two runs with the same card ``c1`` have different digests). It
        stays deterministic: the same run id and request give the same digest on a replay.
        """
        canonical = json.dumps({**self.as_dict(), "run_id": self.run_id}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

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
Observer = Callable[[BoundaryEvent], "Awaitable[None] | None"]


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


@dataclass(frozen=True)
class Verdict:
    """What became of one decision: accepted, or refused with a named ``code`` and a one-line reason.

    False when refused, so ``if run.decide(...)`` reads naturally. Codes: ``ALREADY_DECIDED``,
    ``STALE_REQUEST`` (the digest names another request), ``APPROVAL_CLOSED`` (asked for, no
    longer pending), ``NO_SUCH_APPROVAL``, ``GRANT_REFUSED`` (a rest-of-kind grant on a shell card or a host step's card).
    """

    accepted: bool
    code: str = ""
    reason: str = ""

    def __bool__(self) -> bool:
        return self.accepted


class AsyncApprover:
    """Waits for a decision that arrives from elsewhere (an approval card, a REST call).

    ``on_request`` is told about each pending request (to publish a card). ``resolve`` settles
    one request, bound to its call id and, when given, to the digest of the frozen request; a
    second decision for the same call is refused by name. A request whose call id was already
    asked for is denied at once (identities are minted once per run; a reused one is a host
    bug, never a second chance). A ``timeout`` (seconds) counts as denial; cancelling the
    waiting task cancels the request. A ``deadline`` (``time.monotonic()``: the end of the run's
    runtime budget, set by hosting when the run is admitted) bounds every wait too: a card still
    open at it is withdrawn (denied, by "timeout", with a note) and ``on_overdue`` is told, so the
    run ends instead of holding its place while nobody answers. ``grants`` holds the person's rest-of-kind grants
    (``boundary/grants.py``): made only through ``resolve(..., rest_of_kind=True)`` on a
    pending card; a request they cover is approved without a card and ``notes`` says by which.
    """

    def __init__(
        self,
        on_request: Callable[[ApprovalRequest], object] | None = None,
        timeout: float | None = None,
    ):
        self.on_request = on_request
        self.timeout = timeout
        self.deadline: float | None = None
        self.on_overdue: Callable[[], object] | None = None
        self._pending: dict[str, tuple[asyncio.Future[bool], str]] = {}
        self._requests: dict[str, ApprovalRequest] = {}  # the pending requests, for a grant's category
        self._asked: set[str] = set()
        self.decided: dict[str, bool | None] = {}
        self.decided_by: dict[str, str] = {}  # call id -> who decided: the resolver's name or "timeout"
        self.notes: dict[str, str] = {}  # call id -> how it was decided, when a grant decided it
        self.grants = KindGrants()

    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    def digest(self, call_id: str) -> str | None:
        """The digest of the pending request ``call_id`` (None when it is not pending)."""
        entry = self._pending.get(call_id)
        return None if entry is None else entry[1]

    async def __call__(self, request: ApprovalRequest) -> bool:
        call_id = request.call_id
        if call_id in self._asked:
            log.error("approval for %r asked twice; denied (call ids are minted once per run)", call_id)
            self.decided_by.setdefault(call_id, "duplicate id")
            return False
        self._asked.add(call_id)
        grant = self.grants.covering(request)
        if grant is not None:
            self.decided[call_id], self.decided_by[call_id], self.notes[call_id] = True, "grant", grant.note
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (future, request.digest)
        self._requests[call_id] = request
        try:
            if self.on_request is not None:
                outcome = self.on_request(request)
                if asyncio.iscoroutine(outcome):
                    await outcome
            # asyncio.wait, not wait_for(shield(...)): a cancel that lands as the decision arrives
            # must still cancel the run (wait_for swallowed it there and the run went on)
            wait, overdue = self._wait_bound()
            done, _ = await asyncio.wait({future}, timeout=wait)
            if not done:
                self.decided[call_id] = False
                self.decided_by[call_id] = "timeout"
                if overdue:
                    self.notes[call_id] = WITHDRAWN_NOTE
                    if self.on_overdue is not None:
                        self.on_overdue()
                return False
            return future.result()
        finally:
            self._pending.pop(call_id, None)
            self._requests.pop(call_id, None)
            if not future.done():
                future.cancel()

    def _wait_bound(self) -> tuple[float | None, bool]:
        """How long a card may wait (None: until answered), and whether the run's deadline is that bound."""
        if self.deadline is None:
            return self.timeout, False
        left = max(self.deadline - time.monotonic(), 0.0)
        return (left, True) if self.timeout is None or left <= self.timeout else (self.timeout, False)

    def card_wait(self) -> float | None:
        """Seconds a card opened now may wait before it counts as denied (None: until answered)."""
        return self._wait_bound()[0]

    def resolve(
        self, call_id: str, approved: bool, by: str = "card", digest: str | None = None, *, rest_of_kind: bool = False,
    ) -> Verdict:
        """Settle the pending request ``call_id``; a refused ``Verdict`` (False) names why not.
        ``rest_of_kind`` (with an approval) also grants the rest of its category for this run,
        settling the other pending requests it covers; refused (nothing decided) for a shell call."""
        if call_id in self.decided:
            return Verdict(False, "ALREADY_DECIDED", f"{call_id!r} was already decided; a decision is final")
        entry = self._pending.get(call_id)
        if entry is None or entry[0].done():
            if call_id in self._asked:
                return Verdict(False, "APPROVAL_CLOSED", f"{call_id!r} is no longer waiting for a decision")
            return Verdict(False, "NO_SUCH_APPROVAL", f"no approval of {call_id!r} was asked for")
        future, expected = entry
        if digest is not None and digest != expected:
            return Verdict(False, "STALE_REQUEST",
                           f"the decision names another request than {call_id!r} (digest differs); nothing was decided")
        if rest_of_kind and approved:
            try:
                grant = self.grants.add(self._requests[call_id], by)
            except ValueError as exc:
                return Verdict(False, "GRANT_REFUSED", f"nothing was decided: {exc}")
            for other, request in list(self._requests.items()):
                if other != call_id and self.grants.covering(request) is grant and not self._pending[other][0].done():
                    self.decided[other], self.decided_by[other], self.notes[other] = True, "grant", grant.note
                    self._pending[other][0].set_result(True)
            self.notes[call_id] = grant.made_note  # the log says where the grant was made
        self.decided[call_id] = bool(approved)
        self.decided_by[call_id] = by
        future.set_result(bool(approved))
        return Verdict(True)


def freeze_arguments(arguments: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Deep copy as canonical JSON text: nothing a callback does to the original reaches it."""
    return tuple((key, json.dumps(value, sort_keys=True, ensure_ascii=False)) for key, value in arguments.items())


def thaw_arguments(frozen: Iterable[tuple[str, str]]) -> dict[str, Any]:
    return {key: json.loads(text) for key, text in frozen}
