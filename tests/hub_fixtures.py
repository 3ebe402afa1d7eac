"""A real local JupyterHub (docs/jupyterhub_config.py) for the hub tests, and a kernel client
that talks to a user's kernel through the hub's proxy over the kernel websocket.

The hub, its configurable-http-proxy and the single-user servers are real processes on
127.0.0.1. Teardown stops the hub (which stops the servers and the proxy it started) and then
ends, by pid, any of those processes still alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "docs" / "jupyterhub_config.py"
JUPYTERHUB = Path(sys.executable).with_name("jupyterhub")
INHERITED_NOT = ("BESSER_AGENT_", "JUPYTERHUB_", "JPY_", "BESSER_NOTEBOOK_")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def proxy_missing() -> str | None:
    """Why the hub cannot start here (None when it can)."""
    if not JUPYTERHUB.exists():
        return "jupyterhub is not installed in this environment (pip install -e '.[test]')"
    if shutil.which("configurable-http-proxy") is None:
        return "configurable-http-proxy is not on PATH (npm install -g configurable-http-proxy; .ci/run does it)"
    return None


# LiteLLM's proxy, the classroom gateway, in a venv of its own (.ci/run installs it there, pinned)
LITELLM_VENV = Path(os.environ.get("BESSER_LITELLM_VENV", Path.home() / ".cache" / "besser-agent" / "litellm-1.108.7"))
LITELLM = LITELLM_VENV / "bin" / "litellm"


def litellm_missing() -> str | None:
    """Why LiteLLM's proxy cannot start here (None when it can)."""
    if not LITELLM.exists():
        return (f"LiteLLM's proxy is not installed at {LITELLM} (.ci/run installs it: python3 -m venv "
                f"{LITELLM_VENV} && {LITELLM_VENV}/bin/pip install 'litellm[proxy]==1.108.7' 'prisma==0.15.0')")
    return proxy_missing()


def process_environ(pid: int) -> dict[str, str]:
    """Another process's environment as the kernel holds it (we are root or its owner)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def pid_with(marker: str) -> int:
    """The one process whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    assert len(found) == 1, f"{len(found)} processes mention {marker!r}"
    return found[0]


@dataclass
class Hub:
    url: str
    admin_token: str
    state_dir: Path
    process: subprocess.Popen
    log_path: Path
    pids: set[int] = field(default_factory=set)

    def api(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"token {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, follow_redirects=False)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    async def start_server(self, user: str, timeout: float = 120) -> int:
        """Start ``user``'s server and wait until it is ready; its pid."""
        async with self.api(self.admin_token) as client:
            started = await client.post(f"/hub/api/users/{user}/server")
            assert started.status_code in (201, 202), started.text
            deadline = time.monotonic() + timeout
            while True:
                model = (await client.get(f"/hub/api/users/{user}")).json()
                server = model.get("servers", {}).get("")
                if server and server.get("ready"):
                    pid = int(server["state"]["pid"])
                    self.pids.add(pid)
                    return pid
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise AssertionError(f"{user}'s server did not become ready:\n{self.log_tail()}")
                await asyncio.sleep(0.2)

    async def token_for(self, user: str) -> str:
        """A token of ``user`` that may reach only ``user``'s own server."""
        async with self.api(self.admin_token) as client:
            made = await client.post(
                f"/hub/api/users/{user}/tokens", json={"note": "hub test", "scopes": [f"access:servers!user={user}"]}
            )
            assert made.status_code == 201, made.text
            return made.json()["token"]

    def stop(self) -> None:
        proxy_pid = self.state_dir / "proxy.pid"
        if proxy_pid.exists():
            with contextlib.suppress(ValueError):
                self.pids.add(int(proxy_pid.read_text().strip()))
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the hub stops its servers and its proxy
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for pid in self.pids:  # only processes this hub started, by pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def start_hub(workdir: Path, operator_env: dict[str, str], timeout: float = 60, wrap: list[str] | None = None) -> Hub:
    """The hub of docs/jupyterhub_config.py, answering; ``wrap``: a command prefix it runs under."""
    state = workdir / "hub"
    port, api_port, hub_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED_NOT)}
    # every server as this user unless a test asks for system users (tests/test_hub_users.py):
    # these tests prove the extension's own separation, which holds on one OS user
    env["BESSER_HUB_SPAWNER"] = "shared"
    env.update(operator_env)
    admin_token = uuid.uuid4().hex
    env.update(
        {
            "BESSER_HUB_DIR": str(state),
            "BESSER_HUB_PORT": str(port),
            "BESSER_HUB_API_PORT": str(api_port),
            "BESSER_HUB_INTERNAL_PORT": str(hub_port),
            "BESSER_HUB_ADMIN_TOKEN": admin_token,
            "PATH": f"{JUPYTERHUB.parent}:{env.get('PATH', os.defpath)}",
        }
    )
    log_path = workdir / "jupyterhub.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*(wrap or []), str(JUPYTERHUB), "-f", str(CONFIG)], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    hub = Hub(f"http://127.0.0.1:{port}", admin_token, state, process, log_path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{hub.url}/hub/api/", timeout=2).status_code == 200:
                return hub
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            hub.stop()
            raise AssertionError(f"the hub did not answer:\n{hub.log_tail()}")
        time.sleep(0.2)


