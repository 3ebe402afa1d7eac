"""Launchers parked in their task cap (``tiers.ParkedLauncher``), on real bubblewrap and pids cgroups.

A sandbox built on demand is started through a launcher that already joined its group and set
the limits. What it runs must be exactly the sandbox the usual start gives: the cap the operator
sets at the call, the file and core limits, the call's environment and nothing of the parked one,
every word as given, and stdin. A launcher nobody takes goes: at once when the group serves a
caller that spawns its own way, and after ``LAUNCHER_TTL_S`` otherwise.

The hand-over itself: a variable the launcher started with that the call does not give is
unset; a line up to what the launcher's pipes hold goes through. A line that does not fit, a
word with a NUL, a launcher that is gone or one that breaks half way are refused with nothing
started, so the caller starts the sandbox the usual way (``Launch.start`` returns None and the
launcher is killed). A dismissed launcher is killed, and released once: its pid may belong to
another process by the next time.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from sandbox_fixtures import conf_for, make_run, parked_next, spy_starts, tier_param, wait_until

from kernel_ext.sandbox import resource_caps, supervisor, tiers
from kernel_ext.sandbox.bwrap import bwrap_options
from kernel_ext.sandbox.env import scrub_environment
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.supervisor import spawn_later

needs_cgroups = pytest.mark.skipif(bool(resource_caps.task_cap_cause()),
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
SHOW = 'printf "%s %s\\n" "${#PAD}" "$(wc -c)"'  # the padding variable's length, then stdin's
WORDS = [" lead", "trail ", "", "$HOME", "a\\", "\t*", "é", "two\nlines\n", "\n"]



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


@needs_cgroups
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
    assert parked["env"]["TMPDIR"] == "/tmp"  # the sandbox's own /tmp, not a folder of the run's home
    assert not any(tiers.PARKED_HOME in value for value in parked["env"].values()), parked["env"]
    assert parked["stdin"] == usual["stdin"] == "given on stdin"
    four_gib = resource_caps.FILE_SIZE_LIMIT
    assert parked["fsize"] == usual["fsize"] == [four_gib, four_gib] and parked["core"] == usual["core"] == [0, 0]
    assert 0 < parked["started"] < 40 and 0 < usual["started"] < 40, (parked["started"], usual["started"])


@needs_cgroups
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


@pytest.fixture
def parked(tmp_path, policy):
    """A launcher parked in a fresh group, and the confinement of a run to hand it."""
    run = make_run(tmp_path)
    conf = Confinement.for_run(run.ws, run.home, network=False)
    group = resource_caps.new_group()
    assert group is not None
    stray = resource_caps.take_launcher(group)  # one the pool may have parked there already
    if stray is not None:
        stray.dismiss()
    launcher = tiers.ParkedLauncher.park(group)
    yield launcher, conf
    launcher.dismiss()
    if launcher.process.poll() is None:  # handed a command that did not finish
        supervisor.release(launcher.process, kill=True)


def hand_over(launcher: tiers.ParkedLauncher, *args) -> bool:
    """``launcher.hand_over(*args)``; one that blocks on a full pipe fails the test instead of hanging it."""
    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(launcher.hand_over(*args)), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        launcher.process.kill()  # the pipe loses its reader: the write ends
        worker.join(10)
        raise AssertionError("the hand-over blocked on a full pipe")
    return answer[0]


def call_env(conf: Confinement, **extra: str) -> dict[str, str]:
    return scrub_environment(home=str(conf.home), tmpdir=conf.tmpdir(True), extra=extra).env


def options_size(launcher: tiers.ParkedLauncher, env: dict[str, str], options: list[str]) -> int:
    """Bytes of the options pipe's line: each unset and set variable, then bubblewrap's options."""
    words = [w for name in sorted(launcher.started_with - set(env)) for w in ("--unsetenv", name)]
    words += [w for name, value in env.items() for w in ("--setenv", name, value)] + options
    return sum(len(os.fsencode(w)) + 1 for w in words)


def command_size(command: list[str]) -> int:
    """Bytes of the command's header on stdin: the word count, then per word its line count and lines."""
    lines = [str(len(command))] + [x for w in command for x in (str(w.count("\n") + 1), w)]
    return sum(len(os.fsencode(line)) + 1 for line in lines)


def finish(launcher: tiers.ParkedLauncher) -> str:
    out, err = launcher.process.communicate(timeout=60)
    assert launcher.process.returncode == 0, err
    return out.decode()


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_variable_the_launcher_started_with_and_the_call_does_not_give_is_unset(parked):
    launcher, conf = parked
    env = call_env(conf, CALL_ONLY="given")
    gone = {"LANG", "PIP_DISABLE_PIP_VERSION_CHECK"}
    assert gone <= launcher.started_with
    for name in gone:
        del env[name]
    assert launcher.hand_over(bwrap_options(conf), env, ["env"], b"")
    seen = dict(line.split("=", 1) for line in finish(launcher).splitlines())
    assert seen.pop("PWD") == str(conf.working_dir())
    assert seen == env


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_line_that_does_not_fit_the_pipes_is_refused_with_nothing_started(parked):
    launcher, conf = parked
    options = bwrap_options(conf)
    command = ["sh", "-c", SHOW]
    env = call_env(conf, PAD="")
    fit = tiers.PIPE_ROOM - options_size(launcher, env, options)
    stdin = b"s" * (tiers.PIPE_ROOM - command_size(command))
    assert not hand_over(launcher, options, call_env(conf, PAD="p" * (fit + 1)), command, b"")
    assert not hand_over(launcher, options, env, command, stdin + b"s")
    assert launcher.process.poll() is None and not launcher.handed
    # what was refused left the pipes empty: the same launcher takes a line that fills them exactly
    assert hand_over(launcher, options, call_env(conf, PAD="p" * fit), command, stdin)
    assert finish(launcher).split() == [str(fit), str(len(stdin))]


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_word_with_a_nul_is_refused_and_the_start_falls_back(parked):
    launcher, conf = parked
    options = bwrap_options(conf)
    assert not launcher.hand_over(options, call_env(conf), ["echo", "a\0b"], b"")
    assert not launcher.hand_over(options, call_env(conf, NAME="a\0b"), ["echo"], b"")
    assert launcher.process.poll() is None and not launcher.handed
    ready = tiers.Launch(["unused"], tiers.Tier.BWRAP, True, tuple(options), ("echo", "a\0b"), launcher)
    assert ready.start(call_env(conf)) is None
    assert launcher.process.returncode == -signal.SIGKILL  # dismissed: killed, not left waiting


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_launcher_that_is_gone_is_refused(parked):
    launcher, conf = parked
    launcher.process.kill()
    launcher.process.wait(timeout=10)
    ready = tiers.Launch(["unused"], tiers.Tier.BWRAP, True, tuple(bwrap_options(conf)), ("true",), launcher)
    assert ready.start(call_env(conf)) is None


