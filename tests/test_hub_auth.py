# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""The kernels' capability token under a server whose auth works like JupyterHub's single-user
server: an identity provider that resolves only tokens it knows (ignoring a user set before
``prepare``) and an authorizer that demands a hub user. The capability must still open the
extension, and only the extension. (The real hub is in ``test_hub.py``; this is the fast check.)
"""

from __future__ import annotations

import httpx
import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    runs_dir,
    server_api,
)
from jupyter_server.auth import Authorizer, IdentityProvider, User

from kernel_ext.server.handlers.base import STATE_KEY


class HubLikeIdentity(IdentityProvider):
    """Knows one token (the student's); any other token, the capability included, is nobody."""

    async def get_user(self, handler):
        header = handler.request.headers.get("Authorization", "")
        if header == f"token {self.token}":
            user = User(username="student")
            user.hub_user = {"name": "student", "scopes": ["access:servers!user=student"]}
            return user
        return None


class HubLikeAuthorizer(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return getattr(user, "hub_user", None) is not None


@pytest.fixture
def jp_server_config(runs_dir, extension_config):
    return {
        "ServerApp": {
            "jpserver_extensions": {"kernel_ext": True},
            "ip": "127.0.0.1",
            "identity_provider_class": HubLikeIdentity,
            "authorizer_class": HubLikeAuthorizer,
        },
        "BesserAgentApp": {"runs_dir": str(runs_dir), "heartbeat_interval": 0.05},
    }


async def test_the_capability_opens_the_extension_and_nothing_else(jp_serverapp, http_server):
    capability = jp_serverapp.web_app.settings[STATE_KEY].capability.token
    student = jp_serverapp.identity_provider.token
    base = jp_serverapp.connection_url.rstrip("/")
    async with httpx.AsyncClient(timeout=20) as client:
        as_kernel = {"Authorization": f"token {capability}"}
        assert (await client.get(server_api(jp_serverapp) + "config", headers=as_kernel)).status_code == 200
        started = await client.post(server_api(jp_serverapp) + "runs", headers=as_kernel, json={"kind": "scenario"})
        assert started.status_code == 201, started.text
        assert (await client.get(f"{base}/api/contents", headers=as_kernel)).status_code == 403
        assert (await client.get(f"{base}/api/kernels", headers=as_kernel)).status_code == 403
        as_student = {"Authorization": f"token {student}"}
        assert (await client.get(server_api(jp_serverapp) + "runs", headers=as_student)).status_code == 200
        assert (await client.get(server_api(jp_serverapp) + "runs", headers={"Authorization": "token wrong"})).status_code == 403
        run_id = started.json()["run"]["id"]
        assert (await client.post(server_api(jp_serverapp) + f"runs/{run_id}/cancel", headers=as_kernel, json={})).status_code == 200
