"""Long-lived confined processes the server talks to over pipes (the app host, the import checker).

``run_confined`` (``oneoff``) runs one command that ends; a *worker* stays up and answers JSON
frames (``frames``) on its stdin and stdout. ``WarmWorker`` is the server's one handle on such
a process: started on demand through ``start_worker`` (``spawn_confined``: the operator's tier,
caps, the scrubbed environment), its frames read by a thread of its own, stopped as a whole
tree, and started afresh after it died or after a protocol failure. Code outside this package
never spawns a process that executes project code any other way
(``tests/security/test_sec_spawn_walk.py`` holds the line).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kernel_ext.sandbox import proctree
from kernel_ext.sandbox.confined import Confined, spawn_confined
from kernel_ext.sandbox.frames import FrameError, JSONValue, read_frame, write_frame
from kernel_ext.sandbox.shares import MemoryWatch
from kernel_ext.sandbox.spec import Confinement


def start_worker(
    argv: Sequence[str],
    conf: Confinement,
    *,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[bytes] | None = subprocess.DEVNULL,
) -> Confined:
    """Start ``argv`` confined by ``conf`` under the operator's tier (or ``policy``), stdin and stdout piped.

    Forked from the long-lived spawner thread, so the parent-death signal the tiers rely on
    fires only when the server goes. ``env`` adds variables (secret names are still removed).
    Raises ``ToolFailure(sandbox_unavailable)`` when no tier can confine it, ``OSError`` when
    the sandbox cannot be started.
    """
    return spawn_confined(argv, conf, policy=policy, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=stderr, stable=True)


@dataclass(frozen=True)
class WorkerPlan:
    """What one start of a warm worker runs: its command line, its confinement, extra variables."""

    argv: list[str]
    conf: Confinement
    env: Mapping[str, str] | None = None


class WorkerGone(OSError):
    """The worker exited or its pipe broke (the message says how, exit code included)."""


OnFrame = Callable[[JSONValue], None]
OnExit = Callable[[str], None]


class WarmWorker:
    """One long-lived confined worker speaking JSON frames; not thread-safe to start (owners lock).

    ``plan`` is asked for the command line and confinement at every start (the app host's
    package overlay may change between two). Frames the worker sends are handed to the
    ``on_frame`` given to ``start`` (replies an owner matches by id, several outstanding), or
    else queued for ``receive``; ``on_exit(reason)`` runs once when that process ends. A
    failed exchange (``request``) stops the worker, so the next ``start`` is a fresh one.
    """

    def __init__(
        self,
        plan: Callable[[], WorkerPlan],
        *,
        what: str = "the worker",
        policy: str | None = None,
        log_path: Path | None = None,
    ):
        self._plan = plan
        self.what = what
        self.policy = policy
        self.log_path = log_path  # the worker's stderr is appended here (else discarded)
        self.tier = ""
        self.network = False
        self.notes: tuple[str, ...] = ()
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._frames: queue.SimpleQueue[JSONValue | WorkerGone] | None = None
        self._write_lock = threading.Lock()

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._proc

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, on_frame: OnFrame | None = None, on_exit: OnExit | None = None) -> bool:
        """Start a worker unless one is alive; True when one was started now.

        Raises ``ToolFailure(sandbox_unavailable)`` when no tier can confine it, ``OSError``
        when the sandbox cannot be started.
        """
        if self.alive:
            return False
        self.stop()
        plan = self._plan()
        log = open(self.log_path, "ab") if self.log_path is not None else None  # noqa: SIM115 - closed by stop
        try:
            started = start_worker(plan.argv, plan.conf, policy=self.policy, env=plan.env,
                                   stderr=log if log is not None else subprocess.DEVNULL)
        except BaseException:
            if log is not None:
                log.close()
            raise
        self._proc, self._log = started.process, log
        self.tier, self.network, self.notes = str(started.tier), started.network, started.notes
        self.starts += 1
        frames: queue.SimpleQueue[JSONValue | WorkerGone] = queue.SimpleQueue()
        self._frames = frames
        reader = threading.Thread(target=self._read, args=(started.process, frames, on_frame, on_exit, started.memory),
                                  name="besser-worker-reader", daemon=True)
        reader.start()
        return True

    def send(self, message: Mapping[str, object]) -> None:
        """Write one frame to the worker; ``OSError`` when it is gone, ``FrameError`` past the frame cap."""
        with self._write_lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                raise BrokenPipeError(f"{self.what} is not running")
            write_frame(proc.stdin.fileno(), message)

    def receive(self, timeout: float) -> JSONValue:
        """The next queued frame: ``TimeoutError`` past ``timeout``, ``WorkerGone`` once the worker ended."""
        frames = self._frames
        if frames is None:
            raise WorkerGone(f"{self.what} is not running")
        try:
            item = frames.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise TimeoutError(f"no answer from {self.what} in time") from None
        if isinstance(item, WorkerGone):
            frames.put(item)  # every later receive says the same
            raise item
        return item

    def request(self, message: Mapping[str, object], timeout: float) -> JSONValue:
        """Send one frame and return the next; any failure stops the worker and is raised."""
        try:
            self.send(message)
            return self.receive(timeout)
        except (OSError, FrameError, TimeoutError):
            self.stop()
            raise

    def stop(self, grace: float = 0.0) -> None:
        """End the worker: with ``grace``, close its stdin and let it exit that long; then kill its tree, reap it."""
        proc, self._proc = self._proc, None
        log, self._log = self._log, None
        if proc is not None:
            exited = False
            if grace > 0:
                _close(proc.stdin)
                try:
                    proc.wait(timeout=grace)
                    exited = True
                except subprocess.TimeoutExpired:
                    pass
            if not exited and proc.poll() is None:  # once reaped, its pid may be another process's
                proctree.kill_tree(proc.pid)
            _close(proc.stdin)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if log is not None:
            log.close()

    def _read(self, proc: subprocess.Popen[bytes], frames: queue.SimpleQueue[JSONValue | WorkerGone], on_frame: OnFrame | None,
              on_exit: OnExit | None, memory: MemoryWatch) -> None:
        """The reader thread of one process: frames out, then how it ended (it owns the stdout pipe;
        a stop by the sandbox's memory limit is named in the reason)."""
        assert proc.stdout is not None
        reason = f"{self.what} exited"
        try:
            while True:
                message = read_frame(proc.stdout.fileno())
                if message is None:
                    break
                if on_frame is not None:
                    on_frame(message)
                else:
                    frames.put(message)
        except (FrameError, OSError, ValueError, TypeError, AttributeError) as exc:
            reason = f"{self.what}'s pipe broke: {exc}"
            if proc.poll() is None:  # a protocol failure: this process is done, the next start is fresh
                proctree.kill_tree(proc.pid)
        code = proc.wait()
        _close(proc.stdout)
        reason = f"{reason} (exit code {code})"
        stopped = memory.note(0, code, "")
        if stopped:
            reason = f"{reason}; {stopped}"
        frames.put(WorkerGone(reason))
        if on_exit is not None:
            on_exit(reason)


def _close(stream: IO[bytes] | None) -> None:
    try:
        if stream is not None:
            stream.close()
    except OSError:
        pass
