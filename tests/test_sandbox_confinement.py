"""What a sandboxed command can and cannot reach, per tier, through ``run_confined``.

bwrap and Landlock must both: run the server's interpreter, read the project, write only the
workspace and the run's home, hide other runs and host secrets, keep secret-named variables
out, and (network off) refuse a connection to a listener on 127.0.0.1. ``off`` confines
nothing and says so on every result.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sandbox_fixtures import (
    ALL_TIERS,
    CONFINED_TIERS,
    make_run,
    processes_with,
    tier_param,
    token,
    wait_until,
)

from kernel_ext.errors import ToolFailure
from kernel_ext.sandbox import landlock, tiers
from kernel_ext.sandbox.oneoff import run_confined
from kernel_ext.sandbox.spec import interpreter_paths

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


def sh(run, script: str, policy: str, **kw):
    """A one-off the way checks run it: a prepared sandbox with a fresh temporary home."""
    return run_confined(["/bin/sh", "-c", script], run.ws, 30, policy=policy, **kw)


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path)


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_failing_command_reports_failure_and_exit_code(run, policy):
    silent = sh(run, "exit 3", policy)
    assert (silent.ok, silent.exit_code) == (False, 3)
    assert "exit 3 (failure)" in silent.observation() and "(no output)" in silent.observation()
    success = sh(run, "echo fine; echo 'a warning' >&2", policy)
    assert success.ok and success.exit_code == 0
    assert "a warning" in success.observation()  # stderr of a successful command is kept
    assert success.tier == policy


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_project_readable_host_secrets_and_other_runs_hidden(run, policy, tmp_path):
    host_home = Path.home()
    home_files = [p for p in host_home.iterdir() if p.is_file() and not any(p.is_relative_to(i) for i in interpreter_paths())][:3]
    fake_ssh = tmp_path / "host-home" / ".ssh"
    fake_ssh.mkdir(parents=True)
    (fake_ssh / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    probes = {
        "project": f"cat {run.ws}/project.txt",
        "shadow": "cat /etc/shadow",
        "gshadow": "cat /etc/gshadow",
        "other_run": f"cat {run.other_ws}/secret.txt",
        "other_run_list": f"ls {run.other_ws.parent}",
        "ssh": f"cat {fake_ssh}/id_ed25519",
        "host_ssh": f"ls -a {host_home}/.ssh",
        "pid1_environ": "tr '\\0' '\\n' < /proc/1/environ",
        **{f"home:{p.name}": f"cat {p}" for p in home_files},
    }
    seen = {name: sh(run, f"{cmd} 2>&1", policy) for name, cmd in probes.items()}
    assert seen["project"].ok and "inside-the-project" in seen["project"].stdout.text
    assert "root:" not in seen["shadow"].stdout.text and "root:" not in seen["gshadow"].stdout.text
    for name in ("other_run", "other_run_list", "ssh", "host_ssh", *[f"home:{p.name}" for p in home_files]):
        assert not seen[name].ok, f"{name} was readable inside the {policy} sandbox: {seen[name].stdout.text!r}"
    assert "other-run-secret" not in seen["other_run"].stdout.text
    assert "PRIVATE-KEY-MATERIAL" not in seen["ssh"].stdout.text
    host_pid1 = Path("/proc/1/environ")
    environ = seen["pid1_environ"].stdout.text
    if policy == "landlock":
        assert not seen["pid1_environ"].ok  # Landlock forbids reading a process outside the sandbox
    else:  # bwrap: /proc is the sandbox's own; its pid 1 is bubblewrap with the scrubbed environment
        assert "PATH=" in environ
        try:
            host_vars = [v for v in host_pid1.read_bytes().split(b"\0") if v and b"=" in v]
        except OSError:
            host_vars = []
        assert not any(v.decode(errors="replace") in environ.splitlines() for v in host_vars if not v.startswith((b"PATH=", b"HOME=", b"LANG=", b"TERM=")))


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_writes_only_inside_workspace_and_home(run, policy, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    record = sh(
        run,
        f"echo a > {run.ws}/made.txt && echo b > $HOME/home.txt && echo c > $TMPDIR/tmp.txt && "
        f"{{ echo d > {outside}/escaped.txt; echo e > {run.other_ws}/planted.txt; echo f > /etc/besser-probe; "
        f"echo g > {sys.prefix}/besser-probe; }} 2>/dev/null; echo done",
        policy,
        home=run.home,  # an explicit home: the sandbox is built for this call
    )
    assert record.ok and "done" in record.stdout.text
    assert (run.ws / "made.txt").read_text() == "a\n" and (run.home / "home.txt").read_text() == "b\n"
    assert not (outside / "escaped.txt").exists()
    assert not (run.other_ws / "planted.txt").exists()
    assert not Path("/etc/besser-probe").exists()
    assert not Path(sys.prefix, "besser-probe").exists()


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_network_off_refuses_a_loopback_listener(run, policy):
    if policy == "landlock" and landlock.abi_version() < 4:
        pytest.skip("this kernel's Landlock (ABI < 4) cannot block TCP; results say so in sandbox_limits")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        blocked = run_confined([sys.executable, "-c", code], run.ws, 30, network=False, policy=policy, home=run.home)
        assert not blocked.ok and "connected" not in blocked.stdout.text
        if policy == "bwrap":  # with the network on, the same listener answers (the test can fail)
            allowed = run_confined([sys.executable, "-c", code], run.ws, 30, network=True, policy=policy, home=run.home)
            assert allowed.ok and "connected" in allowed.stdout.text
        else:
            allowed = run_confined([sys.executable, "-c", code], run.ws, 30, network=True, policy=policy, home=run.home)
            assert allowed.ok, allowed.observation()
            assert any("TCP is blocked" in limit for limit in blocked.limits)
    finally:
        listener.close()


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_secret_named_variables_never_reach_the_command(run, policy, monkeypatch):
    monkeypatch.setenv("BESSER_TEST_PROVIDER_API_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-hunter2")
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:s3cret@pypi.example.invalid/simple")
    record = run_confined(["env"], run.ws, 30, policy=policy, env={"APP_MODE": "check", "EXTRA_TOKEN": "tok-123456"})
    assert record.ok and "APP_MODE=check" in record.stdout.text and "tok-123456" not in record.stdout.text
    for leaked in ("sk-test-0123456789abcdef", "hunter2-hunter2", "s3cret", "BESSER_TEST_PROVIDER_API_KEY"):
        assert leaked not in record.stdout.text
    assert record.secrets_removed >= 4
    assert "HOME=" in record.stdout.text and str(Path.home()) not in record.stdout.text.split("HOME=")[1].split()[0]


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_timeout_kills_grandchildren_that_left_the_group(run, policy):
    mark = token()
    script = f"(setsid sleep {mark} &) ; sleep {mark}.5"
    record = run_confined(["/bin/sh", "-c", script], run.ws, 1.0, policy=policy)
    assert record.timed_out and not record.ok
    assert "TIMED OUT" in record.observation()
    assert wait_until(lambda: not processes_with(mark)), f"left running: {processes_with(mark)}"


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_server_interpreter_in_tmp_stays_usable(tmp_path, policy):
    """A venv under /tmp (where BESSER's sandbox hid it) runs inside every tier, read-only."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    run = make_run(tmp_path / "runs-base")
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "from kernel_ext.sandbox.oneoff import run_confined;"
        "r = run_confined([sys.executable, '-c', 'import sys; print(sys.prefix)'], sys.argv[2], 30, policy=sys.argv[3]);"
        "w = run_confined([sys.executable, '-c', 'import sys; open(sys.prefix + \"/planted\", \"w\")'], sys.argv[2], 30, policy=sys.argv[3]);"
        "print(json.dumps([r.exit_code, r.stdout.text.strip(), r.stderr.text, w.ok]))"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, PACKAGE_PARENT, str(run.ws), policy],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""}, check=False,
    )
    assert done.returncode == 0, done.stderr
    code, prefix, stderr, wrote = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, stderr
    assert prefix == str(venv)
    if policy != "off":
        assert not wrote and not (venv / "planted").exists()


