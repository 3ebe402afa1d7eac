"""``POST runs/{id}/approvals/{call_id}`` and ``POST runs/{id}/cancel``: a person's decisions.

An approval is decided once: a second decision for the same call is refused with 409
``ALREADY_DECIDED`` (also when the first came from the card in another tab); a call that was
asked for but can no longer be decided (its run ended) answers 409 ``APPROVAL_CLOSED``.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, ValidationError
from tornado import web

from kernel_ext.pipeline.run import Run
from kernel_ext.server.handlers.base import BesserHandler, Refusal


class Decision(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    approved: bool


class ApprovalHandler(BesserHandler):
    auth_resource = "besser-agent:approvals"

    @web.authenticated
    @authorized(action="write")
    async def post(self, run_id: str, call_id: str) -> None:
        try:
            decision = Decision.model_validate(await self.json_body())
        except ValidationError:
            raise Refusal(400, "INVALID_REQUEST", 'the body must be {"approved": true} or {"approved": false}') from None
        run = self.find_run(run_id)
        if not run.decide(call_id, decision.approved):
            raise _why_not(run, call_id)
        self.reply({"run_id": run.id, "call_id": call_id, "approved": decision.approved, "status": run.status})


def _why_not(run: Run, call_id: str) -> Refusal:
    approver = run.context.approver
    if call_id in approver.decided or any(
        e.type == "approval_resolved" and e.call_id == call_id for e in run.events.events
    ):
        return Refusal(409, "ALREADY_DECIDED", f"{call_id!r} was already decided; a decision is final")
    if any(e.type == "approval_requested" and e.call_id == call_id for e in run.events.events):
        return Refusal(409, "APPROVAL_CLOSED", f"{call_id!r} can no longer be decided: the run is {run.status}")
    return Refusal(404, "NO_SUCH_APPROVAL", f"run {run.id} has not asked for an approval of {call_id!r}")


class CancelHandler(BesserHandler):
    auth_resource = "besser-agent:runs"

    @web.authenticated
    @authorized(action="write")
    async def post(self, run_id: str) -> None:
        run = self.find_run(run_id)
        if not run.cancel():
            raise Refusal(409, "RUN_NOT_ACTIVE", f"run {run.id} is not running here (status {run.status})")
        self.reply({"run_id": run.id, "cancelled": True})
