"""Resource exhaustion from ``run_command``: fork bombs, output floods, a full disk, SIGTERM ignored.

Each case ends with the run's processes gone (found by a unique number in their command
line), the session still answering, and nothing changed outside the run. The fork cases are
bounded (a real unbounded bomb would take the whole machine down if the sandbox failed);
the disk case fills a real tmpfs in a private mount namespace (``tests/tiny_disk.py``).
"""

from __future__ import annotations

import os
import sys

import pytest
from sandbox_fixtures import (
    CONFINED_TIERS,
    processes_with,
    tier_param,
    token,
    wait_until,
)
from tiny_disk import run_on_tiny_disk, tiny_disk_cause

from kernel_ext.boundary import ApprovalPolicy
from kernel_ext.sandbox.resource_caps import (
    operator_max_tasks,
    rlimit_fallback,
    task_cap_cause,
)
from kernel_ext.sandbox.shtools.options import MAX_COMMAND_CHARS

from .world import call, output, sh, shell_executor

TIERS = [tier_param(t) for t in CONFINED_TIERS]
STORM = 1200  # processes a bounded fork storm tries to hold at once
# DESIGN.md's figure (1,024 tasks a sandbox), unless the operator's variable sets another
DOCUMENTED_CAP = int(os.environ.get("BESSER_SANDBOX_MAX_TASKS", "").strip() or 1024)

SPAWN = """import os, sys
mark = sys.argv[1]
started = 0
for _ in range(int(sys.argv[2])):
    try:
        os.posix_spawn("/bin/sleep", ["sleep", mark], {})
        started += 1
    except OSError:
        break
print("started", started)
"""


@pytest.mark.parametrize("policy", TIERS)
def test_the_classic_fork_bomb_is_refused_before_it_runs(world, registry, policy):
    executor = shell_executor(world, registry, policy)
    for bomb in (":(){ :|:& };:", "bomb() { bomb | bomb & }; bomb"):
        result = sh(executor, f"touch ran.txt; {bomb}")
        assert result.error.code == "command_denied", output(result)
    assert not (world.ws / "ran.txt").exists() and world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_a_disguised_fork_storm_dies_with_the_run(world, registry, policy):
    mark = token()
    (world.ws / "storm.py").write_text(SPAWN)
    executor = shell_executor(world, registry, policy)
    result = sh(executor, f"python3 storm.py {mark} 300", timeout=60)
    assert result.ok and "started" in result.data["stdout"], output(result)
    assert wait_until(lambda: len(processes_with(mark)) >= 100)
    assert sh(executor, "echo still-serving").ok
    executor.context.services["shell"].close()  # the run ends
    assert wait_until(lambda: not processes_with(mark), timeout=30), f"{len(processes_with(mark))} left running"
    assert world.unchanged()


@pytest.mark.skipif(bool(task_cap_cause()) and not rlimit_fallback(),
                    reason=f"no task cap on this host (root, so RLIMIT_NPROC does not apply): {task_cap_cause()}")
@pytest.mark.parametrize("policy", TIERS)
def test_a_command_cannot_hold_more_than_a_bounded_number_of_processes(world, registry, policy):
    mark = token()
    (world.ws / "storm.py").write_text(SPAWN)
    executor = shell_executor(world, registry, policy)
    try:
        result = sh(executor, f"python3 storm.py {mark} {STORM}", timeout=60)
        started = int(result.data["stdout"].split()[-1]) if "started" in result.data["stdout"] else STORM
    finally:
        executor.context.services["shell"].close()
        assert wait_until(lambda: not processes_with(mark), timeout=60)
    assert world.unchanged()
    assert started < STORM, f"the sandbox let one command start {started} processes"
    # a pids cgroup counts the sandbox alone; RLIMIT_NPROC the user's processes, which come and go meanwhile
    assert operator_max_tasks() == DOCUMENTED_CAP
    bound = DOCUMENTED_CAP + (64 if rlimit_fallback() else 0)
    assert started <= bound, f"{started} processes, over the cap of {DOCUMENTED_CAP} tasks"
    print(f"{policy}: {started} of {STORM} processes started under a cap of {DOCUMENTED_CAP} tasks")


