"""A real ipykernel driven over ZMQ with jupyter_client, as a front end would drive it.

It records every widget model the kernel opens (``comm_open`` on iopub) and its updates, the
text each request printed (keyed by the request, as a front end files outputs under their
cell), and clicks a button by sending the comm message the ipywidgets front end sends:
``{"method": "custom", "content": {"event": "click"}}``. Several requests can be in flight at
once (a cell still running while the next is queued), as when a person runs all cells.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

BESSER_VARIABLES = ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN")
STOP_TIMEOUT_S = 60.0  # a kernel's shutdown in a test's teardown: bounded, a named failure past it


def kernel_env(*, with_server: bool) -> dict[str, str]:
    env = dict(os.environ)
    if not with_server:
        for name in BESSER_VARIABLES:
            env.pop(name, None)
    return env


class KernelDriver:
    def __init__(self, manager: AsyncKernelManager):
        self.manager = manager
        self.client = manager.client()
        self.widgets: dict[str, dict[str, Any]] = {}  # comm_id -> latest state, in opening order
        self.clicked: set[str] = set()
        self.printed: dict[str, str] = {}  # request msg_id -> the text it printed or displayed
        self._replies: dict[str, asyncio.Future] = {}
        self._idle: dict[str, asyncio.Event] = {}  # request msg_id -> set at its IOPub ``status: idle``
        self._readers: list[asyncio.Task] = []

    @classmethod
    async def start(cls, cwd: Path, env: dict[str, str]) -> KernelDriver:
        manager = AsyncKernelManager(kernel_name="python3")
        await manager.start_kernel(cwd=str(cwd), env=env)
        driver = cls(manager)
        driver.client.start_channels()
        await driver.client.wait_for_ready(timeout=60)
        driver._readers = [asyncio.ensure_future(driver._read_iopub()), asyncio.ensure_future(driver._read_shell())]
        return driver

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the readers and the kernel; a kernel that will not stop within ``timeout`` is a named failure."""
        for reader in self._readers:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self.client.stop_channels()
        try:
            await asyncio.wait_for(self.manager.shutdown_kernel(now=True), timeout)
        except TimeoutError:
            raise AssertionError(f"the kernel did not shut down within {timeout} s") from None

    async def _read_iopub(self) -> None:
        while True:
            message = await self.client.get_iopub_msg()
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                idle = self._idle.get(message["parent_header"].get("msg_id", ""))
                if idle is not None:
                    idle.set()
            elif kind == "stream" or (kind == "display_data" and "text/plain" in content.get("data", {})):
                parent = message["parent_header"].get("msg_id", "")  # a line displayed (a lesson's hint) is the cell's text too
                text = content.get("text", "") if kind == "stream" else content["data"]["text/plain"] + "\n"
                self.printed[parent] = self.printed.get(parent, "") + text
            elif kind == "comm_open" and content.get("target_name") == "jupyter.widget":
                self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
            elif kind == "comm_msg" and content.get("comm_id") in self.widgets:
                data = content.get("data", {})
                if data.get("method") in ("update", "echo_update"):
                    self.widgets[content["comm_id"]].update(data.get("state", {}))

    async def _read_shell(self) -> None:
        while True:
            message = await self.client.get_shell_msg()
            waiter = self._replies.get(message["parent_header"].get("msg_id", ""))
            if waiter is not None and not waiter.done():
                waiter.set_result(message)

    def send(self, code: str, **expressions: str) -> str:
        """Queue ``code`` for execution without waiting; its request id."""
        msg_id = self.client.execute(code, user_expressions=expressions)
        self._replies[msg_id] = asyncio.get_running_loop().create_future()
        self._idle[msg_id] = asyncio.Event()
        return msg_id

    async def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        """The reply to a request sent earlier, once all its output has arrived too; the values of its
        ``expressions``. Fails on an error.

        The shell reply and the IOPub output travel on different sockets: a reply can arrive before
        the request's last print. The kernel publishes ``status: idle`` for a request after all its
        output, so that is waited for as well (on a busy machine the order is anyone's)."""
        reply, _ = await asyncio.wait_for(asyncio.gather(asyncio.shield(self._replies[msg_id]), self._idle[msg_id].wait()), timeout)
        content = reply["content"]
        assert content["status"] == "ok", f"{content.get('ename')}: {content.get('evalue')}"
        values = {}
        for name, value in content.get("user_expressions", {}).items():
            assert value["status"] == "ok", f"{name}: {value.get('ename')}: {value.get('evalue')}"
            values[name] = value["data"]["text/plain"]
        return values

    async def execute(self, code: str, timeout: float = 60, **expressions: str) -> dict[str, Any]:
        """Run ``code``; the values of ``expressions`` (their text/plain) by name. Fails on an error."""
        return await self.reply(self.send(code, **expressions), timeout)

    async def printed_by(self, msg_id: str, text: str, timeout: float = 60) -> None:
        """Until request ``msg_id`` has printed ``text``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while text not in self.printed.get(msg_id, ""):
            if loop.time() > deadline:
                raise AssertionError(f"{msg_id} did not print {text!r}: {self.printed.get(msg_id, '')!r}")
            await asyncio.sleep(0.02)

    async def widget_shows(self, text: str, timeout: float = 60) -> None:
        """Until some widget's ``value`` (an HTML widget's, from the kernel's comm messages) holds ``text``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not any(text in str(state.get("value", "")) for state in list(self.widgets.values())):
            if loop.time() > deadline:
                raise AssertionError(f"no widget shows {text!r}")
            await asyncio.sleep(0.02)

    def buttons(self, description: str) -> list[str]:
        return [cid for cid, state in self.widgets.items() if state.get("_model_name") == "ButtonModel" and state.get("description") == description]

    def click(self, comm_id: str) -> None:
        content = {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        self.client.shell_channel.send(self.client.session.msg("comm_msg", content))
        self.clicked.add(comm_id)

    async def click_next(self, description: str = "Approve", timeout: float = 30) -> str:
        """Click the first ``description`` button not clicked yet (waits for one to appear)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            fresh = [cid for cid in self.buttons(description) if cid not in self.clicked and not self.widgets[cid].get("disabled")]
            if fresh:
                self.click(fresh[0])
                return fresh[0]
            if loop.time() > deadline:
                raise AssertionError(f"no new {description!r} button within {timeout} s")
            await asyncio.sleep(0.02)

    async def wait_for(self, expression: str, expected: str, timeout: float = 60) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = (await self.execute("", value=expression))["value"]
            if value == expected:
                return
            if loop.time() > deadline:
                raise AssertionError(f"{expression} is {value}, expected {expected}")
            await asyncio.sleep(0.1)
