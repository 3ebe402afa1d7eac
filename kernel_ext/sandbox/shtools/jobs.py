"""Background commands: started and left running, polled by byte cursor, stopped as a tree.

A dev server or a ``--watch`` build never exits, so ``sh_run {background: true}`` starts it
from the supervisor's long-lived spawner thread (the sandbox's parent-death signal is tied
to the forking thread) and returns at once. A pump thread per job feeds each stream into a
``Tap``: true byte and line counts, the newest ``RING_BYTES`` in memory, and the stored prefix
(the record's file, or memory under ``no_store``) up to ``STORE_BYTES``. A poll names the byte
offset it has read up to; bytes that fell out of both before the poll are reported as a gap.
Stopping signals every process of the tree (``proctree``), SIGTERM first and SIGKILL after
``KILL_GRACE_S``. At most ``max_jobs`` run at once; ``close`` stops them all (run or server end).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import proctree
from kernel_ext.sandbox.capture import StreamCapture
from kernel_ext.sandbox.supervisor import Job

RING_BYTES = 1 << 20
STORE_BYTES = 8 << 20
MEMORY_STORE_BYTES = 2 << 20
KILL_GRACE_S = 2.0
STARTUP_WAIT_S = 2.0
DEFAULT_MAX_JOBS = 16
MAX_JOBS_VAR = "BESSER_LLM_SHELL_MAX_BACKGROUND"
SIGNALS = {name: getattr(signal, name) for name in ("SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
                                                    "SIGCONT", "SIGSTOP")}
_ESCALATE = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"})


def signal_name(value: str) -> str:
    name = value.strip().upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    if name not in SIGNALS:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"signal {value!r} is not one of {', '.join(SIGNALS)}")
    return name


def default_max_jobs() -> int:
    try:
        return max(0, int(os.environ.get(MAX_JOBS_VAR, DEFAULT_MAX_JOBS)))
    except ValueError:
        return DEFAULT_MAX_JOBS


class Tap:
    """One background stream: what was written, addressable by absolute byte offsets."""

    def __init__(self, path: Path | None, handle: BinaryIO | None, store_bytes: int):
        self._lock = threading.Lock()
        self.total = 0
        self.newlines = 0
        self.last = b""
        self._ring = bytearray()
        self._ring_start = 0
        self._path = path
        self._handle = handle
        self._memory = bytearray() if handle is None else None
        self.stored = 0
        self.store_bytes = store_bytes

    @property
    def lines(self) -> int:
        return self.newlines + (1 if self.total and self.last != b"\n" else 0)

    @property
    def memory(self) -> bytes:
        return bytes(self._memory or b"")

    def write(self, data: bytes) -> int:
        with self._lock:
            room = self.store_bytes - self.stored
            if room > 0:
                piece = data[:room]
                if self._handle is not None:
                    self._handle.write(piece)
                else:
                    assert self._memory is not None
                    self._memory += piece
                self.stored += len(piece)
            self._ring += data
            if len(self._ring) > RING_BYTES:
                drop = len(self._ring) - RING_BYTES
                del self._ring[:drop]
                self._ring_start += drop
            self.total += len(data)
            self.newlines += data.count(b"\n")
            self.last = data[-1:]
        return len(data)

    def read(self, cursor: int, limit: int) -> tuple[bytes, int, bool]:
        """``(data, offset of data, gap)`` from ``cursor``; ``gap`` when bytes before ``offset`` were dropped."""
        with self._lock:
            if cursor < 0 or cursor > self.total:
                raise ToolFailure(ErrorCode.CURSOR_OUT_OF_RANGE,
                                  f"cursor {cursor} is outside the stream (0..{self.total} bytes so far)")
            if cursor < self.stored:
                end = min(self.stored, cursor + limit)
                if self._memory is not None:
                    return bytes(self._memory[cursor:end]), cursor, False
                assert self._path is not None
                with open(self._path, "rb") as handle:
                    handle.seek(cursor)
                    return handle.read(end - cursor), cursor, False
            start = max(cursor, self._ring_start)
            data = bytes(self._ring[start - self._ring_start : start - self._ring_start + limit])
            return data, start, start > cursor

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


class BackgroundJob:
    """One running (or finished) background command.

    Its own daemon thread forks the sandbox and then pumps its output, so the parent-death
    signal the sandbox relies on is tied to a thread that lives exactly as long as the job
    (and, being a daemon, still lives while ``atexit`` stops the job at a clean exit).
    """

    def __init__(
        self,
        record_id: str,
        launch: Callable[[], Job],
        out: Tap,
        err: Tap,
        finish: Callable[[BackgroundJob], None],
        machinery: int = 1,
    ):
        self.id = record_id
        self.machinery = machinery  # levels of the tree that are the sandbox itself (bwrap: 2, launcher: 1)
        self.out, self.err = out, err
        self.started = time.monotonic()
        self.started_at = time.time()
        self.ended: float | None = None
        self.exit_code: int | None = None
        self.stop_signal: str | None = None
        self.done = threading.Event()
        self._finish = finish
        self._launched = threading.Event()
        self._launch_error: ToolFailure | None = None
        self._thread = threading.Thread(target=self._pump, args=(launch,), name=f"besser-bg-{record_id}", daemon=True)
        self._thread.start()
        self._launched.wait()
        if self._launch_error is not None:
            raise self._launch_error

    @property
    def pid(self) -> int:
        return self.job.pid

    @property
    def status(self) -> str:
        if not self.done.is_set():
            return "running"
        return "killed" if self.stop_signal is not None else "exited"

    def running_ms(self) -> float:
        return ((self.ended or time.monotonic()) - self.started) * 1000

    def state(self) -> dict[str, Any]:
        """Status, running time, exit (and signal) once done, and the line counts so far."""
        state: dict[str, Any] = {"status": self.status, "running_ms": round(self.running_ms())}
        if self.done.is_set():
            state["exit"] = self.exit_code
            if self.stop_signal is not None:
                state["signal"] = self.stop_signal
            elif self.exit_code is not None and self.exit_code < 0:
                state["signal"] = -self.exit_code
        state.update(stdout_lines=self.out.lines, stderr_lines=self.err.lines)
        return state

    def _pump(self, launch: Callable[[], Job]) -> None:
        try:
            self.job = launch()
            self._await_command()
        except ToolFailure as exc:
            self._launch_error = exc
            self.out.close()
            self.err.close()
            return
        finally:
            self._launched.set()
        try:
            outcome = self.job.run(math.inf)
            self.exit_code = outcome.exit_code
        except (OSError, ValueError):  # the pump must never leave a job marked as running forever
            self.exit_code = self.job.process.poll()
        finally:
            self.ended = time.monotonic()
            self.out.close()
            self.err.close()
            self.done.set()
            try:
                self._finish(self)
            except (OSError, ValueError, ToolFailure) as exc:  # a storage problem must not hide that the job ended
                print(f"besser: could not store the record of {self.id}: {exc}", file=sys.stderr)

    def _command_level(self) -> list[int]:
        """The pids just below the sandbox machinery: the command's top processes."""
        level = [self.job.pid]
        for _ in range(self.machinery):
            level = [child for pid in level for child in proctree.children(pid)]
        return level

    def _await_command(self, timeout_s: float = STARTUP_WAIT_S) -> None:
        """Return once the command runs below a fully built sandbox (or the sandbox ended).

        Until then the sandbox's own parent-death wiring is incomplete: a server dying in that
        window could orphan the command, so the call does not report ``running`` before it.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.job.process.poll() is None and not self._command_level():
            time.sleep(0.002)

    def send(self, sig: int) -> None:
        """Signal the command's processes. Only SIGKILL also hits the sandbox's own machinery
        (bubblewrap and its namespace init, or the launcher), which ends when the command does:
        another signal reaching a sandbox still being built can orphan the command."""
        if sig == signal.SIGKILL:
            self.job.kill(sig)
            return
        level = self._command_level()
        for pid in [p for top in level for p in (top, *proctree.descendants(top))]:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def stop(self, name: str = "SIGTERM", grace_s: float = KILL_GRACE_S) -> dict[str, Any]:
        """Signal the whole tree; TERM-like signals escalate to SIGKILL after ``grace_s``."""
        if self.done.is_set():
            return {"status": "already_exited", "exit": self.exit_code}
        sent = [name]
        if name in _ESCALATE or name == "SIGKILL":
            self.stop_signal = name
        self.send(SIGNALS[name])
        deadline = time.monotonic() + grace_s
        while name in _ESCALATE and not self.done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                break
            self.send(SIGNALS[name])  # again: a tree still starting up may have grown since
        if name in _ESCALATE and not self.done.is_set():
            self.stop_signal = "SIGKILL"
            self.send(signal.SIGKILL)
            sent.append("SIGKILL")
        if name in _ESCALATE or name == "SIGKILL":
            self.done.wait(10)
        else:
            self.done.wait(0.2)
        return {"status": self.status, "signals_sent": sent, "exit": self.exit_code}


class BackgroundJobs:
    """The background jobs of one ``Shell``: a cap on how many run, and one place to stop them all."""

    def __init__(self, max_jobs: int | None = None):
        self.max_jobs = default_max_jobs() if max_jobs is None else max_jobs
        self._jobs: dict[str, BackgroundJob] = {}
        self._lock = threading.Lock()
        self.closed = False

    def running(self) -> list[BackgroundJob]:
        with self._lock:
            return [j for j in self._jobs.values() if j.status == "running"]

    def admit(self) -> None:
        if self.closed:
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, "this shell was closed")
        if len(self.running()) >= self.max_jobs:
            raise ToolFailure(
                ErrorCode.BACKGROUND_LIMIT,
                f"{self.max_jobs} background processes are already running; stop one with sh_kill first",
            )

    def add(self, job: BackgroundJob) -> None:
        with self._lock:
            self._jobs[job.id] = job

    def get(self, record_id: str) -> BackgroundJob | None:
        with self._lock:
            return self._jobs.get(record_id)

    def close(self, grace_s: float = KILL_GRACE_S) -> int:
        """Stop every running job: SIGTERM to all, SIGKILL to what is left after ``grace_s``."""
        self.closed = True
        running = self.running()
        for job in running:
            job.stop_signal = "SIGTERM"
            job.send(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(not job.done.is_set() for job in running) and time.monotonic() < deadline:
            time.sleep(0.05)
            for job in running:
                if not job.done.is_set():
                    job.send(signal.SIGTERM)
        for job in running:
            if not job.done.is_set():
                job.stop_signal = "SIGKILL"
                job.send(signal.SIGKILL)
        for job in running:
            job.done.wait(10)
        return len(running)


def background_captures(out: Tap, err: Tap) -> tuple[StreamCapture, StreamCapture]:
    """Captures that keep nothing themselves (the taps do) and never stop the job at a cap."""
    def capture(tap: Tap) -> StreamCapture:
        return StreamCapture(cap=sys.maxsize, head_keep=0, tail_keep=0, sink=tap, sink_limit=sys.maxsize)

    return capture(out), capture(err)
