"""Re-running a cell whose run still waits: attach to that run instead of starting a second one.

A person who re-runs ``view = %besser generate ...`` (after a kernel restart, or because the
view looked stuck) almost always wants the run that is already waiting for them, not a second
run asking the same questions while the first waits forever. A live run of the very same
request (``hosting.requests.fingerprint``: the request's whole body) is attached to, with a
note saying so; ``--new`` starts another run anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ext.hosting.requests import HostedRequest, fingerprint

if TYPE_CHECKING:
    from kernel_ext.hosting.summaries import RunSummary
    from kernel_ext.magics.backends import Backend

ACTIVE = ("waiting_for_approval", "running", "queued")


def waiting_twin(backend: Backend, request: HostedRequest) -> RunSummary | None:
    """The newest live run of exactly ``request``, if one is still going."""
    wanted = fingerprint(request)
    twins = [run for run in backend.runs() if run.live and run.status in ACTIVE and run.fingerprint == wanted]
    return max(twins, key=lambda run: run.started_at or 0.0, default=None)


def twin_note(run: RunSummary) -> str:
    waiting = len(run.pending_approvals)
    state = f"waits for {waiting} approval{'s' * (waiting != 1)}" if waiting else "is still running"
    return (f"run {run.id} for this same request {state}: attached to it instead of starting a second run "
            "(add --new to start another)")
