# ruff: noqa: F811 - the h fixture imported from shell_tools_fixtures is requested by name
"""sh_run through the real Executor and bubblewrap: the quiet result, expect, retries, timeouts, sandbox options."""

from __future__ import annotations

import http.server
import os
import threading
from typing import Self

import pytest
from sandbox_fixtures import processes_with, tier_param, token, wait_until
from shell_tools_fixtures import h, harness, needs_bwrap  # noqa: F401 - h is a fixture

from kernel_ext.errors import ToolFailure
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.session.service import ShellService
from kernel_ext.sandbox.shtools import effects, trace
from kernel_ext.sandbox.shtools.shell import Shell


def test_quiet_result_has_only_what_matters(h):
    result = h.call("sh_run", command="echo hi")
    assert result.ok
    assert set(result.data) == {"id", "exit", "ok", "ms", "stdout_lines", "tier", "sandboxed", "risk", "stdout"} | (
        {"secrets_env_scrubbed"} if "secrets_env_scrubbed" in result.data else set()
    )
    assert result.data["exit"] == 0 and result.data["ok"] is True and result.data["stdout"] == "hi"
    assert result.data["tier"] == "bwrap" and result.data["risk"] == "read-only"
    assert result.observation.splitlines()[0].startswith('{"id": "cmd-') and "--- stdout ---\nhi" in result.observation


def test_a_failing_command_is_a_failed_result_with_its_data(h):
    result = h.call("sh_run", command="echo oops >&2; exit 3")
    assert not result.ok and result.error.code == "execution_failed"
    assert result.data["exit"] == 3 and result.data["ok"] is False and result.data["stderr"] == "oops"


def test_expect_failures_surface_while_ok_follows_the_exit_code(h):
    expect = {
        "exit": 0, "stdout_contains": ["hello", "bye"], "stdout_matches": "^hel+o$", "stderr_empty": True,
        "file_exists": "made.txt", "file_absent": "project.txt", "changed": ["made.txt"], "max_ms": 600_000,
    }
    result = h.call("sh_run", command="touch made.txt; echo hello", expect=expect)
    assert not result.ok and result.error.code == "expectation_failed"
    assert result.data["ok"] is True and result.data["exit"] == 0 and result.data["assert_ok"] is False
    assert result.data["assertions_failed"] == ["stdout_contains: 'bye' not found", "file_absent: 'project.txt' exists"]
    passing = h.call("sh_run", command="rm made.txt; echo hello", expect={"stdout_matches": "^hel+o$", "file_absent": "made.txt", "changed": True})
    assert passing.ok and passing.data["assert_ok"] is True and "assertions_failed" not in passing.data
    wanted_failure = h.call("sh_run", command="exit 1", expect={"exit": 1})
    assert wanted_failure.ok and wanted_failure.data["ok"] is False and wanted_failure.data["assert_ok"] is True
    others = h.call("sh_run", command="echo x >&2; sleep 0.2", expect={"stderr_empty": True, "max_ms": 1, "changed": True, "exit": 0})
    assert [f.split(":")[0] for f in others.data["assertions_failed"]] == ["stderr_empty", "changed", "max_ms"]
    quiet = h.call("sh_run", command="touch quiet.txt", expect={"changed": False})
    assert quiet.data["assertions_failed"] == ["changed: expected no change, 1 changed"]


def test_retries_until_success_and_retry_on_exit(h):
    counter = 'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo attempt $n; [ $n -ge 3 ]'
    result = h.call("sh_run", command=counter, retries=4, backoff_ms=0)
    assert result.ok and result.data["attempts"] == 3 and result.data["stdout"] == "attempt 3"
    once = h.call("sh_run", command="exit 1", retries=3, retry_on_exit=[7], backoff_ms=0)
    assert not once.ok and "attempts" not in once.data
    exhausted = h.call("sh_run", command="exit 7", retries=2, retry_on_exit=[7], backoff_ms=1)
    assert exhausted.data["attempts"] == 3 and exhausted.data["exit"] == 7


