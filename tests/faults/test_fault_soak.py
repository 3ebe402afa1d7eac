"""Soak: many sandboxed commands and background jobs started and killed leak nothing.

Small by default (100 commands, 20 jobs per tier); ``--soak`` runs the issue's 1,000 and 100.
What "nothing leaked" means, measured on the server process (this one) after every run has
ended: no process it started is still alive (its descendants, and anything carrying one of
the test's unique numbers in its command line), and it holds no descriptor it did not hold
before (compared by number and target, after a warm-up that creates the lazy singletons:
the spawner thread, the drainer, the prepared one-off sandbox pool).
"""

from __future__ import annotations

import os
import sys
import time

import pytest
from sandbox_fixtures import make_run, processes_with, tier_param, token, wait_until

from kernel_ext.sandbox import proctree
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.oneoff import release_workspace, run_confined
from kernel_ext.sandbox.session.registry import SessionRegistry
from kernel_ext.sandbox.session.service import ShellService

SESSIONS = 4  # commands are spread over this many runs, each ended (closed) in turn


def sizes(config) -> tuple[int, int]:
    return (1000, 100) if config.getoption("--soak") else (100, 20)


def descriptors() -> set[tuple[int, str]]:
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            found.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except OSError:
            continue  # the descriptor listdir itself used
    return found


def leaked_descriptors(before: set[tuple[int, str]]) -> set[tuple[int, str]]:
    return descriptors() - before


def one_run(run, registry: SessionRegistry, policy: str, commands: int, jobs: int, mark: str, index: int) -> dict[str, int]:
    """A run: ``commands`` commands (session and one-off), ``jobs`` background jobs, then its end."""
    settings = ShellSettings(policy=policy, session_network=False)
    shell = ShellService(run.ws, run_id=f"soak-{index}", enabled=True, home=run.home, registry=registry, settings=settings)
    counts = {"ok": 0, "failed": 0, "timed_out": 0}
    try:
        for i in range(jobs):  # background jobs of three kinds, all left running
            kind = i % 3
            line = (f"sleep {mark}{index}{i} & echo started" if kind == 0 else
                    f"(setsid sleep {mark}{index}{i} &); echo started" if kind == 1 else
                    f"nohup sh -c 'sleep {mark}{index}{i}' >/dev/null 2>&1 & echo started")
            assert shell.run(line, timeout=30).ok
        for i in range(commands):
            kind = i % 10
            if kind == 9:  # a one-off confined check (a fresh sandbox each time)
                record = run_confined(["/bin/sh", "-c", f"echo one-off {i}"], run.ws, 30, policy=policy)
            elif kind == 8:  # a command killed at its timeout, its own child too
                record = shell.run(f"sleep {mark}.{i} & sleep {mark}.{i}5", timeout=0.2)
            elif kind == 7:
                record = shell.run(f"(exit {i % 5 + 1})", timeout=30)  # a subshell: a bare exit ends the session
            else:
                record = shell.run(f"echo {i} > out{i % 4}.txt && cat out{i % 4}.txt", timeout=30)
            counts["timed_out" if record.timed_out else "ok" if record.ok else "failed"] += 1
        assert wait_until(lambda: len(processes_with(f"{mark}{index}")) >= jobs // 2), "background jobs did not start"
    finally:
        shell.close()
        release_workspace(run.ws)
    return counts


def settled(before_children: set, mark: str) -> bool:
    return not processes_with(mark) and set(proctree.descendants(os.getpid())) <= before_children


@pytest.mark.slow
@pytest.mark.parametrize("policy", [tier_param("bwrap"), tier_param("landlock")])
def test_commands_and_background_jobs_leave_no_process_and_no_descriptor(tmp_path, request, policy):
    commands, jobs = sizes(request.config)
    mark = token()
    registry = SessionRegistry(max_sessions=10, idle_seconds=900)
    warm = make_run(tmp_path / "warm")
    one_run(warm, registry, policy, 10, 3, token(), 0)  # the lazy singletons exist from here on
    assert wait_until(lambda: settled(set(proctree.descendants(os.getpid())), "-never-"), timeout=10)
    time.sleep(0.2)
    children_before = set(proctree.descendants(os.getpid()))
    fds_before = descriptors()
    totals = {"ok": 0, "failed": 0, "timed_out": 0}
    try:
        for index in range(1, SESSIONS + 1):
            run = make_run(tmp_path / f"soak{index}")
            counts = one_run(run, registry, policy, commands // SESSIONS, jobs // SESSIONS, mark, index)
            for key, value in counts.items():
                totals[key] += value
    finally:
        registry.close()
    assert totals["ok"] >= commands * 0.7 and totals["timed_out"] >= commands // 10 - SESSIONS, totals
    assert totals["failed"] >= commands // 10 - SESSIONS, totals  # failures are earned, and counted
    assert wait_until(lambda: settled(children_before, mark), timeout=60), (
        f"left running: {processes_with(mark)[:10]}; new children: {set(proctree.descendants(os.getpid())) - children_before}")
    assert wait_until(lambda: not leaked_descriptors(fds_before), timeout=20), sorted(leaked_descriptors(fds_before))[:20]
    print(f"{policy}: {sum(totals.values())} commands {totals}, {jobs} background jobs; python {sys.version.split()[0]}")
