"""A real Jupyter server with the extension, in a process of its own (one user's server).

For what an in-process server (pytest-jupyter) cannot show: the server's own memory (its RSS,
read from ``/proc``), its own ``TMPDIR``, and a process outside its tree (the test itself)
holding a kernel's token. Kernels are reached over the server's kernel websocket with the
server token (hub_fixtures.KernelSocket, pointed at this server). Teardown ends the server,
then, by pid, anything it started that is still alive.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from hub_fixtures import INHERITED_NOT, free_port

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class ServerProcess:
    url: str  # the server's root URL, without a trailing "/" (as hub_fixtures' Hub.url)
    token: str  # the server's own token (the person's credential)
    process: subprocess.Popen
    root_dir: Path
    tmpdir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def agent_url(self) -> str:
        return self.url + "/besser-agent/"

    def api(self, token: str | None = None, **kwargs) -> httpx.AsyncClient:
        """An async client of this server's root (``token``: the server's by default; "" for
        none); the same shape as hub_fixtures' ``Hub.api``, so KernelSocket works on both."""
        token = self.token if token is None else token
        headers = {"Authorization": f"token {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, **kwargs)

    def memory_kib(self) -> tuple[int, int]:
        """(current RSS, peak RSS) of the server process, in KiB."""
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.pid}/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        from kernel_ext.server.peer import process_tree

        started = process_tree(self.pid) - {self.pid} if self.process.poll() is None else set()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for pid in started:  # only processes this server started, by pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def start_server(workdir: Path, *, env: dict[str, str] | None = None, args: tuple[str, ...] = (), timeout: float = 60) -> ServerProcess:
    """Start ``jupyter server`` on 127.0.0.1 with its own root and TMPDIR under ``workdir``."""
    root, tmpdir = workdir / "root", workdir / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    tmpdir.mkdir(parents=True, exist_ok=True)
    token, port = secrets.token_hex(24), free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED_NOT)}
    environ.update({"TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT), "JUPYTER_RUNTIME_DIR": str(workdir / "runtime")})
    environ.update(env or {})
    argv = [sys.executable, "-m", "jupyter_server", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--ServerApp.jpserver_extensions=kernel_ext=True", *(["--allow-root"] if os.getuid() == 0 else []), *args]
    log_path = workdir / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, cwd=root, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = ServerProcess(f"http://127.0.0.1:{port}", token, process, root, tmpdir, log_path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = httpx.get(server.agent_url + "config", headers={"Authorization": f"token {token}"}, timeout=2)
            if answer.status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"the server did not answer:\n{server.log_tail()}")
        time.sleep(0.2)
