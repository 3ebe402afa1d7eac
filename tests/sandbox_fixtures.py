"""Shared helpers for the sandbox tests: a runs folder, tier parameters, process and port probes.

Everything is real: bubblewrap and Landlock on this machine, loopback listeners on
127.0.0.1 only, processes looked up in the host's /proc.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernel_ext.sandbox import landlock, resource_caps, tiers
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.spec import Confinement

CONFINED_TIERS = ("bwrap", "landlock")
ALL_TIERS = ("bwrap", "landlock", "off")


def tier_param(name: str):
    """``pytest.param`` for a tier, skipped with the host's reason when it cannot run here."""
    marks = []
    if name == "landlock" and landlock.abi_version() < 1:
        marks.append(pytest.mark.skip(reason="this kernel has no Landlock (landlock_create_ruleset ABI query returned 0)"))
    elif name == "bwrap":
        cause = tiers.self_test(tiers.Tier.BWRAP)
        if cause is not None:
            marks.append(pytest.mark.skip(reason=f"bubblewrap cannot start here: {cause}"))
        marks.append(pytest.mark.bwrap)
    return pytest.param(name, marks=marks, id=name)


@dataclass
class Run:
    runs: Path
    ws: Path
    home: Path
    other_ws: Path


def make_run(tmp_path: Path) -> Run:
    """``runs/r1/app`` (our workspace, with a project file), ``runs/r1/.besser/home``, and a sibling run."""
    runs = tmp_path / "runs"
    ws = runs / "r1" / "app"
    home = runs / "r1" / ".besser" / "home"
    other = runs / "r2" / "app"
    for folder in (ws / "sub", home, other):
        folder.mkdir(parents=True)
    (ws / "project.txt").write_text("inside-the-project\n")
    (other / "secret.txt").write_text("other-run-secret\n")
    return Run(runs, ws, home, other)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def token() -> str:
    """A number no other process on the host has in its command line."""
    return f"{9_000_000 + uuid.uuid4().int % 1_000_000}"


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (zombies have none and do not count)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def cgroup_dir(pid: int, controller: str) -> Path:
    """The cgroup folder ``pid`` is in for ``controller`` (v1 hierarchy, else the v2 one), seen from the host."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
    line = next(x for x in lines if x.startswith("0::"))
    return Path("/sys/fs/cgroup") / line[3:].lstrip("/")


def cgroup_file(pid: int, controller: str, name: str) -> str:
    """A file of the cgroup ``pid`` is in for ``controller``, read from the host."""
    return (cgroup_dir(pid, controller) / name).read_text().strip()


def wait_until(predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (a bound, never an assertion on time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def serving(ns: str) -> list[int]:
    """This process's descendants (pasta, the DNS relay, a run's holder) in or holding the network namespace ``ns``."""
    from kernel_ext.sandbox import proctree

    found = []
    for pid in proctree.descendants(os.getpid()):
        try:
            links = [os.readlink(f"/proc/{pid}/ns/net")] + [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if ns in links:
            found.append(pid)
    return found


def conf_for(run) -> Confinement:
    return Confinement.for_run(run.ws, run.home, network=False)


def parked_next(run) -> None:
    """An on-demand start asks for parked launchers; wait until the next group handed out has one."""
    execute(tiers.choose_tier("bwrap"), conf_for(run), ["true"], timeout=30)
    assert wait_until(lambda: bool(resource_caps._ready) and resource_caps._ready[-1] in resource_caps._launchers,
                      timeout=20), "no launcher was parked"


def spy_starts(monkeypatch) -> list[bool]:
    """Whether each start went through a parked launcher."""
    used: list[bool] = []
    real = tiers.Launch.start

    def start(self, env, stdin=b""):
        process = real(self, env, stdin)
        used.append(process is not None)
        return process

    monkeypatch.setattr(tiers.Launch, "start", start)
    return used


def no_cgroup_cause() -> str:
    """Why this machine gives sandboxes no memory and cpu cgroups ('' when it does)."""
    from kernel_ext.sandbox import resource_caps

    controls = resource_caps.share_controls()
    if controls.memory is None or controls.cpu is None:
        return f"no memory and cpu cgroups here: {controls.memory_cause or controls.cpu_cause}"
    return ""