def wait_for_gateway(hub: Hub, url: str, marker: str, timeout: float) -> int:
    """Wait until the hub's gateway service at ``url`` answers (LiteLLM takes 20-40 s to load on two
    busy cores); its pid (the process whose command line holds ``marker``), kept for teardown."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline and hub.process.poll() is None, f"the gateway did not start:\n{hub.log_tail()}"
        time.sleep(0.2)
    pid = pid_with(marker)
    hub.pids.add(pid)  # the hub stops its services; by pid if it does not
    return pid


class KernelSocket:
    """One kernel of a user's server, reached through the hub proxy (legacy JSON websocket protocol).

    ``hub`` may also be a lone server (server_process.ServerProcess, with ``prefix=""``).
    """

    def __init__(self, hub: Any, user: str, token: str, *, prefix: str | None = None):
        self.hub, self.user, self.token = hub, user, token
        self.prefix = f"/user/{user}" if prefix is None else prefix
        self.kernel_id = ""
        self.session = uuid.uuid4().hex
        self._ws: Any = None

    async def __aenter__(self) -> Self:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        async with self.hub.api(self.token) as client:
            made = await client.post(f"{self.prefix}/api/kernels", json={"name": "python3"})
            assert made.status_code == 201, made.text
            self.kernel_id = made.json()["id"]
        ws_url = self.hub.url.replace("http://", "ws://") + f"{self.prefix}/api/kernels/{self.kernel_id}/channels"
        request = HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"}, request_timeout=60)
        self._ws = await websocket_connect(request)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            self._ws.close()
        async with self.hub.api(self.token) as client:
            await client.delete(f"{self.prefix}/api/kernels/{self.kernel_id}")

    async def execute(self, code: str, timeout: float = 180) -> tuple[dict, list[dict]]:
        """Run ``code``; the execute_reply content and every output message's content."""
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "session": self.session, "username": self.user,
                  "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
                   "stop_on_error": True}
        await self._ws.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                                                 "channel": "shell", "buffers": []}))
        reply, outputs, idle = None, [], False
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            raw = await asyncio.wait_for(self._ws.read_message(), max(deadline - time.monotonic(), 0.1))
            if raw is None:
                raise AssertionError("the kernel websocket closed")
            message = json.loads(raw)
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["header"]["msg_type"]
            if kind in ("stream", "execute_result", "display_data", "error"):
                outputs.append({"type": kind, **message["content"]})
            elif kind == "status" and message["content"].get("execution_state") == "idle":
                idle = True
            elif kind == "execute_reply":
                reply = message["content"]
        return reply, outputs


def output_text(outputs: list[dict]) -> str:
    parts = []
    for output in outputs:
        parts.append(output.get("text", ""))
        parts.extend(v if isinstance(v, str) else json.dumps(v) for v in (output.get("data") or {}).values())
        parts.extend([output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])])
    return "\n".join(parts)


@contextlib.contextmanager
def upstream_holding(key: str) -> Iterator[Any]:
    """The loopback OpenAI-compatible test server, answering only ``key`` (the operator's real key)."""
    from provider_server import ProviderServer

    server = ProviderServer().start()
    server.require_key("openai", key)
    try:
        yield server
    finally:
        server.stop()


async def start_classroom(hub: Hub, users: tuple[str, ...] = ("alice", "bob")) -> dict[str, dict[str, Any]]:
    """Each user's server started (concurrently), with each user's token and each server's pid."""
    pids = await asyncio.gather(*(hub.start_server(user) for user in users))
    tokens = await asyncio.gather(*(hub.token_for(user) for user in users))
    return {"pids": dict(zip(users, pids, strict=True)), "tokens": dict(zip(users, tokens, strict=True))}


def answered(usage: dict[str, int]) -> Any:
    """One upstream reply to a generate run: an empty task list (Phase 2 has nothing to do), with its usage."""
    from provider_server import Plan, fragments, openai_stream

    tasks = json.dumps({"tasks": []})
    return Plan(chunks=openai_stream([], [("c1", "submit_tasks", fragments(tasks, 7))], usage=usage))


async def run_once(hub: Hub, user: str, token: str) -> tuple[str, list[dict]]:
    """One generate run through the hub's proxy with the server's own provider, to its end; its id and events."""
    from kernel_ext.model.jsonform import model_to_dict
    from kernel_ext.model.loading import load_model

    body = {"kind": "generate", "request": "A FastAPI backend", "provider": "openai", "target": "fastapi_backend",
            "approve": "all", "auto_fix": False, "model_json": model_to_dict(load_model("example:library"))}
    base = f"/user/{user}/besser-agent"
    async with hub.api(token) as client:
        started = await client.post(f"{base}/runs", json=body)
        assert started.status_code == 201, started.text
        run_id = started.json()["run"]["id"]
        stream = await client.get(f"{base}/runs/{run_id}/events", timeout=300)
    events = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events and events[-1]["type"] == "done", stream.text[-2000:]
    return run_id, events
