"""The in-sandbox launcher of the ``landlock`` and ``off`` tiers (no namespaces there).

Started by the supervisor as ``python -I -S -c <bootstrap> SPEC -- argv...``, it:

- asks for SIGTERM when its parent (the server) dies, and becomes a child subreaper, so
  every process the command starts (daemons included) stays below it;
- joins its cgroups (task cap, memory, cpu: ``resource_caps``), applies resource limits and
  its niceness (``shares``, where it has no memory or cpu cgroup), drops root
  capabilities (landlock tier) and restricts itself with Landlock before anything of the
  command runs;
- runs the command as its child and, when that child ends (or the server goes away), kills
  whatever the command left behind, then exits with the child's status.

That makes "a one-off's processes stop when it returns" and "a session dies with the
server" hold without a PID namespace. Standard library only, imported with ``-S``.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from typing import TYPE_CHECKING

from kernel_ext.sandbox import proctree

if TYPE_CHECKING:  # the shapes only: the launcher starts with ``-S`` and imports what it runs
    from typing import TypedDict

    class LandlockRules(TypedDict):
        """What the landlock tier lets a command reach (strings: the spec crosses a command line)."""

        read: list[str]
        listable: list[str]
        write: list[str]
        devices: list[str]
        deny_tcp: bool

    class LauncherSpec(TypedDict):
        """What the launcher does around the command (``bootstrap_argv`` writes it as JSON)."""

        cwd: str
        landlock: LandlockRules | None
        drop_caps: bool
        cgroups: list[str]  # the cgroup.procs files it joins: task cap, memory, cpu
        process_limit: int | None
        file_size_limit: int
        address_space: int | None  # RLIMIT_AS, where there is no memory cgroup
        nice: int | None  # added niceness, where there is no cpu cgroup

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36


def bootstrap_argv(spec: LauncherSpec, argv: list[str]) -> list[str]:
    """The interpreter command line that runs this launcher with ``spec`` around ``argv``."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from kernel_ext.sandbox.launcher import main; sys.exit(main(sys.argv[2:]))"
    )
    return [sys.executable, "-I", "-S", "-c", code, package_parent, json.dumps(spec), "--", *argv]


def main(args: list[str]) -> int:
    spec: LauncherSpec = json.loads(args[0])
    command = args[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the server died before the request took effect
        return 125
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _limits(spec.get("file_size_limit"), spec.get("process_limit"), spec.get("address_space"))
    try:
        for tasks in spec.get("cgroups", []):  # before Landlock, which would refuse the write
            with open(tasks, "w") as procs:
                procs.write(str(os.getpid()))
        nice = spec.get("nice")
        if nice:
            os.nice(nice)
        rules = spec.get("landlock")
        if rules is not None:
            from kernel_ext.sandbox.landlock import Ruleset, restrict_self

            restrict_self(
                Ruleset(
                    read=tuple(rules["read"]),
                    write=tuple(rules["write"]),
                    devices=tuple(rules["devices"]),
                    deny_tcp=rules["deny_tcp"],
                    listable=tuple(rules.get("listable", ())),
                )
            )
        if spec.get("drop_caps") and os.geteuid() == 0:
            _drop_bounding_set(libc)
    except OSError as exc:
        os.write(2, f"sandbox: cannot confine the command: {exc}\n".encode())
        return 125
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _die)
    pid = os.fork()
    if pid == 0:
        _exec_child(spec, command)
    _release_streams()
    status = _wait_for(pid)
    proctree.kill_tree(os.getpid(), signal.SIGKILL, include_root=False)
    _reap_all()
    if os.WIFSIGNALED(status):  # end the same way (SIGKILL, the memory limit's, has no handler to reset)
        signum = os.WTERMSIG(status)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status)


def _exec_child(spec: LauncherSpec, command: list[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    try:
        if spec.get("cwd"):
            os.chdir(spec["cwd"])
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"sandbox: cannot run {command[0]!r}: {exc.strerror}\n".encode())
    os._exit(127)


def _die(signum: int, frame: object) -> None:
    proctree.kill_tree(os.getpid(), signal.SIGKILL, include_root=False)
    os._exit(128 + signum)


def _wait_for(pid: int) -> int:
    while True:
        try:
            waited, status = os.wait()
        except ChildProcessError:
            return 0
        if waited == pid:
            return status


def _reap_all() -> None:
    for _ in range(1000):
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return


def _release_streams() -> None:
    """Let go of the command's stdin/stdout/stderr so EOF reaches the supervisor on time."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _limits(file_size: int | None, processes: int | None, address_space: int | None) -> None:
    """No core files; files capped at ``file_size`` bytes, processes at ``processes``, address space
    at ``address_space`` (``resource_caps``)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for which, value in ((resource.RLIMIT_FSIZE, file_size), (resource.RLIMIT_NPROC, processes),
                         (resource.RLIMIT_AS, address_space)):
        if value:
            _, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(hard, value)
            resource.setrlimit(which, (cap, cap))


def _drop_bounding_set(libc: ctypes.CDLL) -> None:
    """Root keeps no capability after exec: every capability leaves the bounding set."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot drop capability {cap}: {os.strerror(err)}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
