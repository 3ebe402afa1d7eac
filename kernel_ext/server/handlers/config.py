"""``GET config``: what this server allows and has, never a key or a token."""

from __future__ import annotations

from functools import partial

from jupyter_server.auth.decorator import authorized
from tornado import web

from kernel_ext.hosting.offloop import for_request
from kernel_ext.server.handlers.base import BesserHandler
from kernel_ext.server.report import describe_configuration, describe_runs, last_budget_refusal


class ConfigHandler(BesserHandler):
    auth_resource = "besser-agent:config"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.state
        # Built once, on a request worker (never behind runs' work): it imports the provider settings (~0.1 s of the
        # GIL) and the loop must keep serving meanwhile. What it describes (the operator's settings, the server's
        # environment) is fixed for the server's life, so later answers add the live run counts on the loop: under
        # load every hop to a thread is another wait for the GIL behind the runs' work.
        if state.configuration is None:
            state.configuration = await for_request(partial(describe_configuration, state.operator, state.manager,
                                                            sandbox=state.sandbox))
        fixed = {k: v for k, v in state.configuration["provider"].items() if k != "budget"}  # as cached
        provider = {**fixed, **last_budget_refusal(state.manager)}  # changes as runs end
        self.reply({**state.configuration, "provider": provider, "runs": describe_runs(state.operator, state.manager)})
