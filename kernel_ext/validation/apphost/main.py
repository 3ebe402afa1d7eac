"""Inside the sandbox: the warm app host program, one per run.

Started by ``apphost.AppHost`` under the run's sandbox tier with the network unshared, it
imports the heavy libraries once (``warmup``), then serves jobs read from its stdin pipe:
each job runs in a freshly forked child (``child``) with a fresh copy of the app and
a fresh SQLite database, and the child's one result frame is passed back on stdout. After a
job, a *standby* child is forked for the same source so the next scenario finds the app
already imported; a job for other source (the agent edited a file) discards the standby,
never the host. A job past its deadline has its child's process group killed.

Its own stdout is the protocol, so fd 1 is moved aside at start and the app's prints can
never reach it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass

from kernel_ext.sandbox.frames import FrameError, JSONValue, as_object, number, read_frame, split_frames, write_frame


@dataclass
class Child:
    pid: int
    key: tuple[str, str, str]
    job_w: int
    result_r: int
    workdir: str
    job_id: int | None = None
    deadline: float = 0.0
    dispatched_at: float = 0.0
    buffer: bytes = b""
    from_standby: bool = False


class Host:
    def __init__(self, proto_in: int, proto_out: int, use_standby: bool = True):
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.use_standby = use_standby
        self.selector = selectors.DefaultSelector()
        self.selector.register(proto_in, selectors.EVENT_READ, None)
        self.running: dict[int, Child] = {}  # result fd -> child with a job
        self.standby: Child | None = None
        self.last_key: tuple[str, str, str] | None = None

    # -- children ---------------------------------------------------------------------------

    def fork(self, key: tuple[str, str, str]) -> Child:
        src, entry, attr = key
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        workdir = tempfile.mkdtemp(prefix="scenario-")
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.setsid()
                _close_all_but({0, 1, 2, job_r, result_w}, self._all_fds() | {job_w, result_r})
                os.set_inheritable(result_w, False)
                os.set_inheritable(job_r, False)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                from kernel_ext.validation.apphost import child

                child.main(src, entry, attr, workdir, job_r, result_w)
            finally:
                os._exit(70)
        os.close(job_r)
        os.close(result_w)
        os.set_blocking(result_r, False)
        return Child(pid, key, job_w, result_r, workdir)

    def _all_fds(self) -> set[int]:
        fds = {self.proto_in, self.proto_out}
        for child in [*self.running.values(), *([self.standby] if self.standby else [])]:
            fds |= {child.job_w, child.result_r}
        return fds

    def kill(self, child: Child) -> None:
        for fd in (child.job_w, child.result_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        for kill in (os.killpg, os.kill):  # the group (the app's own processes), and the child itself
            with contextlib.suppress(OSError):
                kill(child.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)
        shutil.rmtree(child.workdir, ignore_errors=True)

    def drop_standby(self) -> None:
        if self.standby is not None:
            self.kill(self.standby)
            self.standby = None

    def maybe_fork_standby(self) -> None:
        if self.use_standby and self.standby is None and not self.running and self.last_key is not None:
            self.standby = self.fork(self.last_key)

    # -- jobs -----------------------------------------------------------------------------------

    def start_job(self, message: dict[str, JSONValue]) -> None:
        key = (str(message["src"]), str(message.get("entry") or "main_api"), str(message.get("attr") or "app"))
        child = None
        if self.standby is not None and self.standby.key == key:
            child, self.standby = self.standby, None
            child.from_standby = True
        else:
            self.drop_standby()
        if child is None:
            child = self.fork(key)
        self.last_key = key
        child.job_id = int(number(message["id"]))
        child.dispatched_at = time.monotonic()
        child.deadline = child.dispatched_at + number(message.get("timeout") or 60.0)
        # The job goes into the child's own folder; the pipe only carries a small notice, so the
        # host never blocks on a child that is still importing the app.
        job_file = os.path.join(child.workdir, "job.json")
        with open(job_file, "w", encoding="utf-8") as handle:
            json.dump(message.get("job") or {}, handle)
        with contextlib.suppress(OSError):  # the child already died: its result pipe reports it
            write_frame(child.job_w, {"job_file": job_file})
        self.running[child.result_r] = child
        self.selector.register(child.result_r, selectors.EVENT_READ, child)

    def on_child_output(self, child: Child) -> None:
        try:
            chunk = os.read(child.result_r, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            child.buffer += chunk
            try:
                frames, _ = split_frames(child.buffer)
            except FrameError as exc:
                self.finish(child, {"op": "error", "code": "bad_frame", "message": str(exc)})
                return
            if frames:
                self.finish(child, {"op": "result", "result": frames[0]})
            return
        self.finish(child, None)

    def finish(self, child: Child, reply: dict | None) -> None:
        self.selector.unregister(child.result_r)
        self.running.pop(child.result_r, None)
        if reply is None:
            status = self._reap(child.pid)
            reply = {"op": "error", "code": "child_died", "message": f"the app's process ended without a report ({status})",
                     "log_tail": _tail(os.path.join(child.workdir, "app.log"))}
        reply.update(id=child.job_id, from_standby=child.from_standby,
                     wall_ms=round((time.monotonic() - child.dispatched_at) * 1000, 2))
        self.kill(child)
        self.send(reply)
        self.maybe_fork_standby()

    def expire(self) -> None:
        now = time.monotonic()
        for child in [c for c in self.running.values() if c.deadline <= now]:
            seconds = child.deadline - child.dispatched_at
            self.finish(child, {"op": "error", "code": "timeout", "message": f"the app did not finish within {seconds:.0f} s",
                                "log_tail": _tail(os.path.join(child.workdir, "app.log"))})

    @staticmethod
    def _reap(pid: int) -> str:
        """How the child ended; a child that closed its pipe but lives on is killed by ``kill``."""
        for _ in range(50):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return "already reaped"
            if done:
                if os.WIFSIGNALED(status):
                    return f"killed by signal {os.WTERMSIG(status)}"
                return f"exit code {os.waitstatus_to_exitcode(status)}"
            time.sleep(0.01)
        return "it closed its result pipe and was stopped"

    # -- the loop -------------------------------------------------------------------------------

    def send(self, message: dict) -> None:
        write_frame(self.proto_out, message)

    def serve(self) -> None:
        while True:
            deadlines = [c.deadline for c in self.running.values()]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    try:
                        frame = read_frame(self.proto_in)
                        message = None if frame is None else as_object(frame)
                    except FrameError:
                        message = None
                    if message is None or message.get("op") == "stop":
                        return
                    self.handle(message)
                elif key.fd in self.running:
                    self.on_child_output(key.data)
            self.expire()

    def handle(self, message: dict[str, JSONValue]) -> None:
        op = message.get("op")
        if op == "run":
            self.start_job(message)
        elif op == "drop_standby":
            self.drop_standby()
            self.last_key = None
        elif op == "ping":
            self.send({"op": "pong", "id": message.get("id"), "running": len(self.running),
                       "standby": self.standby is not None})

    def close(self) -> None:
        for child in list(self.running.values()):
            self.kill(child)
        self.running.clear()
        self.drop_standby()


def _close_all_but(keep: set[int], known: set[int]) -> None:
    """In a new child: close every descriptor but ``keep`` (the protocol, other children's pipes,
    the selector), so the app can reach nothing but its own job and result pipes."""
    try:
        open_fds = {int(name) for name in os.listdir("/proc/self/fd")}
    except OSError:
        open_fds = set(known)
    for fd in open_fds - keep:
        with contextlib.suppress(OSError):
            os.close(fd)


def _tail(path: str, chars: int = 4000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chars))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    # The protocol keeps private copies of fds 0 and 1; the app's prints go to stderr.
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    use_standby = "--no-standby" not in argv
    # The app's overlay (``kernel_ext.appenv``) goes before the site folders, so its packages win
    # over the server's (never before the standard library, which the host itself runs on).
    overlays = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--path"]
    first_site = next((i for i, p in enumerate(sys.path) if "-packages" in p), len(sys.path))
    sys.path[first_site:first_site] = overlays
    from kernel_ext.validation.apphost import warmup

    imported, preload_ms = warmup.preload()
    warm_ms = warmup.exercise()
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on the first collection
    host = Host(proto_in, proto_out, use_standby)
    host.send({"op": "ready", "pid": os.getpid(), "preload_ms": round(preload_ms, 2), "warm_ms": round(warm_ms, 2),
               "modules": len(imported), "python": sys.version.split()[0]})
    try:
        host.serve()
    finally:
        host.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
