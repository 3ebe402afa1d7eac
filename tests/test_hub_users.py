"""The classroom's key stays out of students' reach on the documented local hub: each student is an
OS user of their own (docs/jupyterhub_config.py, ``BESSER_HUB_SPAWNER=system``, JupyterHub's
LocalProcessSpawner), the hub, its proxy and the gateway run as the hub's account (root).

Real: two OS users made for the test (useradd; removed at the end however it ends), the hub as
root, configurable-http-proxy, both single-user servers and their kernels, a generate run each
through the gateway to the loopback upstream (tests/provider_server.py, answering only the
operator's key). The gateway in the service slot is tests/gateway_standin.py, the LABELLED
stand-in of LiteLLM's proxy API, because LiteLLM's key store cannot run here (docs/jupyterhub.md,
section 8); it is started, holds the keys and runs as the hub's account exactly as LiteLLM would.

From EACH student's kernel: every readable ``/proc/*/environ`` and ``/proc/*/cmdline``, the other
student's home (their server's root, their Jupyter runtime folder), the hub's state and log
folder, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are searched for key-shaped text; neither the
operator's keys, nor the gateway's master key, nor the other student's gateway key is found,
while the student's own key is (in their own server's environment: the search reads what it
can). The hub's, the proxy's, the gateway's and the other server's environments are seen and
closed (no hidepid in play). Everything the hub writes is 0600 / 0700 and the hub's own.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import stat
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from hub_fixtures import (
    LITELLM,
    LITELLM_VENV,
    KernelSocket,
    answered,
    free_port,
    litellm_missing,
    output_text,
    pid_with,
    process_environ,
    proxy_missing,
    run_once,
    start_classroom,
    start_hub,
    upstream_holding,
    wait_for_gateway,
)
from hub_users import cannot_run_python, os_users, os_users_missing, probe_code, run_as, students_view

STANDIN = Path(__file__).with_name("gateway_standin.py")
REAL_KEY = "sk-operator-" + secrets.token_hex(20)
OTHER_KEY = "sk-ant-operator-" + secrets.token_hex(20)
USAGE = {"prompt_tokens": 400, "completion_tokens": 50, "total_tokens": 450}


@pytest.fixture(scope="module")
def view() -> list[str]:
    reason = os_users_missing() or proxy_missing()
    if reason:
        pytest.skip(reason)
    return students_view(also=(LITELLM_VENV,))  # LiteLLM's venv: the hub's gateway runs from it


@pytest.fixture(scope="module")
def students(view):
    with os_users(2) as names:
        reason = cannot_run_python(names[0], view)
        if reason:
            pytest.skip(reason)
        yield names


@pytest.fixture(scope="module")
def upstream():
    with upstream_holding(REAL_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory, view, students, upstream):
    port = free_port()
    hub = start_hub(tmp_path_factory.mktemp("hub"), wrap=view, operator_env={
        "BESSER_HUB_SPAWNER": "system",
        "BESSER_HUB_USERS": ",".join(students),
        "OPENAI_API_KEY": REAL_KEY,
        "ANTHROPIC_API_KEY": OTHER_KEY,
        "OPENAI_BASE_URL": upstream.url + "/v1",
        "BESSER_LLM_MODEL": "gpt-4o-mini",
        "BESSER_HUB_GATEWAY": "litellm",
        "BESSER_HUB_GATEWAY_PORT": str(port),
        "BESSER_HUB_GATEWAY_CMD": json.dumps([sys.executable, str(STANDIN)]),
    })
    hub.gateway = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        wait_for_gateway(hub, hub.gateway, str(STANDIN), timeout=60)  # type: ignore[attr-defined]
        yield hub
    finally:
        hub.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def classroom(hub, students):
    """Both servers started; the second student first planted a link where the hub copies the
    notebooks, to a folder of root's they may enter but not write (the hub copies as the student)."""
    home = Path(os.path.expanduser(f"~{students[1]}"))
    decoy = home.parent / "roots-folder"
    decoy.mkdir(mode=0o755)
    (home / "notebooks").symlink_to(decoy)
    classroom = await start_classroom(hub, tuple(students))
    return {**classroom, "decoy": decoy}


