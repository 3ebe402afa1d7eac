"""Fair shares (``kernel_ext/sandbox/shares.py``): a memory limit and a CPU weight on every sandbox.

Real bubblewrap, real cgroups where this host lets the server make them, and the fallback
(``RLIMIT_AS`` and ``nice``) forced the way an operator forces it: ``BESSER_SANDBOX_CGROUPS=off``.
The end-to-end case is the issue's: a student's server (a child process) runs a CPU spinner and
a memory balloon in its sandboxes while a neighbour's demo run (``python -m kernel_ext demo``,
the replay provider, its own process) completes; the balloon's result names the memory limit,
the spinner's processes carry the weight (or the niceness), and no time is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_fixtures import CONFINED_TIERS, cgroup_file, make_run, no_cgroup_cause, parked_next, spy_starts, tier_param

from kernel_ext.sandbox import resource_caps, shares, tiers
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.shares import Controls, ShareSettings
from kernel_ext.sandbox.spec import Confinement

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30
# Allocates and touches 64 MiB at a time (a cgroup charges touched pages only) until something stops it.
BALLOON = "chunks = []\nwhile True:\n    chunks.append(b'x' * (64 << 20))\n"
SPINNER = "while True:\n    pass\n"


MECHANISMS = [
    pytest.param("cgroup", id="cgroup", marks=pytest.mark.skipif(bool(no_cgroup_cause()), reason=no_cgroup_cause())),
    pytest.param("rlimit", id="rlimit"),
]


# -- the operator's settings ----------------------------------------------------------------------


def test_the_defaults_are_sized_for_a_classroom_node_and_documented():
    assert ShareSettings.from_environment({}) == ShareSettings(GIB, 4 * GIB, 50, 10, True)
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for row in ("| `BESSER_SANDBOX_MEMORY` | `1G` (1 GiB) |", "| `BESSER_SANDBOX_ADDRESS_SPACE` | `4G` (4 GiB) |",
                "| `BESSER_SANDBOX_CPU_WEIGHT` | 50 |", "| `BESSER_SANDBOX_NICE` | 10 |", "| `BESSER_SANDBOX_CGROUPS` | `auto` |"):
        assert row in doc


@pytest.mark.parametrize(("environ", "expected"), [
    ({"BESSER_SANDBOX_MEMORY": "512M"}, {"memory": 512 << 20}),
    ({"BESSER_SANDBOX_MEMORY": " 2GiB "}, {"memory": 2 * GIB}),
    ({"BESSER_SANDBOX_MEMORY": "0", "BESSER_SANDBOX_NICE": "0"}, {"memory": 0, "nice": 0}),
    ({"BESSER_SANDBOX_ADDRESS_SPACE": "8g", "BESSER_SANDBOX_CPU_WEIGHT": "10000"}, {"address_space": 8 * GIB, "cpu_weight": 10000}),
    ({"BESSER_SANDBOX_CGROUPS": "OFF"}, {"cgroups": False}),
])
def test_settings_are_read_from_the_environment(environ, expected):
    settings = ShareSettings.from_environment(environ)
    assert {name: getattr(settings, name) for name in expected} == expected


@pytest.mark.parametrize(("environ", "message"), [
    ({"BESSER_SANDBOX_MEMORY": "lots"}, "BESSER_SANDBOX_MEMORY must be a size"),
    ({"BESSER_SANDBOX_MEMORY": "10M"}, "at least 64M"),
    ({"BESSER_SANDBOX_ADDRESS_SPACE": "-1"}, "BESSER_SANDBOX_ADDRESS_SPACE must be a size"),
    ({"BESSER_SANDBOX_CPU_WEIGHT": "0"}, "BESSER_SANDBOX_CPU_WEIGHT must be between 1 and 10000"),
    ({"BESSER_SANDBOX_NICE": "20"}, "BESSER_SANDBOX_NICE must be between 0 and 19"),
    ({"BESSER_SANDBOX_NICE": "ten"}, "BESSER_SANDBOX_NICE must be a whole number"),
    ({"BESSER_SANDBOX_CGROUPS": "maybe"}, "BESSER_SANDBOX_CGROUPS must be auto or off"),
])
def test_bad_settings_are_named(environ, message):
    with pytest.raises(ValueError, match=message):
        ShareSettings.from_environment(environ)


def test_a_bad_setting_leaves_no_sandbox_and_says_why(monkeypatch, tmp_path):
    """Fail closed: no sandbox starts without the operator's limits; the cause names the variable."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.sandbox.oneoff import run_confined

    monkeypatch.setenv("BESSER_SANDBOX_MEMORY", "lots")
    shares.operator_settings.cache_clear()
    tiers.choose_tier.cache_clear()
    try:
        choice = tiers.choose_tier("bwrap")
        assert not choice.available and "BESSER_SANDBOX_MEMORY" in choice.cause
        run = make_run(tmp_path)
        with pytest.raises(ToolFailure) as refused:
            run_confined(["touch", "ran.txt"], run.ws, 30, policy="bwrap")
        assert refused.value.code == "sandbox_unavailable" and not (run.ws / "ran.txt").exists()
    finally:
        monkeypatch.undo()
        shares.operator_settings.cache_clear()
        tiers.choose_tier.cache_clear()


