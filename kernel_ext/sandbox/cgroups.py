"""Where this process may make cgroups of a controller (``pids``, ``memory``, ``cpu``), and the
folder operations on this server's groups there.

``locate`` reads ``/proc/self/cgroup`` and ``/proc/self/mountinfo``: on cgroup v1 each controller
has a hierarchy of its own (``/sys/fs/cgroup/memory/...``), on v2 they share one, and a v2
controller counts only where it is delegated to this process's cgroup. A server keeps its
sandboxes' groups in ``<its cgroup>/besser-agent-<pid>/`` in each hierarchy it uses
(``server_group``); a group of the same name stands for one sandbox in every hierarchy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GROUP_PREFIX = "besser-agent-"


@dataclass(frozen=True)
class Hierarchy:
    """Where this process may make cgroups of one controller (``base``), or why it may not (``cause``)."""

    base: Path | None
    version: int = 0
    cause: str = ""


def locate(controller: str = "pids") -> Hierarchy:
    """This process's cgroup folder for ``controller``, from /proc/self/cgroup and /proc/self/mountinfo."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            own["v2"] = path
        if controller in controllers.split(","):
            own["v1"] = path
    mounts: dict[str, tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        rest = fields[fields.index("-") + 1 :]
        fstype, options = rest[0], rest[2].split(",") if len(rest) > 2 else []
        root, point = fields[3], fields[4]
        if fstype == "cgroup" and controller in options:
            mounts.setdefault("v1", (root, point))
        elif fstype == "cgroup2":
            mounts.setdefault("v2", (root, point))
    if "v1" in own and "v1" in mounts:
        return _within(mounts["v1"], own["v1"], 1)
    if "v2" in own and "v2" in mounts:
        found = _within(mounts["v2"], own["v2"], 2)
        if found.base is not None:
            delegated = (found.base / "cgroup.controllers").read_text().split()
            if controller not in delegated:
                return Hierarchy(None, 2, f"the {controller} controller is not delegated to this process's cgroup")
        return found
    return Hierarchy(None, cause=f"no {controller} cgroup is mounted")


def _within(mount: tuple[str, str], own_path: str, version: int) -> Hierarchy:
    root, point = mount
    relative = own_path[len(root):] if root != "/" and own_path.startswith(root) else own_path
    base = Path(point) / relative.lstrip("/")
    if not base.is_dir():
        return Hierarchy(None, version, f"this process's cgroup {own_path} is not visible at {point}")
    if not os.access(base, os.W_OK):
        return Hierarchy(None, version, f"no write access to {base}")
    return Hierarchy(base, version)


def server_group(found: Hierarchy, controller: str) -> Path:
    """This server's folder in ``found`` (made on first use); on v2 it hands ``controller`` down
    to its children (raises ``OSError`` when it cannot)."""
    if found.base is None:  # callers only come here with a hierarchy that was found
        raise OSError(2, found.cause or f"no {controller} cgroup")
    parent = found.base / f"{GROUP_PREFIX}{os.getpid()}"
    parent.mkdir(exist_ok=True)
    if found.version == 2:
        control = parent / "cgroup.subtree_control"
        if controller not in control.read_text().split():
            control.write_text(f"+{controller}")
    return parent


def remove(group: Path) -> bool:
    """Remove an empty group; False while it still has tasks (a later sweep takes it)."""
    try:
        group.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:  # EBUSY
        return False


def sweep_dead_servers(base: Path) -> None:
    """Groups left by servers that were killed (their pid is gone): removed when empty."""
    for parent in base.glob(f"{GROUP_PREFIX}*"):
        pid = parent.name[len(GROUP_PREFIX):]
        if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        for group in parent.iterdir():
            if group.is_dir():
                remove(group)
        remove(parent)