@pytest.mark.parametrize("policy", TIERS)
def test_an_endless_output_flood_is_capped_killed_and_spilled_boundedly(world, registry, policy):
    executor = shell_executor(world, registry, policy)
    result = sh(executor, "yes 'flood flood flood flood'", timeout=60)
    assert not result.ok and result.error.code == "execution_failed" and result.data["output_capped"], output(result)
    assert len(result.observation) <= 16_000
    spill = result.data["full_output_path"]
    assert spill and (world.ws / spill).stat().st_size <= 2 * 1024 * 1024 + 4096
    assert sh(executor, "echo still-serving").ok
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_a_command_ignoring_sigterm_is_killed_at_its_timeout(world, registry, policy):
    mark = token()
    executor = shell_executor(world, registry, policy)
    stubborn = (f"{sys.executable} -c \"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep({mark})\"")
    result = sh(executor, f"trap '' TERM HUP; {stubborn}", timeout=1)
    assert result.error.code == "timeout" and result.data["timed_out"], output(result)
    assert wait_until(lambda: not processes_with(mark), timeout=15), processes_with(mark)
    assert sh(executor, "echo still-serving").ok
    assert world.unchanged()


@pytest.mark.parametrize("policy", TIERS)
def test_a_single_file_written_by_a_command_is_size_capped(world, registry, policy):
    executor = shell_executor(world, registry, policy)
    result = sh(executor, "ulimit -f; ulimit -c")
    assert result.ok, output(result)
    assert result.data["stdout"].split() == [str(4 * 1024 * 1024), "0"], output(result)  # DESIGN.md's 4 GiB, in KiB
    assert world.unchanged()


@pytest.mark.skipif(tiny_disk_cause() is not None, reason=f"no private tmpfs: {tiny_disk_cause()}")
@pytest.mark.parametrize("policy", TIERS)
def test_filling_the_workspace_disk_fails_the_command_and_keeps_the_run_standing(world, policy, tmp_path):
    """The workspace is a real 8 MB tmpfs; the command writes 64 MB into it."""
    home = tmp_path / "disk-home"
    home.mkdir()
    seen = run_on_tiny_disk("fill_by_command", tmp_path / "tiny-ws", "8m", str(home), policy)
    assert seen["tier"] == policy
    fill = seen["fill"]
    assert not fill["ok"] and fill["data"]["exit_code"] != 0 and "No space left" in fill["data"]["stderr"]  # earned failure
    assert seen["alive"]["ok"]  # the session still answers
    for name in ("write_new", "modify_keep"):  # the file tools refuse by name, nothing half-written
        assert (seen[name]["code"], "No space left" in seen[name]["message"]) == ("execution_failed", True), seen[name]
    assert seen["keep_intact"] and seen["temps_left"] == []
    assert seen["cleanup"]["ok"] and seen["write_after"]["ok"]  # space freed: work goes on
    assert world.unchanged()


def lexer_steps(run) -> int:
    """Lines executed in the command lexer while ``run()`` goes (a count of work, not a time).

    A card is prepared in a worker thread (off the server's loop) and ``sys.settrace`` is per
    thread, so the tracer is installed around each ``parse`` in the thread that runs it.
    """
    from kernel_ext.shellplan import plan

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename.endswith("shellplan/lexer.py"):
            if event == "line":
                count += 1
            return tracer
        return None

    original = plan.parse

    def traced(command):
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            return original(command)
        finally:
            sys.settrace(previous)

    plan.parse = traced
    try:
        run()
    finally:
        plan.parse = original
    return count


@pytest.mark.parametrize("piece", ["a b ", "$(x) ", "[", "{a,b}", "[a]", "'q' ", "x$y "])
def test_preparing_a_card_for_a_long_command_costs_linear_work(world, registry, piece):
    """A hostile command is only classified for its card (the host denies it): the work must grow linearly."""
    executor = shell_executor(world, registry, "bwrap", approver=lambda request: False,
                              approvals=ApprovalPolicy())  # shell commands need a card here

    def card(size: int) -> None:
        result = sh(executor, (piece * size)[:size])  # ``size`` characters
        assert result.error.code in ("approval_denied", "invalid_argument"), output(result)

    small, large = lexer_steps(lambda: card(300)), lexer_steps(lambda: card(1200))
    assert large < 6 * small, f"4x the command, {large / small:.1f}x the work"
    assert world.unchanged()


@pytest.mark.parametrize("tool", ["run_command", "sh_run", "sh_plan"])
def test_an_over_long_command_is_refused_by_name_before_it_is_planned(world, registry, tool):
    asked = []
    executor = shell_executor(world, registry, "bwrap", approver=lambda request: asked.append(request) or True,
                              approvals=ApprovalPolicy())
    command = "touch ran.txt; " + "[" * MAX_COMMAND_CHARS  # bracket-heavy: once the lexer's worst case
    seen = {}
    steps = lexer_steps(lambda: seen.setdefault("result", call(executor, tool, command=command)))
    result = seen["result"]
    assert not result.ok and result.error.code == "invalid_argument", result.observation
    assert f"{MAX_COMMAND_CHARS}" in result.observation and "command" in result.observation
    assert steps == 0 and not asked  # refused before any planning and before a card
    assert not (world.ws / "ran.txt").exists() and world.unchanged()
