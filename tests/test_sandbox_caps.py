"""Resource caps of every confined tier (``kernel_ext/sandbox/resource_caps.py``), on real sandboxes.

The task cap is a pids cgroup per sandbox: the cases that need one run where the host lets
this process make them and are skipped elsewhere with the reason. Its fallback for non-root
servers, RLIMIT_NPROC, is checked inside both tiers and, as the kernel enforces it, for
``nobody`` in front of an unprivileged bubblewrap.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_fixtures import CONFINED_TIERS, make_run, tier_param, wait_until

from kernel_ext.sandbox import cgroups, resource_caps, tiers
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.spec import Confinement

TIERS = [tier_param(t) for t in CONFINED_TIERS]
# The figures the documentation promises (DESIGN.md, README), written out here rather than read from
# the code's constants, so a changed constant fails until the promise is changed too.
DOCUMENTED_MAX_TASKS = 1024
DOCUMENTED_FILE_SIZE_KIB = 4 * 1024 * 1024  # 4 GiB, in the KiB that ulimit counts
needs_task_cap = pytest.mark.skipif(bool(resource_caps.task_cap_cause()),
                                    reason=f"no pids cgroups here: {resource_caps.task_cap_cause()}")


@pytest.fixture(autouse=True)
def tiers_resolved():
    """Each tier is self-tested before a test breaks the caps (a test elsewhere may have reset the choice)."""
    for policy in CONFINED_TIERS:
        tiers.choose_tier(policy)


SPAWN = """import os
started = 0
for _ in range(200):
    try:
        os.posix_spawn("/bin/sleep", ["sleep", "30"], {})
        started += 1
    except OSError as exc:
        print("refused:", exc.strerror)
        break
print("started", started)
"""


def run_once(tmp_path: Path, policy: str, argv: list[str]):
    run = make_run(tmp_path)
    conf = Confinement.for_run(run.ws, run.home, network=False)
    return run, execute(tiers.choose_tier(policy), conf, argv, timeout=60)


def test_the_documents_state_the_figures_the_code_is_held_to():
    design = (Path(__file__).parent.parent / "DESIGN.md").read_text()
    assert "at most 1,024 tasks" in design and "4 GiB files" in design
    assert (DOCUMENTED_MAX_TASKS, DOCUMENTED_FILE_SIZE_KIB) == (1_024, 4_194_304)


def test_the_operator_cap_is_parsed_with_named_errors():
    assert resource_caps.max_tasks({}) == DOCUMENTED_MAX_TASKS
    assert resource_caps.max_tasks({"BESSER_SANDBOX_MAX_TASKS": " 2048 "}) == 2048
    with pytest.raises(ValueError, match="BESSER_SANDBOX_MAX_TASKS must be a whole number"):
        resource_caps.max_tasks({"BESSER_SANDBOX_MAX_TASKS": "lots"})
    with pytest.raises(ValueError, match="at least 16"):
        resource_caps.max_tasks({"BESSER_SANDBOX_MAX_TASKS": "3"})


@needs_task_cap
@pytest.mark.parametrize("policy", TIERS)
def test_a_sandbox_holds_no_more_tasks_than_its_cap(tmp_path, policy, monkeypatch):
    monkeypatch.setattr(resource_caps, "operator_max_tasks", lambda: 40)  # the operator's setting, smaller
    _, record = run_once(tmp_path, policy, ["python3", "-c", SPAWN])
    lines = record.stdout.text.splitlines()
    started = int(lines[-1].split()[-1])
    assert 0 < started < 40 and "refused: Resource temporarily unavailable" in lines, record.stdout.text
    assert not any("number of processes" in line for line in tiers.choose_tier(policy).limits(network=False))


@needs_task_cap
@pytest.mark.parametrize("policy", TIERS)
def test_a_sandbox_that_cannot_join_its_cap_does_not_run(tmp_path, policy, monkeypatch):
    nowhere = tmp_path / "not-a-cgroup"  # its cgroup.procs does not exist: the join fails
    monkeypatch.setattr(resource_caps, "new_group", lambda limit=None: nowhere)
    run, record = run_once(tmp_path, policy, ["touch", "ran.txt"])
    assert record.exit_code == 125 and "sandbox:" in record.stderr.text, (record.exit_code, record.stderr.text)
    assert not (run.ws / "ran.txt").exists()


@needs_task_cap
def test_groups_go_when_their_sandboxes_end_and_dead_servers_are_swept(tmp_path, monkeypatch):
    base = resource_caps.pids_hierarchy().base
    given, make = [], resource_caps.new_group
    monkeypatch.setattr(resource_caps, "new_group", lambda limit=None: given.append(make(limit)) or given[-1])
    _, record = run_once(tmp_path, "bwrap" if tiers.self_test(tiers.Tier.BWRAP) is None else "landlock", ["true"])
    assert record.exit_code == 0 and len(given) == 1 and given[0].is_dir()
    documented = os.environ.get("BESSER_SANDBOX_MAX_TASKS", "").strip() or str(DOCUMENTED_MAX_TASKS)
    assert (given[0] / "pids.max").read_text().strip() == documented
    companions = resource_caps.share_controls().companions(given[0])  # its memory and cpu groups (cgroup v1)
    assert all(c.is_dir() for c in companions)
    # the sandbox ended; its groups go at the first sweep after its last task has exited
    assert wait_until(lambda: resource_caps.sweep(0.0) >= 0 and not given[0].exists(), timeout=10)
    assert not any(c.exists() for c in companions)
    dead = base / f"{cgroups.GROUP_PREFIX}{2**22 + 12345}"  # above pid_max's default: no such process
    (dead / "sandbox-left-behind").mkdir(parents=True)
    cgroups.sweep_dead_servers(base)
    assert not dead.exists()


def test_the_limits_name_a_missing_cap(monkeypatch):
    monkeypatch.setattr(resource_caps, "task_cap_cause", lambda: "no pids cgroup is mounted")
    bwrap = tiers.TierChoice("bwrap", tiers.Tier.BWRAP).limits(network=False)
    assert bwrap == ("no cap on the number of processes: no pids cgroup is mounted", *resource_caps.share_limits())
    assert tiers.TierChoice("off", tiers.Tier.OFF).limits(network=False) == tiers.OFF_LIMITS


@pytest.mark.parametrize("policy", TIERS)
def test_files_are_capped_with_or_without_a_task_cap(tmp_path, policy, monkeypatch):
    monkeypatch.setattr(resource_caps, "new_group", lambda limit=None: None)  # a host without pids cgroups
    _, record = run_once(tmp_path, policy, ["bash", "-c", "ulimit -f; ulimit -c; ulimit -Hf"])
    kib = str(DOCUMENTED_FILE_SIZE_KIB)
    assert record.exit_code == 0 and record.stdout.text.split() == [kib, "0", kib], record.stdout.text


def test_a_cap_that_cannot_be_set_up_stops_the_start_by_name(tmp_path, monkeypatch):
    """No sandbox runs uncapped because its cgroup could not be made: the start fails, named."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.sandbox.oneoff import run_confined
    from kernel_ext.sandbox.session.service import ShellService

    def no_room(limit=None):
        raise OSError(28, "the sandbox's task cap could not be set up: No space left on device")

    monkeypatch.setattr(resource_caps, "new_group", no_room)
    run = make_run(tmp_path)
    policy = "bwrap" if tiers.self_test(tiers.Tier.BWRAP) is None else "landlock"
    with pytest.raises(ToolFailure) as oneoff:
        run_confined(["touch", "ran.txt"], run.ws, 30, policy=policy)
    assert oneoff.value.code == "execution_failed" and "task cap" in str(oneoff.value)
    shell = ShellService(run.ws, run_id="caps", enabled=True, home=run.home)
    try:
        with pytest.raises(ToolFailure) as session:
            shell.run("touch ran.txt", timeout=30)
        assert session.value.code == "execution_failed"
    finally:
        shell.close()
    assert not (run.ws / "ran.txt").exists()


