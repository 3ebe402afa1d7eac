"""Where this process may make ``pids`` cgroups: its own pids cgroup, found from ``/proc/self``.

Read once per process by ``resource_caps.pids_hierarchy``; a v2 hierarchy counts only where the
``pids`` controller is delegated to this process's cgroup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PidsHierarchy:
    """Where this process may make ``pids`` cgroups (``base``), or why it may not (``cause``)."""

    base: Path | None
    version: int = 0
    cause: str = ""


def locate() -> PidsHierarchy:
    """This process's pids cgroup folder, from /proc/self/cgroup and /proc/self/mountinfo."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            own["v2"] = path
        for name in controllers.split(","):
            if name == "pids":
                own["v1"] = path
    mounts: dict[str, tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        rest = fields[fields.index("-") + 1 :]
        fstype, options = rest[0], rest[2].split(",") if len(rest) > 2 else []
        root, point = fields[3], fields[4]
        if fstype == "cgroup" and "pids" in options:
            mounts.setdefault("v1", (root, point))
        elif fstype == "cgroup2":
            mounts.setdefault("v2", (root, point))
    if "v1" in own and "v1" in mounts:
        return _within(mounts["v1"], own["v1"], 1)
    if "v2" in own and "v2" in mounts:
        found = _within(mounts["v2"], own["v2"], 2)
        if found.base is not None:
            delegated = (found.base / "cgroup.controllers").read_text().split()
            if "pids" not in delegated:
                return PidsHierarchy(None, 2, "the pids controller is not delegated to this process's cgroup")
        return found
    return PidsHierarchy(None, cause="no pids cgroup is mounted")


def _within(mount: tuple[str, str], own_path: str, version: int) -> PidsHierarchy:
    root, point = mount
    relative = own_path[len(root):] if root != "/" and own_path.startswith(root) else own_path
    base = Path(point) / relative.lstrip("/")
    if not base.is_dir():
        return PidsHierarchy(None, version, f"this process's cgroup {own_path} is not visible at {point}")
    if not os.access(base, os.W_OK):
        return PidsHierarchy(None, version, f"no write access to {base}")
    return PidsHierarchy(base, version)
