"""One shell per run: state carries over, background servers live until the run ends.

Runs on real bubblewrap and forces the Landlock and off tiers too. Background servers listen
on 127.0.0.1 only; processes are found in the host's /proc by a unique number in their
command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sandbox_fixtures import (
    ALL_TIERS,
    CONFINED_TIERS,
    free_port,
    make_run,
    port_answers,
    processes_with,
    tier_param,
    token,
    wait_until,
)

from kernel_ext.sandbox.session.persistent import ShellSession
from kernel_ext.sandbox.session.registry import SessionRegistry
from kernel_ext.sandbox.tiers import choose_tier

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


class FakeClock:
    """The registry's idle clock, advanced by hand (no test waits 900 s)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path)


@pytest.fixture
def registry():
    found = SessionRegistry(max_sessions=10, idle_seconds=900)
    yield found
    found.close()


def open_session(registry, run, policy, key="r1", **kw) -> ShellSession:
    choice = choose_tier(policy)
    return registry.session(key, lambda: ShellSession(choice, run.ws, run.home, **kw))


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_cd_and_export_carry_over_and_working_dir_does_not_move_the_shell(registry, run, policy):
    shell = open_session(registry, run, policy)
    first = shell.run("cd sub && export GREETING=hello && declare -x OTHER=x", timeout=30)
    assert first.ok and first.cwd == "sub"
    second = shell.run("pwd; echo $GREETING $OTHER", timeout=30)
    assert second.stdout.text.split() == [str(run.ws / "sub"), "hello", "x"]
    elsewhere = shell.run("pwd", timeout=30, working_dir=".")
    assert elsewhere.stdout.text.strip() == str(run.ws) and elsewhere.cwd == "."
    assert shell.run("pwd", timeout=30).stdout.text.strip() == str(run.ws / "sub")


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_ending_outside_the_workspace_returns_to_the_root_and_says_so(registry, run, policy):
    shell = open_session(registry, run, policy)
    left = shell.run("cd /usr", timeout=30)
    assert left.ok and any("outside the workspace" in note for note in left.notes)
    assert shell.run("pwd", timeout=30).stdout.text.strip() == str(run.ws)


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_failure_is_earned_and_exit_ends_only_the_shell(registry, run, policy):
    shell = open_session(registry, run, policy)
    shell.run("export KEEP=1", timeout=30)
    failed = shell.run("false", timeout=30)
    assert (failed.ok, failed.exit_code) == (False, 1)
    exited = shell.run("exit 4", timeout=30)
    assert (exited.ok, exited.exit_code) == (False, 4)
    assert any("exit ends the session" in note for note in exited.notes)
    after = shell.run("echo $KEEP", timeout=30)
    assert after.ok and after.stdout.text.strip() == "1"


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_background_server_answers_next_command_and_dies_with_the_run(registry, run, policy):
    port = free_port()
    shell = open_session(registry, run, policy, network=True)
    started = shell.run(f"{sys.executable} -m http.server {port} --bind 127.0.0.1 >server.log 2>&1 &", timeout=30)
    assert started.ok
    probe = (
        f"{sys.executable} -c \"import time,urllib.request as u\nfor _ in range(100):\n try: print(u.urlopen('http://127.0.0.1:{port}/').status); break\n"
        f" except OSError: time.sleep(0.05)\""
    )
    answered = shell.run(probe, timeout=30)
    assert answered.ok and answered.stdout.text.strip() == "200", answered.observation()
    assert port_answers(port)
    registry.close_run("r1")
    assert wait_until(lambda: not port_answers(port)), "the background server outlived its run"


@pytest.mark.parametrize("policy", [tier_param("bwrap"), tier_param("landlock")])
def test_late_background_output_is_discarded_not_mixed_in(registry, run, policy):
    shell = open_session(registry, run, policy)
    shell.run("yes late-output-from-background &", timeout=30)  # what it printed before returning is its own
    following = shell.run("echo next", timeout=30)
    assert following.ok and following.stdout.text == "next\n"
    registry.close_run("r1")


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_timeout_kills_the_command_tree_but_not_the_session_or_earlier_jobs(registry, run, policy):
    earlier, mark = token(), token()
    shell = open_session(registry, run, policy)
    shell.run(f"export STAYS=yes; sleep {earlier} &", timeout=30)
    timed = shell.run(f"(setsid sleep {mark} &); sh -c 'sleep {mark}.5'", timeout=1.0)
    assert timed.timed_out and not timed.ok and "TIMED OUT" in timed.observation()
    assert wait_until(lambda: not processes_with(mark)), f"grandchildren left: {processes_with(mark)}"
    assert processes_with(earlier), "an earlier background job was killed by another command's timeout"
    assert shell.run("echo $STAYS", timeout=30).stdout.text.strip() == "yes"
    registry.close_run("r1")
    assert wait_until(lambda: not processes_with(earlier))


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_a_timed_out_list_stops_and_a_shell_that_ignores_it_is_restarted(registry, run, policy):
    shell = open_session(registry, run, policy)
    shell.kill_grace_s = 1.0
    shell.run("cd sub; export KEEP=2", timeout=30)
    stopped = shell.run("sleep 30; echo never; while :; do :; done", timeout=0.5)
    assert stopped.timed_out and "never" not in stopped.stdout.text
    assert not any("restarted" in note for note in stopped.notes)  # the same shell goes on
    busy = shell.run("while :; do :; done", timeout=0.5)
    assert busy.timed_out and not any("restarted" in note for note in busy.notes)
    stubborn = shell.run("trap '' USR1; while :; do :; done", timeout=0.5)
    assert stubborn.timed_out and any("restarted" in note for note in stubborn.notes)
    after = shell.run("echo $KEEP; pwd", timeout=30)
    assert after.stdout.text.split() == ["2", str(run.ws / "sub")]
    assert any("new shell" in note for note in after.notes)