async def search_from_kernel(hub, user: str, token: str, roots: list[str]) -> dict:
    async with KernelSocket(hub, user, token) as kernel:
        reply, outputs = await kernel.execute(probe_code(roots), timeout=300)
    assert reply["status"] == "ok", output_text(outputs)
    return json.loads("".join(o.get("text", "") for o in outputs if o["type"] == "stream"))


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_from_each_students_kernel_no_key_but_their_own_is_reachable(hub, students, classroom, upstream):
    homes = {name: Path(os.path.expanduser(f"~{name}")) for name in students}
    servers = classroom["pids"]
    keys = {name: process_environ(servers[name])["OPENAI_API_KEY"] for name in students}
    master = (hub.state_dir / "gateway_master_key").read_text().strip()
    proxy = int((hub.state_dir / "proxy.pid").read_text())
    hub_side = {hub.process.pid: "the hub", proxy: "its proxy", pid_with(str(STANDIN)): "the gateway"}
    assert process_environ(pid_with(str(STANDIN)))["OPENAI_API_KEY"] == REAL_KEY  # the gateway holds it
    assert keys[students[0]] != keys[students[1]] and REAL_KEY not in keys.values()

    for me, other in (students, students[::-1]):
        roots = [str(homes[other]), str(homes[other] / ".local" / "share" / "jupyter" / "runtime"),
                 str(hub.state_dir), str(hub.log_path.parent), "/tmp", "/var/tmp", "/dev/shm"]
        seen = await search_from_kernel(hub, me, classroom["tokens"][me], roots)
        uid = os.stat(homes[me]).st_uid
        assert seen["uid"] == uid != 0
        forbidden = {REAL_KEY: "the operator's key", OTHER_KEY: "the operator's other key",
                     master: "the gateway's master key", keys[other]: f"{other}'s gateway key"}
        leaks = [(where, name) for where, text in seen["found"] for key, name in forbidden.items() if key in text]
        assert leaks == [], f"{me}'s kernel found {leaks}"
        # the search reads what it can: the student's own key, in their own server's environment
        assert [f"/proc/{servers[me]}/environ", keys[me]] in seen["found"]
        # every environment the student can read is their own; the hub's side and the other
        # student's server are listed (no hidepid) and closed
        assert {e["uid"] for e in seen["environs"].values() if e["readable"]} == {uid}
        for pid, what in {**hub_side, servers[other]: f"{other}'s server"}.items():
            assert seen["environs"][str(pid)]["readable"] is False, what
        assert str(homes[other]) in seen["denied"] and str(hub.state_dir) in seen["denied"]
        assert seen["files"] > 0  # it did read files (in /tmp and the like)

    # each student's own run still goes through the gateway, with their own key
    upstream.plan(*(answered(USAGE) for _ in students))
    for name in students:
        _, events = await run_once(hub, name, classroom["tokens"][name])
        assert events[-1]["status"] == "completed", events[-1]  # sandboxes and all, as the student
    assert len(upstream.requests) == 2
    assert {r.headers["authorization"] for r in upstream.requests} == {f"Bearer {REAL_KEY}"}


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_what_the_hub_writes_is_its_own_and_each_home_its_students(hub, students, classroom):
    written = [hub.state_dir, *hub.state_dir.rglob("*")]
    names = {p.name for p in written}
    assert {"jupyterhub.sqlite", "jupyterhub_cookie_secret", "gateway_master_key", "litellm_config.yaml"} <= names
    loose = [(str(p), oct(p.lstat().st_mode)) for p in written
             if p.lstat().st_uid != os.getuid() or p.lstat().st_mode & 0o077]
    assert loose == []
    assert "users" not in names  # system users: their homes are their own, not the hub's
    for name in students:
        account = Path(os.path.expanduser(f"~{name}")).stat()
        assert stat.S_IMODE(account.st_mode) == 0o700  # useradd made it 0755; the hub's hook did, as the student
    notebooks = sorted(Path(os.path.expanduser(f"~{students[0]}"), "notebooks").glob("*.ipynb"))
    assert notebooks and {p.stat().st_uid for p in notebooks} == {pwd.getpwnam(students[0]).pw_uid}  # as the student
    # through the second student's planted link the copy, as that student, wrote nothing into root's folder
    assert list(classroom["decoy"].iterdir()) == [] and "the notebooks were not copied" in hub.log_path.read_text()


@pytest.fixture(scope="module")
def litellm_hub(tmp_path_factory, view, students, upstream):
    reason = litellm_missing()
    if reason:
        pytest.skip(reason)
    port = free_port()
    hub = start_hub(tmp_path_factory.mktemp("litellm-hub"), wrap=view, operator_env={
        "BESSER_HUB_SPAWNER": "system",
        "BESSER_HUB_USERS": ",".join(students),
        "OPENAI_API_KEY": REAL_KEY,
        "OPENAI_BASE_URL": upstream.url + "/v1",
        "BESSER_LLM_MODEL": "gpt-4o-mini",
        "BESSER_HUB_GATEWAY": "litellm",
        "BESSER_HUB_GATEWAY_PORT": str(port),
        "BESSER_HUB_LITELLM": str(LITELLM),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    })
    try:
        hub.gateway_pid = wait_for_gateway(  # type: ignore[attr-defined]
            hub, f"http://127.0.0.1:{port}", str(hub.state_dir / "litellm_config.yaml"), timeout=240)
        yield hub
    finally:
        hub.stop()


@pytest.mark.slow
def test_the_real_litellm_gateway_runs_closed_to_students(litellm_hub, view, students):
    """LiteLLM itself as the hub's gateway, on the same system-user hub. Its key store cannot run
    here, so no student server starts (tests/test_hub_litellm.py): the same search runs as a
    student's own process instead of in their kernel."""
    hub = litellm_hub
    assert process_environ(hub.gateway_pid)["OPENAI_API_KEY"] == REAL_KEY  # LiteLLM holds the key
    master = (hub.state_dir / "gateway_master_key").read_text().strip()
    roots = [str(hub.state_dir), str(hub.log_path.parent), "/tmp", "/var/tmp", "/dev/shm"]
    done = run_as(students[1], view, probe_code(roots))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["uid"] == pwd.getpwnam(students[1]).pw_uid
    assert [where for where, text in seen["found"] if REAL_KEY in text or master in text] == []
    assert {e["uid"] for e in seen["environs"].values() if e["readable"]} == {seen["uid"]}
    proxy = int((hub.state_dir / "proxy.pid").read_text())
    for pid in (hub.gateway_pid, hub.process.pid, proxy):
        assert seen["environs"][str(pid)]["readable"] is False
    assert str(hub.state_dir) in seen["denied"] and seen["files"] > 0
    written = [hub.state_dir, *hub.state_dir.rglob("*")]
    assert {"jupyterhub.sqlite", "litellm_config.yaml", "gateway_master_key"} <= {p.name for p in written}
    assert [str(p) for p in written if p.lstat().st_uid != os.getuid() or p.lstat().st_mode & 0o077] == []
