"""Fair shares: a memory limit and a CPU weight on every confined sandbox, so one student's runaway
command or app cannot starve the neighbours on a shared node.

Where this server makes cgroups for its sandboxes (``resource_caps``: the task cap's groups; a
v1 hierarchy per controller or one v2 hierarchy with the controller delegated), each sandbox's
group also gets:

- memory: ``memory.max`` (v2) / ``memory.limit_in_bytes`` (v1) at ``BESSER_SANDBOX_MEMORY``
  (1 GiB) and no swap (``memory.swap.max`` 0 / ``memory.memsw.limit_in_bytes`` equal, where the
  kernel accounts swap; the limits say when it does not): the limit is RAM, since a sandbox that
  swaps slows every neighbour's I/O. Past it the kernel stops the
  largest process in the sandbox and counts an ``oom_kill`` (``memory.events`` /
  ``memory.oom_control``), which the result names (``memory_limit``).
- CPU: ``cpu.weight`` (v2) / ``cpu.shares`` (v1, weight x 1024 / 100) at
  ``BESSER_SANDBOX_CPU_WEIGHT`` (50), on each sandbox's group and on the server's group that
  holds them all: under contention this server's sandboxes together weigh half of a default
  group or process (100), so the server and its neighbours keep answering; among themselves
  they share equally. A weight is no cap: an idle node gives a sandbox every core.

Elsewhere (no cgroups this process may make, or ``BESSER_SANDBOX_CGROUPS=off``):

- memory: ``RLIMIT_AS`` at ``BESSER_SANDBOX_ADDRESS_SPACE`` (4 GiB) per process. It counts
  address space, not memory: Python reserves 8 MiB of stack per thread and glibc 64 MiB per
  malloc arena. Measured here: a FastAPI app answering 40 requests at once (TestClient, anyio's
  worker threads) peaked at 1.9 GiB of address space while using ~100 MB, pip needs more than
  512 MiB, node ~1 GiB to start. So 1 GiB would stop real jobs; 4 GiB leaves them twice the room
  and still stops a balloon. An allocation past it fails (Python: ``MemoryError``), which the
  result names from the output.
- CPU: ``nice`` +``BESSER_SANDBOX_NICE`` (10) against the server.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.sandbox.cgroups import Hierarchy, locate, server_group, sweep_dead_servers

MEMORY_VAR = "BESSER_SANDBOX_MEMORY"
ADDRESS_SPACE_VAR = "BESSER_SANDBOX_ADDRESS_SPACE"
CPU_WEIGHT_VAR = "BESSER_SANDBOX_CPU_WEIGHT"
NICE_VAR = "BESSER_SANDBOX_NICE"
CGROUPS_VAR = "BESSER_SANDBOX_CGROUPS"
DEFAULT_MEMORY = 1 << 30
DEFAULT_ADDRESS_SPACE = 4 << 30
DEFAULT_CPU_WEIGHT = 50
DEFAULT_NICE = 10
MIN_MEMORY = 64 << 20  # a shell and an interpreter must start
MEMORY_LIMIT = "memory_limit"  # the named reason on a result
STDERR_TAIL = 4000  # characters of a command's stderr searched for a failed allocation
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^(\d+)\s*([kmgt]?)(?:i?b)?$")
# What a failed allocation prints under RLIMIT_AS (Python, C, C++, node, Go).
_OUT_OF_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|[Oo]ut of memory|bad_alloc|Failed to reserve")


@dataclass(frozen=True)
class ShareSettings:
    """The operator's figures (``from_environment``); 0 turns a limit off."""

    memory: int = DEFAULT_MEMORY
    address_space: int = DEFAULT_ADDRESS_SPACE
    cpu_weight: int = DEFAULT_CPU_WEIGHT
    nice: int = DEFAULT_NICE
    cgroups: bool = True  # False: no cgroups at all (task cap included), the rlimit and nice fallbacks

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ShareSettings:
        """Read the ``BESSER_SANDBOX_*`` figures; a bad value is a ``ValueError`` naming the variable."""
        mode = environ.get(CGROUPS_VAR, "").strip().lower() or "auto"
        if mode not in ("auto", "off"):
            raise ValueError(f"{CGROUPS_VAR} must be auto or off, not {mode!r}")
        return cls(
            memory=_size(environ, MEMORY_VAR, DEFAULT_MEMORY),
            address_space=_size(environ, ADDRESS_SPACE_VAR, DEFAULT_ADDRESS_SPACE),
            cpu_weight=_whole(environ, CPU_WEIGHT_VAR, DEFAULT_CPU_WEIGHT, 1, 10_000),
            nice=_whole(environ, NICE_VAR, DEFAULT_NICE, 0, 19),
            cgroups=mode == "auto",
        )