def test_the_limits_say_which_mechanism_applies_with_its_figures():
    settings = ShareSettings()
    v2 = shares.limits(Controls(Path("/m"), Path("/c"), 2, 2), settings)
    assert v2 == ("memory: 1 GiB per sandbox, no swap (cgroup v2 memory.max); a command past it is stopped, its result "
                  "says memory_limit",
                  "cpu: weight 50 against a default of 100, per sandbox and for this server's sandboxes together "
                  "(cgroup v2 cpu.weight)")
    assert "cgroup v1 memory.limit_in_bytes" in shares.limits(Controls(Path("/m"), Path("/c"), 1, 1), settings)[0]
    unaccounted = Controls(Path("/m"), Path("/c"), 1, 1, no_swap=False)
    assert "swap not limited (this kernel does not account it)" in shares.limits(unaccounted, settings)[0]
    bare = Controls(memory_cause="no memory cgroup is mounted", cpu_cause="no cpu cgroup is mounted")
    assert shares.limits(bare, settings) == (
        "memory: 4 GiB of address space per process, not per sandbox (RLIMIT_AS; no memory cgroup: no memory cgroup "
        "is mounted)",
        "cpu: nice +10, a lower priority than the server (no cpu cgroup: no cpu cgroup is mounted)")
    off = shares.limits(bare, ShareSettings(memory=0, nice=0))
    assert off[0].startswith("memory: no limit per sandbox (BESSER_SANDBOX_MEMORY=0)") and "NICE=0" in off[1]
    # every confined tier's limits carry them; the operator's explicit off tier says it has none at all
    for policy in CONFINED_TIERS:
        assert tiers.TierChoice(policy, tiers.Tier(policy)).limits(network=False)[-2:] == resource_caps.share_limits()
    assert tiers.TierChoice("off", tiers.Tier.OFF).limits(network=False) == tiers.OFF_LIMITS


@pytest.mark.parametrize("version", [1, 2])
def test_the_files_written_and_read_per_cgroup_version(tmp_path, version):
    """What a group gets and how a stop is counted, on each version's file names (plain files here:
    this host has one version; the real hierarchy is exercised by the tests below)."""
    parent = tmp_path / "besser-agent-1"
    group = parent / "sandbox-a"
    group.mkdir(parents=True)
    swap = group / ("memory.swap.max" if version == 2 else "memory.memsw.limit_in_bytes")
    swap.write_text("max")
    controls = Controls(parent, parent, version, version)
    assert controls.companions(group) == []  # one group serves both controllers on one hierarchy
    controls.apply(group, ShareSettings(memory=GIB, cpu_weight=50))
    if version == 2:
        assert [(group / n).read_text() for n in ("memory.max", "memory.swap.max", "cpu.weight")] == [str(GIB), "0", "50"]
        events = group / "memory.events"
        events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    else:
        assert [(group / n).read_text() for n in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "cpu.shares")] == [
            str(GIB), str(GIB), "512"]
        events = group / "memory.oom_control"
        events.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    watch = shares.watch(controls, group, None)
    assert watch.events == events and watch.kills() == 0 and watch.note(0, 137, "") is None
    events.write_text(events.read_text().replace("oom_kill 0", "oom_kill 2"))
    assert watch.kills() == 2 and watch.note(2, 137, "") is None  # stops before the command are not its own
    assert watch.note(1, 137, "").startswith("memory_limit: the command was stopped")
    assert watch.note(1, 0, "") is None  # a command that succeeded was not stopped
    v1_apart = Controls(tmp_path / "memory", tmp_path / "cpu", 1, 1)  # v1: a hierarchy per controller
    assert v1_apart.companions(group) == [tmp_path / "memory" / "sandbox-a", tmp_path / "cpu" / "sandbox-a"]


