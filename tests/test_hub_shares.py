"""Fair shares on the local hub (docs/jupyterhub_config.py): one student's sandboxes run a CPU
spinner and a memory balloon while her neighbour's demo run completes.

Everything is real and started here: the hub, its proxy, alice's and bob's single-user servers,
alice's kernel, bubblewrap (or Landlock) and the cgroups. The sandbox settings are the
operator's, set when the hub starts and handed to every server by the hub's spawner
(``BESSER_SANDBOX_*``): the cgroup case runs with this host's memory and cpu groups, the rlimit
case with ``BESSER_SANDBOX_CGROUPS=off`` (``RLIMIT_AS``, here at 1 GiB, and ``nice``).

Alice's path is a student's own shell command through the agent's sandbox: cells in her
kernel call ``python -m kernel_ext tool ... run_command`` (the shell tools as the CLI offers
them), once in the background for the spinner and once for the balloon. Bob's is a REST run
of the demo (replay provider, ``approve: all``) through the hub's proxy, followed over SSE.
The spinner's limits are read from the host (``/proc/<pid>/cgroup`` and the group's files, or
``/proc/<pid>/stat`` and ``/proc/<pid>/limits``). No time is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
from pathlib import Path

import pytest
from hub_fixtures import KernelSocket, process_environ, proxy_missing, start_classroom, start_hub
from run_load import client_for, follow, start
from sandbox_fixtures import cgroup_dir, cgroup_file, no_cgroup_cause, processes_with

from kernel_ext.sandbox import proctree

GIB = 1 << 30
# Touches 64 MiB at a time (a cgroup charges touched pages only) until something stops it.
BALLOON = "python3 -c \"import itertools; chunks = [b'x' * (64 << 20) for _ in itertools.count()]\""


# What the operator sets when the hub starts, per mechanism (explicit both ways: nothing inherited decides).
OPERATOR = {
    "cgroup": {"BESSER_SANDBOX_CGROUPS": "auto"},
    "rlimit": {"BESSER_SANDBOX_CGROUPS": "off", "BESSER_SANDBOX_ADDRESS_SPACE": "1G"},  # 1G: a small balloon
}
MECHANISMS = [
    pytest.param("cgroup", id="cgroup", marks=pytest.mark.skipif(bool(no_cgroup_cause()), reason=no_cgroup_cause())),
    pytest.param("rlimit", id="rlimit"),
]

TOOL_CELL = """
import json, os, subprocess, sys, tempfile
workspace = tempfile.mkdtemp(prefix="shares-", dir=os.getcwd())
def tool(command, timeout):
    return [sys.executable, "-m", "kernel_ext", "tool", "--workspace", workspace, "--enable-shell", "--allow", "shell",
            "--approve", "yes", "run_command", json.dumps({{"command": command, "timeout": timeout}})]