def _size(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    match = _SIZE.match(raw.lower())
    if match is None:
        raise ValueError(f"{name} must be a size such as 1G, 512M or a number of bytes (0: no limit), not {raw!r}")
    value = int(match.group(1)) * _UNITS[match.group(2)]
    if 0 < value < MIN_MEMORY:
        raise ValueError(f"{name} must be 0 (no limit) or at least 64M (a shell and an interpreter), not {raw!r}")
    return value


def _whole(environ: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, not {value}")
    return value


@functools.cache
def operator_settings() -> ShareSettings:
    """The figures every sandbox of this process gets, read from the environment at first use."""
    return ShareSettings.from_environment(os.environ)


def size_text(value: int) -> str:
    """``1 GiB``, ``512 MiB``: the figure as results and documents write it."""
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
        if value >= unit and value % (unit // 4) == 0:
            return f"{value / unit:g} {name}"
    return f"{value} bytes"


@dataclass(frozen=True)
class Controls:
    """Where this server's sandboxes get memory and CPU cgroups: its group in each hierarchy, or why not."""

    memory: Path | None = None
    cpu: Path | None = None
    memory_version: int = 0
    cpu_version: int = 0
    memory_cause: str = ""
    cpu_cause: str = ""
    no_swap: bool = True  # the kernel accounts swap per group, so the limit keeps a sandbox out of swap

    def companions(self, group: Path) -> list[Path]:
        """The folders of the sandbox ``group`` (its pids group) in the other hierarchies (v1)."""
        out: list[Path] = []
        for parent in (self.memory, self.cpu):
            if parent is not None and parent / group.name != group and parent / group.name not in out:
                out.append(parent / group.name)
        return out

    def apply(self, group: Path, settings: ShareSettings) -> None:
        """Write the memory limit and CPU weight of the sandbox ``group`` (``OSError`` when a write fails)."""
        if self.memory is not None:
            _write_memory(self.memory / group.name, self.memory_version, settings.memory)
        if self.cpu is not None:
            _write_weight(self.cpu / group.name, self.cpu_version, settings.cpu_weight)


def discover(pids: Hierarchy, settings: ShareSettings) -> Controls:
    """Find and prove (a group made, limited and removed) the memory and CPU hierarchies, where
    this server makes task-cap groups (``pids``); the server's own group gets the CPU weight."""
    found: dict[str, tuple[Path | None, int, str]] = {}
    no_swap = True
    for controller, wanted in (("memory", settings.memory > 0), ("cpu", True)):
        if not wanted:
            found[controller] = (None, 0, f"off ({MEMORY_VAR}=0)")
            continue
        if pids.base is None:
            found[controller] = (None, pids.version, pids.cause)
            continue
        try:
            hierarchy = locate(controller)
            if hierarchy.base is None:
                found[controller] = (None, hierarchy.version, hierarchy.cause)
                continue
            parent = server_group(hierarchy, controller)
            probe = parent / f"probe-{uuid.uuid4().hex[:8]}"
            probe.mkdir()
            try:
                if controller == "memory":
                    no_swap = _write_memory(probe, hierarchy.version, settings.memory)
                else:
                    _write_weight(probe, hierarchy.version, settings.cpu_weight)
            finally:
                probe.rmdir()
            if controller == "cpu":
                _write_weight(parent, hierarchy.version, settings.cpu_weight)
            if hierarchy.base != pids.base:
                sweep_dead_servers(hierarchy.base)
        except OSError as exc:
            found[controller] = (None, 0, f"cannot make a {controller} cgroup: {exc.strerror or exc}")
            continue
        found[controller] = (parent, hierarchy.version, "")
    (memory, memory_version, memory_cause), (cpu, cpu_version, cpu_cause) = found["memory"], found["cpu"]
    return Controls(memory, cpu, memory_version, cpu_version, memory_cause, cpu_cause, no_swap)


def _write_memory(group: Path, version: int, limit: int) -> bool:
    """Write the limit and keep the group out of swap; False where the kernel does not account swap."""
    if version == 2:
        (group / "memory.max").write_text(str(limit))
        swap = group / "memory.swap.max"
    else:
        (group / "memory.limit_in_bytes").write_text(str(limit))
        swap = group / "memory.memsw.limit_in_bytes"  # memory + swap: equal means no swap
    if not swap.exists():  # no swap accounting (swapaccount=0): swap is not limited per group
        return False
    swap.write_text("0" if version == 2 else str(limit))
    return True


def _write_weight(group: Path, version: int, weight: int) -> None:
    if version == 2:
        (group / "cpu.weight").write_text(str(weight))
    else:
        (group / "cpu.shares").write_text(str(max(2, weight * 1024 // 100)))


@dataclass(frozen=True)
class MemoryWatch:
    """How one sandbox shows that its memory limit stopped a command.

    ``events``: its memory cgroup's ``memory.events`` / ``memory.oom_control``, whose ``oom_kill``
    count grows when the kernel stops a process there; else (``RLIMIT_AS``, ``per_process``) a
    failed command whose output says an allocation failed. ``limit`` 0: no memory limit.
    """

    limit: int = 0
    events: Path | None = None
    per_process: bool = False

    def kills(self) -> int:
        """How many processes the memory limit stopped in this sandbox so far (0 when unknown)."""
        if self.events is None:
            return 0
        try:
            text = self.events.read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def note(self, kills_before: int, exit_code: int | None, output: str) -> str | None:
        """The named reason for a result, when the limit stopped the command (``kills_before``: the
        count read before it started); ``output``: the end of its stderr."""
        if self.limit <= 0 or exit_code == 0:
            return None
        if self.events is not None and self.kills() > kills_before:
            return (f"{MEMORY_LIMIT}: the command was stopped: it exceeded the sandbox's memory limit of "
                    f"{size_text(self.limit)}")
        if self.per_process and exit_code is not None and _OUT_OF_MEMORY.search(output):
            return (f"{MEMORY_LIMIT}: the command ran out of memory: an allocation failed at the sandbox's limit of "
                    f"{size_text(self.limit)} of address space per process (RLIMIT_AS)")
        return None


NO_WATCH = MemoryWatch()  # a sandbox with no memory limit (or none known)


def watch(controls: Controls, group: Path | None, address_space: int | None) -> MemoryWatch:
    """The watch for a sandbox given ``group`` (its task-cap group) or an ``RLIMIT_AS`` of ``address_space``."""
    if group is not None and controls.memory is not None:
        name = "memory.events" if controls.memory_version == 2 else "memory.oom_control"
        return MemoryWatch(operator_settings().memory, controls.memory / group.name / name)
    if address_space:
        return MemoryWatch(address_space, per_process=True)
    return NO_WATCH


def limits(controls: Controls, settings: ShareSettings) -> tuple[str, ...]:
    """What every sandbox here gets, for results (``sandbox_limits``) and the tier's description."""
    if settings.memory <= 0:
        memory = f"memory: no limit per sandbox ({MEMORY_VAR}=0)"
    elif controls.memory is not None:
        files = "memory.max" if controls.memory_version == 2 else "memory.limit_in_bytes"
        swap = "no swap" if controls.no_swap else "swap not limited (this kernel does not account it)"
        memory = (f"memory: {size_text(settings.memory)} per sandbox, {swap} (cgroup v{controls.memory_version} "
                  f"{files}); a command past it is stopped, its result says {MEMORY_LIMIT}")
    elif settings.address_space > 0:
        memory = (f"memory: {size_text(settings.address_space)} of address space per process, not per sandbox "
                  f"(RLIMIT_AS; no memory cgroup: {controls.memory_cause})")
    else:
        memory = f"memory: no limit (no memory cgroup: {controls.memory_cause}; {ADDRESS_SPACE_VAR}=0)"
    if controls.cpu is not None:
        files = "cpu.weight" if controls.cpu_version == 2 else "cpu.shares"
        cpu = (f"cpu: weight {settings.cpu_weight} against a default of 100, per sandbox and for this server's "
               f"sandboxes together (cgroup v{controls.cpu_version} {files})")
    elif settings.nice > 0:
        cpu = f"cpu: nice +{settings.nice}, a lower priority than the server (no cpu cgroup: {controls.cpu_cause})"
    else:
        cpu = f"cpu: the server's priority (no cpu cgroup: {controls.cpu_cause}; {NICE_VAR}=0)"
    return memory, cpu
