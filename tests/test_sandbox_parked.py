"""Launchers parked in their task cap (``tiers.ParkedLauncher``), on real bubblewrap and pids cgroups.

A sandbox built on demand is started through a launcher that already joined its group and set
the limits. What it runs must be exactly the sandbox the usual start gives: the cap the operator
sets at the call, the file and core limits, the call's environment and nothing of the parked one,
every word as given, and stdin. A launcher nobody takes goes: at once when the group serves a
caller that spawns its own way, and after ``LAUNCHER_TTL_S`` otherwise.
"""

from __future__ import annotations

import json

import pytest
from sandbox_fixtures import make_run, tier_param, wait_until

from kernel_ext.sandbox import resource_caps, tiers
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.supervisor import spawn_later

pytestmark = pytest.mark.skipif(bool(resource_caps.task_cap_cause()),
                                reason=f"no pids cgroups here: {resource_caps.task_cap_cause()}")
BWRAP = [tier_param("bwrap")]
PROBE = r"""
import json, os, resource, sys
started = 0
for _ in range(60):
    try:
        os.posix_spawn("/bin/sleep", ["sleep", "30"], {})
        started += 1
    except OSError:
        break
print(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "stdin": sys.stdin.read(), "started": started,
                  "fsize": resource.getrlimit(resource.RLIMIT_FSIZE), "core": resource.getrlimit(resource.RLIMIT_CORE)}))
"""
WORDS = [" lead", "trail ", "", "$HOME", "a\\", "\t*", "é", "two\nlines\n", "\n"]


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


def no_more_parked(monkeypatch) -> None:
    """From here on every start is the usual one: no launcher is parked, none waits."""
    monkeypatch.setattr(resource_caps, "want_launchers", lambda park: None)
    monkeypatch.setattr(resource_caps, "_park", None)
    spawn_later(lambda: None).result()  # a refill under way has finished
    for group in list(resource_caps._launchers):
        resource_caps._expire(group)


def probe(run, words: list[str]) -> dict:
    record = execute(tiers.choose_tier("bwrap"), conf_for(run), ["python3", "-c", PROBE, *words], timeout=60,
                     stdin=b"given on stdin", env={"EXTRA_FLAG": "on"})
    assert record.exit_code == 0, record.stderr.text
    return json.loads(record.stdout.text)


@pytest.mark.parametrize("policy", BWRAP)
def test_a_parked_start_is_the_sandbox_the_usual_start_gives(tmp_path, monkeypatch, policy):
    run = make_run(tmp_path)
    parked_next(run)
    used = spy_starts(monkeypatch)
    monkeypatch.setattr(resource_caps, "operator_max_tasks", lambda: 40)  # set after the launcher was parked
    parked = probe(run, WORDS)
    assert used == [True]
    no_more_parked(monkeypatch)
    usual = probe(run, WORDS)
    assert used == [True, False]
    assert parked["argv"] == usual["argv"] == WORDS
    assert parked["env"] == usual["env"]
    assert parked["env"]["HOME"] == str(run.home) and parked["env"]["EXTRA_FLAG"] == "on"
    assert not any(tiers.PARKED_HOME in value for value in parked["env"].values()), parked["env"]
    assert parked["stdin"] == usual["stdin"] == "given on stdin"
    four_gib = resource_caps.FILE_SIZE_LIMIT
    assert parked["fsize"] == usual["fsize"] == [four_gib, four_gib] and parked["core"] == usual["core"] == [0, 0]
    assert 0 < parked["started"] < 40 and 0 < usual["started"] < 40, (parked["started"], usual["started"])


@pytest.mark.parametrize("policy", BWRAP)
def test_a_launcher_nobody_takes_goes(tmp_path, monkeypatch, policy):
    run = make_run(tmp_path)
    parked_next(run)
    group = resource_caps._ready[-1]
    launcher = resource_caps._launchers[group][0]
    # a caller that spawns its own way (a session, a worker) takes the group as a plain one
    ready = tiers.launch(tiers.Tier.BWRAP, conf_for(run), ["true"])
    assert ready.parked is None and launcher.process.poll() is not None
    assert resource_caps.procs_file(group) in ready.argv
    monkeypatch.setattr(resource_caps, "LAUNCHER_TTL_S", 0.5)
    execute(tiers.choose_tier("bwrap"), conf_for(run), ["true"], timeout=30)  # the refill parks short-lived ones
    assert wait_until(lambda: any(resource_caps._launchers.values()), timeout=20)
    waiting = [parked for parked, _ in resource_caps._launchers.values()]
    assert wait_until(lambda: not resource_caps._launchers and all(p.process.poll() is not None for p in waiting),
                      timeout=20), "parked launchers outlived their time"
