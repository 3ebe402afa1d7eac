"""Which sandbox confines commands on this server: ``bwrap``, ``landlock`` or ``off``.

The operator's policy (``auto``, ``bwrap``, ``landlock``, ``off``) is resolved once per process
by real self-tests: a tier is used only after it ran the server's interpreter inside, let a
write into the workspace through and stopped one outside it. ``auto`` takes the strongest tier
that passes and never falls to ``off``; a named tier that fails is not replaced by another
(fail closed). The cause of a failure is for the server log; the model is only ever told that
the sandbox is unavailable.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ext.sandbox import landlock, resource_caps, shares
from kernel_ext.sandbox.bwrap import bwrap_options, bwrap_path
from kernel_ext.sandbox.env import scrub_environment
from kernel_ext.sandbox.launcher import bootstrap_argv
from kernel_ext.sandbox.spec import (
    Confinement,
    sensitive_paths,
    split_around,
    system_dirs,
)
from kernel_ext.sandbox.supervisor import release, spawn

if TYPE_CHECKING:
    from kernel_ext.sandbox.launcher import LandlockRules, LauncherSpec

log = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE = "the shell sandbox is unavailable on this server"
OFF_WARNING = "sandbox is OFF (operator override): this command ran unconfined, as the server's user"
OFF_LIMITS = ("no confinement at all: files, processes and network of the server's user are reachable",)
# The rest of a parked launcher's /bin/sh, once it joined the group and set the limits: read the
# command (a word count, then per word its line count and lines; the shell reads byte by byte,
# so what follows stays the command's stdin), then become bubblewrap (``$1``; under ``nice`` when
# the sandbox has no cpu cgroup), which reads its options and the command's variables
# (``--setenv``/``--unsetenv``) from the pipe numbered ``$2``.
PARKED_READER = (
    '__b=$1 __f=$2; IFS= read -r __n || exit 125; set --; __i=0; '
    'while [ "$__i" -lt "$__n" ]; do IFS= read -r __k && IFS= read -r __a || exit 125; __j=1; '
    'while [ "$__j" -lt "$__k" ]; do IFS= read -r __l || exit 125; __a="$__a\n$__l"; __j=$((__j+1)); done; '
    'set -- "$@" "$__a"; __i=$((__i+1)); done; exec $__nice "$__b" --args "$__f" -- "$@"'
)
# A parked launcher starts with the scrubbed environment for no home in particular (what the
# sandbox's pid 1, bubblewrap, shows); the command gets the call's own, set over it.
PARKED_HOME = "/nonexistent"
PIPE_ROOM = 65536  # what a pipe holds: a hand-over is written at once, never blocks


class Tier(StrEnum):
    BWRAP = "bwrap"
    LANDLOCK = "landlock"
    OFF = "off"


@dataclass(frozen=True)
class TierChoice:
    """The outcome of a policy: the tier in force (or None: refuse everything) and why."""

    policy: str
    tier: Tier | None
    cause: str = ""

    @property
    def available(self) -> bool:
        return self.tier is not None

    def limits(self, network: bool) -> tuple[str, ...]:
        """What the active tier does not give, then the memory and CPU share every sandbox gets
        (which mechanism, what figure), for results and run metadata."""
        if self.tier is Tier.OFF:
            return OFF_LIMITS
        missing = []
        if self.tier is Tier.LANDLOCK:
            missing += landlock.Ruleset(deny_tcp=not network).limits(landlock.abi_version())
        cause = resource_caps.task_cap_cause()
        if cause and resource_caps.rlimit_fallback():
            missing.append(f"processes are capped per user, not per sandbox (RLIMIT_NPROC: the cap plus what the "
                           f"user runs at the start): {cause}")
        elif cause:
            missing.append(f"no cap on the number of processes: {cause}")
        return (*missing, *resource_caps.share_limits())


@dataclass
class ParkedLauncher:
    """A launcher waiting in its sandbox's task cap: ``/bin/sh`` joined the group and set the
    limits (``resource_caps.bwrap_prefix``, as for every bwrap sandbox) and waits for the command
    line. Used at most once; one nobody takes is killed."""

    process: subprocess.Popen[bytes]
    options_fd: int  # our end of the pipe bubblewrap reads its options from
    started_with: frozenset[str]  # the variables bubblewrap will have, before the call's
    handed: bool = False

    @classmethod
    def park(cls, group: Path) -> ParkedLauncher:
        bwrap = bwrap_path()
        if not bwrap:
            raise OSError(errno.ENOENT, "bwrap is not installed")
        env = scrub_environment(home=PARKED_HOME, tmpdir=PARKED_HOME).env
        read_end, write_end = os.pipe()
        try:
            argv = [*resource_caps.bwrap_prefix(resource_caps.caps_for(group), PARKED_READER), bwrap, str(read_end)]
            process = spawn(argv, stable=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd="/", pass_fds=(read_end,))
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(process, write_end, frozenset(env))  # and PWD, which the shell exports and bubblewrap sets

    def hand_over(self, options: Sequence[str], env: Mapping[str, str], command: Sequence[str], stdin: bytes) -> bool:
        """Start ``command`` under bubblewrap with ``options`` and ``env``, then ``stdin`` (left open).

        False, with nothing started, when the launcher is gone or the line does not fit its pipes."""
        words = [w for name in sorted(self.started_with - set(env)) for w in ("--unsetenv", name)]
        words += [w for name, value in env.items() for w in ("--setenv", name, value)] + list(options)
        if self.handed or self.process.poll() is not None or any("\0" in w for w in (*words, *command)):
            return False
        blob = b"".join(os.fsencode(w) + b"\0" for w in words)
        lines = [str(len(command))]
        for word in command:
            lines += [str(word.count("\n") + 1), word]
        header = b"".join(os.fsencode(line) + b"\n" for line in lines)
        if len(blob) > PIPE_ROOM or len(header) + len(stdin) > PIPE_ROOM:
            return False
        assert self.process.stdin is not None
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(self.options_fd, view):]
            os.close(self.options_fd)
            self.options_fd = -1
            self.process.stdin.write(header + stdin)
            self.process.stdin.flush()
        except OSError:
            return False
        self.handed = True
        return True

    def dismiss(self) -> None:
        """Kill it unless it was handed a command; close our ends of its pipes."""
        if self.handed:
            return
        self.handed = True
        release(self.process, kill=True)
        if self.options_fd >= 0:
            os.close(self.options_fd)
            self.options_fd = -1


@dataclass(frozen=True)
class Launch:
    """A ready command line for ``tier``; ``private_tmp`` says whether ``/tmp`` is the sandbox's own.

    ``parked``: a launcher already in this sandbox's task cap (``launch(parked=True)``), which
    ``start`` hands ``options`` and ``command``; ``argv`` is the same sandbox started the usual way.
    """

    argv: list[str]
    tier: Tier
    private_tmp: bool
    options: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    parked: ParkedLauncher | None = field(default=None, compare=False)
    caps: resource_caps.SandboxCaps = field(default_factory=resource_caps.SandboxCaps)

    def start(self, env: Mapping[str, str], stdin: bytes = b"") -> subprocess.Popen[bytes] | None:
        """The parked launcher running the command (``stdin`` written, stdin left open), or None:
        then the caller spawns ``argv`` itself."""
        if self.parked is None:
            return None
        if self.parked.hand_over(self.options, env, self.command, stdin):
            return self.parked.process
        self.parked.dismiss()
        return None

    def dismiss(self) -> None:
        """Let go of an unused parked launcher (a no-op once it runs the command)."""
        if self.parked is not None:
            self.parked.dismiss()


def launch(tier: Tier, conf: Confinement, argv: Sequence[str], *, parked: bool = False,
           extra_options: Sequence[str] = (), join: Sequence[str] = ()) -> Launch:
    """The command line that runs ``argv`` confined by ``conf`` under ``tier``, with its resource caps.

    ``parked`` (callers that spawn with stdin, stdout and stderr piped, then use ``start``):
    take the launcher parked in the sandbox's group when there is one, and have launchers
    parked ahead from now on. Raises ``OSError`` when the sandbox's task cap cannot be set up
    (callers treat it as a failed start, like a failed spawn: the command does not run uncapped).
    ``extra_options``: more bubblewrap options for this start only (``netns``'s synchronisation pipes).
    ``join``: what runs bubblewrap inside the run's network namespace (``runnet``), which it then keeps.
    """
    if tier is Tier.BWRAP and parked:
        resource_caps.want_launchers(ParkedLauncher.park)
    caps = resource_caps.SandboxCaps() if tier is Tier.OFF else resource_caps.sandbox_caps()
    taken = resource_caps.take_launcher(caps.group)
    waiting = taken if isinstance(taken, ParkedLauncher) and parked and tier is Tier.BWRAP else None
    if taken is not None and waiting is None:
        taken.dismiss()  # this caller spawns its own way: the group serves it as a plain one
    if tier is Tier.BWRAP:
        options = [*bwrap_options(conf, joined=bool(join)), *extra_options]
        full = [*resource_caps.bwrap_prefix(caps), *join, bwrap_path() or "bwrap", *options, "--", *argv]
        return Launch(full, tier, True, tuple(options), tuple(argv), waiting, caps)
    spec: LauncherSpec = {"cwd": str(conf.working_dir()), "landlock": None, "drop_caps": False,
                  "cgroups": resource_caps.procs_files(caps.group), "process_limit": caps.process_limit,
                  "file_size_limit": resource_caps.FILE_SIZE_LIMIT, "address_space": caps.address_space,
                  "nice": caps.nice}
    if tier is Tier.LANDLOCK:
        spec["landlock"] = landlock_rules(conf)
        spec["drop_caps"] = True
    return Launch(bootstrap_argv(spec, list(argv)), tier, False, caps=caps)


def landlock_rules(conf: Confinement) -> LandlockRules:
    excluded = (*sensitive_paths(), *conf.hidden)
    readable = [Path(d) for d in system_dirs()] + list(conf.readonly_paths()) + [Path("/proc")]
    allowed, listable = split_around(readable, excluded)
    return {
        "read": [str(p) for p in allowed],
        "listable": [str(p) for p in listable],
        "write": [str(p) for p in conf.writable_paths()],
        "devices": ["/dev"],
        "deny_tcp": not conf.network or conf.private_net,  # Landlock has no namespace to offer: closed
    }


@cache
def choose_tier(policy: str) -> TierChoice:
    """Resolve ``policy`` once per process (self-tests included) and log the outcome."""
    if policy == "off":
        log.warning("shell sandbox policy is 'off': commands run unconfined (operator override)")
        return TierChoice(policy, Tier.OFF)
    order = {"auto": (Tier.BWRAP, Tier.LANDLOCK), "bwrap": (Tier.BWRAP,), "landlock": (Tier.LANDLOCK,)}.get(policy)
    if order is None:
        return TierChoice(policy, None, f"unknown sandbox policy {policy!r}")
    try:  # the operator's caps: a bad figure leaves no tier (fail closed), named in the log
        resource_caps.operator_max_tasks()
        shares.operator_settings()
    except ValueError as exc:
        log.error("shell sandbox unavailable (policy %s): %s", policy, exc)
        return TierChoice(policy, None, str(exc))
    causes = []
    for tier in order:
        cause = self_test(tier)
        if cause is None:
            log.info("shell sandbox: policy %s -> tier %s", policy, tier)
            return TierChoice(policy, tier)
        causes.append(f"{tier}: {cause}")
    cause = "; ".join(causes)
    log.error("shell sandbox unavailable (policy %s): %s", policy, cause)
    return TierChoice(policy, None, cause)


def reset() -> None:
    """Forget self-test results (tests; an operator changing the host)."""
    choose_tier.cache_clear()
    self_test.cache_clear()


@cache
def self_test(tier: Tier) -> str | None:
    """None when ``tier`` really confines on this host, else the cause."""
    if tier is Tier.BWRAP and bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed"
    if tier is Tier.LANDLOCK and landlock.abi_version() < 1:
        return "the kernel has no Landlock (ABI 0)"
    scratch = Path(tempfile.mkdtemp(prefix="besser-selftest-"))
    try:
        ws, home, outside = scratch / "ws", scratch / "home", scratch / "outside"
        for folder in (ws, home, outside, home / ".tmp"):
            folder.mkdir()
        conf = Confinement.for_run(ws, home)
        script = '"$1" -S -c pass && echo ok > "$2/probe" && ! (echo x > "$3/escaped") 2>/dev/null'
        try:
            ready = launch(tier, conf,
                           ["/bin/sh", "-c", script, "sh", os.path.realpath(_python()), str(conf.workspace), str(outside)])
            done = subprocess.run(ready.argv, cwd=conf.workspace, env=_probe_env(), capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"self-test could not run: {exc}"
        if (outside / "escaped").exists():
            return "self-test wrote outside the workspace: the tier does not confine here"
        if done.returncode != 0 or not (ws / "probe").exists():
            detail = done.stderr.decode(errors="replace").strip()[-400:]
            return f"self-test exited {done.returncode}: {detail or 'no output'}"
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _python() -> str:
    import sys

    return sys.executable


def _probe_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
