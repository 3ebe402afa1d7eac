"""``GET config``: what this server allows and has, never a key or a token."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from kernel_ext.server.handlers.base import BesserHandler
from kernel_ext.server.report import describe_configuration


class ConfigHandler(BesserHandler):
    auth_resource = "besser-agent:config"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.state
        self.reply(describe_configuration(state.operator, state.manager, sandbox=state.sandbox))