def test_under_rlimit_as_a_failed_allocation_is_read_from_the_output():
    watch = shares.watch(Controls(), None, 4 * GIB)
    assert watch.per_process and watch.limit == 4 * GIB
    assert watch.note(0, 1, "Traceback ...\nMemoryError\n").endswith("4 GiB of address space per process (RLIMIT_AS)")
    assert watch.note(0, 1, "ValueError: no") is None and watch.note(0, 0, "MemoryError") is None
    assert shares.watch(Controls(), None, None) is shares.NO_WATCH


# -- real sandboxes, in process ---------------------------------------------------------------------


@pytest.fixture
def mechanism_in_process(request, monkeypatch):
    """``cgroup``: this host's groups. ``rlimit``: a host without cgroups (no task-cap group, no
    memory or cpu group), RLIMIT_AS at 1 GiB so the balloon stays small."""
    if request.param == "rlimit":
        monkeypatch.setattr(resource_caps, "new_group", lambda limit=None: None)
        monkeypatch.setattr(resource_caps, "share_controls", lambda: Controls(memory_cause="none here", cpu_cause="none here"))
        monkeypatch.setattr(shares, "operator_settings", lambda: ShareSettings(address_space=GIB))
    return request.param


@pytest.mark.parametrize("mechanism_in_process", MECHANISMS, indirect=True)
@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_a_balloon_in_a_one_off_is_stopped_by_name(tmp_path, policy, mechanism_in_process):
    run = make_run(tmp_path)
    conf = Confinement.for_run(run.ws, run.home)
    record = execute(tiers.choose_tier(policy), conf, ["python3", "-c", BALLOON], timeout=120)
    expected = ("it exceeded the sandbox's memory limit of 1 GiB" if mechanism_in_process == "cgroup"
                else "an allocation failed at the sandbox's limit of 1 GiB of address space per process (RLIMIT_AS)")
    assert record.exit_code != 0 and not record.timed_out, record.as_data()
    if mechanism_in_process == "cgroup":  # the kernel stopped it: SIGKILL, as bwrap (128 + 9) or the launcher reports it
        assert record.exit_code in (137, -9), record.as_data()
    assert record.stopped_by == "memory_limit" and record.as_data()["stopped_by"] == "memory_limit"
    assert any(note.startswith("memory_limit: ") and expected in note for note in record.notes), record.notes
    assert "memory limit" in record.status_line() and "memory_limit" in record.observation()
    ordinary = execute(tiers.choose_tier(policy), conf, ["python3", "-c", "print(sum(range(10**6)))"], timeout=60)
    assert ordinary.exit_code == 0 and ordinary.stopped_by is None and "stopped_by" not in ordinary.as_data()


@pytest.mark.skipif(bool(resource_caps.task_cap_cause()), reason=f"no pids cgroups here: {resource_caps.task_cap_cause()}")
@pytest.mark.skipif(tiers.self_test(tiers.Tier.BWRAP) is not None, reason="bubblewrap cannot start here")
def test_a_parked_launcher_in_a_group_without_memory_or_cpu_cgroups_sets_rlimit_as_and_nice(tmp_path, monkeypatch):
    """A task-cap group alone (a v2 subtree with only pids delegated): the launcher parked in it
    applies the fallbacks itself, and the command it takes runs under them."""
    monkeypatch.setattr(resource_caps, "share_controls", lambda: Controls(memory_cause="not here", cpu_cause="not here"))
    monkeypatch.setattr(shares, "operator_settings", lambda: ShareSettings(address_space=2 * GIB, nice=7))
    resource_caps.drain()  # launchers parked before carry the real groups' caps
    try:
        run = make_run(tmp_path)
        used = spy_starts(monkeypatch)
        parked_next(run)
        probe = "import os, resource; print(os.nice(0), resource.getrlimit(resource.RLIMIT_AS)[0])"
        record = execute(tiers.choose_tier("bwrap"), Confinement.for_run(run.ws, run.home), ["python3", "-c", probe], timeout=60)
    finally:
        resource_caps.drain()
    assert used[-1] is True, used  # through a launcher parked in its group
    assert record.exit_code == 0 and record.stdout.text.split() == [str(min(19, os.nice(0) + 7)), str(2 * GIB)], record.as_data()