def test_timeout_kills_the_whole_process_group(h):
    marker = token()
    result = h.call("sh_run", command=f"(sleep {marker} &) ; sleep {marker}", timeout_ms=400)
    assert not result.ok and result.error.code == "timeout"
    assert result.data["timed_out"] is True and result.data["ok"] is False
    assert any("background: true" in tip for tip in result.data["advice"])
    assert wait_until(lambda: not processes_with(f"sleep {marker}"), timeout=5)


def test_cwd_stays_inside_the_fence(h):
    moved = h.call("sh_run", command="pwd", cwd="sub")
    assert moved.ok and moved.data["stdout"] == str(h.ws / "sub")
    assert h.call("sh_run", command="pwd", cwd="../..").error.code == "outside_workspace"
    assert h.call("sh_run", command="pwd", cwd="missing").error.code == "not_found"
    (h.ws / "escape").symlink_to(h.ws.parent)
    assert h.call("sh_run", command="pwd", cwd="escape").error.code == "outside_workspace"


def test_long_output_is_condensed_with_failures_surfaced_and_full_on_request(h):
    command = "seq 1 99; echo 'ERROR: boom in the middle'; seq 101 200"
    condensed = h.call("sh_run", command=command)
    data = condensed.data
    assert data["stdout_lines"] == 200 and data["stdout_truncated"] is True
    assert "[line 100] ERROR: boom in the middle" in data["stdout"] and "\n150\n" not in data["stdout"]
    assert any("sh_detail" in tip for tip in data["advice"])
    full = h.call("sh_run", command=command, full=True)
    assert "stdout_truncated" not in full.data and full.data["stdout"].splitlines() == [*map(str, range(1, 100)), "ERROR: boom in the middle", *map(str, range(101, 201))]


def test_binary_and_capped_output_are_flagged(h):
    binary = h.call("sh_run", command="printf 'a\\000b\\001'")
    assert binary.data["stdout_binary"] is True and "binary output" in binary.data["stdout"]
    flood = h.call("sh_run", command="head -c 9000000 /dev/zero | tr '\\0' x")
    assert flood.data["output_capped"] is True and flood.data["stdout_truncated"] is True and not flood.ok


def test_network_false_cuts_the_network(tmp_path):
    """``host`` (the operator's choice) reaches the host's loopback, ``network: false`` cuts it; the
    default, ``private``, never reaches it (a namespace of the call's own)."""
    h = harness(tmp_path, network="host")
    private = harness(tmp_path / "private", network=True)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        probe = f"python -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=5); print('reached')\""
        reached = h.call("sh_run", command=probe)
        assert reached.ok and reached.data["stdout"] == "reached"
        assert reached.data["network_limits"][0].startswith("network: host")  # the operator's choice, named
        cut = h.call("sh_run", command=probe, sandbox={"network": False})
        assert not cut.ok and cut.data["network"] is False and "reached" not in cut.data.get("stdout", "")
        own = private.call("sh_run", command=probe)
        assert not own.ok and "reached" not in own.data.get("stdout", "")
    finally:
        server.shutdown()
        server.server_close()
        h.service.close()
        private.service.close()


def test_sandbox_confines_writes_to_cwd_and_writable_roots(h):
    (h.ws / "other").mkdir()
    inside = h.call("sh_run", command="touch inside.txt ../other/granted.txt", cwd="sub", sandbox={"writable": ["../other"]})
    assert inside.ok and inside.data["writes_confined_to"] == "sub"
    assert (h.ws / "sub" / "inside.txt").exists() and (h.ws / "other" / "granted.txt").exists()
    refused = h.call("sh_run", command="touch ../escaped.txt", cwd="sub", sandbox=True)
    assert not refused.ok and not (h.ws / "escaped.txt").exists()
    assert "project.txt" in h.call("sh_run", command="ls ..", cwd="sub", sandbox=True).data["stdout"]  # the rest stays readable
    assert h.call("sh_run", command="true", sandbox={"writable": [str(h.ws.parent)]}).error.code == "outside_workspace"


