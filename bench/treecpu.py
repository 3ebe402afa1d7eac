"""CPU seconds of a process and everything it starts, for benches that print a floor beside a time.

Where this bench may make a cgroup v1 ``cpuacct`` group (root, the controller mounted on its own
or with ``cpu``), the process is moved into a fresh one and every descendant, short-lived
sandboxes included, is counted by the kernel (``cpuacct.usage``). Elsewhere the figure is the
process's own CPU plus its reaped children's (``/proc/<pid>/stat``): it misses descendants a
still-running child has not yet waited for, which the label says.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class TreeCPU:
    """``seconds()``: CPU used by ``pid``'s tree since it joined (``how`` names the method)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.group: Path | None = None
        with contextlib.suppress(OSError):
            group = CPUACCT / f"besser-bench-{os.getpid()}-{pid}"
            group.mkdir()
            try:
                (group / "cgroup.procs").write_text(str(pid))
                self.group = group
            except OSError:
                group.rmdir()
        self.how = "cpuacct group of the server's tree" if self.group else "server + reaped children (/proc stat; misses unreaped)"

    def seconds(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Remove the group once its processes have ended (the server was stopped first)."""
        if self.group is None:
            return
        for _ in range(100):
            try:
                self.group.rmdir()
                return
            except OSError:  # a process still exiting
                time.sleep(0.05)