@pytest.mark.parametrize("mechanism_in_process", MECHANISMS, indirect=True)
@pytest.mark.skipif(tiers.self_test(tiers.Tier.BWRAP) is not None, reason="bubblewrap cannot start here")
def test_the_run_shell_names_the_stop_and_keeps_going(tmp_path, mechanism_in_process):
    """In the run's persistent shell the limit stops the balloon, not the shell: the next command runs there."""
    from kernel_ext.sandbox.session.service import ShellService

    run = make_run(tmp_path)
    shell = ShellService(run.ws, run_id="shares", enabled=True, home=run.home)
    try:
        first = shell.run("export KEPT=yes; true", timeout=30)
        balloon = shell.run(f"python3 -c \"{BALLOON}\"", timeout=120)
        after = shell.run('echo "$KEPT"', timeout=30)
    finally:
        shell.close()
    assert first.exit_code == 0
    assert balloon.stopped_by == "memory_limit" and any("memory_limit: " in n for n in balloon.notes), balloon.as_data()
    assert after.exit_code == 0 and after.stdout.text.strip() == "yes" and after.stopped_by is None
    assert not any("a new shell was started" in n for n in after.notes)  # the same shell, not a restarted one


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_a_command_killed_by_sigkill_is_reported_so_in_every_tier(tmp_path, policy):
    """The memory limit's signal: the landlock launcher ends as its command did (it once exited 1)."""
    run = make_run(tmp_path)
    record = execute(tiers.choose_tier(policy), Confinement.for_run(run.ws, run.home), ["sh", "-c", "kill -KILL $$"],
                     timeout=30)
    assert record.exit_code in (137, -9) and record.stopped_by is None, record.as_data()


@pytest.mark.parametrize("mechanism_in_process", MECHANISMS, indirect=True)
def test_sh_run_names_the_stop_gives_a_hint_and_does_not_retry(tmp_path, mechanism_in_process):
    from shell_tools_fixtures import harness

    h = harness(tmp_path)
    try:
        result = h.call("sh_run", command=f"python3 -c \"{BALLOON}\"", retries=3, backoff_ms=0, timeout_ms=120_000)
    finally:
        h.service.close()
    assert not result.ok and result.data["stopped_by"] == "memory_limit", result.data
    assert "attempts" not in result.data  # the same command would meet the same limit: not retried
    assert "memory limit of 1 GiB" in result.data["memory_limit"] or "1 GiB of address space" in result.data["memory_limit"]
    assert "BESSER_SANDBOX_MEMORY" in result.data["hint"]


@pytest.mark.parametrize("mechanism_in_process", MECHANISMS, indirect=True)
def test_a_background_command_stopped_by_the_limit_is_named_in_its_record(tmp_path, mechanism_in_process):
    from sandbox_fixtures import wait_until
    from shell_tools_fixtures import harness

    h = harness(tmp_path)
    try:
        record = h.call("sh_run", command=f"python3 -c \"{BALLOON}\"", background=True).data["id"]
        box: dict = {}

        def stored() -> bool:
            box["meta"] = h.call("sh_detail", id=record, selector="meta").data["meta"]
            return "exit" in box["meta"]

        assert wait_until(stored, timeout=120), box
    finally:
        h.service.close()
    assert box["meta"]["stopped_by"] == "memory_limit" and "1 GiB" in box["meta"]["memory_limit"], box["meta"]


@pytest.mark.skipif(bool(no_cgroup_cause()), reason=no_cgroup_cause())
@pytest.mark.skipif(tiers.self_test(tiers.Tier.BWRAP) is not None, reason="bubblewrap cannot start here")
def test_a_worker_stopped_by_the_memory_limit_says_so_in_its_exit_reason(tmp_path):
    """A long-lived worker (the app host's kind): the reason its owner gets names the limit."""
    from sandbox_fixtures import wait_until

    from kernel_ext.sandbox.workers import WarmWorker, WorkerPlan

    run = make_run(tmp_path)
    worker = WarmWorker(lambda: WorkerPlan(["python3", "-c", BALLOON], Confinement.for_run(run.ws, run.home)),
                        what="the balloon worker", policy="bwrap")
    reasons: list[str] = []
    worker.start(on_exit=reasons.append)
    try:
        assert wait_until(lambda: bool(reasons), timeout=120)
    finally:
        worker.stop()
    assert reasons[0].startswith("the balloon worker exited (exit code ") and "memory_limit: " in reasons[0], reasons


