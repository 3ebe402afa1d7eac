"""Escapes tried for real from ``run_command`` (the run's sandboxed session), per confined tier.

Host files, the /proc of host processes, other runs, the network, signals to host processes
and mount tricks; then the cross-layer one: links planted by a command and handed to the file
tools. Host processes are found by a unique number in their command line; listeners are on
127.0.0.1 only. Signals go to exactly one process of ours (never ``kill -1``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sandbox_fixtures import (
    CONFINED_TIERS,
    processes_with,
    tier_param,
    token,
    wait_until,
)

from kernel_ext.sandbox import landlock

from .world import HOST_SECRET, attack, call, output, sh, shell_executor

TIERS = [tier_param(t) for t in CONFINED_TIERS]


@pytest.fixture
def host_process(world):
    """A process of the host's user, holding a secret in its environment, its cwd outside the run."""
    mark = token()
    process = subprocess.Popen(["sleep", mark], cwd=world.outside, env={"PATH": "/usr/bin:/bin", "HOST_ONLY": HOST_SECRET})
    yield process, mark
    process.kill()
    process.wait()


@pytest.mark.parametrize("policy", TIERS)
def test_host_files_are_neither_readable_nor_writable(world, registry, policy):
    executor = shell_executor(world, registry, policy)
    probe = token()
    attempts = [
        f"cat {world.secret_file}",
        f"ls -la {world.outside}",
        f"echo planted > {world.outside}/new.txt",
        f"echo planted >> {world.outside}/module.py",
        f"rm {world.outside}/module.py",
        f"mv {world.outside}/folder {world.ws}/stolen",
        f"cp {world.secret_file} {world.ws}/copied.txt",
        f"touch /etc/besser-{probe} /usr/besser-{probe} {sys.prefix}/besser-{probe} /root/besser-{probe}",
        "cat /etc/shadow",
        f"cd {world.outside} && ls",
    ]
    for command in attempts:
        result = attack(executor, command, policy)
        assert HOST_SECRET not in output(result) and "root:" not in output(result)
    assert not (world.ws / "copied.txt").exists() and not (world.ws / "stolen").exists()
    for folder in ("/etc", "/usr", sys.prefix, "/root"):
        assert not Path(folder, f"besser-{probe}").exists()
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_host_processes_are_invisible_or_opaque(world, registry, policy, host_process):
    process, mark = host_process
    executor = shell_executor(world, registry, policy)
    pid = process.pid
    for command in (
        f"tr '\\0' '\\n' < /proc/{pid}/environ",
        f"cat /proc/{pid}/root{world.secret_file}",
        f"ls /proc/{pid}/cwd/",
        f"ls -l /proc/{pid}/fd/",
        f"cat /proc/{pid}/cwd/host_secret.txt",
        "tr '\\0' '\\n' < /proc/1/environ | grep HOST_ONLY",
    ):
        result = attack(executor, command, policy)
        assert HOST_SECRET not in output(result)
    scan = sh(executor, f"grep -l {mark} /proc/[0-9]*/cmdline 2>/dev/null; true")
    if policy == "bwrap":  # a private PID namespace: the host process does not exist in there
        assert mark not in output(scan).replace(f"grep -l {mark}", "")
        assert "/proc/" not in scan.data["stdout"]
    else:  # Landlock has no PID namespace: names are visible, and every result says so
        assert any("no PID isolation" in limit for limit in scan.data["sandbox_limits"])
    assert process.poll() is None and world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_other_runs_do_not_exist_inside(world, registry, policy):
    executor = shell_executor(world, registry, policy)
    other = world.run.other_ws
    for command in (
        f"cat {other}/secret.txt",
        f"ls -a {other.parent.parent} | grep r2",
        f"echo planted > {other}/planted.txt",
        "cat ../../r2/app/secret.txt",
        "ls -a ../.. | grep r2",
        f"ln -s {other}/secret.txt {world.ws}/peek && cat {world.ws}/peek",
    ):
        result = attack(executor, command, policy)
        assert "other-run-secret" not in output(result)
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_network_off_reaches_no_listener_on_the_host(world, registry, policy):
    if policy == "landlock" and landlock.abi_version() < 4:
        pytest.skip("this kernel's Landlock cannot block TCP (ABI < 4); results say so")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    executor = shell_executor(world, registry, policy, network=False)
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        for command in (f"{sys.executable} -c \"{code}\"", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"):
            result = attack(executor, command, policy)
            assert "connected" not in result.data["stdout"], output(result)
    finally:
        stop.set()
        listener.close()
    assert accepted == [] and world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_signals_never_reach_host_processes(world, registry, policy, host_process):
    process, mark = host_process
    delivered: list[int] = []
    previous = signal.signal(signal.SIGURG, lambda signum, frame: delivered.append(signum))  # harmless if it lands
    executor = shell_executor(world, registry, policy)
    try:
        for command in (f"kill -9 {process.pid}", f"kill -TERM {process.pid}", f"kill -URG {os.getpid()}",
                        f"kill -STOP {process.pid}"):
            attack(executor, command, policy)
        sh(executor, f"pkill -9 -f {mark}; true")
    finally:
        signal.signal(signal.SIGURG, previous)
    assert delivered == [], "a sandboxed command signalled the server process"
    assert process.poll() is None and processes_with(mark) == [process.pid]
    with open(f"/proc/{process.pid}/stat") as handle:
        assert handle.read().split(") ")[1][0] != "T", "the host process was stopped"
    assert world.unchanged()


@pytest.fixture
def host_mounts():
    """The host's mount table before the test; anything a failing sandbox mounted is undone after."""
    before = Path("/proc/self/mountinfo").read_text()
    yield before
    for line in Path("/proc/self/mountinfo").read_text().splitlines()[::-1]:
        if line not in before.splitlines():
            subprocess.run(["umount", "-l", line.split()[4]], check=False, capture_output=True)


@pytest.mark.parametrize("policy", TIERS)
def test_mount_tricks_stay_inside_the_sandbox(world, registry, policy, host_mounts):
    executor = shell_executor(world, registry, policy)
    probe = token()
    mounts_before = host_mounts
    (world.ws / "m").mkdir()
    for command in (
        f"mount -t tmpfs none {world.ws}/m",
        f"mount --bind {world.ws} /usr",
        "mount -o remount,rw /usr",
        f"unshare -rm sh -c 'mount -o remount,rw /usr && touch /usr/besser-{probe}'",
        f"unshare -rm sh -c 'mount -o remount,rw,bind {sys.prefix} && touch {sys.prefix}/besser-{probe}'",
        f"chroot /proc/1/root cat {world.secret_file}",
        f"cat /proc/1/root{world.secret_file}",
    ):
        result = attack(executor, command, policy)
        assert HOST_SECRET not in output(result)
    # A private mount namespace may let a command mount over /etc in its own view: the host's stays.
    inner = sh(executor, f"unshare -rm sh -c 'mount -t tmpfs none /etc && echo pwned > /etc/besser-{probe} && ls /etc'")
    assert not Path(f"/etc/besser-{probe}").exists() and not Path(f"/usr/besser-{probe}").exists()
    assert not Path(sys.prefix, f"besser-{probe}").exists()
    assert Path("/proc/self/mountinfo").read_text() == mounts_before, "the host's mounts changed"
    assert HOST_SECRET not in output(inner)
    assert sh(executor, "echo still-serving").ok  # the session survived every attempt
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_links_planted_by_a_command_are_refused_by_the_file_tools(world, registry, policy):
    """The cross-layer path: a command plants links (it may), the model then hands them to file tools."""
    executor = shell_executor(world, registry, policy)
    planted = sh(executor, f"ln -s {world.secret_file} leak.txt && ln -s {world.outside} out && "
                           f"ln -s ../../r2/app other && mkdir -p deep && ln -s /etc/passwd deep/pw && echo planted")
    assert planted.ok, output(planted)
    hard = sh(executor, f"ln {world.secret_file} hard.txt")
    assert not hard.ok and not (world.ws / "hard.txt").exists()  # the outside file is not there to link
    world.snapshot()
    for name, arguments in (
        ("read_file", {"path": "leak.txt"}),
        ("read_file", {"path": "out/host_secret.txt"}),
        ("read_file", {"path": "other/secret.txt"}),
        ("read_file", {"path": "deep/pw"}),
        ("write_file", {"path": "out/new.py", "content": "x = 1\n"}),
        ("modify_file", {"path": "out/module.py", "old_text": "VALUE", "new_text": "PLANTED"}),
        ("delete_file", {"path": "out/module.py"}),
        ("check_syntax", {"path": "out/module.py"}),
    ):
        result = call(executor, name, **arguments)
        assert not result.ok and result.error.code in ("symlink_refused", "outside_workspace"), (name, result.observation)
        assert HOST_SECRET not in result.observation and "other-run-secret" not in result.observation
    found = call(executor, "search_in_files", pattern="SECRET|secret|root:")
    assert found.ok and HOST_SECRET not in found.observation and "root:" not in found.observation
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_a_background_job_cannot_outlive_its_run(world, registry, policy):
    """Daemons started with setsid and double forks die when the run ends (registry closes the run)."""
    mark = token()
    executor = shell_executor(world, registry, policy)
    started = sh(executor, f"(setsid sleep {mark} &) ; nohup sleep {mark}.5 >/dev/null 2>&1 & disown; "
                           f"python3 -c 'import os, time\nif os.fork() == 0:\n  os.setsid()\n  time.sleep({mark})' & echo up")
    assert started.ok, output(started)
    assert wait_until(lambda: len(processes_with(mark)) >= 2), processes_with(mark)
    executor.context.services["shell"].close()
    assert wait_until(lambda: not processes_with(mark), timeout=15), f"left running: {processes_with(mark)}"
    assert world.unchanged()
