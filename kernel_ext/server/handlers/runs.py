"""``GET/POST runs`` and ``GET runs/{id}``: list, start (validated body), and look up runs."""

from __future__ import annotations

import asyncio

from jupyter_server.auth.decorator import authorized
from tornado import web

from kernel_ext.hosting.events import ApprovalRequested
from kernel_ext.hosting.requests import RequestRefused, kind_of, parse_request
from kernel_ext.hosting.summaries import summarize
from kernel_ext.server.handlers.base import BesserHandler, Refusal


class RunsHandler(BesserHandler):
    auth_resource = "besser-agent:runs"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        # the run index keeps each finished run's JSON text: the reply is joined, not encoded, per request
        self.set_header("Content-Type", "application/json")
        self.finish(await self.state.manager.listing_json())

    @web.authenticated
    @authorized(action="execute")
    async def post(self) -> None:
        """Start a run. Fields the operator decides (``allow_shell_tools``...) are ignored."""
        try:
            request = parse_request(await self.json_body())
            run = await self.state.manager.start_from_request(request)
        except RequestRefused as exc:
            raise Refusal(exc.status, exc.code, exc.message) from None
        # One turn of the loop: the run's first step takes its place or its place in the queue, so the
        # answer's status is already true ("queued" for a run that waits, never "running").
        await asyncio.sleep(0)
        self.log.info("besser-agent: started %s run %s", kind_of(request), run.id)
        self.set_header("Location", f"{self.request.path.rstrip('/')}/{run.id}")
        self.reply({"run": summarize(run).as_json()}, status=201)


class RunHandler(BesserHandler):
    auth_resource = "besser-agent:runs"

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        run = await self.find_run(run_id)
        summary = summarize(run).as_json()
        pending = set(run.pending_approvals())
        summary["approvals"] = [
            {"call_id": e.call_id, "name": e.name, "category": e.category, "pending": e.call_id in pending, "digest": e.digest}
            for e in run.events.of_type("approval_requested") if isinstance(e, ApprovalRequested)
        ]
        self.reply({"run": summary})
