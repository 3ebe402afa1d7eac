"""A process that forks after using the sandbox (a forking server, a test runner's fork server)
gets a child that can still start sandboxes: the spawner thread, the ready cgroups and the
parked launchers are its parent's and are forgotten in the child, never used twice."""

from __future__ import annotations

import os
import subprocess

import pytest

from kernel_ext.sandbox import resource_caps, supervisor


def _in_child(check) -> int:
    pid = os.fork()
    if pid == 0:  # the child: any failure or a hang (the alarm) is a non-zero status
        try:
            import signal

            signal.alarm(20)
            os._exit(0 if check() else 1)
        except BaseException:  # noqa: BLE001 - whatever goes wrong in the child is its exit status
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_forked_child_can_still_spawn_from_the_spawner_thread():
    first = supervisor.spawn(["true"], stable=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first.wait(timeout=10)  # the parent's spawner thread now exists

    def check() -> bool:
        child = supervisor.spawn(["true"], stable=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return child.wait(timeout=10) == 0

    assert _in_child(check) == 0


def test_a_forked_child_inherits_no_ready_group_or_parked_launcher():
    if resource_caps.task_cap_cause():
        pytest.skip(f"no pids cgroups here: {resource_caps.task_cap_cause()}")

    def check() -> bool:
        return not resource_caps._ready and not resource_caps._launchers and not resource_caps._created

    resource_caps.new_group()  # the parent hands one out and refills its pool
    assert _in_child(check) == 0