def test_deny_read_and_protect_secrets_hide_files(h):
    (h.ws / ".env").write_text("API_TOKEN=value-that-must-not-leak\n")
    (h.ws / "sub" / "id_rsa").write_text("PRIVATE KEY\n")
    protected = h.call("sh_run", command="cat .env sub/id_rsa project.txt", sandbox={"protect_secrets": True})
    assert protected.data["secrets_protected"] == 2
    assert "value-that-must-not-leak" not in protected.observation and "PRIVATE KEY" not in protected.observation
    assert "inside-the-project" in protected.data["stdout"]
    denied = h.call("sh_run", command="cat project.txt", sandbox={"deny_read": ["project.txt"]})
    assert "inside-the-project" not in denied.observation
    assert (h.ws / ".env").read_text() == "API_TOKEN=value-that-must-not-leak\n" and (h.ws / "project.txt").read_text() == "inside-the-project\n"


def test_environment_is_scrubbed_and_cannot_be_unscrubbed(h, monkeypatch):
    monkeypatch.setenv("SERVICE_API_TOKEN", "tok-value-that-must-not-leak")
    result = h.call("sh_run", command="env")
    assert result.ok and result.data["secrets_env_scrubbed"] >= 1
    assert "tok-value-that-must-not-leak" not in result.observation and "SERVICE_API_TOKEN" not in result.data["stdout"]
    assert h.call("sh_run", command="env", scrub_env=False).error.code == "invalid_argument"


@pytest.mark.skipif(trace.strace_path() is None, reason="strace is not installed on this machine")
def test_trace_summarises_files_and_processes(h):
    result = h.call("sh_run", command="touch traced.txt; rm project.txt; ls sub", trace=True)
    summary = result.data["trace_summary"]
    assert "traced.txt" in summary["files_written"] and "project.txt" in summary["files_deleted"]
    assert {"touch", "rm", "ls"} <= set(summary["programs"])
    stored = h.call("sh_detail", id=result.data["id"], selector="trace", match="unlink")
    assert stored.ok and any("project.txt" in line for line in stored.data["lines"])


def test_trace_unavailable_without_strace(h, monkeypatch):
    monkeypatch.setattr(trace, "strace_path", lambda: None)
    result = h.call("sh_run", command="true", trace=True)
    assert result.ok and result.data["trace_unavailable"] == "strace is not installed on this server"
    assert "trace_summary" not in result.data


class WatchedLock:
    """The tree's change-window lock, telling when a second caller has to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def __enter__(self) -> Self:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_files_changed_and_concurrent_runs_on_one_tree_do_not_steal_changes(h, monkeypatch):
    """The two calls overlap for certain, with barriers instead of sleeps: the slow command waits
    for a file in the run's ``$HOME`` (outside the measured tree), which appears only once the
    fast call is seen waiting for the tree's change window."""
    window = WatchedLock()
    monkeypatch.setitem(effects._locks, os.path.realpath(h.ws), window)
    results = {}
    started, release = h.home / "slow-started", h.home / "slow-may-go"

    def run(name, command):
        results[name] = h.call("sh_run", command=command)

    wait_for_release = 'i=0; until [ -e "$HOME/slow-may-go" ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done'
    slow_command = (f'touch "$HOME/slow-started"; {wait_for_release}; '
                    'test -e "$HOME/slow-may-go" && touch slow.txt && echo x >> project.txt')
    slow = threading.Thread(target=run, args=("slow", slow_command))
    fast = threading.Thread(target=run, args=("fast", "touch fast.txt; rm -f sub/none; mkdir made"))
    slow.start()
    try:
        assert wait_until(started.exists, timeout=30), "the slow command never started"
        fast.start()
        assert window.contended.wait(30), "the fast call never reached the tree the slow one is changing"
        assert not results, "a call ended while the slow command was still held"
    finally:
        release.touch()
        slow.join()
        fast.join()
    assert results["slow"].ok, results["slow"].observation
    assert results["slow"].data["files_changed"] == ["M project.txt", "+ slow.txt"]
    assert results["fast"].data["files_changed"] == ["+ fast.txt", "+ made/"]
    assert "files_changed" not in h.call("sh_run", command="cat project.txt").data  # read-only: not measured


