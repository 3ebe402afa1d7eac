"""Owning running processes: spawn, pump output into bounded captures, stop whole trees.

Every sandboxed process tree has one root the server started (bubblewrap, or the
launcher); stopping a command means killing that root's descendants (``proctree``), never
only a process group a child may have left. Output is read from pipes as it arrives, so a
grandchild holding a pipe cannot hang the server, and a stream past its cap stops the tree.

Long-lived roots (shell sessions, background jobs) are started from one dedicated thread
(``spawn(stable=True)``): the kernel's parent-death signal, which ``--die-with-parent`` and the
launcher rely on, fires when the *thread* that forked exits, and worker threads come and go.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from kernel_ext.sandbox import proctree
from kernel_ext.sandbox.capture import StreamCapture

_F_SETPIPE_SZ = 1031
READ_CHUNK = 1 << 20
EOF_GRACE_S = 2.0
MAX_STDIN = 65536  # the pipe's guaranteed capacity: written at once, never blocks
_SPAWNER_NAME = "besser-sandbox-spawner"
_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()
T = TypeVar("T")
Stream = int | IO[bytes] | None  # what Popen takes for a standard stream


def _forget_spawner() -> None:
    """In a forked child the spawner thread does not exist: its pool would take work and never run it."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner)


def _spawner_pool() -> ThreadPoolExecutor:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_SPAWNER_NAME)
        return _spawner


def spawn(
    argv: Sequence[str],
    *,
    stable: bool = False,
    stdin: Stream = None,
    stdout: Stream = None,
    stderr: Stream = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session; ``stable`` forks from the long-lived spawner thread."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
            pass_fds=tuple(pass_fds), start_new_session=True, close_fds=True,
        )

    if not stable or threading.current_thread().name.startswith(_SPAWNER_NAME):
        return start()
    return _spawner_pool().submit(start).result()


def spawn_later(fn: Callable[..., T], *args: object) -> Future[T]:
    """Run ``fn`` on the spawner thread without waiting (it may call ``spawn(stable=True)``)."""
    return _spawner_pool().submit(fn, *args)


def nonblocking(fd: int, pipe_size: int | None = None) -> int:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    if pipe_size:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, pipe_size)
    return fd