def test_a_hand_over_that_breaks_half_way_is_refused_and_closes_nothing_else():
    """The options went through, then the launcher's stdin is gone (it died in between)."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(["/bin/sh", "-c", "exec 0<&-; exec sleep 60"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(read_end,))
    os.close(read_end)
    launcher = tiers.ParkedLauncher(process, write_end, frozenset())
    assert wait_until(lambda: not os.path.exists(f"/proc/{process.pid}/fd/0"), timeout=10)
    saved = os.dup(1)
    try:
        ready = tiers.Launch(["unused"], tiers.Tier.BWRAP, True, ("--die-with-parent",), ("true",), launcher)
        assert ready.start({"PATH": "/usr/bin:/bin"}) is None
        os.fstat(1)  # our own descriptors are untouched
        assert process.returncode == -signal.SIGKILL
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        supervisor.release(process, kill=True)


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_dismissed_launcher_is_killed_and_released_once(parked, monkeypatch):
    launcher, conf = parked
    released: list[int] = []
    real = tiers.release

    def release(process, *, kill):
        released.append(process.pid)
        return real(process, kill=kill)

    monkeypatch.setattr(tiers, "release", release)
    ready = tiers.Launch(["unused"], tiers.Tier.BWRAP, True, tuple(bwrap_options(conf)), ("true",), launcher)
    ready.dismiss()
    assert launcher.process.returncode == -signal.SIGKILL
    ready.dismiss()
    launcher.dismiss()
    assert released == [launcher.process.pid]
    assert ready.start(call_env(conf)) is None


def test_a_launcher_cannot_be_parked_without_bubblewrap(monkeypatch, tmp_path):
    """The cause the server log gives when the pool's groups stay plain."""
    monkeypatch.setattr(tiers, "bwrap_path", lambda: None)
    with pytest.raises(OSError) as failure:
        tiers.ParkedLauncher.park(Path(tmp_path))
    assert failure.value.errno == errno.ENOENT and failure.value.strerror == "bwrap is not installed"


@needs_cgroups
@pytest.mark.parametrize("policy", BWRAP)
def test_a_parked_launcher_keeps_no_folder_of_the_server_busy(parked, tmp_path, monkeypatch):
    """It waits in ``/``: the server's working folder (a run's, about to be removed) is not held."""
    launcher, _ = parked
    assert os.readlink(f"/proc/{launcher.process.pid}/cwd") == "/"
    monkeypatch.chdir(tmp_path)
    group = resource_caps.new_group()
    assert group is not None
    again = tiers.ParkedLauncher.park(group)
    try:
        assert os.readlink(f"/proc/{again.process.pid}/cwd") == "/"
    finally:
        again.dismiss()


def test_a_launcher_that_cannot_start_leaves_no_descriptor_behind(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise OSError(errno.EAGAIN, "fork refused")

    monkeypatch.setattr(tiers, "spawn", refuse)
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError) as failure:
        tiers.ParkedLauncher.park(Path(tmp_path))
    assert failure.value.errno == errno.EAGAIN  # the cause itself, for the server log
    assert sorted(os.listdir("/proc/self/fd")) == before


@needs_cgroups
@pytest.mark.parametrize("tier, parked, asks", [(tiers.Tier.BWRAP, True, True), (tiers.Tier.BWRAP, False, False),
                                                (tiers.Tier.LANDLOCK, True, False), (tiers.Tier.OFF, True, False)])
def test_only_a_parked_bwrap_start_has_launchers_parked_ahead(tmp_path, monkeypatch, tier, parked, asks):
    """A server whose sandboxes start their own way (sessions, workers, Landlock) keeps no process parked."""
    run = make_run(tmp_path)
    monkeypatch.setattr(resource_caps, "_park", None)
    tiers.launch(tier, conf_for(run), ["true"], parked=parked).dismiss()
    assert (resource_caps._park is not None) == asks


def test_the_off_tier_needs_no_task_cap(tmp_path, monkeypatch):
    """The operator's override runs where a task cap cannot be set up (it promises no confinement at all)."""
    def broken(limit=None):
        raise OSError(errno.EACCES, "the sandbox's task cap could not be set up")

    run = make_run(tmp_path)
    monkeypatch.setattr(resource_caps, "new_group", broken)
    with pytest.raises(OSError):
        tiers.launch(tiers.Tier.LANDLOCK, conf_for(run), ["true"])
    ready = tiers.launch(tiers.Tier.OFF, conf_for(run), ["true"])
    assert ready.tier is tiers.Tier.OFF and not any("cgroup.procs" in word for word in ready.argv)