spinner = subprocess.Popen(tool({spinner!r}, 600), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
print("SPINNER", spinner.pid)
"""
BALLOON_CELL = """
done = subprocess.run(tool({balloon!r}, 300), capture_output=True, text=True, timeout=420)
print("BALLOON " + json.dumps({{"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-3000:]}}))
"""


@pytest.fixture
def hub(request, tmp_path):
    reason = proxy_missing()
    if reason:
        pytest.skip(reason)
    hub = start_hub(tmp_path, OPERATOR[request.param])
    hub.mechanism = request.param
    try:
        yield hub
    finally:
        hub.stop()


def stream_text(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o["type"] == "stream")


def spinning(marker: str) -> int | None:
    """The spinner itself (``python3 -c 'while True: pass' MARKER``), not the tool process naming it."""
    for pid in processes_with(marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"python3") and argv[1:3] == [b"-c", b"while True: pass"]:
            return pid
    return None


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("hub", MECHANISMS, indirect=True)
async def test_a_neighbours_demo_completes_beside_a_students_balloon_and_spinner(hub):
    classroom = await start_classroom(hub)
    server_env = process_environ(classroom["pids"]["alice"])
    for name, value in OPERATOR[hub.mechanism].items():  # the operator's settings reached her server
        assert server_env.get(name) == value, name
    marker = f"spin-{secrets.token_hex(6)}"
    spinner_command = f"python3 -c 'while True: pass' {marker}"
    tool_pid = spinner = None
    async with KernelSocket(hub, "alice", classroom["tokens"]["alice"]) as kernel:
        try:
            reply, outputs = await kernel.execute(TOOL_CELL.format(spinner=spinner_command))
            assert reply["status"] == "ok", outputs
            tool_pid = int(stream_text(outputs).split("SPINNER ", 1)[1].split()[0])
            for _ in range(600):  # a bound on the sandbox's start-up, not an assertion on time
                spinner = spinning(marker)
                if spinner:
                    break
                await asyncio.sleep(0.1)
            assert spinner, "the spinner never started in alice's sandbox"
            assert spinner in proctree.descendants(tool_pid)

            async with client_for(f"{hub.url}/user/bob/besser-agent/", classroom["tokens"]["bob"]) as as_bob:
                run = await start(as_bob)
                bobs, (reply, outputs) = await asyncio.gather(
                    follow(as_bob, run, time.monotonic(), 900),
                    kernel.execute(BALLOON_CELL.format(balloon=BALLOON), timeout=600),
                )
            assert reply["status"] == "ok", outputs
            balloon = json.loads(stream_text(outputs).split("BALLOON ", 1)[1])

            # the spinner spun the whole time, in its sandbox's share
            assert Path(f"/proc/{spinner}").exists() and spinning(marker) == spinner
            if hub.mechanism == "cgroup":
                v2 = "cgroup v2" in " ".join(balloon_data(balloon)["sandbox_limits"])
                memory, weight = ("memory.max", "cpu.weight") if v2 else ("memory.limit_in_bytes", "cpu.shares")
                assert int(cgroup_file(spinner, "memory", memory)) == GIB
                assert cgroup_file(spinner, "cpu", weight) == ("50" if v2 else "512")
                # its groups hang under the group of the process that made the sandbox (the tool, not
                # alice's server), which carries the same weight for all of that process's sandboxes
                for controller in ("memory", "cpu"):
                    assert cgroup_dir(spinner, controller).parent.name == f"besser-agent-{tool_pid}"
                assert (cgroup_dir(spinner, "cpu").parent / weight).read_text().strip() == ("50" if v2 else "512")
            else:
                assert "besser-agent-" not in Path(f"/proc/{spinner}/cgroup").read_text()  # no group made at all
                stat = Path(f"/proc/{spinner}/stat").read_text().rsplit(")", 1)[1].split()
                assert int(stat[16]) == min(19, os.nice(0) + 10)  # field 19: nice, the default +10
                limits = Path(f"/proc/{spinner}/limits").read_text().splitlines()
                assert any(line.startswith("Max address space") and str(GIB) in line for line in limits), limits
        finally:
            if tool_pid is not None:  # the tool process's session holds the sandbox: end it, by pid
                proctree.kill_tree(tool_pid)
            if spinner is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(spinner, signal.SIGKILL)
        for _ in range(300):
            if spinning(marker) is None:
                break
            await asyncio.sleep(0.1)
        assert spinning(marker) is None, "the spinner outlived its sandbox"

    assert bobs.status == "completed" and not bobs.host_lost, (bobs.status, bobs.summary, bobs.errors)
    data = balloon_data(balloon)
    assert data["stopped_by"] == "memory_limit", data
    figure = ("exceeded the sandbox's memory limit of 1 GiB" if hub.mechanism == "cgroup"
              else "1 GiB of address space per process (RLIMIT_AS)")
    assert any(note.startswith("memory_limit: ") and figure in note for note in data["notes"]), data["notes"]
    mechanism = "cgroup v" if hub.mechanism == "cgroup" else "RLIMIT_AS"
    assert any(line.startswith("memory: ") and mechanism in line for line in data["sandbox_limits"]), data
    assert any(line.startswith("cpu: ") for line in data["sandbox_limits"]), data


def balloon_data(balloon: dict) -> dict:
    """The run_command result's data, from the tool's JSON answer (the CLI exits 0 either way)."""
    assert balloon["rc"] == 0, balloon["stderr"]
    answer = json.loads(balloon["stdout"])
    assert answer["name"] == "run_command" and answer["ok"] is False, answer
    return answer["data"]