class Pump:
    """A poll loop over readable descriptors, each with a callback (``b""`` means EOF)."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._sinks: dict[int, Callable[[bytes], None]] = {}

    def add(self, fd: int, sink: Callable[[bytes], None]) -> None:
        nonblocking(fd)
        self._sinks[fd] = sink
        self._poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def remove(self, fd: int) -> None:
        if self._sinks.pop(fd, None) is not None:
            self._poll.unregister(fd)

    @property
    def active(self) -> bool:
        return bool(self._sinks)

    def watching(self, fd: int) -> bool:
        return fd in self._sinks

    def drain(self, fd: int, max_reads: int = 16) -> bool:
        """Read ``fd`` until it would block (at most ``max_reads`` times, so a writer faster
        than us cannot keep us here); True when it reached EOF (and was removed)."""
        sink = self._sinks.get(fd)
        for _ in range(max_reads):
            if sink is None:
                return True
            try:
                data = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return False
            except OSError:
                data = b""
            sink(data)
            if not data:
                self.remove(fd)
                return True
        return sink is None

    def once(self, timeout_s: float | None) -> None:
        ms = None if timeout_s is None else max(0, int(timeout_s * 1000))
        for fd, _ in self._poll.poll(ms):
            self.drain(fd)


@dataclass
class Outcome:
    """How a process tree ended. ``exit_code`` is negative for a signal (``-9``: killed)."""

    exit_code: int | None
    timed_out: bool
    capped: bool
    duration_s: float
    stdout: StreamCapture
    stderr: StreamCapture
    timeout_s: float = 0.0


class Job:
    """One confined process tree (already started, stdout and stderr piped) with its captures."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        stdout: StreamCapture | None = None,
        stderr: StreamCapture | None = None,
    ):
        self.process = process
        self.stdout = stdout or StreamCapture()
        self.stderr = stderr or StreamCapture()
        self.started = time.monotonic()
        self.pump = Pump()
        for pipe, capture in ((process.stdout, self.stdout), (process.stderr, self.stderr)):
            assert pipe is not None
            nonblocking(pipe.fileno(), 1 << 20)
            self.pump.add(pipe.fileno(), capture.feed)
        self.timed_out = False
        self.capped = False
        self.ended: float | None = None

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
        stdin: bytes | None = None,
        stable: bool = False,
    ) -> Job:
        """Spawn ``argv`` with piped output; ``stdin`` (at most 64 KiB) is written and closed."""
        if stdin is not None and len(stdin) > MAX_STDIN:
            raise ValueError(f"stdin input above {MAX_STDIN} bytes: pass a file in the workspace instead")
        process = spawn(
            argv,
            stable=stable,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=str(cwd),
        )
        if stdin is not None:
            feed_stdin(process, stdin)
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Signal the whole tree (descendants first found, then the root)."""
        return proctree.kill_tree(self.process.pid, sig)

    def terminate(self, grace_s: float = 2.0) -> str:
        """SIGTERM the tree, SIGKILL it after ``grace_s``: ``already_exited``, ``terminated`` or ``killed``."""
        if self.process.poll() is not None:
            return "already_exited"
        self.kill(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.process.wait()
            return "killed"
        return "terminated"  # the root's machinery (bwrap's PID namespace, the launcher) took the rest

    def run(self, timeout_s: float) -> Outcome:
        """Pump until the tree is gone; kill it at the deadline or when a stream passes its cap.

        The root's exit is watched through a pidfd in the same poll, so the result is ready
        the moment the last pipe closes and the root has exited (no sleep-and-retry).
        """
        deadline = self.started + timeout_s
        exited: list[float] = []
        pidfd = _pidfd(self.process.pid)
        if pidfd is not None:
            self.pump.add(pidfd, lambda data: exited.append(time.monotonic()))
        try:
            while self.pump.active:
                now = time.monotonic()
                if not self.timed_out and not self.capped and now >= deadline:
                    self.timed_out = True
                    self.kill()
                if pidfd is None and not exited and self.process.poll() is not None:
                    exited.append(now)
                if exited and now - exited[0] > EOF_GRACE_S:
                    self.kill()  # a process that left the tree still holds a pipe
                    break
                if exited and pidfd is not None and not self._pipes_open():
                    break
                wait = deadline - now if not (self.timed_out or self.capped) else 0.1
                self.pump.once(min(max(wait, 0.0), 0.25 if not exited else 0.05))
                if not self.capped and (self.stdout.over_cap or self.stderr.over_cap):
                    self.capped = True
                    self.kill()
        finally:
            if pidfd is not None:
                self.pump.remove(pidfd)
                os.close(pidfd)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait()
        self.ended = time.monotonic()
        return Outcome(code, self.timed_out, self.capped, self.ended - self.started, self.stdout, self.stderr, timeout_s)

    def _pipes_open(self) -> bool:
        return any(
            pipe is not None and self.pump.watching(pipe.fileno()) for pipe in (self.process.stdout, self.process.stderr)
        )


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def feed_stdin(process: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` (at most the pipe's capacity) to the process's stdin and close it."""
    assert process.stdin is not None
    try:
        process.stdin.write(data)
    except BrokenPipeError:
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()


class Drainer:
    """Reads and discards what background processes print after their command returned.

    A session's command writes into its own FIFOs; a process it left running may keep them
    open and keep printing. Closing our end would kill such a server with SIGPIPE on its next
    log line, so one daemon thread keeps reading and discarding until the writers are gone.
    """

    def __init__(self) -> None:
        self._poll = select.poll()
        self._fds: set[int] = set()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        nonblocking(self._wake_r)
        self._poll.register(self._wake_r, select.POLLIN)
        threading.Thread(target=self._loop, name="besser-sandbox-drainer", daemon=True).start()

    def add(self, fd: int) -> None:
        nonblocking(fd)
        with self._lock:
            self._fds.add(fd)
            self._poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        os.write(self._wake_w, b"x")

    @property
    def count(self) -> int:
        return len(self._fds)

    def _loop(self) -> None:
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                    continue
                try:
                    data = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    with self._lock:
                        self._poll.unregister(fd)
                        self._fds.discard(fd)
                    os.close(fd)


def release(process: subprocess.Popen[bytes], *, kill: bool) -> int | None:
    """Kill ``process``'s tree (when ``kill``), close our ends of its pipes, reap it (5 s at most)."""
    if kill:
        proctree.kill_tree(process.pid)
    for stream in (process.stdin, process.stdout, process.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        return process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


_drainer: Drainer | None = None
_drainer_lock = threading.Lock()


def drainer() -> Drainer:
    global _drainer
    with _drainer_lock:
        if _drainer is None:
            _drainer = Drainer()
        return _drainer