def test_a_tier_that_cannot_start_refuses_with_the_plain_message(run, monkeypatch):
    from kernel_ext.sandbox import bwrap

    tiers.reset()
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: "/nonexistent/bwrap")
    monkeypatch.setattr(tiers, "bwrap_path", lambda: "/nonexistent/bwrap")
    try:
        with pytest.raises(ToolFailure) as refused:
            run_confined(["true"], run.ws, 10, policy="bwrap", home=run.home)
        assert refused.value.code == "sandbox_unavailable"
        assert refused.value.message == "the shell sandbox is unavailable on this server"
        assert tiers.choose_tier("bwrap").cause  # the cause exists, for the server log only
        assert not (run.ws / "probe").exists()
    finally:
        monkeypatch.undo()
        tiers.reset()


def test_run_confined_refuses_a_cwd_outside_the_workspace(run):
    with pytest.raises(ToolFailure) as refused:
        run_confined(["true"], run.ws, 10, cwd=run.other_ws, home=run.home)
    assert refused.value.code == "outside_workspace"


@pytest.mark.parametrize("policy", [tier_param(t) for t in ALL_TIERS])
def test_one_offs_are_fresh_and_carry_argv_stdin_cwd_exactly(run, policy):
    argv = [sys.executable, "-c", "import os, sys; print(repr(sys.argv[1:])); print(os.getcwd()); print(sys.stdin.read())",
            "two words", "", "quote'\"", "line\nbreak", "--flag=$HOME"]
    first = run_confined(argv, run.ws, 30, policy=policy, cwd="sub", stdin=b"from stdin")
    assert first.ok, first.observation()
    lines = first.stdout.text.splitlines()
    assert lines[0] == repr(argv[3:]) and lines[1] == str(run.ws / "sub") and lines[2] == "from stdin"
    assert first.cwd == "sub"
    left = run_confined(["/bin/sh", "-c", "echo left > $HOME/left; echo left > $TMPDIR/left; export LEFT=1"], run.ws, 30, policy=policy)
    assert left.ok
    seen = run_confined(["/bin/sh", "-c", "ls -A $HOME $TMPDIR; echo LEFT=$LEFT"], run.ws, 30, policy=policy)
    assert "left" not in seen.stdout.text.replace("LEFT=", "") and "LEFT=\n" in seen.stdout.text


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_a_prepared_sandbox_never_runs_against_a_replaced_workspace(run, policy):
    (run.ws / "marker").write_text("old tree\n")
    assert run_confined(["cat", "marker"], run.ws, 30, policy=policy).stdout.text == "old tree\n"
    run.ws.rename(run.ws.with_name("app-before-restore"))
    run.ws.mkdir()
    (run.ws / "marker").write_text("restored tree\n")
    assert run_confined(["cat", "marker"], run.ws, 30, policy=policy).stdout.text == "restored tree\n"


def test_prepared_sandboxes_of_a_finished_run_are_discarded(run):
    from kernel_ext.sandbox.spares import pool

    assert run_confined(["true"], run.ws, 30).ok  # leaves one prepared for the next check
    assert pool().discard_for(run.ws) == 1
    assert pool().discard_for(run.ws) == 0