def test_bad_input_gets_named_errors(h):
    before = h.tree()
    assert h.call("sh_run", command="true", timeout_ms=-5).error.code == "invalid_argument"
    assert h.call("sh_run", command="true", timeout_ms=600_001).error.code == "invalid_argument"
    assert h.call("sh_run", command="true", expect={"stdout_matches": "("}).error.code == "invalid_argument"
    assert h.call("sh_run", command="true", surprise=1).error.code == "invalid_argument"
    assert h.call("sh_run", command="true", expect={"file_exists": "../../x"}).error.code == "outside_workspace"
    assert h.call("sh_run", command="sudo touch x").error.code == "command_denied"
    assert h.call("sh_run", command="   ").error.code == "invalid_argument"
    assert h.tree() == before


def test_gate_not_installed_disabled_and_unsupported_tier(tmp_path):
    from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog

    without = Executor(default_catalog(), ToolContext(services={}), policy=ExecutionPolicy.allowing(["shell", "plan"]))
    assert not [n for n in without.offered.names() if n.startswith("sh_")]
    assert without.execute_sync(ToolCall("c", "sh_run", {"command": "true"})).error.code == "tool_not_offered"
    disabled = harness(tmp_path / "a", enabled=False)
    assert disabled.call("sh_run", command="touch x").error.code == "shell_disabled"
    assert not (disabled.ws / "x").exists()
    off = ShellService(tmp_path / "a" / "runs" / "r1" / "app", enabled=True, settings=ShellSettings(policy="off"))
    with Shell(service=off, state_dir=tmp_path / "state-off") as shell:
        unconfined = shell.run("echo unconfined")
        assert unconfined["tier"] == "off" and unconfined["sandboxed"] is False and unconfined["ok"]
        with pytest.raises(Exception) as refused:
            shell.run("true", sandbox={"network": False})
        assert refused.value.code == "sandbox_option_unsupported"
    off.close()


@needs_bwrap
def test_plain_python_api(tmp_path, monkeypatch):
    monkeypatch.setenv("BESSER_SHELL_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "proj").mkdir()
    with Shell(tmp_path / "proj", enable=True, policy="bwrap") as sh:
        result = sh.run("echo from-python > out.txt; cat out.txt", expect={"file_exists": "out.txt"})
        assert result["ok"] and result["assert_ok"] and result["files_changed"] == ["+ out.txt"]
        assert sh.detail(result["id"], "stdout")["text"] == "from-python"
        assert sh.plan("git push --force")["category"] == "destructive"
    assert (tmp_path / "state" / "records").is_dir()
    with Shell(tmp_path / "proj", enable=False) as off:
        assert off.plan("ls")["category"] == "read-only"
        with pytest.raises(Exception) as refused:
            off.run("touch nope")
        assert refused.value.code == "shell_disabled"


@pytest.mark.parametrize("policy", [tier_param("bwrap"), tier_param("landlock"), tier_param("off")])
def test_every_tier_runs_polls_and_kills(tmp_path, policy):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / ".env").write_text("K=1\n")
    with Shell(ws, enable=True, policy=policy, state_dir=tmp_path / "state") as sh:
        done = sh.run("echo made > sub/out.txt; cat sub/out.txt", expect={"file_exists": "sub/out.txt"})
        assert done["ok"] and done["assert_ok"] and done["tier"] == policy and done["files_changed"] == ["+ sub/out.txt"]
        marker = token()
        job = sh.run(f"echo up; sleep {marker}", background=True)
        assert wait_until(lambda: "up" in sh.logs(job["id"]).get("stdout", ""))
        assert sh.kill(job["id"])["status"] == "killed"
        assert wait_until(lambda: not processes_with(f"sleep {marker}"), timeout=5)
        if policy == "off":
            return
        confined = sh.run("touch ../escaped", cwd="sub", sandbox=True)
        assert not confined["ok"] and not (ws / "escaped").exists()
        if policy == "landlock":
            with pytest.raises(ToolFailure) as refused:
                sh.run("cat .env", sandbox={"protect_secrets": True})
            assert refused.value.code == "sandbox_option_unsupported"