# -- the issue's case: a student's balloon and spinner beside a neighbour's demo run ------------------

STUDENT = r"""
import json, os, signal, subprocess, sys
sys.path.insert(0, sys.argv[1])
from kernel_ext.sandbox import proctree, tiers
from kernel_ext.sandbox.confined import spawn_confined
from kernel_ext.sandbox.oneoff import run_confined
from kernel_ext.sandbox.spec import Confinement
ws, home, spinner_code, balloon_code = sys.argv[2:6]
spinner = spawn_confined(["python3", "-c", spinner_code], Confinement.for_run(ws, home), policy="bwrap",
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stable=True)
def spinning():
    for pid in proctree.descendants(spinner.process.pid):
        try:
            if b"while True" in open(f"/proc/{pid}/cmdline", "rb").read():
                return pid
        except OSError:
            pass
    return None
import time
for _ in range(200):
    pid = spinning()
    if pid:
        break
    time.sleep(0.05)
balloon = run_confined(["python3", "-c", balloon_code], ws, 300, policy="bwrap")
print(json.dumps({"spinner": pid, "balloon": balloon.as_data(), "limits": list(tiers.choose_tier("bwrap").limits(False))}),
      flush=True)
sys.stdin.read()  # the neighbour's run is over
proctree.kill_tree(spinner.process.pid)
spinner.process.wait(timeout=30)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.skipif(tiers.self_test(tiers.Tier.BWRAP) is not None, reason="bubblewrap cannot start here")
def test_a_neighbours_demo_completes_beside_a_balloon_and_a_spinner(tmp_path, mechanism):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BESSER_SANDBOX_")}
    env["PYTHONPATH"] = str(ROOT)
    if mechanism == "rlimit":
        env["BESSER_SANDBOX_CGROUPS"] = "off"  # the operator's switch: RLIMIT_AS and nice, default figures
    run = make_run(tmp_path)
    student = subprocess.Popen([sys.executable, "-c", STUDENT, str(ROOT), str(run.ws), str(run.home), SPINNER, BALLOON],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=tmp_path, text=True)
    try:
        neighbour = subprocess.Popen([sys.executable, "-m", "kernel_ext", "demo", "--out", str(tmp_path / "demo")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, text=True)
        assert student.stdout is not None
        seen = json.loads(student.stdout.readline())
        output, _ = neighbour.communicate(timeout=900)
        spinner = seen["spinner"]
        assert spinner and Path(f"/proc/{spinner}").exists()  # it spun the whole time the neighbour ran
        if mechanism == "cgroup":
            memory_file = "memory.max" if "memory.max" in " ".join(seen["limits"]) else "memory.limit_in_bytes"
            assert int(cgroup_file(spinner, "memory", memory_file)) == GIB
            weight = cgroup_file(spinner, "cpu", "cpu.weight" if "cpu.weight" in " ".join(seen["limits"]) else "cpu.shares")
            assert weight in ("50", "512")
        else:
            stat = Path(f"/proc/{spinner}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[16]) == min(19, os.nice(0) + 10)  # field 19: nice
            limits = Path(f"/proc/{spinner}/limits").read_text()
            assert any(line.startswith("Max address space") and str(4 * GIB) in line for line in limits.splitlines())
    finally:
        if student.stdin is not None:
            student.stdin.close()
        student.wait(timeout=60)
    assert neighbour.returncode == 0, output[-3000:]
    assert "done: completed" in output
    balloon = seen["balloon"]
    assert balloon["stopped_by"] == "memory_limit", balloon
    figure = "memory limit of 1 GiB" if mechanism == "cgroup" else "4 GiB of address space per process (RLIMIT_AS)"
    assert any(note.startswith("memory_limit: ") and figure in note for note in balloon["notes"]), balloon["notes"]
    assert any(line.startswith("memory: ") for line in balloon["sandbox_limits"])
    assert any(line.startswith("cpu: ") for line in balloon["sandbox_limits"])
