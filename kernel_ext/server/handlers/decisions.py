"""``POST runs/{id}/approvals/{call_id}`` and ``POST runs/{id}/cancel``: a person's decisions.

An approval is decided once: a second decision for the same call is refused with 409
``ALREADY_DECIDED`` (also when the first came from the card in another tab); a call that was
asked for but can no longer be decided (its run ended) answers 409 ``APPROVAL_CLOSED``; a body
whose ``digest`` names another request than the pending one answers 409 ``STALE_REQUEST``; a
``rest_of_kind`` grant on a shell card answers 409 ``GRANT_REFUSED`` and decides nothing. Call
ids are the host's (``c1``, ...), never the endpoint's, so a re-sent POST cannot reach the next call.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, ValidationError
from tornado import web

from kernel_ext.server.handlers.base import BesserHandler, Refusal


class Decision(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    approved: bool
    digest: str | None = None  # the card's request_digest: binds the decision to the request shown
    rest_of_kind: bool = False  # also approve the rest of this card's category in this run (never shell)


STATUS = {"NO_SUCH_APPROVAL": 404}  # every other refusal (decided, closed, stale) is a 409 conflict


class ApprovalHandler(BesserHandler):
    auth_resource = "besser-agent:approvals"

    @web.authenticated
    @authorized(action="write")
    async def post(self, run_id: str, call_id: str) -> None:
        await self.decide(run_id, call_id)

    async def decide(self, run_id: str, call_id: str) -> None:
        """The decision itself, undecorated so the mutation run (``bench/mutation.py``) reaches it."""
        try:
            decision = Decision.model_validate(await self.json_body())
        except ValidationError:
            raise Refusal(400, "INVALID_REQUEST",
                          'the body must be {"approved": true} or {"approved": false} (and an optional "digest")') from None
        run = await self.find_run(run_id)
        verdict = run.decide(call_id, decision.approved, digest=decision.digest, rest_of_kind=decision.rest_of_kind)
        if not verdict:
            raise Refusal(STATUS.get(verdict.code, 409), verdict.code, f"run {run.id}: {verdict.reason}")
        self.reply({"run_id": run.id, "call_id": call_id, "approved": decision.approved, "status": run.status})


class CancelHandler(BesserHandler):
    auth_resource = "besser-agent:runs"

    @web.authenticated
    @authorized(action="write")
    async def post(self, run_id: str) -> None:
        await self.cancel(run_id)

    async def cancel(self, run_id: str) -> None:
        """Undecorated for the mutation run, as ``ApprovalHandler.decide``."""
        run = await self.find_run(run_id)
        if not run.cancel(by="person"):  # the view's Cancel button, or a person's own REST call
            raise Refusal(409, "RUN_NOT_ACTIVE", f"run {run.id} is not running here (status {run.status})")
        self.reply({"run_id": run.id, "cancelled": True})
