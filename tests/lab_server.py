"""A real Jupyter server for the browser tests: ``jupyter lab`` or Notebook 7's ``jupyter notebook``
on a folder (loopback, a random token, the extension enabled by the install), with Jupyter
directories of the test's own; it can be stopped and started again on the same folder."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LabServer:
    """``jupyter lab`` or ``jupyter notebook`` (7) on a folder, with the extension; unpacks as (url, token, root).

    ``restart`` stops it and starts a new server (new port, new token, no kernel) on the same folder
    and Jupyter directories: the same person opening their saved notebook on another day."""

    def __init__(self, tmp_path: Path, frontend: str, root: Path):
        self.tmp_path, self.frontend, self.root = tmp_path, frontend, root
        self.process: subprocess.Popen | None = None
        self.url = self.token = ""

    def __iter__(self):
        return iter((self.url, self.token, self.root))

    def start(self) -> None:
        tmp_path = self.tmp_path
        token, port = secrets.token_hex(16), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BESSER_AGENT_", "BESSER_NOTEBOOK_", "JUPYTER"))}
        env.update({"JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"), "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
                    "JUPYTER_PATH": str(tmp_path / "jupyter-path"),  # searched before the environment's specs
                    "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
                    "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces")})
        argv = [str(Path(sys.executable).with_name("jupyter")), self.frontend, "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={self.root}",
                "--ServerApp.port_retries=0"]
        if os.getuid() == 0:
            argv.append("--allow-root")
        with open(tmp_path / "jupyterlab.log", "ab") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(argv, env=env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url, self.token = f"http://127.0.0.1:{port}", token
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/status", headers={"Authorization": f"token {token}"}, timeout=2).status_code == 200:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"jupyter {self.frontend} did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.2)
        extensions = httpx.get(f"{self.url}/besser-agent/config", headers={"Authorization": f"token {token}"}, timeout=10)
        assert extensions.status_code == 200, "the besser-agent server extension is not loaded"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()
