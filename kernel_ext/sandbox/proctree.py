"""A process and everything it started, found through ``/proc`` and killed as a tree.

Process groups are not enough: a command's grandchildren may start their own group or
session, and a double-forked daemon leaves its parent. Every tier therefore keeps its
commands under one root (bubblewrap's PID namespace, or the launcher, which is a child
subreaper), and this module walks that root's descendants. A process is identified by its
pid and start time, so a recycled pid is never mistaken for a process seen earlier.
Standard library only: the launcher imports it inside the sandbox.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

Ident = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _children_files_work() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


_HAS_CHILDREN_FILES = _children_files_work()


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's children)."""
    if not _HAS_CHILDREN_FILES:
        return [p for p, parent in _ppid_map().items() if parent == pid]
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                out.extend(int(x) for x in handle.read().split())
        except OSError:
            continue
    return out


def descendants(root: int) -> list[int]:
    """Every living descendant of ``root`` (not ``root`` itself), parents before children."""
    found: list[int] = []
    queue = [root]
    seen = {root}
    while queue:
        pid = queue.pop(0)
        for child in children(pid):
            if child not in seen:
                seen.add(child)
                found.append(child)
                queue.append(child)
    return found


def start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


def idents(pids: Iterable[int]) -> set[Ident]:
    out: set[Ident] = set()
    for pid in pids:
        started = start_time(pid)
        if started is not None:
            out.add((pid, started))
    return out


def snapshot(root: int) -> set[Ident]:
    """The identities of ``root``'s descendants right now."""
    return idents(descendants(root))


def kill_new(root: int, before: set[Ident], keep: Iterable[int] = (), sig: int = signal.SIGKILL, rounds: int = 6) -> int:
    """Kill ``root``'s descendants that were not in ``before`` (nor in ``keep``); returns the count.

    Repeated a few times, so children forked while the first round was being killed die too.
    """
    keep = set(keep)
    killed = 0
    for _ in range(rounds):
        fresh = [pid for pid in descendants(root) if pid not in keep and (pid, start_time(pid)) not in before]
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, sig)
                killed += 1
            except OSError:
                pass
    return killed


def kill_tree(root: int, sig: int = signal.SIGKILL, *, include_root: bool = True, rounds: int = 6) -> int:
    """Send ``sig`` to every descendant of ``root`` (children first found, then the root)."""
    return kill_new(root, set(), sig=sig, rounds=rounds) + (_kill(root, sig) if include_root else 0)


def _kill(pid: int, sig: int) -> int:
    try:
        os.kill(pid, sig)
        return 1
    except OSError:
        return 0


def _ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out