@pytest.mark.parametrize("policy", [tier_param("bwrap"), tier_param("landlock")])
def test_idle_close_keeps_state_and_says_background_is_gone(run, policy):
    clock = FakeClock()
    registry = SessionRegistry(max_sessions=10, idle_seconds=900, clock=clock)
    mark = token()
    try:
        shell = registry.session("r1", lambda: ShellSession(choose_tier(policy), run.ws, run.home))
        shell.last_used = clock.now
        shell.run(f"cd sub; export IDLE=kept; sleep {mark} &", timeout=30)
        shell.last_used = clock.now
        assert registry.reap_idle() == []
        clock.now += 901
        assert registry.reap_idle() == ["r1"]
        assert wait_until(lambda: not processes_with(mark))
        after = shell.run("echo $IDLE; pwd", timeout=30)
        assert after.stdout.text.split() == ["kept", str(run.ws / "sub")]
        assert any("without commands" in note for note in after.notes)
        assert any("background processes" in note for note in after.notes)
    finally:
        registry.close()


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
def test_past_the_session_limit_a_command_runs_one_off_with_state(tmp_path, policy):
    registry = SessionRegistry(max_sessions=1, idle_seconds=900)
    first, second = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    try:
        one = registry.session("a", lambda: ShellSession(choose_tier(policy), first.ws, first.home))
        two = registry.session("b", lambda: ShellSession(choose_tier(policy), second.ws, second.home))
        assert one.run("true", timeout=30).ok and registry.live_count() == 1
        moved = two.run("cd sub; export LIMITED=1; echo $LIMITED", timeout=30)
        assert moved.ok and any("one-off sandbox" in note for note in moved.notes)
        assert registry.live_count() == 1 and not two.alive
        after = two.run("pwd; echo $LIMITED", timeout=30)
        assert after.stdout.text.split() == [str(second.ws / "sub"), "1"]
    finally:
        registry.close()


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_flood_is_capped_killed_and_spilled_with_its_tail(registry, run, policy):
    shell = open_session(registry, run, policy)
    flood = shell.run("head -c 200000000 /dev/zero | tr '\\0' x; echo never", timeout=60)
    assert flood.output_capped and not flood.ok
    assert 8 * 1024 * 1024 <= flood.stdout.total_bytes < 200_000_000
    assert flood.stdout.text.endswith("x") and "bytes dropped from the middle" in flood.stdout.text
    assert flood.full_output_path and flood.full_output_path.startswith(".besser_command_output/")
    spilled = run.ws / flood.full_output_path
    assert spilled.stat().st_size <= 2 * 1024 * 1024 + 4096
    assert spilled.read_text().rstrip().endswith("x")
    assert len(flood.observation()) < 16_000
    assert shell.run("echo still-alive", timeout=30).stdout.text.strip() == "still-alive"


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
def test_cut_output_is_spilled_complete_and_a_planted_link_is_refused(registry, run, policy, tmp_path):
    shell = open_session(registry, run, policy)
    long = shell.run("seq 1 20000", timeout=30)
    assert long.ok and long.full_output_path
    text = (run.ws / long.full_output_path).read_text()
    assert "\n1\n" in text and "\n20000" in text and "\n12345\n" in text
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.ws / ".besser_command_output").rename(run.ws / "old-spill")
    (run.ws / ".besser_command_output").symlink_to(elsewhere)
    again = shell.run("seq 1 20000", timeout=30)
    assert again.ok and again.full_output_path is None
    assert any("could not be saved" in note for note in again.notes)
    assert list(elsewhere.iterdir()) == []


SERVER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from kernel_ext.sandbox.session.registry import SessionRegistry
    from kernel_ext.sandbox.session.persistent import ShellSession
    from kernel_ext.sandbox.tiers import choose_tier
    registry = SessionRegistry()
    shell = registry.session("r", lambda: ShellSession(choose_tier(sys.argv[2]), sys.argv[3], sys.argv[4]))
    print(shell.run(f"sleep {sys.argv[5]} &", timeout=30).exit_code, shell.ctl, flush=True)
    if sys.argv[6] == "wait":
        time.sleep(600)
    """
)


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_session_processes_die_when_the_server_process_ends(run, policy, ending):
    mark = token()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT, PACKAGE_PARENT, policy, str(run.ws), str(run.home), mark, "wait" if ending == "sigkill" else "exit"],
        stdout=subprocess.PIPE, text=True,
    )
    ctl = None
    try:
        code, ctl = server.stdout.readline().split()
        assert code == "0"
        assert wait_until(lambda: bool(processes_with(mark)))
        if ending == "sigkill":
            os.kill(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        assert wait_until(lambda: not processes_with(mark)), f"orphaned after server {ending}: {processes_with(mark)}"
    finally:
        server.kill()
        server.wait()
        if ctl:  # a killed server cannot remove its session's control folder
            shutil.rmtree(ctl, ignore_errors=True)
