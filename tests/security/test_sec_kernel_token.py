"""The kernels' capability token on one user's own server (the one-server-per-user shape).

A real ``jupyter server`` in a process of its own, a real kernel it started. The kernel (and a
child of it) reaches the extension with the token the server exported to it, at the direct
URL it was given. The same token in the hands of a process the server did not start (this
test process, which read it from the kernel's ``/proc/<pid>/environ``, as another user of the
same OS account could) is refused with 403 ``CAPABILITY_REFUSED`` on listing runs, reading an
archive and starting a run; so is the kernel itself when its request carries proxy headers.
Every refusal leaves the runs folder as it was. (The shared-OS-user hub: tests/test_hub.py.)
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from file_tool_helpers import tree_state
from hub_fixtures import KernelSocket, output_text, pid_with, process_environ
from server_process import start_server

KERNEL_CODE = r"""
import json, os, subprocess, sys
import httpx
url, token = os.environ["BESSER_AGENT_URL"], os.environ["BESSER_AGENT_TOKEN"]
seen = {"url": url}
with httpx.Client(headers={"Authorization": f"token {token}"}, timeout=60) as client:
    started = client.post(url + "runs", json={"kind": "scenario"})
    seen["start"] = started.status_code
    run_id = started.json()["run"]["id"]
    seen["run_id"] = run_id
    seen["list"] = client.get(url + "runs").status_code
    seen["archive"] = client.get(url + f"runs/{run_id}/archive").status_code
    proxied = client.get(url + "runs", headers={"X-Forwarded-For": "10.1.2.3"})
    seen["proxied"] = [proxied.status_code, proxied.json().get("code")]
child = ("import httpx, os; print(httpx.get(os.environ['BESSER_AGENT_URL'] + 'config', "
         "headers={'Authorization': 'token ' + os.environ['BESSER_AGENT_TOKEN']}, timeout=60).status_code)")
seen["child"] = int(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip() or 0)
print("SEEN " + json.dumps(seen))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = start_server(tmp_path_factory.mktemp("one-user"))
    try:
        yield process
    finally:
        process.stop()


def seen_in(outputs: list[dict]) -> dict:
    line = next(x for x in output_text(outputs).splitlines() if x.startswith("SEEN "))
    return json.loads(line[5:])


@pytest.mark.slow
async def test_the_token_works_for_the_servers_kernel_and_nobody_else(server):
    async with KernelSocket(server, "", server.token, prefix="") as kernel:
        reply, outputs = await kernel.execute(KERNEL_CODE)
        assert reply["status"] == "ok", output_text(outputs)
        seen = seen_in(outputs)
        # the kernel: its token at the direct (loopback) URL it was given opens the extension
        assert seen["url"] == server.agent_url
        assert (seen["start"], seen["list"], seen["archive"], seen["child"]) == (201, 200, 200, 200)
        # ... but not when the request says it came through a proxy
        assert seen["proxied"] == [403, "CAPABILITY_REFUSED"]
        reply, outputs = await kernel.execute("%load_ext kernel_ext\n%besser config")
        assert reply["status"] == "ok" and "mode: server" in output_text(outputs)  # the magics still find the server

        stolen = process_environ(pid_with(kernel.kernel_id))["BESSER_AGENT_TOKEN"]
        runs = server.root_dir / "besser_runs"
        async with server.api() as person:  # wait until the kernel's run is waiting on its card
            for _ in range(300):
                run = (await person.get(f"/besser-agent/runs/{seen['run_id']}")).json()["run"]
                if any(a["pending"] for a in run["approvals"]):
                    break
                await asyncio.sleep(0.1)
        before = tree_state(runs)
        async with httpx.AsyncClient(headers={"Authorization": f"token {stolen}"}, timeout=60) as thief:
            for method, path, body in (("GET", "runs", None), ("GET", f"runs/{seen['run_id']}/archive", None),
                                       ("POST", "runs", {"kind": "scenario"}), ("GET", "config", None)):
                answer = await thief.request(method, server.agent_url + path, json=body)
                assert answer.status_code == 403, f"{method} {path} -> {answer.status_code}"
                assert answer.json()["code"] == "CAPABILITY_REFUSED" and seen["run_id"] not in answer.text
        assert tree_state(runs) == before
        async with server.api() as person:  # the person's own credential still works, and sees one run
            listed = await person.get("/besser-agent/runs")
            assert listed.status_code == 200 and [r["id"] for r in listed.json()["runs"]] == [seen["run_id"]]
            assert (await person.post(f"/besser-agent/runs/{seen['run_id']}/cancel", json={})).status_code == 200

