"""``GET config``: what this server allows and has, never a key or a token."""

from __future__ import annotations

from functools import partial

from jupyter_server.auth.decorator import authorized
from tornado import web

from kernel_ext.hosting.offloop import for_request
from kernel_ext.server.handlers.base import BesserHandler
from kernel_ext.server.report import describe_configuration


class ConfigHandler(BesserHandler):
    auth_resource = "besser-agent:config"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.state
        # On a request worker (never behind runs' work): the first answer imports the provider settings (~0.1 s of the GIL),
        # and the loop must keep serving while it does.
        self.reply(await for_request(partial(describe_configuration, state.operator, state.manager, sandbox=state.sandbox)))