@pytest.mark.parametrize("policy", TIERS)
def test_without_pids_cgroups_a_non_root_server_sets_rlimit_nproc(tmp_path, policy, monkeypatch):
    """The fallback's plumbing: the value reaches the sandbox as its soft and hard limit.

    (The kernel enforces RLIMIT_NPROC only for non-root users; this suite runs as root here,
    so what is checked is that the limit is in place inside the sandbox.)"""
    monkeypatch.setattr(resource_caps, "new_group", lambda limit=None: None)  # a host without pids cgroups
    monkeypatch.setattr(resource_caps, "task_cap_cause", lambda: "no pids cgroup is mounted")
    monkeypatch.setattr(resource_caps, "rlimit_fallback", lambda: True)  # as a non-root server would
    monkeypatch.setattr(resource_caps, "process_limit", lambda: 4321)
    _, record = run_once(tmp_path, policy, ["bash", "-c", "ulimit -u; ulimit -Hu"])
    assert record.exit_code == 0 and record.stdout.text.split() == ["4321", "4321"], record.stdout.text + record.stderr.text
    limits = tiers.TierChoice(policy, tiers.Tier(policy)).limits(network=False)
    assert any("capped per user, not per sandbox (RLIMIT_NPROC" in line for line in limits), limits
    assert not any("no cap on the number of processes" in line for line in limits), limits


def test_the_process_limit_is_the_cap_plus_the_users_processes(monkeypatch):
    monkeypatch.setattr(resource_caps, "operator_max_tasks", lambda: 500)
    mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and p.stat().st_uid == os.getuid())
    limit = resource_caps.process_limit()
    assert limit > 500 and abs(limit - (500 + mine)) <= 10  # processes come and go while it counts


def _nobody_cause() -> str:
    if os.geteuid() != 0:
        return "needs root to start a process as another user"
    if not (Path("/usr/bin/setpriv").exists() and Path("/usr/bin/python3").exists()):
        return "needs util-linux's setpriv and a system /usr/bin/python3"
    return ""


@pytest.mark.skipif(bool(_nobody_cause()), reason=_nobody_cause())
@pytest.mark.parametrize("limit", [50, None])
def test_rlimit_nproc_set_before_bubblewrap_holds_a_non_root_sandbox(limit):
    """The fallback as the kernel enforces it: ``bwrap_prefix`` with a process limit, run as
    ``nobody`` in front of an unprivileged bubblewrap (a minimal one: the project's own mounts
    name this interpreter's folders, which ``nobody`` cannot read here). Without the limit the
    same sandbox starts every process it asks for."""
    import subprocess

    if tiers.self_test(tiers.Tier.BWRAP) is not None:
        pytest.skip("bubblewrap cannot start here")
    spawn = SPAWN.replace('"30"', '"5"')
    sandbox = ["bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--proc", "/proc", "--dev", "/dev",
               "--die-with-parent", "--", "/usr/bin/python3", "-c", spawn]
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    caps = resource_caps.SandboxCaps(None, limit)
    done = subprocess.run(as_nobody + resource_caps.bwrap_prefix(caps) + sandbox, capture_output=True, text=True,
                          cwd="/tmp", timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-1000:]
    started = int(done.stdout.split()[-1])
    if limit is None:
        assert started == 200, done.stdout
    else:
        assert started < limit and "refused: Resource temporarily unavailable" in done.stdout, done.stdout
