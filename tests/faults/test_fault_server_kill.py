"""The Jupyter server killed with SIGKILL in the middle of runs, then started again.

A real ``jupyter server`` subprocess (extension enabled, 127.0.0.1, its own token) hosts two
runs: the chapter-5 scenario waiting on its first card, and a generation of a 120-class model
killed while Phase 1 publishes its files. After the kill: every process the server started
is gone, ``events.jsonl`` is readable up to the kill, and every file in the workspace is
whole (byte-identical to the same generator's output; temporaries of an interrupted publish
are hidden names nobody lists). After the restart both runs read ``interrupted``, their
events replay with the ``done`` recovery appended, and a late decision is refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sandbox_fixtures import free_port, wait_until

from kernel_ext.hosting.bus import EventLog
from kernel_ext.sandbox import proctree
from kernel_ext.workspace import is_temp_name

pytestmark = pytest.mark.slow

CLASSES = 120


class Server:
    """One ``jupyter server`` process on 127.0.0.1 with the extension and a known token."""

    def __init__(self, root: Path, runs: Path, log: Path):
        self.root, self.runs, self.log = root, runs, log
        self.port = free_port()
        self.token = "f11-" + os.urandom(8).hex()
        self.process: subprocess.Popen | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/besser-agent/"

    def start(self) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BESSER_", "OPENAI_", "ANTHROPIC_", "JUPYTER_"))}
        argv = [sys.executable, "-m", "jupyter_server", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
                "--ServerApp.jpserver_extensions={'kernel_ext': True}", f"--BesserAgentApp.runs_dir={self.runs}"]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        ready = wait_until(lambda: self._answers(), timeout=90, step=0.2)
        assert ready, f"the server did not start:\n{self.log.read_text()[-3000:]}"
        return self

    def _answers(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log.read_text()[-3000:]
        try:
            return httpx.get(self.api + "config", headers=self.headers, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def request(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        return httpx.request(method, self.api + path, headers=self.headers, timeout=30,
                             content=json.dumps(body) if body is not None else None)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _visible_files(app: Path) -> dict[str, bytes]:
    return {p.relative_to(app).as_posix(): p.read_bytes() for p in sorted(app.rglob("*"))
            if p.is_file() and not is_temp_name(p.name) and ".besser" not in p.relative_to(app).parts}


def _reference(model_json: dict, target: Path) -> dict[str, bytes]:
    from kernel_ext.generation import run_phase1
    from kernel_ext.model.jsonform import model_from_dict

    run_phase1(model_from_dict(model_json), target, "fastapi_backend", check=False)
    return _visible_files(target)


@pytest.fixture
def server_dirs(tmp_path):
    root = tmp_path / "root"
    runs = root / "besser_runs"
    runs.mkdir(parents=True)
    return root, runs, tmp_path / "server.log"


def test_sigkill_mid_run_then_restart(server_dirs, tmp_path):
    from kernel_ext.model import synthetic_model
    from kernel_ext.model.jsonform import model_to_dict

    root, runs, log = server_dirs
    model_json = model_to_dict(synthetic_model(CLASSES))
    reference = _reference(model_json, tmp_path / "reference")
    first = Server(root, runs, log).start()
    try:
        waiting = first.request("POST", "runs", {"kind": "scenario"}).json()["run"]["id"]
        assert wait_until(lambda: first.request("GET", f"runs/{waiting}").json()["run"]["pending_approvals"], timeout=30)
        card = first.request("GET", f"runs/{waiting}").json()["run"]["pending_approvals"][0]
        generating = first.request("POST", "runs", {"kind": "generate", "request": "A FastAPI backend", "provider": "none",
                                                    "target": "fastapi_backend", "model_json": model_json}).json()["run"]["id"]
        app = runs / generating / "app"
        assert wait_until(lambda: _published(app) >= 20, timeout=120, step=0.002)
        os.kill(first.process.pid, signal.SIGSTOP)  # freeze every thread where it is: the kill lands mid-Phase 1
        started = set(proctree.descendants(first.process.pid))
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait()
    finally:
        first.stop()
    assert wait_until(lambda: not (started & set(_alive(started))), timeout=20), f"orphans: {_alive(started)}"

    # What the kill left on disk: complete events up to the kill, whole files only.
    logs = {run_id: EventLog.load(run_id, runs / run_id / "events.jsonl").events for run_id in (waiting, generating)}
    for run_id, events in logs.items():
        assert events and events[0].type == "run_started", run_id
        assert [e.seq for e in events] == list(range(1, len(events) + 1)) and events[-1].type != "done", run_id
    files = _visible_files(app)
    phases = [(e.phase, e.status) for e in logs[generating] if e.type == "phase"]
    assert ("generate", "started") in phases and ("generate", "done") not in phases, phases
    assert 0 < len(files) < len(reference), f"the kill did not come mid-write: {len(files)} of {len(reference)} files"
    partial = [path for path, data in files.items() if path in reference and data != reference[path]]
    assert partial == [], f"files cut by the kill: {partial[:5]}"
    assert set(files) <= set(reference), sorted(set(files) - set(reference))[:5]
    hidden = [p.name for p in app.rglob("*") if is_temp_name(p.name)]
    calculator = (runs / waiting / "app" / "calculator.py").read_text()

    second = Server(root, runs, log).start()
    try:
        for run_id, before in logs.items():
            summary = second.request("GET", f"runs/{run_id}").json()["run"]
            assert summary["status"] == "interrupted" and summary["live"] is False, summary
            replay = [json.loads(line[5:]) for line in second.request("GET", f"runs/{run_id}/events").text.splitlines()
                      if line.startswith("data:")]
            assert [e["seq"] for e in replay[:-1]] == [e.seq for e in before]
            assert replay[-1]["type"] == "done" and replay[-1]["status"] == "interrupted"
        late = second.request("POST", f"runs/{waiting}/approvals/{card}", {"approved": True})
        assert late.status_code == 409 and late.json()["code"] == "APPROVAL_CLOSED"
        listed = {r["id"]: r["status"] for r in second.request("GET", "runs").json()["runs"]}
        assert listed == {waiting: "interrupted", generating: "interrupted"}
    finally:
        second.stop()
    assert (runs / waiting / "app" / "calculator.py").read_text() == calculator  # nothing ran after the restart
    assert _visible_files(app) == files
    print(f"killed after {len(files)} of {len(reference)} files; hidden temporaries left: {len(hidden)}")


def _published(app: Path) -> int:
    """Visible files published so far (counted, not read: the poll must be cheap to stop the server in time)."""
    if not app.is_dir():
        return 0
    return sum(1 for p in app.rglob("*") if not is_temp_name(p.name) and ".besser" not in p.relative_to(app).parts
               and p.is_file())


def _alive(pids: set[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(") ")[1][0] != "Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive

