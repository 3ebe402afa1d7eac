"""The session's reset between commands, fast path included: a command that defines nothing costs
only the light step and the check its own line ends with (the full reset does not run); a definition made in any way between
two commands (alias, function, ``enable``, ``hash -p``, ``set -o`` / ``shopt`` options, traps) is
gone before the next command, whose names run what they name; PATH is kept and named, as in a
terminal. Real bubblewrap, one shell per test."""

from __future__ import annotations

import signal

import pytest
from sandbox_fixtures import make_run
from shell_tools_fixtures import needs_bwrap

from kernel_ext.sandbox.session.persistent import ShellSession
from kernel_ext.sandbox.session.protocol import shell_state
from kernel_ext.sandbox.session.registry import SessionRegistry
from kernel_ext.sandbox.tiers import choose_tier

pytestmark = needs_bwrap


@pytest.fixture
def shell(tmp_path):
    run = make_run(tmp_path)
    (run.ws / ".hidden").write_text("dot\n")
    registry = SessionRegistry(max_sessions=2, idle_seconds=900)
    yield registry.session("r1", lambda: ShellSession(choose_tier("bwrap"), run.ws, run.home))
    registry.close()


def resets(session) -> int:
    """How many times the shell ran its full reset (the clean inventory's ``k N``)."""
    lines = shell_state(session.ctl) or []
    assert len(lines) == 2 and lines[1].startswith("k "), lines
    return int(lines[1].split()[1])


PROBE = "cat project.txt; type -t ls cat echo; echo *; false; trap -p; echo end"
CLEAN = "inside-the-project\nfile\nfile\nbuiltin\nproject.txt sub\ntrap -- '__b_exit' EXIT\n"

DEFINITIONS = {
    "alias": "shopt -s expand_aliases; alias cat='echo PWNED'; alias ls='echo PWNED'",
    "function": "cat() { echo PWNED; }; ls() { echo PWNED; }",
    "function via eval": 'eval "$(printf \'%s\' \'cat() { echo PWNED; }\')"',
    "enable -n": "enable -n echo",
    "hash -p": "hash -p /bin/echo cat",
    "set -o noglob": "set -o noglob",
    "shopt dotglob": "shopt -s dotglob",
    "posix mode": "set -o posix",
    "DEBUG trap": "trap 'echo PWNED' DEBUG",
    "DEBUG trap inherited": "set -T; trap 'echo PWNED' DEBUG RETURN",
    "ERR trap": "trap 'echo PWNED' ERR",
    "ERR trap inherited": "set -E; trap 'echo PWNED' ERR",
    "DEBUG trap that defines": "set -T; trap 'cat() { echo PWNED; }' DEBUG",
    "signal trap": "trap 'cat() { echo PWNED; }' USR2",
    "builtin shadowed": "builtin() { echo PWNED; }; trap() { echo PWNED; }; unalias() { :; }; command() { :; }",
    "disabled then shadowed": "enable -n unalias; unalias() { :; }; shopt -s expand_aliases; alias cat='echo PWNED'",
}

# What the light step, the top-level trap clearing and the options check clear by themselves
# (no full reset).
LIGHT = {"alias", "hash -p", "posix mode", "DEBUG trap", "ERR trap", "ERR trap inherited", "builtin shadowed", "set -o noglob",
         "shopt dotglob", "DEBUG trap inherited"}


def test_a_command_that_defines_nothing_never_runs_the_full_reset(shell):
    for _ in range(3):
        record = shell.run("true", timeout=30)
        assert record.exit_code == 0
    assert resets(shell) == 0 and shell.caveat == ""
    record = shell.run("cd sub && export X=1 && IFS=:", timeout=30)  # state a terminal keeps is no definition
    assert record.exit_code == 0 and resets(shell) == 0
    assert shell.run("pwd; echo $X", timeout=30).stdout.text.endswith("/sub\n1\n")


@pytest.mark.parametrize("how", list(DEFINITIONS))
def test_a_definition_made_in_any_way_is_gone_before_the_next_command(shell, how):
    assert shell.run(PROBE, timeout=30).stdout.text.startswith(CLEAN)  # the probe, as a clean shell answers it
    before = resets(shell)
    defined = shell.run(DEFINITIONS[how], timeout=30)
    assert defined.exit_code == 0 and not defined.timed_out, (how, defined.notes)  # a trap's output never hides the marker
    probe = shell.run(PROBE, timeout=30)
    assert "PWNED" not in probe.stdout.text + probe.stderr.text, (how, probe.stdout.text, probe.stderr.text)
    assert probe.stdout.text.startswith(CLEAN), (how, probe.stdout.text)
    assert resets(shell) - before == (0 if how in LIGHT else 1), how  # the full reset runs only when needed
    assert shell.caveat == "" and not any("could not be dropped" in n for n in probe.notes)


def test_a_trap_that_skips_the_reset_ends_the_shell_and_the_next_starts_clean(shell):
    shell.kill_grace_s = 1.0
    shell.run("ls() { echo PWNED; }", timeout=30)
    skipped = shell.run("shopt -s extdebug; trap 'false' DEBUG", timeout=2)  # every later step skipped: no marker
    assert skipped.timed_out or any("restarted" in n or "exited" in n for n in skipped.notes), skipped
    probe = shell.run(PROBE, timeout=30)
    assert "PWNED" not in probe.stdout.text and probe.stdout.text.startswith(CLEAN), probe.stdout.text


def test_path_is_kept_and_named_a_readonly_function_is_named(shell):
    shell.run("mkdir -p bin && printf '#!/bin/sh\\necho SHIM\\n' > bin/cat && chmod +x bin/cat && export PATH=$PWD/bin:$PATH",
              timeout=30)
    assert "changed PATH" in shell.caveat
    shell.run("ls() { echo PWNED; }; readonly -f ls", timeout=30)
    assert "could not be dropped (ls)" in shell.caveat


@pytest.mark.parametrize("ignored", [("SIGINT",), ("SIGHUP", "SIGTERM")])
def test_a_signal_the_host_ignored_when_the_shell_started_is_not_named_as_a_trap(tmp_path, ignored):
    """A server under ``nohup`` (or a process that ignored SIGINT before the session started) hands its
    shell signals bash cannot reset; the caveat names what a command left, never those (a suite started
    from a session that ignored SIGTTIN and SIGTTOU made three tests fail)."""
    run = make_run(tmp_path)
    registry = SessionRegistry(max_sessions=1, idle_seconds=900)
    before = {name: signal.signal(getattr(signal, name), signal.SIG_IGN) for name in ignored}
    try:
        session = registry.session("r1", lambda: ShellSession(choose_tier("bwrap"), run.ws, run.home))
        session.run("true", timeout=30)  # the shell starts with the signals ignored
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)
    try:
        session.run("ls() { echo PWNED; }; readonly -f ls", timeout=30)
        assert "could not be dropped (ls):" in session.caveat, session.caveat
        session.run("trap '' USR2 QUIT", timeout=30)  # a command's own ignore: the reset clears it, nothing more is named
        assert "could not be dropped (ls):" in session.caveat, session.caveat
    finally:
        registry.close()


def test_a_check_variable_made_readonly_means_a_full_reset_every_time(shell):
    shell.run('readonly __b_v="$__b_clean"; cat() { echo PWNED; }', timeout=30)  # a forged "clean" listing
    for _ in range(2):
        probe = shell.run(PROBE, timeout=30)
        assert "PWNED" not in probe.stdout.text and probe.stdout.text.startswith(CLEAN), probe.stdout.text
        lines = shell_state(shell.ctl) or []
        assert len(lines) > 2 and not lines[1].startswith("k ")  # never reported clean: the full reset ran
